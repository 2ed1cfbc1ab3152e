"""A run's history in TensorBoard: every numeric history column as a scalar, control changes
as text.

Written with the ``tensorboard`` package alone (its event-file writer and protos; no
TensorFlow, no torch), installed by the optional extra ``pip install 'esnb[tensorboard]'``.
Attach it to any runner in Python, or pass ``--tensorboard [DIR]`` to ``esnb train``::

    tb = esnb.TensorBoard(runner, "runs/tb/es-hopper")   # rows already there are written too
    runner.start(generations=100)
    ...
    tb.close()

then ``tensorboard --logdir runs/tb``. A scalar's step is the row's ``env_steps`` when the
history has it (runs of different algorithms then share an x axis), else the runner's
iteration counter; the text tag ``controls`` holds each change (``sigma 0.02 → 0.05``) at the
step of the first iteration that used it, as in ``runner.changes`` (the bookkeeping of
:class:`esnb.views.tracking.Tracker`, shared with :class:`esnb.MLflow`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from esnb.views.tracking import Tracker

#: the tag of the control changes (a text series)
CHANGES_TAG = "controls"


def _modules():
    try:
        import numpy as np
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.scalar import metadata as scalar_metadata
        from tensorboard.plugins.text import metadata as text_metadata
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
        from tensorboard.util import tensor_util
    except ImportError as exc:  # the optional extra is missing
        raise ImportError("TensorBoard logging needs the tensorboard package: "
                          "pip install 'esnb[tensorboard]'") from exc
    return np, event_pb2, summary_pb2, scalar_metadata, text_metadata, EventFileWriter, \
        tensor_util


class TensorBoard(Tracker):
    """Write ``runner``'s history rows and control changes as TensorBoard events.

    Parameters
    ----------
    runner : esnb.runners.base.Runner
        Attached at once (``runner.add_observer``): every later row is written as the runner
        makes it, on the runner's thread.
    logdir : str or path-like, optional
        Folder of the event file (created). Default: ``runs/<runner.name>/tensorboard``.
    history : bool
        Also write the rows and changes the runner already has (a run resumed from a checkpoint
        in a new folder; set False when the folder holds them from before).
    flush_every : float
        Seconds between flushes to disk (TensorBoard reads what is flushed).

    Attributes
    ----------
    logdir : pathlib.Path
    rows : int
        History rows written.
    """

    def __init__(self, runner, logdir: str | os.PathLike | None = None, *,
                 history: bool = True, flush_every: float = 5.0):
        (self._np, self._event_pb2, self._summary_pb2, scalar_md, text_md, writer_cls,
         self._tensor_util) = _modules()
        self.logdir = Path(logdir) if logdir is not None else \
            Path("runs") / runner.name / "tensorboard"
        self.logdir.mkdir(parents=True, exist_ok=True)
        self._scalar_md = scalar_md.create_summary_metadata(display_name="", description="")
        self._text_md = text_md.create_summary_metadata(display_name="", description="")
        self._writer = writer_cls(str(self.logdir))
        super().__init__(runner, history=history, flush_every=flush_every)

    def _event(self, step: int, tag: str, tensor, metadata):
        event = self._event_pb2.Event(wall_time=time.time(), step=int(step))
        event.summary.value.add(tag=tag, tensor=tensor, metadata=metadata)
        self._writer.add_event(event)

    def _scalars(self, step: int, values: dict[str, float]) -> None:
        for column, number in values.items():
            self._event(step, column, self._tensor_util.make_tensor_proto(
                self._np.float32(number)), self._scalar_md)

    def _changes(self, step: int, text: str) -> None:
        tensor = self._tensor_util.make_tensor_proto(self._np.array(text.encode(), dtype=object))
        self._event(step, CHANGES_TAG, tensor, self._text_md)

    def _flush(self) -> None:
        self._writer.flush()

    def _close(self, failed: bool) -> None:
        self._writer.close()

    def __repr__(self) -> str:
        return f"<TensorBoard {str(self.logdir)!r} rows={self.rows}>"

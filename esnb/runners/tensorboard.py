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
step of the first iteration that used it, as in ``runner.changes``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path
from typing import Any

from esnb.record import finite_float

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


def _text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


class TensorBoard:
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
        self.runner = runner
        self.logdir = Path(logdir) if logdir is not None else \
            Path("runs") / runner.name / "tensorboard"
        self.logdir.mkdir(parents=True, exist_ok=True)
        self._scalar_md = scalar_md.create_summary_metadata(display_name="", description="")
        self._text_md = text_md.create_summary_metadata(display_name="", description="")
        self._writer = writer_cls(str(self.logdir))
        self._lock = threading.Lock()  # rows come from the runner's thread, close from others
        self._flush_every = float(flush_every)
        self._last_flush = time.monotonic()
        self._closed = False
        self.rows = 0
        # changes already in the log before we attach are written with the history or skipped
        self._changes_seen = 0 if history else len(runner.changes)
        if history:
            for row in runner.records:
                self._write_row(row)
        runner.add_observer(self)

    # -- what is written ---------------------------------------------------------------------
    def step_of(self, row: dict[str, Any]) -> int:
        """The TensorBoard step of a history row: env steps if it has them, else its iteration."""
        steps = finite_float(row.get("env_steps"))
        if steps is not None:
            return int(steps)
        return int(row.get(self.runner.iteration_column, self.rows + 1))

    def _event(self, step: int, tag: str, tensor, metadata):
        event = self._event_pb2.Event(wall_time=time.time(), step=int(step))
        event.summary.value.add(tag=tag, tensor=tensor, metadata=metadata)
        self._writer.add_event(event)

    def _write_row(self, row: dict[str, Any]) -> None:
        step = self.step_of(row)
        for column, value in row.items():
            number = finite_float(value)
            if number is not None:
                self._event(step, column, self._tensor_util.make_tensor_proto(
                    self._np.float32(number)), self._scalar_md)
        self._write_changes(row)
        self.rows += 1

    def _write_changes(self, row: dict[str, Any]) -> None:
        # a change is logged before the row of the iteration that first used it
        changes = self.runner.changes
        it = self.runner.iteration_column
        new = changes.iloc[self._changes_seen:]
        new = new[new[it] <= row.get(it, math.inf)]
        if not len(new):
            return
        text = ", ".join(f"{c['name']} {_text(c['old'])} → {_text(c['new'])}"
                         for _, c in new.iterrows())
        tensor = self._tensor_util.make_tensor_proto(self._np.array(text.encode(), dtype=object))
        self._event(self.step_of(row), CHANGES_TAG, tensor, self._text_md)
        self._changes_seen += len(new)

    # -- the observer ------------------------------------------------------------------------
    def __call__(self, row: dict[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            self._write_row(row)
            if time.monotonic() - self._last_flush >= self._flush_every:
                self._writer.flush()
                self._last_flush = time.monotonic()

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._writer.flush()

    def close(self) -> None:
        """Detach from the runner and close the event file (idempotent)."""
        self.runner.remove_observer(self)
        with self._lock:
            if not self._closed:
                self._closed = True
                self._writer.close()

    def __enter__(self) -> TensorBoard:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<TensorBoard {str(self.logdir)!r} rows={self.rows}>"

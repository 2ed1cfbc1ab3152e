"""One interface for experiment trackers (TensorBoard, MLflow, the next one): a runner's
observer that writes every numeric history column, each control change and, at the end, the
final evaluation and the checkpoint.

:class:`Tracker` does the bookkeeping every tracker shares: it attaches to the runner (rows
already there are written first, unless the destination holds them), picks each row's step
(``env_steps`` when the history has it, so runs of different algorithms share an x axis,
else the iteration), keeps only finite numbers, groups the control changes with the first row
that used them (``sigma 0.02 → 0.05``, as in ``runner.changes``), flushes every
``flush_every`` seconds and closes once. A tracker implements four calls: :meth:`_scalars`,
:meth:`_changes` and, if it has them, :meth:`_file`, :meth:`_flush` and :meth:`_close`.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

from esnb.record import finite_float


def _text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


class Tracker:
    """Base of the trackers: a runner's rows and control changes, written as they come.

    Parameters
    ----------
    runner : esnb.runners.base.Runner
        Attached at once (``runner.add_observer``): every later row is written on the
        runner's thread.
    history : bool
        Also write the rows and changes the runner already has (False when the destination
        holds them from before a resume).
    flush_every : float
        Seconds between flushes.

    Attributes
    ----------
    rows : int
        History rows written.
    """

    def __init__(self, runner, *, history: bool = True, flush_every: float = 5.0):
        self.runner = runner
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

    # -- what a tracker implements -----------------------------------------------------------
    def _scalars(self, step: int, values: dict[str, float]) -> None:
        """Write finite numbers at ``step``."""
        raise NotImplementedError

    def _changes(self, step: int, text: str) -> None:
        """Write the control changes first used by the row at ``step`` (one line of text)."""
        raise NotImplementedError

    def _file(self, path: Path) -> None:
        """Keep a file of the run (its checkpoint); default: the run folder keeps it."""

    def _flush(self) -> None:
        """Make what was written visible; default: nothing buffered."""

    def _close(self, failed: bool) -> None:
        """Release the destination; ``failed``: the run ended in an error."""

    # -- shared ------------------------------------------------------------------------------
    def step_of(self, row: dict[str, Any]) -> int:
        """The step of a history row: env steps if it has them, else its iteration."""
        steps = finite_float(row.get("env_steps"))
        if steps is not None:
            return int(steps)
        return int(row.get(self.runner.iteration_column, self.rows + 1))

    def _write_row(self, row: dict[str, Any]) -> None:
        step = self.step_of(row)
        numbers = {column: finite_float(value) for column, value in row.items()}
        self._scalars(step, {k: v for k, v in numbers.items() if v is not None})
        # a change is logged with the row of the iteration that first used it
        changes = self.runner.changes
        it = self.runner.iteration_column
        new = changes.iloc[self._changes_seen:]
        new = new[new[it] <= row.get(it, math.inf)]
        if len(new):
            self._changes(step, ", ".join(f"{c['name']} {_text(c['old'])} → {_text(c['new'])}"
                                          for _, c in new.iterrows()))
            self._changes_seen += len(new)
        self.rows += 1

    def __call__(self, row: dict[str, Any]) -> None:
        with self._lock:
            if self._closed:
                return
            self._write_row(row)
            if time.monotonic() - self._last_flush >= self._flush_every:
                self._flush()
                self._last_flush = time.monotonic()

    def log_final(self, summary: dict[str, Any], checkpoint=None) -> None:
        """The end of a run (``esnb train``): the final evaluation's numbers of ``summary``
        (``final_eval_mean``...) at the last row's step, and the ``checkpoint`` file."""
        with self._lock:
            if self._closed:
                return
            records = self.runner.records
            step = self.step_of(records[-1]) if records else 0
            numbers = {k: finite_float(v) for k, v in summary.items()
                       if k.startswith("final_eval")}
            numbers = {k: v for k, v in numbers.items() if v is not None}
            if numbers:
                self._scalars(step, numbers)
            if checkpoint is not None and Path(checkpoint).exists():
                self._file(Path(checkpoint))
            self._flush()

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._flush()

    def close(self, failed: bool = False) -> None:
        """Detach from the runner, flush and release the destination (idempotent)."""
        self.runner.remove_observer(self)
        with self._lock:
            if not self._closed:
                self._closed = True
                self._flush()
                self._close(failed)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(failed=exc_type is not None)

"""A run's checkpoints: what every runner writes and reads back, when, and what is refused.

- :func:`save_runner` writes the runner's state (its algorithm's :meth:`~Runner._state_dict`
  plus the lifecycle's: iteration, wall time, controls and their change log, history, the
  budget it was running towards) through :func:`esnb.record.save_checkpoint`: a temporary file
  fsynced and renamed over the old one, so a checkpoint on disk is always whole and the
  previous one stays until the new one is complete.
- :func:`load_runner` rebuilds a runner from one, after checks beyond the digest: counters
  are >= 0 and finite, float arrays finite, and the algorithm's own loader raises for what is
  missing or malformed; any refusal is a :class:`~esnb.record.CheckpointError` naming the file.
- :class:`CheckpointKeeper` makes a running runner write one every ``every`` seconds (between
  iterations, never inside one) and when its run stops or finishes (not when it fails: the
  state of a failed iteration is not one to resume from), and keeps the run folder's
  ``history.csv`` and ``changes.csv`` up to date after every iteration
  (:mod:`esnb.live_history`).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from esnb.live_history import CsvRows
from esnb.record import CheckpointError, history_to_json, load_checkpoint, save_checkpoint
from esnb.settings import check_names

log = logging.getLogger("esnb.runners")

#: meta keys of the lifecycle that are counters (never negative)
_COUNTERS = ("iteration", "wall_time", "controls_version", "applied_version")


class CheckpointKeeper:
    """Where and how often a run writes its checkpoint.

    Parameters
    ----------
    path : str or Path
        The checkpoint file (its folder must be writable: checked now).
    every : float
        Seconds between checkpoints while the run goes (0: after every iteration).
    keep : int
        Also keep a checkpoint every ``keep`` iterations, beside this one, for forks
        (:mod:`esnb.runners.fork`; 0: none).
    """

    def __init__(self, path, every: float = 60.0, keep: int = 0):
        every = float(every)
        if not math.isfinite(every) or every < 0:
            raise ValueError(f"checkpoint_every must be a finite number of seconds >= 0, got "
                             f"{every!r}")
        if isinstance(keep, bool) or int(keep) != keep or keep < 0:
            raise ValueError(f"keep_every must be an integer >= 0 (0: none), got {keep!r}")
        self.keep = int(keep)
        self.path = Path(path)
        self.every = every
        self.last = time.monotonic()
        self.saved = 0
        self._history = self._changes = None
        check_writable(self.path.parent)

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.every

    def save(self, runner) -> Path:
        out = runner.save(self.path)
        self.last = time.monotonic()
        self.saved += 1
        self.write_history(runner)
        return out

    def write_history(self, runner) -> None:
        """The run folder's ``history.csv`` and ``changes.csv`` brought up to the run's rows
        (after every iteration: readable while the run goes and after a crash)."""
        folder = self.path.parent
        if self._history is None:
            self._history = CsvRows(folder / "history.csv")
            self._changes = CsvRows(folder / "changes.csv", runner.change_columns)
        try:
            self._history.write(runner._records)
            self._changes.write(runner._change_log)
        except OSError as exc:  # the checkpoint holds the history: the run goes on
            log.warning("could not write the history of %s into %s: %s", runner.name, folder,
                        exc)

    def after_iteration(self, runner) -> None:
        """The checkpoints due after an iteration: a kept one every :attr:`keep` iterations,
        the run's own every :attr:`every` seconds."""
        if self.keep and runner.iteration % self.keep == 0:
            from esnb.runners.fork import kept_path

            path = kept_path(self.path, runner.iteration_column, runner.iteration)
            path.parent.mkdir(exist_ok=True)
            runner.save(path)
        if self.due():
            self.save(runner)
        else:
            self.write_history(runner)


def check_writable(folder) -> Path:
    """Create ``folder`` if needed and prove it writable now, before any work starts."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".esnb-write-check-{time.monotonic_ns()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"cannot write into {folder}: {exc.strerror or exc}") from None
    return folder


def save_runner(runner, path) -> Path:
    """Write ``runner``'s checkpoint to ``path`` (waits for the iteration in progress)."""
    with runner._iter_lock:
        meta, arrays = runner._state_dict()
        meta = {
            **meta,
            "config": runner.config_dict(),
            "name": runner.name,
            "iteration": runner.iteration,
            "wall_time": runner.wall_time,
            "controls": runner.controls.as_dict(),
            "controls_version": runner.controls.version,
            "control_changes": [c.__dict__ for c in runner.controls.changes],
            "applied_version": runner._applied_version,
            "history": history_to_json(runner._records),
            "change_log": history_to_json(runner._change_log),
            "target": dict(runner._target),
            "parent": runner.parent,
        }
        return save_checkpoint(path, runner.algorithm, meta, arrays)


def check_state(path, meta: dict[str, Any], arrays: dict[str, np.ndarray],
                allow_nonfinite: tuple[str, ...] = ()) -> None:
    """Refuse a checkpoint whose counters are negative or not numbers, or whose float arrays
    hold NaN or infinities (except the arrays named in ``allow_nonfinite``)."""
    for key in _COUNTERS:
        value = meta.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or value < 0:
            raise CheckpointError(f"{path}: {key} must be a finite number >= 0, got {value!r}")
    for name, a in arrays.items():
        if name in allow_nonfinite or not np.issubdtype(a.dtype, np.floating):
            continue
        if not np.all(np.isfinite(a)):
            raise CheckpointError(f"{path}: array {name!r} holds NaN or infinite values")


def _check_saved_device(path, saved: dict, overrides: dict) -> None:
    """Refuse, in one line saying how to resume, a run saved with a ``device`` this machine
    cannot use (``cuda`` where torch sees none) unless ``overrides`` name another."""
    if "device" not in saved or "device" in overrides:
        return
    from esnb.device import device_problem

    problem = device_problem(saved["device"])
    if problem is not None:
        raise CheckpointError(f"{path}: saved with device {problem}: load it with "
                              f"device='auto' or 'cpu' to resume here")


def load_runner(cls, path, client=None, **overrides):
    """Rebuild a ``cls`` runner from :func:`save_runner`'s file; see :meth:`Runner.load`."""
    meta, arrays = load_checkpoint(path, cls.algorithm)
    check_state(path, meta, arrays, getattr(cls, "nonfinite_arrays", ()))
    try:
        saved = {k: v for k, v in meta["config"].items() if k != "name"}
        name = overrides.pop("name", meta.get("name"))
        check_names(cls.Config, overrides)  # a retired or unknown name is refused, not dropped
        _check_saved_device(path, saved, overrides)
        # overrides first: a run saved on a device this machine lacks resumes on another
        config = cls.Config.from_dict({**saved, **overrides})
        runner = cls(client=client, config=config, name=name)
        runner.controls.restore(meta["controls"], meta.get("control_changes", ()),
                                meta.get("controls_version", 0))
        runner._applied_version = meta.get("applied_version", runner.controls.version)
        runner.iteration = int(meta["iteration"])
        runner.wall_time = float(meta["wall_time"])
        runner._records = list(meta["history"])
        runner._change_log = list(meta.get("change_log", []))
        runner._saved_target = dict(meta.get("target") or {})
        runner.parent = meta.get("parent")
        runner._load_state_dict(meta, arrays)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(
            f"{path} does not match a {cls.algorithm} run: {type(exc).__name__}: {exc}"
        ) from exc
    return runner

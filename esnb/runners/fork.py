"""Branching a run: a new run from the kept checkpoint nearest before an iteration, with some
controls changed, that remembers its parent.

A run keeps a checkpoint every ``keep`` iterations beside its own
(``runner.keep_checkpoints(path, keep=k)``, ``esnb train --keep-every k``):
``checkpoints/<iteration column>-<iteration>.npz`` in its folder. :func:`fork` loads the newest
of them at or before ``at``, gives it a new name, applies the changes as control changes
(validated like any other, recorded in its change log) and records where it came from in
``runner.parent`` (saved in its checkpoints and its summary.json).

A fork changes live controls only: a fixed setting (the network, the environment) would make
another run, which :func:`fork` refuses naming the setting.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

KEPT = "checkpoints"


def kept_path(checkpoint: Path, iteration_column: str, iteration: int) -> Path:
    """Where the checkpoint kept at ``iteration`` goes, beside the run's ``checkpoint``."""
    return Path(checkpoint).parent / KEPT / f"{iteration_column}-{iteration:06d}.npz"


def kept(folder) -> dict[int, Path]:
    """``{iteration: path}`` of the checkpoints a run folder kept."""
    found = {}
    for path in (Path(folder) / KEPT).glob("*-*.npz"):
        m = re.fullmatch(r".+-(\d+)\.npz", path.name)
        if m:
            found[int(m.group(1))] = path
    return dict(sorted(found.items()))


def nearest(folder, at: int) -> tuple[int, Path]:
    """The kept checkpoint at or before iteration ``at`` (a clear error when there is none)."""
    folder = Path(folder)
    if int(at) != at or at < 1:
        raise ValueError(f"at must be an iteration >= 1, got {at!r}")
    found = kept(folder)
    before = [i for i in found if i <= at]
    if not before:
        where = (f"it kept {', '.join(map(str, found))}" if found else
                 "it kept none (keep some: keep_checkpoints(..., keep=k), esnb train "
                 "--keep-every k)")
        raise ValueError(f"{folder} has no checkpoint at or before iteration {at}: {where}")
    return before[-1], found[before[-1]]


def fork(folder, at: int, client=None, name: str | None = None,
         **changes: Any):
    """A new runner from ``folder``'s kept checkpoint nearest before ``at``, with ``changes``
    applied as control changes; ``runner.parent`` says where it came from.

    Raises
    ------
    ValueError
        No such checkpoint, a change of a fixed setting or an invalid value (nothing is
        started then).
    """
    from esnb.runners.playback import checkpoint_algorithm, runner_class

    iteration, path = nearest(folder, at)
    cls = runner_class(checkpoint_algorithm(path))
    fixed = [k for k in changes if k not in cls.Config.declarations()
             or not cls.Config.declarations()[k][0].live]
    if fixed:
        raise ValueError(f"a fork changes live controls only; not: {', '.join(fixed)} "
                         f"(start a new run for those)")
    runner = cls.load(path, client=client)
    parent = {"run": str(Path(folder)), "name": runner.name, "iteration": iteration,
              "checkpoint": str(path), "changes": dict(changes)}
    runner.name = name or f"{runner.name}-fork{iteration}"
    try:
        if changes:
            runner.controls.set(**changes)
    except ValueError:
        runner.close()
        raise
    runner.parent = parent
    return runner

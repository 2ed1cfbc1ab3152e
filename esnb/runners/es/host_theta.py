"""Theta shared in memory with the workers on the driver's own machine.

A replica (:mod:`.replica`) costs its worker the update's arithmetic every generation: the
weighted sum of the batch's noise rows, Adam, the IW updates. On a cluster each worker does it
on its own core at once, which is the point of Salimans et al.'s scheme. But workers on the
driver's machine -- a LocalCluster, a single-node batch job -- share the driver's cores: 32
local workers on 2 cores recomputed a 1M-parameter update 32 times per generation (measured:
5.2 s per generation against 1.2 s when theta was sent to each).

So the driver also writes each generation's theta and observation normalisation into a file
in the host's shared memory (``esnb.shm.shared_dir()``, ``/dev/shm``: RAM, nothing travels), named
by the run and the generation, and its update names the file and the host. A task on the same
host maps the file read-only, checks the checksum the update carries, and rolls out with it; it
keeps no replica. Tasks on other hosts use their replicas, exactly as before. A generation's
file is removed once the next one is written (every task of a generation has ended by then),
and the last one when the run closes. A driver killed (SIGKILL, a hung run killed, a lost node)
cannot remove its file: the name carries the driver's pid, and the next run on the host removes
the files of drivers that are gone (:func:`collect_stale`). Where the directory is unavailable,
every worker keeps a replica.

numpy only (it runs on lean workers).
"""

from __future__ import annotations

import logging
import os
import socket
import weakref

import numpy as np

from esnb.runners.es.replica import Update, checksum
from esnb.shm import shared_dir

log = logging.getLogger("esnb.es")

#: a theta file's name: ``esnb-theta-<driver pid>-<run token>-<generation>.f32``: raw
#: little-endian float32, no header. Not ``.npy``: reading an ``.npy`` header parses it with
#: ``ast.literal_eval``, and CPython 3.11's AST constructor keeps its recursion counter per
#: interpreter, so two worker threads reading theta at once failed now and then with
#: ``SystemError: AST constructor recursion depth mismatch`` (gh-106905; seen in CI).
PREFIX = "esnb-theta-"


def collect_stale(folder: str) -> list[str]:
    """Remove the theta files (and half-written ``.tmp`` ones) in ``folder`` whose driver
    process no longer exists on this host; returns the paths removed.

    A pid that exists but belongs to someone else (``PermissionError``) counts as alive, and so
    does a reused pid: a file is kept unless its driver is surely gone.
    """
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        pid = name[len(PREFIX):].split("-", 1)[0] if name.startswith(PREFIX) else ""
        if not pid.isdigit() or _alive(int(pid)):
            continue
        path = os.path.join(folder, name)
        try:
            os.remove(path)
        except OSError:  # removed by another run's collection, or not ours to remove
            continue
        removed.append(path)
    if removed:
        log.info("removed %d theta file(s) of runs that are gone from %s", len(removed), folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class HostTheta:
    """The driver's side: one file per generation, the previous one removed."""

    def __init__(self, token: str):
        self.token = token
        self.host = socket.gethostname()
        folder = shared_dir()
        self.dir = folder if folder and os.path.isdir(folder) and os.access(folder, os.W_OK) \
            else None
        if self.dir is not None:
            collect_stale(self.dir)
        self._current: list[str] = []  # the file written last (a list: the finaliser's view)
        # a runner never closed still removes its file when collected or when Python exits
        self._finalizer = weakref.finalize(self, _remove_all, self._current)

    @property
    def path(self) -> str | None:
        return self._current[0] if self._current else None

    def publish(self, generation: int, theta: np.ndarray, mean: np.ndarray | None,
                std: np.ndarray | None) -> str | None:
        """Write ``generation``'s theta (and normalisation); returns the file, or None when
        there is nowhere to write it (workers then use their replicas)."""
        if self.dir is None:
            return None
        parts = [np.asarray(a, dtype=np.float32) for a in (theta, mean, std) if a is not None]
        path = os.path.join(self.dir, f"{PREFIX}{os.getpid()}-{self.token}-{generation}.f32")
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(np.concatenate(parts).astype("<f4", copy=False).tobytes())
            os.replace(tmp, path)  # a reader sees the whole file or none
        except OSError as exc:
            log.warning("cannot share theta in %s (%s): every worker keeps a replica",
                        self.dir, exc)
            _remove(tmp)
            self.dir = None
            return None
        if self.path is not None and self.path != path:
            _remove(self.path)
        self._current[:] = [path]
        return path

    def close(self) -> None:
        _remove_all(self._current)


def _remove_all(paths: list[str]) -> None:
    for path in paths:
        _remove(path)
    paths.clear()


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def read(update: Update, dim: int, obs_dim: int, obs_norm: bool):
    """``(theta, mean, std)`` from the driver's file when this process is on the driver's host
    and the file holds the update's state, else None (use the replica)."""
    if update.shared is None or update.host != socket.gethostname():
        return None
    try:
        # read-only, shared pages; a plain ndarray view (the np.memmap subclass costs every
        # small matrix product of the policy's forward a subclass round trip)
        want = dim + (2 * obs_dim if obs_norm else 0)
        if os.path.getsize(update.shared) != 4 * want:
            return None
        values = np.memmap(update.shared, dtype="<f4", mode="r", shape=(want,)).view(np.ndarray)
    except (OSError, ValueError):
        return None
    theta = values[:dim]
    mean = values[dim:dim + obs_dim] if obs_norm else None
    std = values[dim + obs_dim:] if obs_norm else None
    if checksum(theta, mean, std) != update.checksum:
        return None
    return theta, mean, std

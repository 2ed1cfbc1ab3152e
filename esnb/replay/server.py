"""The replay as a service: :class:`ReplayServer`, a buffer plus the bookkeeping a distributed
run needs, written as a plain class that an executor holds as an actor (a Dask actor on a
worker, or an object in this process; see :class:`esnb.runners.replay_service.ReplayService`).

Callers batch their calls: actors add 100-1000 transitions per call, learners sample several
batches per call (:meth:`ReplayServer.sample`) and send priorities back in one call (an actor
call costs ~1-2 ms, the computation less).

Replies carry the buffer's ``inserted`` counter and the server's ``generation`` (its creation
number in a run), so the driver knows how much a loss takes away (inserted before the loss minus
inserted in the checkpoint a recreated server starts from; sizes say nothing once FIFO eviction
or overwriting keeps them at the capacity). A checkpoint file carries a ``token`` and its size
and inserted count, so a run's checkpoint can name exactly the replay file it goes with.

A server never opens a file the driver names: its worker may be on another host, with another
file system (a cloud or Kubernetes cluster, a batch cluster whose nodes have only local
scratch). Its state travels to the driver, which writes the replay files
(:meth:`ReplayServer.snapshot` and :mod:`esnb.replay.transfer`), and a new server is filled from
the driver's file the same way (:meth:`ReplayServer.restore_begin`).

Where a replay can be lost with its worker, the server also keeps its generation and
``inserted`` counter in a 16-byte *count file* on its own host's scratch (:func:`scratch_dir`:
``ESNB_SCRATCH``, else the temporary directory, ``TMPDIR``), rewritten on every insert
(:func:`write_count`, a ``pwrite`` into the page cache: a killed process's last write stays
readable). After a loss the driver reads it through a worker on that host
(:func:`read_count_here`), so the inserts that no reply had shown yet are counted too: what a
loss takes away is known exactly whenever a worker of the lost server's host is alive.

The server lowers the Python thread switch interval of its worker process (default 0.5 ms):
a busy actor loop on the same worker otherwise holds the GIL for the default 5 ms slices and a
replay call waited ~24 ms instead of ~2 ms (measured).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import tempfile
import time
from typing import Any

import numpy as np

from esnb.replay.config import buffer_from_config
from esnb.replay.limits import ReplayNotReady
from esnb.replay.state import join_state, split_state

CHECKPOINT_ALGORITHM = "replay"


class ReplayLost(RuntimeError):
    """The worker holding the replay actor is gone (recreate it with
    :meth:`~esnb.runners.replay_service.ReplayService.recover`)."""


class ReplayServer:
    """The actor: a buffer plus the bookkeeping a distributed run needs.

    Plain Python (it runs in-process too); every method takes and returns batches.

    Parameters
    ----------
    config : dict
        Buffer constructor arguments plus ``prioritized`` (see
        :func:`~esnb.replay.config.buffer_from_config`).
    seed : int
        Seeds the server's generator (sampling and priority eviction).
    switch_interval : float, optional
        ``sys.setswitchinterval`` for this process (None: leave it).
    generation : int
        Which creation of the run's replay this is (0: the first; replies carry it).
    count_name : str, optional
        Keep ``(generation, inserted)`` in the count file
        ``<scratch>/<count_name>.count-<generation>`` on this host (:func:`scratch_dir`),
        rewritten on every insert (see the module's doc).
    """

    def __init__(self, config: dict, seed: int = 0, switch_interval: float | None = 0.0005,
                 generation: int = 0, count_name: str | None = None):
        self.buffer = buffer_from_config(config)
        self.rng = np.random.default_rng(seed)
        self.generation = int(generation)
        self.restored = 0
        self.restored_inserted = 0
        self.restored_token: str | None = None
        self.infos: list[dict] = []
        self.created = time.time()
        self.host = socket.gethostname()
        self._snapshots: dict[str, dict[str, np.ndarray]] = {}
        self._incoming: tuple[dict, dict[str, np.ndarray]] | None = None
        if switch_interval is not None:
            sys.setswitchinterval(float(switch_interval))
        self._count_fd = None
        self.count_file = None
        if count_name is not None:
            self.count_file = os.path.join(scratch_dir(), f"{count_name}.count-{generation}")
            self._count_fd = os.open(self.count_file, os.O_RDWR | os.O_CREAT | os.O_TRUNC
                                     | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            self._write_count()

    def _write_count(self) -> None:
        if self._count_fd is not None:
            write_count(self._count_fd, self.generation, int(self.buffer.counters["inserted"]))

    def add(self, batch: dict, priorities=None, keys=None, info: dict | None = None) -> dict:
        """Store a batch (see :meth:`ReplayBuffer.add`); ``info`` is kept for :meth:`drain`.

        Returns ``stored``, ``size``, ``inserted``, ``generation`` and ``throttle`` (True:
        inserts are ahead of the samples-per-insert ratio and the writer should wait, see
        :meth:`insert_ready`).
        """
        ids = self.buffer.add(batch, priorities, keys)
        self._write_count()
        if info is not None:
            self.infos.append(info)
        return {"stored": int((ids >= 0).sum()), **self._counts(),
                "throttle": not self.buffer.insert_ready()}

    def _counts(self) -> dict[str, int]:
        """What every reply tells the driver: size, inserted so far, generation."""
        return {"size": len(self.buffer), "inserted": int(self.buffer.counters["inserted"]),
                "generation": self.generation}

    def insert_ready(self, n: int = 1) -> bool:
        """Whether writers may add ``n`` more items without outrunning the learner."""
        return self.buffer.insert_ready(n)

    def sample(self, batch_size: int, n_batches: int = 1, beta: float | None = None):
        """Up to ``n_batches`` batches stacked along a new first axis, or None when the rate
        limiter allows none now.

        Returns
        -------
        dict or None
            ``{"batch": {field: [k, B, ...]}, "ids": [k, B], "weights": [k, B]}`` plus
            ``size``, ``inserted`` and ``generation``.
        """
        batches, ids, weights = [], [], []
        for _ in range(int(n_batches)):
            if not self.buffer.ready(batch_size):
                break
            try:
                b, i, w = self.buffer.sample(batch_size, self.rng, beta)
            except ReplayNotReady:  # a frame storage dropped items whose frames were gone
                break
            batches.append(b)
            ids.append(i)
            weights.append(w)
        if not batches:
            return None
        return {"batch": {k: np.stack([b[k] for b in batches]) for k in batches[0]},
                "ids": np.stack(ids), "weights": np.stack(weights), **self._counts()}

    def exchange(self, ids, priorities, batch_size: int, n_batches: int = 1,
                 beta: float | None = None, evict: bool = False):
        """New priorities for earlier samples (``ids`` None: none), optional eviction, then
        :meth:`sample`: a learner's cycle in one call (an actor call costs ~1-2 ms, the
        computation less)."""
        if ids is not None:
            self.update_priorities(ids, priorities, evict)
        elif evict:
            self.buffer.evict(self.rng)
        return self.sample(batch_size, n_batches, beta)

    def update_priorities(self, ids, priorities, evict: bool = False) -> dict:
        """New priorities for sampled ids (any shape); optionally :meth:`evict` after."""
        n = self.buffer.update_priorities(np.asarray(ids).ravel(),
                                          np.asarray(priorities).ravel())
        evicted = self.buffer.evict(self.rng) if evict else 0
        return {"updated": n, "evicted": evicted, **self._counts()}

    def evict(self) -> int:
        return self.buffer.evict(self.rng)

    def high_water(self, actors) -> list[int]:
        """Per-actor high-water marks (-1: nothing stored yet)."""
        return [self.buffer.high_water(int(a)) for a in actors]

    def ready(self, batch_size: int = 1) -> bool:
        return self.buffer.ready(batch_size)

    def stats(self) -> dict[str, Any]:
        """The buffer's size and counters, the generation, and what it was restored with
        (``restored`` items, ``restored_inserted``, ``restored_token``)."""
        return {**self.buffer.stats(), "generation": self.generation, "restored": self.restored,
                "restored_inserted": self.restored_inserted,
                "restored_token": self.restored_token, "host": self.host,
                "count_file": self.count_file}

    def drain(self) -> dict[str, Any]:
        """Stats plus the ``info`` dicts received since the last drain."""
        infos, self.infos = self.infos, []
        return {"stats": self.stats(), "infos": infos}

    def state_dict(self) -> dict[str, Any]:
        return self.buffer.state_dict()

    # -- the state travels: the driver writes the files (esnb.replay.transfer) ---------------
    def snapshot(self, token: str, drain: bool = False) -> dict[str, Any]:
        """Freeze a copy of the buffer's state under ``token`` for the driver to fetch
        (:meth:`snapshot_rows`, then :meth:`snapshot_release`).

        Returns ``token``, ``size``, ``inserted``, ``generation``, the state's JSON-able
        ``meta`` (with its ``mark``: token, size, inserted, readable by
        :func:`checkpoint_mark` once written) and ``shapes`` (``{name: (dtype, shape)}``); with
        ``drain``, also :meth:`drain`'s ``stats`` and ``infos`` of the same moment (what the
        snapshot holds is exactly what those infos reported).
        """
        meta, arrays = split_state(self.buffer.state_dict())  # copies: inserts may go on
        self._snapshots[str(token)] = arrays
        mark = {"token": token, "size": len(self.buffer),
                "inserted": int(self.buffer.counters["inserted"])}
        out = {**self._counts(), "token": token, "meta": {**meta, "mark": mark},
               "shapes": {k: (a.dtype.str, a.shape) for k, a in arrays.items()}}
        if drain:
            out.update(self.drain())
        return out

    def snapshot_rows(self, token: str, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of array ``name`` of snapshot ``token`` (``0, 0``: a 0-d
        array whole)."""
        array = self._snapshots[str(token)][name]
        return array[int(start):int(stop)] if stop else array

    def snapshot_release(self, token: str) -> None:
        """Let go of snapshot ``token``."""
        self._snapshots.pop(str(token), None)

    def restore_begin(self, meta: dict, shapes: dict) -> None:
        """Start filling this new, empty server from a replay file the driver holds:
        ``meta`` and ``shapes`` (``{name: (dtype, shape)}``) of the file's state, then
        :meth:`restore_rows` piece by piece, then :meth:`restore_end`."""
        if self.buffer.counters["inserted"] or len(self.buffer):
            raise ValueError("a replay is restored only into a new, empty server")
        arrays = {k: np.empty(tuple(shape), dtype=np.dtype(dtype))
                  for k, (dtype, shape) in shapes.items()}
        self._incoming = (dict(meta), arrays)

    def restore_rows(self, name: str, start: int, rows: np.ndarray) -> None:
        """Put ``rows`` at row ``start`` of array ``name`` (a 0-d array: whole)."""
        if self._incoming is None:
            raise ValueError("restore_rows before restore_begin")
        array = self._incoming[1][name]
        if array.ndim == 0:
            array[()] = rows
        else:
            array[int(start):int(start) + len(rows)] = rows

    def restore_abort(self) -> None:
        """Drop a restore that will not finish (the file was damaged on the way)."""
        self._incoming = None

    def restore_end(self) -> dict[str, Any]:
        """Load the state the driver sent (everything is checked before anything changes);
        returns :meth:`stats` (``restored``, ``restored_inserted``, ``restored_token``)."""
        if self._incoming is None:
            raise ValueError("restore_end before restore_begin")
        (meta, arrays), self._incoming = self._incoming, None
        self.buffer.load_state_dict(join_state(meta, arrays))
        self.restored = len(self.buffer)
        self.restored_inserted = int(self.buffer.counters["inserted"])
        self.restored_token = (meta.get("mark") or {}).get("token")
        self._write_count()
        return self.stats()

    def close(self) -> None:
        """Remove this server's count file (the run closes its replay)."""
        if self._count_fd is not None:
            os.close(self._count_fd)
            self._count_fd = None
            try:
                os.unlink(self.count_file)
            except FileNotFoundError:
                pass


def scratch_dir() -> str:
    """This host's scratch folder for what a server keeps beside itself (its count file):
    ``ESNB_SCRATCH`` if set, else the temporary directory (``TMPDIR``, ``/tmp``). Evaluated on
    the server's own worker, so each host uses its own."""
    return os.environ.get("ESNB_SCRATCH") or tempfile.gettempdir()


def read_count_here(host: str, path: str, remove: bool = True) -> tuple[int, int] | None:
    """A task on a worker of host ``host``: the count file ``path`` a lost server left there,
    ``(generation, inserted)``, and remove it (``remove``); None on another host or without
    the file."""
    if socket.gethostname() != host:
        return None
    count = read_count(path)
    if remove and count is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    return count


_COUNT = struct.Struct("<qq")


def write_count(fd: int, generation: int, inserted: int) -> None:
    """Overwrite a count file's ``(generation, inserted)`` (one 16-byte ``pwrite``)."""
    os.pwrite(fd, _COUNT.pack(int(generation), int(inserted)), 0)


def read_count(path) -> tuple[int, int] | None:
    """``(generation, inserted)`` from a count file, or None if there is none (yet)."""
    try:
        with open(path, "rb") as f:
            data = f.read(_COUNT.size)
    except OSError:
        return None
    return _COUNT.unpack(data) if len(data) == _COUNT.size else None


def checkpoint_mark(path) -> dict[str, Any]:
    """The ``token``, ``size`` and ``inserted`` a replay checkpoint file was written with,
    read without loading (or checking) its arrays; raises
    :class:`~esnb.record.CheckpointError` if it is not a replay checkpoint."""
    import json
    import zipfile

    from esnb.record import CheckpointError

    try:
        with np.load(path, allow_pickle=False) as z:
            doc = json.loads(z["__meta__"].tobytes().decode())
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, EOFError,
            UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is damaged or not an esnb replay checkpoint "
                              f"({type(exc).__name__}: {exc})") from exc
    if not isinstance(doc, dict) or doc.get("algorithm") != CHECKPOINT_ALGORITHM:
        raise CheckpointError(f"{path} is not an esnb replay checkpoint")
    return dict(doc["meta"].get("mark") or {})


def wait_result(call, timeout: float, replaced=None):
    """The result of an actor call, failing fast once the replay has been replaced.

    A call in flight when the replay's worker dies never completes (Dask awaits the dead
    actor's future inside it), and a worker is not told that another worker's actor died,
    so waiting for ``timeout`` stalled an Ape-X loop ~20 s after every loss and held an AES-RL
    evaluation's worker 15-30 s (measured). Instead, every second of waiting asks
    ``replaced()`` (does the run name a newer replay?) and raises :class:`ReplayLost` if so.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call.result(timeout=1.0)
        except TimeoutError:
            if replaced is not None and replaced():
                raise ReplayLost("the replay was replaced while a call was in flight") from None
            if time.monotonic() >= deadline:
                raise


def replaced_check(handle):
    """For a task holding the replay's ``handle`` (:meth:`ReplayService.info`): a function
    saying whether the run has replaced that replay since (None where it cannot be lost)."""
    if not isinstance(handle, dict) or handle.get("current") is None:
        return None
    current, generation = handle["current"], int(handle["generation"])

    def replaced() -> bool:
        try:
            return int(current.get(timeout=5)) != generation
        except Exception:  # noqa: BLE001 - cannot tell: keep waiting (the timeout still holds)
            return False

    return replaced


def is_loss(exc: BaseException) -> bool:
    """Whether an actor call failed because the actor's worker is gone."""
    text = str(exc)
    return (isinstance(exc, (OSError, ReplayLost)) or "Worker holding Actor was lost" in text
            or "Unable to contact Actor" in text or type(exc).__name__ in (
                "CommClosedError", "KilledWorker", "FutureCancelledError", "CancelledError"))

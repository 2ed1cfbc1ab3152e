"""A replay's state between the worker holding it and the driver, which alone writes files.

A run's worker may be on another host than its driver, with another file system (a cloud or
Kubernetes Dask cluster, a batch cluster whose nodes have only local scratch), so a
:class:`~esnb.replay.server.ReplayServer` never opens a file the driver names. Instead:

- :func:`pull`: the server freezes a copy of its state (one call: the moment the file holds),
  the driver fetches it piece by piece (:data:`~esnb.record.CHUNK_BYTES` rows at a time) and
  writes the replay file as the pieces arrive (:func:`esnb.record.write_checkpoint`);
- :func:`push`: a new, empty server is filled from a replay file of the driver's, piece by
  piece, the digest checked as the pieces pass; it loads the state only once all of it has
  arrived intact.

``call(method, *args)`` is how the driver reaches the server (a
:class:`~esnb.runners.replay_service.ReplayService`'s ``call``, or a plain object's method): the
same code runs for a server in this process and one on another host. No Dask here.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from esnb.record import CHUNK_BYTES, read_checkpoint_rows, write_checkpoint
from esnb.replay.server import CHECKPOINT_ALGORITHM

Call = Callable[..., Any]


def pull(call: Call, path: str | os.PathLike, token: str | None = None, drain: bool = False,
         chunk_bytes: int = CHUNK_BYTES) -> dict[str, Any]:
    """Write the server's state now into the replay file ``path`` on this machine.

    Returns the snapshot's ``token``, ``size``, ``inserted`` and ``generation``, with
    ``path``, ``bytes`` (the file's size) and ``seconds``; with ``drain``, also the server's
    ``stats`` and ``infos`` of the same moment (see
    :meth:`~esnb.replay.server.ReplayServer.snapshot`).
    """
    t0 = time.perf_counter()
    token = token or uuid.uuid4().hex[:16]
    snap = call("snapshot", token, drain)
    try:
        write_checkpoint(path, CHECKPOINT_ALGORITHM, snap["meta"], snap["shapes"],
                         lambda name, a, b: call("snapshot_rows", token, name, a, b),
                         chunk_bytes)
    finally:
        try:
            call("snapshot_release", token)
        except Exception:  # noqa: BLE001 - a lost server holds nothing any more
            pass
    out = {k: v for k, v in snap.items() if k not in ("meta", "shapes")}
    out.update(path=str(path), bytes=os.path.getsize(path),
               seconds=time.perf_counter() - t0)
    return out


def push(call: Call, path: str | os.PathLike, chunk_bytes: int = CHUNK_BYTES) -> dict:
    """Fill a new, empty server from the replay file ``path`` on this machine; returns its
    ``stats`` (``restored``, ``restored_inserted``, ``restored_token``). A damaged file
    raises :class:`~esnb.record.CheckpointError` and the server stays empty."""
    meta, shapes, pieces = read_checkpoint_rows(path, CHECKPOINT_ALGORITHM, chunk_bytes)
    call("restore_begin", meta, {k: (dtype.str, shape) for k, (dtype, shape) in shapes.items()})
    try:
        for name, start, rows in pieces:
            call("restore_rows", name, start, rows)
    except BaseException:
        try:
            call("restore_abort")
        except Exception:  # noqa: BLE001 - a lost server holds nothing any more
            pass
        raise
    return call("restore_end")


def local_call(server) -> Call:
    """``call`` for a server object in this process (tests, tools)."""
    return lambda method, *args, **kwargs: getattr(server, method)(*args, **kwargs)

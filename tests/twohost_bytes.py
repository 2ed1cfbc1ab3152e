"""A Dask preload that counts the bytes a worker process sends and receives, per connection.

The two-host fixture (:mod:`twohost`) loads it into every worker it starts (``dask worker
--preload``). Every Dask message goes through :meth:`distributed.comm.tcp.TCP.write` and
:meth:`~distributed.comm.tcp.TCP.read`; this wraps them and adds the bytes of each message
as they go on the wire (the 8-byte length header, the frames' headers and the frames: what
the peer reads) to the connection's counters. TCP/IP headers are not counted. A connection
is named by its two ends and, on its first message, by the process at the other end (found
with psutil in the shared network namespace), so a reader can say who talked to whom.

Read back with ``client.run(twohost_bytes.snapshot)`` (the worker names the module
``twohost_bytes`` when it loads it; :func:`twohost.TwoHosts.traffic` does this).
"""

from __future__ import annotations

import os
import threading

from distributed.comm import tcp

#: (local address, peer address) -> {"sent", "received", "messages", "peer_pid"}
COUNTS: dict[tuple[str, str], dict] = {}
_LOCK = threading.Lock()
#: bytes before each message's frames: its length (struct "Q")
HEADER = 8


def _peer_pid(local: str, peer: str) -> int | None:
    """The process holding the other end of a TCP connection on this machine (None: gone)."""
    import psutil

    def parts(address):
        host, port = address.split("://", 1)[-1].rsplit(":", 1)
        return host, int(port)

    try:
        mine, theirs = parts(local), parts(peer)
        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.raddr and tuple(conn.laddr) == theirs \
                    and tuple(conn.raddr) == mine:
                return conn.pid
    except (ValueError, psutil.Error, OSError):
        return None
    return None


def _record(comm, sent: int = 0, received: int = 0) -> None:
    key = (comm.local_address, comm.peer_address)
    entry = COUNTS.get(key)
    if entry is None:
        pid = _peer_pid(*key)
        with _LOCK:
            entry = COUNTS.setdefault(key, {"sent": 0, "received": 0, "messages": 0,
                                            "peer_pid": pid})
    entry["sent"] += sent
    entry["received"] += received
    entry["messages"] += 1


_write, _read, _read_bytes_rw = tcp.TCP.write, tcp.TCP.read, tcp.read_bytes_rw


async def _counted_write(self, msg, serializers=None, on_error="message"):
    n = await _write(self, msg, serializers=serializers, on_error=on_error)
    _record(self, sent=int(n))
    return n


async def _counted_read_bytes_rw(stream, n):
    buf = await _read_bytes_rw(stream, n)
    stream._esnb_received = getattr(stream, "_esnb_received", 0) + int(n)
    return buf


async def _counted_read(self, deserializers=None):
    stream = self.stream
    before = getattr(stream, "_esnb_received", 0)
    msg = await _read(self, deserializers=deserializers)
    _record(self, received=HEADER + getattr(stream, "_esnb_received", 0) - before)
    return msg


def install() -> None:
    """Count from now on (idempotent)."""
    if tcp.TCP.write is not _counted_write:
        tcp.TCP.write, tcp.TCP.read = _counted_write, _counted_read
        tcp.read_bytes_rw = _counted_read_bytes_rw


def snapshot(dask_worker=None) -> dict:
    """This process's counters: ``{"pid", "nanny", "connections": [{local, peer, peer_pid,
    sent, received, messages}, ...]}`` (``dask_worker``: given by ``client.run``)."""
    with _LOCK:
        rows = [{"local": local, "peer": peer, **dict(entry)}
                for (local, peer), entry in COUNTS.items()]
    nanny = getattr(dask_worker, "nanny", None) if dask_worker is not None else None
    return {"pid": os.getpid(), "nanny": nanny, "connections": rows}


def dask_setup(worker) -> None:
    """Dask's preload hook: count this worker's traffic."""
    install()

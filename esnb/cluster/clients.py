"""A Dask client that either starts or is gone: :func:`start_client`.

A ``distributed.Client`` whose start fails (a refused TLS handshake, a timeout) is left in a
reference cycle through its exception's traceback. Collected later, its ``__del__`` closes it,
which takes dask's class-wide ``LoopRunner`` lock; if that collection happens inside the next
Client's start (which holds the lock, and allocates), the process waits on itself for ever.
"""

from __future__ import annotations

import gc


def start_client(address, **kwargs):
    """``distributed.Client(address, **kwargs)``; when it fails, the failed Client is closed
    and collected before the error is raised (its tracebacks, which hold it, are dropped).

    Parameters
    ----------
    address : str or Cluster
        What the Client connects to.
    **kwargs
        ``distributed.Client``'s own (``security``, ``timeout``, ``set_as_default`` ...).
    """
    from distributed import Client

    try:
        return Client(address, **kwargs)
    except Exception as exc:  # noqa: BLE001 - re-raised below, without its frames
        failed = exc
        seen = exc
        while seen is not None:  # the frames of the error and of those it came from
            seen.__traceback__ = None
            seen = seen.__cause__ or seen.__context__
    gc.collect()
    raise failed

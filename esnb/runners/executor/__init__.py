"""Where a run's work happens: the one layer that knows inline from Dask.

Every runner talks to an *executor* and never asks whether there is a Dask client. The calls
are the :class:`Executor` protocol (:mod:`.protocol`, each with its doc); two executors take
them:

- :class:`InlineExecutor` (:mod:`.inline`) runs everything in this process: ``submit``
  computes at once and returns a finished future, actors are plain objects, channels are
  local boxes, and background loops (generators) advance one step per ``turn()``. Nothing
  depends on timing, so an inline run is reproducible.
- :class:`~esnb.runners.executor.on_dask.DaskExecutor` (:mod:`.on_dask`) submits futures to a
  cluster, holds actors on workers (recreated elsewhere when their worker dies), publishes
  values as task results (never ``scatter``: scattered data dies with its worker), places
  pinned calls again when their worker leaves (:mod:`.pinned`).

The concepts both share, a module each: futures (:mod:`.futures`: :class:`Done`,
:class:`Completions`), actors (:mod:`.actors`: :class:`ActorRef`, :class:`LocalProxy`) and
channels (:mod:`.channels`: :class:`Box`, ``DaskChannel``). Here: :func:`make_executor` (an
executor from whatever ``client=`` a runner was given), :func:`attach` (inside a task, the
actor behind a handle) and :func:`session` (the cluster of one command).
"""

from __future__ import annotations

import contextlib
from typing import Any

from esnb.runners.executor.actors import ActorRef, LocalProxy
from esnb.runners.executor.channels import Box
from esnb.runners.executor.futures import Completions, Done
from esnb.runners.executor.inline import INLINE, InlineExecutor
from esnb.runners.executor.protocol import Executor

__all__ = ["INLINE", "ActorRef", "Box", "Completions", "Done", "Executor", "InlineExecutor",
           "LocalProxy", "attach", "make_executor", "resolve_client", "session"]


def attach(handle: Any) -> Any:
    """Inside a task: the actor behind :meth:`ActorRef.handle` -- its calls return futures
    (``.result(timeout)``), inline and on a cluster alike."""
    if isinstance(handle, dict):
        from esnb.runners.executor.on_dask import attach as attach_dask

        return attach_dask(handle)
    return handle


def resolve_client(client):
    """``client``, else the current default Dask client, else None (inline).

    ``client=False`` means inline even when a default client exists (e.g. a whole run inside
    one Dask task).
    """
    if client is False or isinstance(client, InlineExecutor):
        return None
    if isinstance(client, Executor):
        return client.client
    if client not in (None, True) and not isinstance(client, str):
        return client
    try:
        from distributed import default_client
    except ImportError:  # a lean process without distributed runs inline
        return None
    if isinstance(client, str):
        raise TypeError(f"client must be a distributed.Client, None or False, got the string "
                        f"{client!r}: connect first with esnb.make_client(address={client!r})")
    try:
        return default_client()
    except ValueError:
        return None


def make_executor(client=None):
    """The executor for ``client``: an executor as is, a Dask client's, the default client's,
    or inline (``False``, or no client at all)."""
    if isinstance(client, Executor):
        return client
    resolved = resolve_client(client)
    if resolved is None:
        return InlineExecutor()
    from esnb.runners.executor.on_dask import DaskExecutor

    return DaskExecutor(resolved)


def put(client, obj: Any, prefix: str = "esnb-put", priority: int = 0):
    """Send ``obj`` once as a task result on ``client``'s cluster (see
    :meth:`DaskExecutor.put`)."""
    return make_executor(client).put(obj, prefix=prefix, priority=priority)


@contextlib.contextmanager
def session(workers: int = 2, address: str | None = None, **cluster: Any):
    """The executor of one command: join ``address``, else a LocalCluster of ``workers``
    processes (``cluster``: more keyword arguments of :func:`~esnb.cluster.make_client`), else
    (``workers=0``) this process; the cluster closes when the block ends.

    Yields
    ------
    InlineExecutor or DaskExecutor
    """
    from esnb.cluster import make_client

    if address:
        client = make_client(address=address)
    elif workers > 0:
        client = make_client(workers, **cluster)
    else:
        client = False
    try:
        yield make_executor(client)
    finally:
        if client is not False:
            client.close()

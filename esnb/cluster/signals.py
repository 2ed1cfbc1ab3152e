"""Signals meant for the driver stay with the driver.

A terminal delivers Ctrl-C to its whole foreground *process group*, and so do ``kill -INT
-<pgid>``, ``srun``/``salloc`` forwarding a signal to a job step's processes, ``scancel``
(SIGTERM) and a notebook's interrupt button (jupyter_client signals the kernel's process group).
The worker processes of a LocalCluster that esnb starts belong to the driver's group: they died
of the signal meant for the driver (two screens of ``KeyboardInterrupt`` tracebacks), the
driver then waited for work that had been on them, and the run never wrote its checkpoint.

Here those workers ignore SIGINT and SIGTERM: the driver stops them when it closes its cluster
(dask's nanny asks a worker to close, and kills it with SIGKILL if it does not), and a driver
that dies takes them with it (dask's workers exit when their parent's pipe closes). Two
mechanisms, because no hook of dask runs in a worker process before it imports ``distributed``:

- :func:`spawned_processes_ignore` sets SIGINT and SIGTERM to ``SIG_IGN`` while the cluster
  starts its first workers. An ignored signal stays ignored across ``exec``, and Python does
  not install its ``KeyboardInterrupt`` handler where SIGINT is ignored, so those workers are
  immune from their first instruction. The driver ignores both signals for that moment too
  (the cluster's start, about a second): a Ctrl-C then is lost, never half-handled.
- :class:`IgnoreGroupSignals`, given to every worker of the cluster (``plugins=``), ignores them
  the moment a worker process unpickles its arguments, and again at setup: this covers the
  workers a nanny restarts later (after a fault), which dask spawns while the driver handles
  its signals. A signal in the half second between such a restart's spawn and that moment
  still reaches the new worker.

Workers forked from esnb's forkserver (:mod:`esnb.cluster.forkserver`) get the first
mechanism's effect from the server, which is launched inside :func:`spawned_processes_ignore`.

Workers of batch clusters (dask-jobqueue) are not touched: their jobs are signalled by the
batch system, which is how they are meant to retire.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from distributed import WorkerPlugin

#: what a terminal, a batch system or a notebook's interrupt button sends to a process group
GROUP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def ignore_group_signals() -> bool:
    """Ignore :data:`GROUP_SIGNALS` in this process (True), where Python lets us: only its
    main thread may change a signal's handler (False elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    for sig in GROUP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    return True


@contextlib.contextmanager
def spawned_processes_ignore() -> Iterator[None]:
    """While the block runs, processes started by this one are born ignoring SIGINT and
    SIGTERM (their dispositions are ``SIG_IGN``, which ``exec`` keeps); this process ignores
    them too for that time, and its handlers are put back after. Off the main thread it
    changes nothing (Python allows no handler change there).

    (Blocking the signals in the main thread instead of losing them does not work: a signal
    sent to the process goes to any thread that does not block it, such as OpenBLAS's, which
    then drops it.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.getsignal(sig) for sig in GROUP_SIGNALS}
    try:
        for sig in GROUP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        yield
    finally:
        for sig, handler in old.items():
            # None: a handler installed outside Python, which Python cannot put back
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


class IgnoreGroupSignals(WorkerPlugin):
    """A worker process of the driver's own LocalCluster ignores SIGINT and SIGTERM.

    Given to the workers' constructor (``LocalCluster(..., plugins={IgnoreGroupSignals()})``):
    a nanny pickles it into the worker process's arguments, and unpickling it (in that
    process's main thread, as it starts, before the worker is built) ignores the signals.
    """

    name = "esnb-ignore-group-signals"
    idempotent = True

    def __reduce__(self):
        return _unpickled, ()

    def setup(self, worker) -> None:
        ignore_group_signals()


def _unpickled() -> IgnoreGroupSignals:
    ignore_group_signals()
    return IgnoreGroupSignals()

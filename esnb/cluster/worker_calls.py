"""The functions the Dask executor submits for itself: a held value, a background loop and a
warm-up started in the background.

They live here, not in :mod:`esnb.runners.executor.on_dask`, because a task's function is
pickled by reference: a worker unpickling ``on_dask._hold`` imports ``esnb.runners.executor``
(and whatever that imports) only to return its argument. An ES worker then imports no
runner module at all (``tests/test_lean_workers.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from distributed import get_worker, secede

log = logging.getLogger("esnb.cluster")


def hold(obj: Any) -> Any:
    """The task behind ``DaskExecutor.put``: its result is ``obj`` itself."""
    return obj


def drive(genfn: Callable, *args) -> Any:
    """A background loop as a long-running task: run the generator to its end."""
    secede()
    gen = genfn(*args)
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def in_background(fn: Callable, *args) -> None:
    """Start ``fn(*args)`` on a daemon thread of this worker and return at once.

    ``client.run`` calls its function on the worker's event loop: a warm-up there (imports,
    making an environment: ~0.25 s) would hold heartbeats and the first task's arrival.
    A task that needs a module being imported meanwhile waits on Python's import lock.
    """

    def call():
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - a warm-up that fails only costs the first task
            log.debug("warm-up %r failed", fn, exc_info=True)

    threading.Thread(target=call, name="esnb-warm-up", daemon=True).start()


def naming_the_worker(fn: Callable, *args) -> Any:
    """``fn(*args)`` in a task; an error it raises comes back with this worker's address in
    front (which of a cluster's workers refused)."""
    try:
        return fn(*args)
    except Exception as exc:
        try:
            said = type(exc)(f"worker {get_worker().address}: {exc}")
        except Exception:  # noqa: BLE001 - an exception that takes other arguments
            raise exc from None
        raise said from None

"""The functions the Dask executor submits for itself: a held value and a background loop.

They live here, not in :mod:`esnb.runners.executor.on_dask`, because a task's function is
pickled by reference: a worker unpickling ``on_dask._hold`` imports ``esnb.runners.executor``
(and whatever that imports) only to return its argument. An ES worker then imports no
runner module at all (``tests/test_lean_workers.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distributed import secede


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

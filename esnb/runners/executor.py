"""Where a runner's tasks run: inline in this process, or as futures on a Dask cluster.

Both executors take the same calls and return results in submission order, so an algorithm
reduces them in a fixed order and gets bitwise the same numbers with 0, 1 or N workers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from distributed import Client, default_client

from esnb.noise import NoiseConfig, get_noise_table


def resolve_client(client: Client | None | bool) -> Client | None:
    """``client``, else the current default Dask client, else None (run inline).

    ``client=False`` runs inline even when a default client exists (e.g. a whole run inside one
    Dask task).
    """
    if client is False:
        return None
    if client is not None:
        return client
    try:
        return default_client()
    except ValueError:
        return None


class InlineExecutor:
    """Runs every call in this process, one after another."""

    client = None

    @property
    def n_workers(self) -> int:
        return 1

    def prepare_noise(self, noise: NoiseConfig) -> None:
        get_noise_table(noise)

    def put(self, obj: Any) -> Any:
        return obj

    def release(self, handle: Any) -> None:
        pass

    def run(self, calls: Sequence[tuple[Callable, tuple]], label: str = "") -> list[Any]:
        return [fn(*args) for fn, args in calls]


def _hold(obj: Any) -> Any:
    """The task behind :func:`put`: its result is ``obj`` itself."""
    return obj


def put(client: Client, obj: Any, prefix: str = "esnb-put", priority: int = 0):
    """Send ``obj`` once, as a task that returns it (Dask copies it where tasks need it).

    Not ``scatter``: scattered data dies with its worker and every task needing it is
    cancelled (a SIGKILLed worker otherwise failed the whole ES run), and a scatter whose
    target worker dies mid-transfer closes the client's connection with an error (seen when a
    SLURM job holding the Ape-X replay was killed). A task's result is recomputed elsewhere,
    and ``submit`` only queues a message, so it cannot fail that way.
    """
    return client.submit(_hold, obj, key=f"{prefix}-{uuid.uuid4().hex}", pure=False,
                         priority=priority)


class DaskExecutor:
    """Submits calls as futures (``pure=False``, unique keys) and gathers them in order."""

    def __init__(self, client: Client):
        self.client = client
        self._token = uuid.uuid4().hex[:8]

    @property
    def n_workers(self) -> int:
        return max(1, len(self.client.scheduler_info(n_workers=-1)["workers"]))

    def prepare_noise(self, noise: NoiseConfig) -> None:
        from esnb.cluster import register_noise_table

        register_noise_table(self.client, noise)

    def put(self, obj: Any):
        """Send ``obj`` once; see :func:`put`."""
        return put(self.client, obj)

    def release(self, handle: Any) -> None:
        handle.release()

    def run(self, calls: Sequence[tuple[Callable, tuple]], label: str = "") -> list[Any]:
        futures = [
            self.client.submit(fn, *args, key=f"esnb-{label}-{self._token}-{i}", pure=False)
            for i, (fn, args) in enumerate(calls)
        ]
        try:
            return self.client.gather(futures)
        finally:
            for f in futures:
                f.release()


def make_executor(client: Client | None):
    client = resolve_client(client)
    return InlineExecutor() if client is None else DaskExecutor(client)

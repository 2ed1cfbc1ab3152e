"""Dask clusters for esnb: ``make_client`` and the worker plugins that prepare workers.

Per-worker state (the noise table, torch's thread count) is built on each worker by a
:class:`distributed.WorkerPlugin`, including workers that join later: data scattered with
``broadcast=True`` is silently dropped by the Active Memory Manager, so nothing is replicated.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

import dask.config
from distributed import Client, WorkerPlugin

from esnb import config
from esnb.noise import NoiseConfig, drop_noise_table, get_noise_table

log = logging.getLogger("esnb.cluster")


class NoiseTablePlugin(WorkerPlugin):
    """Builds the noise table on every worker, off the event loop (heartbeats keep flowing).

    Registering it again with the same table is a no-op (``idempotent``).
    """

    idempotent = True

    def __init__(self, noise: NoiseConfig):
        self.noise = noise
        self.name = f"esnb-noise-{noise.key}"

    async def setup(self, worker):
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, get_noise_table, self.noise)

    def teardown(self, worker):
        drop_noise_table(self.noise)


class TorchThreadsPlugin(WorkerPlugin):
    """One intra-op thread per worker for torch (and BLAS), set before torch is imported."""

    idempotent = True
    name = "esnb-torch-threads"

    def __init__(self, threads: int = 1):
        self.threads = int(threads)

    def setup(self, worker):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(self.threads)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(self.threads)


def register_noise_table(client: Client, noise: NoiseConfig) -> None:
    """Have every worker (present and future) build ``noise``; waits for present ones."""
    client.register_plugin(NoiseTablePlugin(noise))


def make_client(n_workers: int | None = None, *, address: str | None = None,
                threads_per_worker: int | None = None, processes: bool | None = None,
                noise: NoiseConfig | None = None, dashboard_address: str | None = None,
                set_as_default: bool = True, **cluster_kwargs) -> Client:
    """A Dask client ready for esnb.

    Parameters
    ----------
    n_workers : int, optional
        Workers of a new LocalCluster (default: ``esnb.cluster.n-workers``, else one per core).
    address : str, optional
        Join an existing scheduler instead of starting a LocalCluster.
    threads_per_worker : int, optional
        Default 1: rollouts hold the GIL, so parallelism comes from processes.
    processes : bool, optional
        Default True; ``False`` runs workers as threads of this process (Binder, debugging).
    noise : NoiseConfig, optional
        Build this noise table on every worker now (runners register what they need anyway).
    dashboard_address : str, optional
        Default ``127.0.0.1:8787`` (loopback); a taken port falls back to a free one.
    set_as_default : bool
        Make it Dask's default client (runners created with ``client=None`` then use it).
    **cluster_kwargs
        Passed to ``LocalCluster``.

    Notes
    -----
    Values not given come from dask config under ``esnb.cluster`` (see ``esnb/esnb.yaml``).
    """
    kind = config.get("cluster.type", "local")
    address = address or (config.get("cluster.address") if kind == "address" else None)
    if address:
        client = Client(address, set_as_default=set_as_default)
    else:
        if kind not in ("local", "address"):
            raise ValueError(
                f"esnb.cluster.type {kind!r} is not supported yet; use 'local' or 'address'"
            )
        n_workers = n_workers or config.get("cluster.n-workers") or os.cpu_count() or 1
        if int(n_workers) < 1:
            raise ValueError(f"n_workers must be >= 1, got {n_workers}")
        cluster_kwargs.setdefault("silence_logs", logging.WARNING)
        # the statistical profiler samples every task's stack each 10 ms, holding the GIL:
        # ~5-10% of a rollout's time. Off unless esnb.cluster.worker-profile is true.
        profile = bool(config.get("cluster.worker-profile", False))
        # Client(**kwargs) starts a LocalCluster it owns: client.close() also closes it
        with dask.config.set({"distributed.worker.profile.enabled": profile}):
            client = Client(
                n_workers=int(n_workers),
                threads_per_worker=threads_per_worker
                or config.get("cluster.threads-per-worker", 1),
                processes=config.get("cluster.processes", True) if processes is None
                else processes,
                host=cluster_kwargs.pop("host", config.get("cluster.host", "127.0.0.1")),
                dashboard_address=dashboard_address or config.get("cluster.dashboard-address"),
                set_as_default=set_as_default,
                **cluster_kwargs,
            )
    client.register_plugin(TorchThreadsPlugin(1))
    if noise is not None:
        register_noise_table(client, noise)
    return client

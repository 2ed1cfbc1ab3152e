"""Worker and scheduler plugins: per-worker state built on every worker (any function through
:class:`EveryWorker`: a run's noise table; torch's thread count) and the protection of workers
that hold actors."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys

from distributed import Client, SchedulerPlugin, WorkerPlugin

from esnb.lazy import after_import
from esnb.noise import NoiseConfig, drop_noise_table, get_noise_table

log = logging.getLogger("esnb.cluster")

#: worker resource of the long-lived worker that holds actors
ACTOR_RESOURCE = "esnb-actor"
#: worker resource of workers with a GPU (``make_client(gpu_workers=N)``, or a batch job
#: started with ``--resources GPU=1``): a learner whose device is not ``cpu`` goes there
GPU_RESOURCE = "GPU"


class EveryWorker(WorkerPlugin):
    """``fn(*args)`` on every worker as it registers (present ones and those that join later),
    off the event loop (heartbeats keep flowing); ``teardown(*args)`` when the worker closes.

    A function that raises fails the registration with its error, the worker's address in
    front (a worker whose noise table differs refuses a run this way), and the worker leaves
    the cluster with its nanny, saying why in its log: a worker that joins later cannot serve
    the run (Dask only logs a joiner's failed plugin and would give it tasks). Registering the
    same ``name`` again is a no-op (``idempotent``): a run checks the present workers itself
    (:func:`esnb.noise.check_noise_table`).
    """

    idempotent = True

    def __init__(self, name: str, fn, args: tuple = (), teardown=None):
        self.name, self.fn, self.args, self.on_teardown = name, fn, tuple(args), teardown

    async def setup(self, worker):
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.fn, *self.args)
        except Exception as exc:  # say which worker, and leave
            log.error("worker %s leaves the cluster: %s", worker.address, exc)
            worker.loop.add_callback(worker.close, nanny=True, reason=f"esnb: {self.name}")
            try:
                said = type(exc)(f"worker {worker.address}: {exc}")
            except Exception:  # noqa: BLE001 - an exception that takes other arguments
                raise exc from None
            raise said from None

    def teardown(self, worker):
        if self.on_teardown is not None:
            self.on_teardown(*self.args)


def register_noise_table(client: Client, noise: NoiseConfig) -> None:
    """Have every worker (present and future) build ``noise``; waits for present ones."""
    client.register_plugin(EveryWorker(f"esnb-noise-{noise.key}", get_noise_table, (noise,),
                                       drop_noise_table))


class TorchThreadsPlugin(WorkerPlugin):
    """One intra-op thread per worker for torch (and BLAS), without importing torch.

    Most workers never use torch (ES's rollouts are numpy): importing it only to set its
    thread count cost each of them ~0.3 s and ~200 MB. The environment variables reach BLAS
    and OpenMP libraries loaded later, and an import hook (:func:`esnb.lazy.after_import`)
    calls ``torch.set_num_threads`` the moment something on the worker imports torch.
    """

    idempotent = True
    name = "esnb-torch-threads"

    def __init__(self, threads: int = 1):
        self.threads = int(threads)

    def setup(self, worker):
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(self.threads)
        after_import("torch", functools.partial(_set_torch_threads, self.threads))


def _set_torch_threads(threads: int) -> None:
    sys.modules["torch"].set_num_threads(threads)


class KeepActorWorkers(SchedulerPlugin):
    """Never offer a worker holding actors (or the actor resource) to adaptive downscaling.

    ``adapt()`` retires idle workers, and a worker whose only work is an actor looks idle.
    """

    idempotent = True
    name = "esnb-keep-actor-workers"

    def valid_workers_downscaling(self, scheduler, workers):
        return [ws for ws in workers if not ws.actors and ACTOR_RESOURCE not in ws.resources]


def actor_resources(client: Client) -> dict | None:
    """``resources=`` that pins an actor to the long-lived actor worker, if there is one.

    Returns ``{ACTOR_RESOURCE: 1}`` when a worker of ``client``'s cluster carries the resource,
    else None (then any worker may take the actor: on a LocalCluster they all live as long as
    the client).
    """
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    if any(ACTOR_RESOURCE in (w.get("resources") or {}) for w in workers.values()):
        return {ACTOR_RESOURCE: 1}
    return None

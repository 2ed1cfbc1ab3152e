"""Dask clusters for esnb: ``make_client`` and the plugins that prepare and protect workers.

Where workers come from is one setting, ``esnb.cluster.type`` in dask's configuration
(package defaults in ``esnb/esnb.yaml``; override in ``~/.config/dask/esnb.yaml`` or with
``DASK_ESNB__CLUSTER__TYPE=slurm``):

- ``local``: a LocalCluster of worker processes bound to 127.0.0.1;
- ``address``: join a running scheduler at ``esnb.cluster.address``;
- ``slurm``, ``pbs``, ``sge``, ``lsf``: a dask-jobqueue cluster. Its keyword arguments come from
  ``esnb.cluster.kwargs`` (then dask-jobqueue's own ``jobqueue.<type>`` config); it runs under
  ``adapt()`` between ``esnb.cluster.adapt.minimum`` and ``maximum``, and its workers get a
  ``--lifetime`` shorter than the job's walltime so they retire gracefully and are replaced.

Dask actors (replay buffers, learners) die with their worker, so they belong on a worker no
walltime retires: with ``esnb.cluster.actor-worker`` (default for jobqueue clusters) one extra
worker (:class:`ActorWorker`: a job of its own, started without ``--lifetime``, with
``esnb.cluster.actor-walltime``) carries the resource :data:`ACTOR_RESOURCE`; adaptive scaling
never retires it, a new one is started if it dies anyway, and ``actor_resources(client)``
returns the ``resources=`` argument that pins an actor there
(``ApeX(..., replay_resources=actor_resources(client))``).

TLS is the one setting ``esnb.cluster.security`` (see :func:`make_security`).

A worker's death is one WARNING line of ``esnb.cluster`` on the driver, not the tracebacks dask
echoes it with (:mod:`esnb.cluster.deaths`).

Per-worker state (the noise table, torch's thread count) is built on each worker by a
:class:`distributed.WorkerPlugin`, including workers that join later: data scattered with
``broadcast=True`` is silently dropped by the Active Memory Manager, so nothing is replicated.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import numbers
import os
from typing import Any

import dask.config
from distributed import Client

from esnb import config
from esnb.cluster import forkserver, quiet
from esnb.cluster.clients import start_client
from esnb.cluster.deaths import QuietDeathsPlugin, quiet_death_echoes, report_deaths
from esnb.cluster.jobqueue import (
    JOBQUEUE_CLASSES,
    ActorWorker,
    EsnbAdaptive,
    jobqueue_cluster,
    lifetime_args,
    start_actor_worker,
    walltime_seconds,
)
from esnb.cluster.keep_local import keep_planned_workers
from esnb.cluster.options import dashboard_address_for, underscored
from esnb.cluster.plugins import (
    ACTOR_RESOURCE,
    GPU_RESOURCE,
    EveryWorker,
    KeepActorWorkers,
    TorchThreadsPlugin,
    actor_resources,
    register_noise_table,
)
from esnb.cluster.security import make_security
from esnb.cluster.signals import IgnoreGroupSignals, spawned_processes_ignore
from esnb.config import CLUSTER_TYPES
from esnb.noise import NoiseConfig

__all__ = ["ACTOR_RESOURCE", "CLUSTER_TYPES", "GPU_RESOURCE", "JOBQUEUE_CLASSES", "ActorWorker",
           "check_address",
           "EsnbAdaptive", "EsnbClient", "EveryWorker", "KeepActorWorkers",
           "QuietDeathsPlugin",
           "TorchThreadsPlugin", "actor_resources", "lifetime_args", "make_client",
           "make_security", "register_noise_table", "walltime_seconds"]

log = logging.getLogger("esnb.cluster")


# Every comm logs its last ``low-level-log-length`` messages (< 1 MB each) for debugging; ES
# messages carry theta, so dask's 1000 kept ~50 MB alive in a soak's driver. Lowered once,
# here (distributed is imported, its defaults are in place), unless someone set it already.
_MESSAGE_LOG = "distributed.admin.low-level-log-length"
if dask.config.get(_MESSAGE_LOG) == 1000 and config.get("cluster.message-log-length"):
    dask.config.set({_MESSAGE_LOG: int(config.get("cluster.message-log-length"))})


# launched now, so that it imports the workers' modules while the driver goes on importing
forkserver.start()


class EsnbClient(Client):
    """A :class:`distributed.Client` that also closes the cluster esnb started for it."""

    _esnb_cluster = None
    _esnb_extra: tuple = ()

    def close(self, *args, **kwargs):
        try:
            return super().close(*args, **kwargs)
        finally:
            cluster, self._esnb_cluster = self._esnb_cluster, None
            extra, self._esnb_extra = self._esnb_extra, ()
            if cluster is not None:
                for proc in extra:
                    try:
                        cluster.sync(proc.close)
                    except Exception:  # the cluster closes anyway; report, do not mask
                        log.exception("could not close %r", proc)
                cluster.close()


def make_client(n_workers: int | None = None, *, address: str | None = None,
                threads_per_worker: int | None = None, processes: bool | None = None,
                noise: NoiseConfig | None = None, dashboard_address: str | None = None,
                set_as_default: bool = True, cluster_type: str | None = None,
                security: Any = None, actor_worker: bool | None = None,
                gpu_workers: int = 0, **cluster_kwargs) -> Client:
    """A Dask client ready for esnb.

    Parameters
    ----------
    n_workers : int, optional
        Workers to start: a LocalCluster's processes (default ``esnb.cluster.n-workers``, else
        one per core), or the workers a jobqueue cluster keeps (adapt minimum; default
        ``esnb.cluster.adapt.minimum``, else ``n-workers``, else 1).
    address : str, optional
        Join an existing scheduler instead of starting a cluster.
    threads_per_worker : int, optional
        Default 1: rollouts hold the GIL, so parallelism comes from processes.
    processes : bool, optional
        Local only. Default True; ``False`` runs workers as threads of this process.
    noise : NoiseConfig, optional
        Build this noise table on every worker now (runners register what they need anyway).
    dashboard_address : str, optional
        Default ``127.0.0.1:8787``. An address without a host (``":0"``) binds to the cluster's
        host (loopback for a LocalCluster), never to every interface; a taken port falls back
        to a free one.
    set_as_default : bool
        Make it Dask's default client (runners created with ``client=None`` then use it).
    cluster_type : str, optional
        Overrides ``esnb.cluster.type``: one of :data:`CLUSTER_TYPES`.
    security : optional
        Overrides ``esnb.cluster.security`` (see :func:`make_security`).
    actor_worker : bool, optional
        Start one long-lived worker carrying :data:`ACTOR_RESOURCE` (default
        ``esnb.cluster.actor-worker``; ``"auto"`` means yes for jobqueue clusters).
    gpu_workers : int
        LocalCluster only: this many more workers, each declaring the resource
        ``{"GPU": 1}`` (:data:`GPU_RESOURCE`), where a learner whose ``device`` is not ``cpu``
        is placed (the AES-RL/CEM-RL critic). The label is all they add: they see the GPUs
        this machine's torch sees, none on a CPU-only machine (where they are CPU workers
        with the label). On a batch cluster a GPU job declares the resource itself (tutorial
        09).
    **cluster_kwargs
        Passed to ``LocalCluster`` or to the dask-jobqueue cluster (over ``esnb.cluster.kwargs``).

    Returns
    -------
    distributed.Client
        Closing it also closes a cluster it started.

    Notes
    -----
    Values not given come from dask config under ``esnb.cluster`` (see ``esnb/esnb.yaml``).
    """
    if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(
            n_workers, numbers.Integral) or n_workers < 1):
        raise ValueError(f"n_workers must be an integer >= 1 (or None: esnb.cluster.n-workers,"
                         f" else one per core), got {n_workers!r}")
    kind = str(cluster_type or config.get("cluster.type", "local")).lower()
    if kind not in CLUSTER_TYPES:
        raise ValueError(f"esnb.cluster.type {kind!r} is unknown; valid types: "
                         f"{', '.join(CLUSTER_TYPES)}")
    if dashboard_address not in (None, False) and not config.host_port(dashboard_address):
        raise ValueError(f"dashboard_address must be 'host:port' or ':port' (a port in "
                         f"[0, 65535]), got {dashboard_address!r}")
    if isinstance(gpu_workers, bool) or not isinstance(gpu_workers, numbers.Integral) \
            or gpu_workers < 0:
        raise ValueError(f"gpu_workers must be an integer >= 0, got {gpu_workers!r}")
    if gpu_workers and (address or kind != "local"):
        raise ValueError(f"gpu_workers adds LocalCluster workers; this cluster is "
                         f"{'at ' + repr(address) if address else repr(kind)}: start its GPU "
                         f"workers with --resources {GPU_RESOURCE}=1 (tutorial 09)")
    if kind == "local" and not address and n_workers is not None:
        config.check_local_workers(int(n_workers) + int(gpu_workers))
    sec = make_security(security if security is not None else config.get("cluster.security"))
    if address or kind == "address":
        address = address or config.get("cluster.address")
        if not address:
            raise ValueError("esnb.cluster.type is 'address' but esnb.cluster.address is not set")
        client = _connect(address, set_as_default, sec)
    else:
        profile = bool(config.get("cluster.worker-profile", False))
        threads = int(threads_per_worker or config.get("cluster.threads-per-worker", 1))
        cluster_kwargs.setdefault("silence_logs", logging.WARNING)
        # dask's periodic monitors relaxed (esnb.cluster.quiet: the values and why), read by
        # the scheduler, nannies and workers as they are made here
        relaxed = quiet.values()
        # the statistical profiler samples every task's stack each 10 ms, holding the GIL:
        # ~5-10% of a rollout's time. Off unless esnb.cluster.worker-profile is true.
        with dask.config.set({"distributed.worker.profile.enabled": profile, **relaxed}):
            if kind == "local":
                cluster = _local_cluster(n_workers, threads, processes, sec, dashboard_address,
                                         cluster_kwargs, int(gpu_workers))
            else:
                cluster = jobqueue_cluster(kind, n_workers, threads, sec, dashboard_address,
                                            cluster_kwargs, relaxed)
            try:
                client = EsnbClient(cluster, set_as_default=set_as_default, security=sec)
                client._esnb_cluster = cluster
                client.register_plugin(KeepActorWorkers())
                want = config.get("cluster.actor-worker", "auto") if actor_worker is None \
                    else actor_worker
                if want is True or (want == "auto" and kind != "local"):
                    client._esnb_extra = (start_actor_worker(cluster, kind),)
            except BaseException:
                cluster.close()
                raise
    client.register_plugin(TorchThreadsPlugin(1))
    # a worker's death is one line on esnb.cluster, not dask's echoes (esnb.cluster.deaths)
    quiet_death_echoes()
    client.register_plugin(QuietDeathsPlugin())
    report_deaths(client)
    if noise is not None:
        register_noise_table(client, noise)
    return client


def _local_cluster(n_workers, threads, processes, sec, dashboard_address, kwargs,
                   gpu_workers: int = 0):
    from distributed import LocalCluster

    if n_workers is None:
        n_workers = config.check_local_workers(
            int(config.get("cluster.n-workers") or os.cpu_count() or 1),
            "esnb.cluster.n-workers")
    kwargs = {**underscored(config.get("cluster.kwargs") or {}), **kwargs}
    host = kwargs.pop("host", config.get("cluster.host", "127.0.0.1"))
    processes = config.get("cluster.processes", True) if processes is None else processes
    if not processes and sec is None and "://" not in str(host):
        # threads only: dask would pick "inproc://", which takes no host (a host fails the
        # scheduler's start) and links the dashboard to the machine's address; stay on TCP
        kwargs.setdefault("protocol", "tcp://")
    ignoring = contextlib.nullcontext()
    if processes:
        # a terminal's Ctrl-C, scancel's SIGTERM and a notebook's interrupt reach the whole
        # process group: these workers are the driver's to stop (esnb.cluster.signals)
        kwargs["plugins"] = {*kwargs.get("plugins", ()), IgnoreGroupSignals()}
        ignoring = spawned_processes_ignore()
        # a nanny hands its dask config to every worker it starts, restarts included, but it
        # keeps it by reference (a shallow merge): once make_client's dask.config.set ends, a
        # restarted worker got dask's monitor intervals and profiler back. A copy of the
        # "distributed" settings as they are now goes in each worker's spec (a config= given
        # here is merged over it).
        kwargs["config"] = dask.config.merge(
            {"distributed": copy.deepcopy(dask.config.get("distributed"))},
            kwargs.get("config") or {})
    # workers forked from a server that imported their modules while the driver imported its
    # own (esnb.cluster.forkserver); spawned if that server is not esnb's
    forking = forkserver.method() if processes else contextlib.nullcontext()
    with ignoring, forking:
        cluster = LocalCluster(
            n_workers=int(n_workers),
            threads_per_worker=threads,
            processes=processes,
            host=host,
            dashboard_address=dashboard_address_for(dashboard_address, host),
            security=sec,
            **kwargs,
        )
        try:
            _add_gpu_workers(cluster, gpu_workers)
        except BaseException:
            cluster.close()
            raise
        if processes:  # a nanny dask gave up on is started again (esnb.cluster.keep_local)
            keep_planned_workers(cluster)
        return cluster


def _add_gpu_workers(cluster, n: int) -> None:
    """``n`` more workers of ``cluster``'s own kind declaring :data:`GPU_RESOURCE` (in its
    plan, named ``esnb-gpu-<i>``: a LocalCluster restarts them as it does the others)."""
    if n <= 0:
        return
    spec = cluster.new_spec
    for i in range(n):
        name = f"esnb-gpu-{i}"
        resources = {**(spec["options"].get("resources") or {}), GPU_RESOURCE: 1}
        cluster.worker_spec[name] = {"cls": spec["cls"],
                                     "options": {**spec["options"], "name": name,
                                                 "resources": resources}}
    cluster.sync(cluster._correct_state)
    cluster.wait_for_workers(len(cluster.worker_spec))


def check_address(address: str, what: str = "address") -> str:
    """``address`` if it reads as a scheduler's (``[protocol://]host:port``), else one error
    naming ``what``."""
    from distributed.comm import parse_address, parse_host_port

    try:
        protocol, location = parse_address(str(address))
        if protocol in ("tcp", "tls"):
            parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what} {address!r} is no scheduler address "
                         f"([tcp://]host:port): {exc}") from None
    return address


def _refused(address: str) -> str | None:
    """Why nothing can answer at a TCP ``address`` at once (a refused connection), else None:
    dask would retry a refused port until its connect timeout (30 s by default)."""
    import socket

    from distributed.comm import parse_address, parse_host_port

    protocol, location = parse_address(address)
    if protocol not in ("tcp", "tls"):
        return None
    host, port = parse_host_port(location)
    try:
        with socket.create_connection((host, port), timeout=5):
            return None
    except ConnectionRefusedError:
        return f"connection refused: nothing listens on {host}:{port}"
    except OSError:  # unreachable, filtered, unresolvable: dask's own timeout decides
        return None


def _connect(address: str, set_as_default: bool, sec) -> Client:
    """A client of the scheduler at ``address``; an unreachable one is one clear error (at
    once when the port refuses, else after dask's connect timeout
    ``distributed.comm.timeouts.connect``), not a traceback."""
    check_address(address)
    refused = _refused(address)
    if refused:
        raise ValueError(f"cannot reach a Dask scheduler at {address!r}: {refused}")
    timeout = dask.config.get("distributed.comm.timeouts.connect")
    try:
        return start_client(address, set_as_default=set_as_default, security=sec,
                            timeout=timeout)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"cannot reach a Dask scheduler at {address!r} within {timeout} "
                         f"({type(exc).__name__}: {exc})") from None

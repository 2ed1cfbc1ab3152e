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

Per-worker state (the noise table, torch's thread count) is built on each worker by a
:class:`distributed.WorkerPlugin`, including workers that join later: data scattered with
``broadcast=True`` is silently dropped by the Active Memory Manager, so nothing is replicated.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
import time
from typing import Any

import dask.config
from dask.utils import parse_timedelta
from distributed import Client, Nanny, SchedulerPlugin, WorkerPlugin
from distributed.deploy.adaptive import Adaptive
from distributed.security import Security

from esnb import config
from esnb.noise import NoiseConfig, drop_noise_table, get_noise_table

log = logging.getLogger("esnb.cluster")

#: values of ``esnb.cluster.type``
CLUSTER_TYPES = ("local", "address", "slurm", "pbs", "sge", "lsf")
#: the dask-jobqueue class behind each batch-system type
JOBQUEUE_CLASSES = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster",
                    "lsf": "LSFCluster"}
#: worker resource of the long-lived worker that holds actors
ACTOR_RESOURCE = "esnb-actor"

# Every comm logs its last ``low-level-log-length`` messages (< 1 MB each) for debugging; ES
# messages carry theta, so dask's 1000 kept ~50 MB alive in a soak's driver. Lowered once,
# here (distributed is imported, its defaults are in place), unless someone set it already.
_MESSAGE_LOG = "distributed.admin.low-level-log-length"
if dask.config.get(_MESSAGE_LOG) == 1000 and config.get("cluster.message-log-length"):
    dask.config.set({_MESSAGE_LOG: int(config.get("cluster.message-log-length"))})


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


class KeepActorWorkers(SchedulerPlugin):
    """Never offer a worker holding actors (or the actor resource) to adaptive downscaling.

    ``adapt()`` retires idle workers, and a worker whose only work is an actor looks idle.
    """

    idempotent = True
    name = "esnb-keep-actor-workers"

    def valid_workers_downscaling(self, scheduler, workers):
        return [ws for ws in workers if not ws.actors and ACTOR_RESOURCE not in ws.resources]


class EsnbAdaptive(Adaptive):
    """``adapt()`` that also replaces jobs whose workers left (walltime, ``--lifetime``, kill).

    SpecCluster keeps a finished job in its plan, so plain ``adapt()`` believes the worker is
    still coming and never submits a replacement (dask-jobqueue issue #691; jobs of several
    worker processes are never even forgotten). Here a job whose workers have all been seen
    and then gone for ``distributed.deploy.lost-worker-timeout`` is cancelled and forgotten,
    and the cluster resubmits it. The long-lived actor worker is not part of the plan, so it
    does not count towards ``minimum``/``maximum``.
    """

    def __init__(self, cluster, *args, **kwargs):
        super().__init__(cluster, *args, **kwargs)
        # read now: adapt() runs later on the cluster's loop, outside any dask.config.set
        self.grace = parse_timedelta(dask.config.get("distributed.deploy.lost-worker-timeout"))
        self._seen: set = set()  # jobs whose workers have all connected once
        self._gone_since: dict = {}

    async def workers_to_close(self, target: int) -> list:
        # the scheduler counts the actor worker, which is protected and outside the plan
        extra = sum(1 for d in self.cluster.scheduler_info.get("workers", {}).values()
                    if ACTOR_RESOURCE in (d.get("resources") or {}))
        return await super().workers_to_close(target + extra)

    async def adapt(self) -> None:
        await super().adapt()
        self._replace_finished_jobs()

    def _replace_finished_jobs(self) -> None:
        cluster = self.cluster
        if getattr(cluster.status, "name", "") != "running":
            return
        present = {str(d.get("name")) for d in cluster.scheduler_info.get("workers", {}).values()}
        now = time.monotonic()
        actor = getattr(cluster, "_esnb_actor_worker", None)
        if actor is not None:
            actor.check(present, now, self.grace)
        for job_name, job in list(cluster.workers.items()):
            spec = cluster.worker_spec.get(job_name)
            if spec is None:
                continue
            names = {f"{job_name}{s}" for s in spec.get("group", [""])}
            if names <= present:
                self._seen.add(job_name)
            if names & present or job_name not in self._seen:
                self._gone_since.pop(job_name, None)
                continue  # alive, or still waiting in the queue
            since = self._gone_since.setdefault(job_name, now)
            if now - since >= self.grace:
                log.info("job %s lost its workers: submitting a replacement", job_name)
                cluster.workers.pop(job_name, None)
                self._seen.discard(job_name)
                self._gone_since.pop(job_name, None)
                asyncio.ensure_future(job.close())  # cancels it if it is somehow still queued
        # plan entries without a job (forgotten here, or by SpecCluster itself after a lost
        # worker) are reopened; scale() runs one serialised _correct_state, so a call while a
        # submission is in flight opens nothing twice
        if set(cluster.worker_spec) - set(cluster.workers):
            cluster.scale(jobs=len(cluster.worker_spec))


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


def register_noise_table(client: Client, noise: NoiseConfig) -> None:
    """Have every worker (present and future) build ``noise``; waits for present ones."""
    client.register_plugin(NoiseTablePlugin(noise))


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


def make_security(setting: Any = None) -> Security | None:
    """The :class:`distributed.security.Security` of a setting (``esnb.cluster.security``).

    Parameters
    ----------
    setting
        ``None``/``False``/``"none"``: plain TCP. ``"temporary"``/``True``: self-signed
        certificates made now, in memory (one LocalCluster, or a jobqueue cluster that writes
        them to its shared temporary directory for the jobs). ``"config"``: dask's own
        ``distributed.comm.tls.*`` settings (certificate files of a real CA). A dict: keyword
        arguments of ``Security`` (``tls_ca_file``, ``tls_scheduler_cert``, ...), dashes
        allowed. A ``Security`` object is returned as is.
    """
    if isinstance(setting, Security):
        return setting
    if setting is None or setting is False or setting in ("none", "null", ""):
        return None
    if setting is True or setting == "temporary":
        try:
            return Security.temporary()
        except ImportError as exc:
            raise ImportError("temporary TLS certificates need the cryptography package: "
                              "pip install cryptography") from exc
    if setting == "config":
        sec = Security(require_encryption=True)
        if not sec.tls_ca_file:
            raise ValueError("esnb.cluster.security is 'config' but distributed.comm.tls.ca-file "
                             "is not set: give dask the certificate files")
        return sec
    if isinstance(setting, dict):
        kw = {k.replace("-", "_"): v for k, v in setting.items()}
        kw.setdefault("require_encryption", True)
        return Security(**kw)
    raise ValueError(f"esnb.cluster.security must be null, 'temporary', 'config', a dict of "
                     f"Security arguments or a Security object; got {setting!r}")


def make_client(n_workers: int | None = None, *, address: str | None = None,
                threads_per_worker: int | None = None, processes: bool | None = None,
                noise: NoiseConfig | None = None, dashboard_address: str | None = None,
                set_as_default: bool = True, cluster_type: str | None = None,
                security: Any = None, actor_worker: bool | None = None,
                **cluster_kwargs) -> Client:
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
    kind = str(cluster_type or config.get("cluster.type", "local")).lower()
    if kind not in CLUSTER_TYPES:
        raise ValueError(f"esnb.cluster.type {kind!r} is unknown; valid types: "
                         f"{', '.join(CLUSTER_TYPES)}")
    sec = make_security(security if security is not None else config.get("cluster.security"))
    if address or kind == "address":
        address = address or config.get("cluster.address")
        if not address:
            raise ValueError("esnb.cluster.type is 'address' but esnb.cluster.address is not set")
        client = Client(address, set_as_default=set_as_default, security=sec)
    else:
        profile = bool(config.get("cluster.worker-profile", False))
        threads = int(threads_per_worker or config.get("cluster.threads-per-worker", 1))
        cluster_kwargs.setdefault("silence_logs", logging.WARNING)
        # the statistical profiler samples every task's stack each 10 ms, holding the GIL:
        # ~5-10% of a rollout's time. Off unless esnb.cluster.worker-profile is true.
        with dask.config.set({"distributed.worker.profile.enabled": profile}):
            if kind == "local":
                cluster = _local_cluster(n_workers, threads, processes, sec, dashboard_address,
                                         cluster_kwargs)
            else:
                cluster = _jobqueue_cluster(kind, n_workers, threads, sec, dashboard_address,
                                            cluster_kwargs)
            try:
                client = EsnbClient(cluster, set_as_default=set_as_default, security=sec)
                client._esnb_cluster = cluster
                client.register_plugin(KeepActorWorkers())
                want = config.get("cluster.actor-worker", "auto") if actor_worker is None \
                    else actor_worker
                if want is True or (want == "auto" and kind != "local"):
                    client._esnb_extra = (_start_actor_worker(cluster, kind),)
            except BaseException:
                cluster.close()
                raise
    client.register_plugin(TorchThreadsPlugin(1))
    if noise is not None:
        register_noise_table(client, noise)
    return client


def _dashboard(address: str | None, host: str | None) -> str | None:
    """``address``, with the cluster's host filled in when it names only a port."""
    address = address or config.get("cluster.dashboard-address")
    if address and str(address).startswith(":") and host:
        return f"{host}{address}"
    return address


def _local_cluster(n_workers, threads, processes, sec, dashboard_address, kwargs):
    from distributed import LocalCluster

    n_workers = n_workers or config.get("cluster.n-workers") or os.cpu_count() or 1
    if int(n_workers) < 1:
        raise ValueError(f"n_workers must be >= 1, got {n_workers}")
    kwargs = {**_underscored(config.get("cluster.kwargs") or {}), **kwargs}
    host = kwargs.pop("host", config.get("cluster.host", "127.0.0.1"))
    processes = config.get("cluster.processes", True) if processes is None else processes
    if not processes and sec is None and "://" not in str(host):
        # threads only: dask would pick "inproc://", which takes no host (a host fails the
        # scheduler's start) and links the dashboard to the machine's address; stay on TCP
        kwargs.setdefault("protocol", "tcp://")
    return LocalCluster(
        n_workers=int(n_workers),
        threads_per_worker=threads,
        processes=processes,
        host=host,
        dashboard_address=_dashboard(dashboard_address, host),
        security=sec,
        **kwargs,
    )


def _underscored(kwargs: dict) -> dict:
    """YAML keys as Python keyword names (``job-extra-directives`` -> ``job_extra_directives``)."""
    return {str(k).replace("-", "_"): v for k, v in dict(kwargs).items()}


def _jobqueue_cluster(kind, n_workers, threads, sec, dashboard_address, kwargs):
    try:
        import dask_jobqueue
    except ImportError as exc:
        raise ImportError(f"esnb.cluster.type {kind!r} needs dask-jobqueue: "
                          f"pip install 'esnb[jobqueue]'") from exc
    cls = getattr(dask_jobqueue, JOBQUEUE_CLASSES[kind])
    jq_name = cls.job_cls.config_name

    def jq(key, default=None):
        return dask.config.get(f"jobqueue.{jq_name}.{key}", default=default)

    kw = {**_underscored(config.get("cluster.kwargs") or {}), **kwargs}
    # one single-threaded worker process per core: rollouts hold the GIL
    kw.setdefault("cores", jq("cores") or threads)
    kw.setdefault("processes", jq("processes") or max(1, int(kw["cores"]) // threads))
    kw.setdefault("memory", jq("memory") or f"{2 * int(kw['processes'])}GiB")
    kw.setdefault("walltime", jq("walltime"))
    if sec is not None:
        kw.setdefault("security", sec)
    options = dict(kw.pop("scheduler_options", None) or jq("scheduler-options") or {})
    options.setdefault("dashboard_address",
                       _dashboard(dashboard_address, options.get("host") or "127.0.0.1"))
    args = list(kw.pop("worker_extra_args", None) or jq("worker-extra-args") or [])
    if "--lifetime" not in args:
        args += lifetime_args(kw.get("walltime"), kind)
    kw["worker_extra_args"] = args

    cluster = cls(scheduler_options=options, **kw)
    try:
        per_job = int(kw["processes"])
        minimum = config.get("cluster.adapt.minimum")
        minimum = int(n_workers or minimum or config.get("cluster.n-workers") or 1)
        maximum = config.get("cluster.adapt.maximum")
        maximum = max(minimum, int(maximum)) if maximum is not None else minimum
        cluster.adapt(Adaptive=EsnbAdaptive, minimum=minimum, maximum=maximum)
        log.info("%s: adapting between %d and %d workers (%d per job), worker args %s",
                 cls.__name__, minimum, maximum, per_job, " ".join(map(str, args)))
    except BaseException:
        cluster.close()
        raise
    return cluster


def walltime_seconds(walltime: str | int | None, kind: str = "slurm") -> float | None:
    """Seconds of a batch-system walltime: ``D-HH:MM:SS``, ``HH:MM:SS``, ``HH:MM`` (LSF) or
    ``MM:SS`` (SLURM, PBS), or a number of minutes; None if there is none."""
    if walltime is None or walltime == "":
        return None
    text = str(walltime).strip()
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    try:
        parts = [int(p) for p in text.split(":")]
    except ValueError as exc:
        raise ValueError(f"cannot read the walltime {walltime!r}: set esnb.cluster.lifetime "
                         f"explicitly") from exc
    if len(parts) == 1:
        h, m, s = 0, parts[0], 0
    elif len(parts) == 2:
        h, m, s = (parts[0], parts[1], 0) if kind == "lsf" else (0, parts[0], parts[1])
    elif len(parts) == 3:
        h, m, s = parts
    else:
        raise ValueError(f"cannot read the walltime {walltime!r}: set esnb.cluster.lifetime "
                         f"explicitly")
    return float(((days * 24 + h) * 60 + m) * 60 + s)


def lifetime_args(walltime, kind: str = "slurm") -> list[str]:
    """``--lifetime``/``--lifetime-stagger`` for jobqueue workers (``esnb.cluster.lifetime``).

    ``auto`` retires a worker after 90% of the walltime, staggered by 5% either way, so it
    hands its data over before the batch system kills it (1 h: between 51 and 57 min).
    """
    lifetime = config.get("cluster.lifetime", "auto")
    stagger = config.get("cluster.lifetime-stagger", "auto")
    if lifetime in (None, False, "none"):
        return []
    wall = walltime_seconds(walltime, kind)
    if lifetime == "auto":
        if wall is None:
            return []
        lifetime_s = 0.9 * wall
    else:
        lifetime_s = parse_timedelta(lifetime)
    if stagger == "auto":
        stagger_s = 0.05 * wall if wall else 0.0
    else:
        stagger_s = parse_timedelta(stagger or 0)
    if wall is not None and lifetime_s + stagger_s >= wall:
        log.warning("worker lifetime %.0f s (+%.0f s stagger) reaches the walltime %.0f s: "
                    "the batch system may kill workers before they retire",
                    lifetime_s, stagger_s, wall)
    args = ["--lifetime", f"{math.floor(lifetime_s)}s"]
    if stagger_s > 0:
        args += ["--lifetime-stagger", f"{math.floor(stagger_s)}s"]
    return args


class ActorWorker:
    """The long-lived worker with :data:`ACTOR_RESOURCE`: outside the adaptive plan (scaling
    never touches it), started without ``--lifetime``, replaced if it dies, closed with the
    client.

    On a LocalCluster it is a Nanny of this process (which restarts its worker process); on a
    jobqueue cluster a job of its own, resubmitted by :class:`EsnbAdaptive` once its worker has
    been gone for ``distributed.deploy.lost-worker-timeout`` (walltime, node failure, scancel).
    """

    name = "esnb-actor"

    def __init__(self, cluster, kind: str):
        self.cluster = cluster
        self.replacements = 0
        self.proc = None
        self._seen = False
        self._gone_since: float | None = None
        self._restarting = False
        if kind == "local":
            self.options = dict(cluster.new_spec["options"])
            self.options.update(name=self.name, resources={ACTOR_RESOURCE: 1})
            self._make = Nanny
        else:
            # the cluster's own job arguments (interface, protocol, worker TLS files)
            options = dict(cluster._job_kwargs)
            args = list(options.get("worker_extra_args") or [])
            if "--lifetime" in args:  # drop --lifetime and --lifetime-stagger with their values
                args = [a for i, a in enumerate(args)
                        if not (str(a).startswith("--lifetime") or
                                (i and str(args[i - 1]).startswith("--lifetime")))]
            options["worker_extra_args"] = args + ["--resources", f"{ACTOR_RESOURCE}=1"]
            walltime = config.get("cluster.actor-walltime")
            if walltime:
                options["walltime"] = walltime
            options.update(processes=1, cores=1, name=self.name)
            self.options = options
            self._make = cluster.job_cls

    async def start(self) -> None:
        # built inside the cluster's event loop: a Nanny is bound to the loop it is made in
        self.proc = await self._make(self.cluster.scheduler_address, **self.options)

    async def close(self) -> None:
        if self.proc is not None:
            await self.proc.close()

    def check(self, present: set, now: float, grace: float) -> None:
        """Called by :class:`EsnbAdaptive` on the cluster's loop: replace a dead actor worker."""
        if self.name in present:
            self._seen, self._gone_since = True, None
            return
        if not self._seen or self._restarting:
            return  # still starting (or queued), or already being replaced
        if self._gone_since is None:
            self._gone_since = now
        if now - self._gone_since >= grace:
            self._restarting = True
            asyncio.ensure_future(self._replace())

    async def _replace(self) -> None:
        log.warning("the actor worker is gone: starting a new one")
        try:
            try:
                await self.close()  # cancels its job if the batch system still holds it
            except Exception:
                log.debug("closing the lost actor worker failed", exc_info=True)
            self._seen, self._gone_since = False, None
            await self.start()
            self.replacements += 1
        finally:
            self._restarting = False


def _start_actor_worker(cluster, kind: str) -> ActorWorker:
    actor = ActorWorker(cluster, kind)
    cluster.sync(actor.start)
    cluster._esnb_actor_worker = actor  # EsnbAdaptive replaces it if it dies
    return actor

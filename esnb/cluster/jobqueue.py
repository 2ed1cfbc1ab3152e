"""Batch clusters through dask-jobqueue: adaptive scaling that replaces jobs whose workers
left, worker lifetimes shorter than the walltime, and the long-lived actor worker."""

from __future__ import annotations

import asyncio
import logging
import math
import time

import dask.config
from dask.utils import parse_timedelta
from distributed import Nanny
from distributed.deploy.adaptive import Adaptive

from esnb import config
from esnb.cluster.options import dashboard_address_for, underscored
from esnb.cluster.plugins import ACTOR_RESOURCE
from esnb.cluster.quiet import job_script_lines

log = logging.getLogger("esnb.cluster")

#: the dask-jobqueue class behind each batch-system type
JOBQUEUE_CLASSES = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster",
                    "lsf": "LSFCluster"}


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


def jobqueue_cluster(kind, n_workers, threads, sec, dashboard_address, kwargs,
                     relaxed: dict | None = None):
    try:
        import dask_jobqueue
    except ImportError as exc:
        raise ImportError(f"esnb.cluster.type {kind!r} needs dask-jobqueue: "
                          f"pip install 'esnb[jobqueue]'") from exc
    cls = getattr(dask_jobqueue, JOBQUEUE_CLASSES[kind])
    jq_name = cls.job_cls.config_name

    def jq(key, default=None):
        return dask.config.get(f"jobqueue.{jq_name}.{key}", default=default)

    kw = {**underscored(config.get("cluster.kwargs") or {}), **kwargs}
    # one single-threaded worker process per core: rollouts hold the GIL
    kw.setdefault("cores", jq("cores") or threads)
    kw.setdefault("processes", jq("processes") or max(1, int(kw["cores"]) // threads))
    kw.setdefault("memory", jq("memory") or f"{2 * int(kw['processes'])}GiB")
    kw.setdefault("walltime", jq("walltime"))
    if sec is not None:
        kw.setdefault("security", sec)
    options = dict(kw.pop("scheduler_options", None) or jq("scheduler-options") or {})
    options.setdefault("dashboard_address",
                       dashboard_address_for(dashboard_address, options.get("host") or "127.0.0.1"))
    args = list(kw.pop("worker_extra_args", None) or jq("worker-extra-args") or [])
    if "--lifetime" not in args:
        args += lifetime_args(kw.get("walltime"), kind)
    kw["worker_extra_args"] = args
    if relaxed and "env_extra" not in kw and jq("env-extra") is None:
        # dask's monitors relaxed on the job's workers too (esnb.cluster.quiet), first in the
        # script so the user's own prologue lines come after them
        prologue = kw.pop("job_script_prologue", None) or jq("job-script-prologue") or []
        kw["job_script_prologue"] = job_script_lines(relaxed) + list(prologue)

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


def start_actor_worker(cluster, kind: str) -> ActorWorker:
    actor = ActorWorker(cluster, kind)
    cluster.sync(actor.start)
    cluster._esnb_actor_worker = actor  # EsnbAdaptive replaces it if it dies
    return actor

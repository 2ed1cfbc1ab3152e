"""A LocalCluster keeps the workers it was asked for, also on a loaded machine.

A killed worker process is restarted by its nanny. But dask's ``SpecCluster`` closes and
forgets a nanny whose worker has been gone from the scheduler for
``distributed.deploy.lost-worker-timeout`` (15 s by default), and starts no other in its
place: on a loaded machine a restart that spends longer than that spawning and importing
(torch, MuJoCo, gymnasium) shrinks the cluster for good, silently. The plan
(``cluster.worker_spec``) still names the forgotten worker, so :func:`keep_planned_workers`
asks the cluster every few seconds to start what its plan names and it lacks (dask's own
``_correct_state``, which ``scale()`` runs); ``scale()`` and ``close()`` change the plan or the
status first, so neither is undone.

Two states make such a start fail, and the check waits them out rather than make them:

- the name is still held at the scheduler: the nanny dask is closing may have restarted its
  worker a moment before, and that worker leaves only when the close is done; a new worker of
  the same name is refused ("name taken") until then;
- a nanny whose start failed (that refusal, or any other) stays in ``cluster.workers``, where
  dask never looks at it again: the check drops it and starts its name anew.
"""

from __future__ import annotations

import logging

log = logging.getLogger("esnb.cluster")

#: how often the cluster's plan is compared with its nannies (seconds)
INTERVAL_S = 2.0


def keep_planned_workers(cluster, interval_s: float | None = None):
    """Start, on ``cluster``'s event loop, a periodic check that replaces the nannies dask's
    ``SpecCluster`` forgot (see the module's doc); returns the callback (stopped with the
    cluster's loop, or by ``.stop()``); ``interval_s`` (None: :data:`INTERVAL_S`)."""
    from tornado.ioloop import PeriodicCallback

    seen_missing: set = set()

    def held_at_scheduler() -> set[str]:
        info = getattr(cluster, "scheduler_info", None) or {}
        return {str(w.get("name")) for w in info.get("workers", {}).values()}

    def lacking() -> set:
        """Names of the plan with no nanny, or with one that failed or closed."""
        return {name for name in cluster.worker_spec
                if name not in cluster.workers
                or getattr(cluster.workers[name].status, "name", "") in ("failed", "closed")}

    def check():
        lock = getattr(cluster, "_lock", None)
        if getattr(cluster.status, "name", "") != "running" or getattr(
                cluster, "_correct_state_waiting", None) is not None or (
                lock is not None and lock.locked()):
            # dask is starting or closing workers (scale(), a start): a name of the plan is
            # missing from the nannies until the start is done, which is no loss
            seen_missing.clear()
            return
        held = held_at_scheduler()
        now = {name for name in lacking() if str(name) not in held}
        # lacking at two checks in a row with no start in between: scale() changes the plan
        # before its start is scheduled, so a single check may fall between the two
        due = now & seen_missing
        seen_missing.clear()
        if not due:
            seen_missing.update(now)
            return
        failed = sorted(str(name) for name in due if name in cluster.workers)
        forgotten = sorted(str(name) for name in due if name not in cluster.workers)
        for names, why in ((forgotten, "gave up restarting (dask's lost-worker-timeout)"),
                           (failed, "failed to start")):
            if names:
                log.warning("worker%s %s %s: starting %s again", "s" * (len(names) > 1),
                            ", ".join(names), why, "them" if len(names) > 1 else "it")
        for name in due:
            cluster.workers.pop(name, None)  # failed: dask would not look at it again
        cluster._correct_state()

    callback = PeriodicCallback(check, (interval_s or INTERVAL_S) * 1000)
    cluster.loop.add_callback(callback.start)
    cluster.periodic_callbacks["esnb-keep-planned-workers"] = callback
    return callback

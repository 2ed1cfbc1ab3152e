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

    def check():
        lock = getattr(cluster, "_lock", None)
        if getattr(cluster.status, "name", "") != "running" or getattr(
                cluster, "_correct_state_waiting", None) is not None or (
                lock is not None and lock.locked()):
            # dask is starting or closing workers (scale(), a start): a name of the plan is
            # missing from the nannies until the start is done, which is no loss
            seen_missing.clear()
            return
        now = set(cluster.worker_spec) - set(cluster.workers)
        # missing at two checks in a row with no start in between: scale() changes the plan
        # before its start is scheduled, so a single check may fall between the two
        missing = sorted(map(str, now & seen_missing))
        seen_missing.clear()
        seen_missing.update(now)
        if missing:
            seen_missing.clear()
            log.warning("worker%s %s gave up restarting (dask's lost-worker-timeout): "
                        "starting %s again", "s" * (len(missing) > 1), ", ".join(missing),
                        "them" if len(missing) > 1 else "it")
            cluster._correct_state()

    callback = PeriodicCallback(check, (interval_s or INTERVAL_S) * 1000)
    cluster.loop.add_callback(callback.start)
    cluster.periodic_callbacks["esnb-keep-planned-workers"] = callback
    return callback

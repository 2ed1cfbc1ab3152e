"""Dask's periodic monitors, relaxed on the clusters esnb starts (issue 37).

Every Dask server (the scheduler, each nanny, each worker) runs periodic callbacks on its event
loop whether or not anything happens. Three of them cost a training run measurable CPU (an
idle 2-worker LocalCluster: the driver 0.076 CPU-s per second, each worker 0.029; with the
values below 0.016 and 0.0045; an ES generation on HalfCheetah-v5 took 0.74 CPU-s of the
driver, 0.36 with them: ``esnb bench dask-idle``, BENCHMARKS.md), and none of them is what a
training run needs at dask's rate:

- ``distributed.admin.tick.interval`` (dask: 20 ms): each server wakes 50 times a second to
  time its own loop, for the "Event loop was unresponsive" log line and the dashboard's
  event-loop figure. At 500 ms that line still appears for a stall past
  ``distributed.admin.tick.limit`` (3 s, left as it is), timed to within half a second. Most of
  the saving.
- ``distributed.worker.memory.monitor-interval`` (dask: 100 ms): each nanny and each worker
  reads its process's memory with psutil ten times a second, for the spill, pause and
  terminate thresholds. ES workers hold a noise table and small tasks; a worker growing at
  1 GB/s passes its limit by ~0.5 GB instead of ~0.1 GB before its nanny ends it.
- ``distributed.admin.system-monitor.interval`` (dask: 500 ms): each server samples CPU,
  memory, network and disk I/O for the dashboard's System page (and the workers' heartbeat
  metrics); the page updates every 2 s instead.

Left as dask has them: heartbeats and the scheduler's worker TTL (how fast a dead worker is
noticed: tests/test_faults.py, tests/test_deaths.py), work stealing (already 1 s in dask),
the client's heartbeat (5 s), the statistical profiler (off through
``esnb.cluster.worker-profile``).

Applied by :func:`esnb.cluster.make_client` to the clusters it starts, in the dask config the
servers read as they are made: a LocalCluster's scheduler, nannies and worker processes (forked
or spawned), and, through a copy of the ``distributed`` settings in the workers' spec, every
worker a nanny restarts or a later ``cluster.scale`` adds (dask's nanny keeps its config by
reference, so a restarted worker got dask's intervals back: ``_local_cluster``); a jobqueue
cluster's scheduler in the driver, and each job's workers through ``DASK_DISTRIBUTED__...``
exports at the top of the job script (not when the deprecated ``env_extra`` is used: that list
is left alone). Never applied to a scheduler esnb joins
(``esnb.cluster.type: address``) nor to clusters made outside ``make_client``. A key is relaxed
only while it holds dask's own default: a value that differs from it (YAML, ``dask.config.set``)
or any ``DASK_...`` environment variable for that key is the user's, and kept. (A YAML or
``dask.config.set`` value equal to dask's default cannot be told from it: keep dask's interval
with the ``DASK_...`` variable, or with ``esnb.cluster.quiet: false``, which leaves all three
at dask's values.)
"""

from __future__ import annotations

from typing import Any

import dask.config
from dask.utils import parse_timedelta

from esnb import config

#: dask key -> esnb's value on its own clusters (the reasons: the module's docstring)
SETTINGS: dict[str, str] = {
    "distributed.admin.tick.interval": "500ms",
    "distributed.worker.memory.monitor-interval": "500ms",
    "distributed.admin.system-monitor.interval": "2s",
}

_MISSING = object()


def dask_default(key: str) -> Any:
    """``key``'s value in dask's packaged defaults (distributed.yaml), whatever is set now."""
    return dask.config.get(key, default=None, config=dask.config.merge(*dask.config.defaults))


def _same(a: Any, b: Any) -> bool:
    try:
        return parse_timedelta(a) == parse_timedelta(b)
    except (TypeError, ValueError):
        return a == b


def env_var(key: str) -> str:
    """The environment variable dask reads ``key`` from (``DASK_DISTRIBUTED__ADMIN__...``)."""
    return "DASK_" + "__".join(part.upper().replace("-", "_") for part in key.split("."))


def user_set(key: str) -> bool:
    """Whether ``key`` is the user's: its value is not dask's default, or a ``DASK_...``
    variable sets it (even to dask's default)."""
    if dask.config.get(key, default=_MISSING, config=dask.config.collect_env()) is not _MISSING:
        return True
    return not _same(dask.config.get(key, default=None), dask_default(key))


def values() -> dict[str, str]:
    """The quiet values to apply now, as ``dask.config.set`` takes them: {} when
    ``esnb.cluster.quiet`` is false, else every key of :data:`SETTINGS` the user has not set."""
    if not config.get("cluster.quiet", True):
        return {}
    return {key: value for key, value in SETTINGS.items() if not user_set(key)}


def job_script_lines(flat: dict[str, Any]) -> list[str]:
    """Shell lines for a batch job's script: each value exported unless the job's environment
    already sets that variable."""
    return [f"export {env_var(k)}=\"${{{env_var(k)}:-{v}}}\""
            for k, v in flat.items()]

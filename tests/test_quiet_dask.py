"""Dask's periodic monitors relaxed on esnb's own clusters (esnb.cluster.quiet, issue 37): the
values reach the scheduler, the nannies and the worker processes; a value the user set is kept;
the dashboard still serves. (What they save is measured by ``esnb bench dask-idle``, not here.)"""

import logging
import urllib.request

import dask.config
import pytest
from dask.utils import parse_timedelta

from esnb.cluster import make_client, quiet

TICK = "distributed.admin.tick.interval"
MEMORY = "distributed.worker.memory.monitor-interval"
SYSTEM = "distributed.admin.system-monitor.interval"


def seconds(value) -> float:
    return parse_timedelta(value)


def _intervals(server) -> dict:
    """The intervals a dask server was made with (a worker or nanny also has a memory
    monitor)."""
    out = {TICK: server._tick_interval,
           SYSTEM: server.periodic_callbacks["monitor"].callback_time / 1000}
    if getattr(server, "memory_manager", None) is not None:
        out[MEMORY] = server.memory_manager.memory_monitor_interval
    return out


def _worker_view(dask_worker) -> dict:
    return {"config": {k: dask.config.get(k) for k in (TICK, MEMORY, SYSTEM)},
            "made_with": _intervals(dask_worker)}


def test_dask_defaults_are_what_esnb_relaxes():
    """The values esnb relaxes are dask's defaults now, and esnb's are longer."""
    for key, value in quiet.SETTINGS.items():
        default = quiet.dask_default(key)
        assert default is not None, key
        assert seconds(value) > seconds(default), key


def test_quiet_values_reach_scheduler_nannies_and_workers(client):
    want = {k: seconds(v) for k, v in quiet.SETTINGS.items()}
    on_scheduler = client.run_on_scheduler(lambda dask_scheduler: _intervals(dask_scheduler))
    assert on_scheduler == {TICK: want[TICK], SYSTEM: want[SYSTEM]}
    workers = client.run(_worker_view)
    assert len(workers) == 2
    for view in workers.values():  # forked from esnb's server, the config handed by the nanny
        assert {k: seconds(v) for k, v in view["config"].items()} == want
        assert view["made_with"] == want
    nannies = list(client.cluster.workers.values())
    assert nannies and all(_intervals(n) == want for n in nannies)
    # only esnb's cluster: the driver's own config is dask's again after make_client
    for key in quiet.SETTINGS:
        assert seconds(dask.config.get(key)) == seconds(quiet.dask_default(key))


def test_a_value_the_user_set_is_kept():
    with dask.config.set({TICK: "50ms"}):
        c = make_client(1, dashboard_address=":0", set_as_default=False,
                        silence_logs=logging.ERROR)
    try:
        assert c.run_on_scheduler(lambda dask_scheduler: dask_scheduler._tick_interval) == 0.05
        (view,) = c.run(_worker_view).values()
        assert view["made_with"][TICK] == 0.05
        # the keys the user left alone are still relaxed
        assert view["made_with"][MEMORY] == seconds(quiet.SETTINGS[MEMORY])
        assert view["made_with"][SYSTEM] == seconds(quiet.SETTINGS[SYSTEM])
    finally:
        c.close()


def test_a_restarted_or_added_worker_is_quiet_and_unprofiled_too():
    """A nanny restarts its worker (after a fault) outside make_client's config, and a later
    scale adds workers outside it: both still get esnb's settings (profiler off included)."""
    c = make_client(1, dashboard_address=":0", set_as_default=False,
                    silence_logs=logging.ERROR)
    try:
        want = {k: seconds(v) for k, v in quiet.SETTINGS.items()}
        c.restart()
        c.cluster.scale(2)
        c.wait_for_workers(2, timeout=120)
        views = c.run(_worker_view)
        assert len(views) == 2
        for view in views.values():
            assert view["made_with"] == want
        profiled = c.run(lambda: dask.config.get("distributed.worker.profile.enabled"))
        assert set(profiled.values()) == {False}
    finally:
        c.close()


def test_an_environment_variable_is_the_users_even_at_dasks_default(monkeypatch):
    monkeypatch.setenv(quiet.env_var(TICK), "20ms")
    assert quiet.env_var(TICK) == "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL"
    assert quiet.user_set(TICK)
    assert TICK not in quiet.values() and MEMORY in quiet.values()


def test_quiet_false_leaves_dasks_intervals():
    with dask.config.set({"esnb.cluster.quiet": False}):
        assert quiet.values() == {}
    with dask.config.set({"esnb.cluster.quiet": "yes"}), pytest.raises(ValueError,
                                                                     match="true or false"):
        quiet.values()


def test_dashboard_serves_with_the_quiet_settings(client):
    link = client.dashboard_link
    assert link.endswith("/status")
    for page in (link, link.rsplit("/", 1)[0] + "/system"):
        with urllib.request.urlopen(page, timeout=60) as response:
            assert response.status == 200
            assert b"<html" in response.read().lower()


def test_jobqueue_workers_get_the_quiet_values_in_their_job_script(monkeypatch):
    """A SLURM cluster's scheduler (in this process) is quiet, and its job script exports the
    values before the user's own prologue lines (nothing is submitted: adapt is stubbed)."""
    jobqueue = pytest.importorskip("dask_jobqueue")
    monkeypatch.setattr(jobqueue.SLURMCluster, "adapt", lambda self, *a, **kw: None)
    c = make_client(1, cluster_type="slurm", actor_worker=False, dashboard_address=":0",
                    set_as_default=False, job_script_prologue=["export MINE=1"])
    try:
        assert c.run_on_scheduler(lambda dask_scheduler: dask_scheduler._tick_interval) == \
            seconds(quiet.SETTINGS[TICK])
        script = c.cluster.job_script()
        lines = [line.strip() for line in script.splitlines()]
        exports = quiet.job_script_lines(quiet.SETTINGS)
        assert all(line in lines for line in exports)
        assert lines.index("export MINE=1") > max(lines.index(line) for line in exports)
        assert 'export DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=' \
               '"${DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL:-500ms}"' in lines
    finally:
        c.close()

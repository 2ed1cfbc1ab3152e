"""Cluster configuration: cluster types, worker lifetimes, the long-lived actor worker."""

import collections
import logging
import os
import subprocess
import sys

import dask.config
import psutil
import pytest

from esnb.cluster import (
    ACTOR_RESOURCE,
    CLUSTER_TYPES,
    actor_resources,
    lifetime_args,
    make_client,
    walltime_seconds,
)


def test_unknown_cluster_type_lists_the_valid_ones():
    with dask.config.set({"esnb.cluster.type": "kubernetes"}):
        with pytest.raises(ValueError) as err:
            make_client(1)
    for kind in CLUSTER_TYPES:
        assert kind in str(err.value)
    assert "esnb.cluster.type" in str(err.value) and "got 'kubernetes'" in str(err.value)


def test_cluster_type_from_an_environment_variable():
    # dask reads DASK_ESNB__CLUSTER__TYPE when it is imported: a fresh interpreter
    code = ("import esnb.cluster as c, dask.config as d\n"
            "print(d.get('esnb.cluster.type'))\n"
            "try:\n    c.make_client(1)\nexcept ValueError as e:\n    print(e)\n")
    env = {**os.environ, "DASK_ESNB__CLUSTER__TYPE": "address"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "address", "esnb.cluster.type is 'address' but esnb.cluster.address is not set"]


def test_address_type_joins_a_running_scheduler(client):
    with dask.config.set({"esnb.cluster.type": "address",
                          "esnb.cluster.address": client.scheduler.address}):
        other = make_client(set_as_default=False)
    try:
        assert other.scheduler.address == client.scheduler.address
        assert len(other.scheduler_info()["workers"]) == 2
        assert other.submit(sum, [1, 2], pure=False).result() == 3
    finally:
        other.close()
    # closing a client that only joined leaves the cluster running
    assert client.submit(sum, [3, 4], pure=False).result() == 7


def test_jobqueue_type_without_dask_jobqueue_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # import fails as if missing
    with pytest.raises(ImportError, match=r"pip install 'esnb\[jobqueue\]'"):
        make_client(1, cluster_type="pbs")


@pytest.mark.parametrize("walltime, kind, seconds", [
    ("01:00:00", "slurm", 3600), ("1-02:00:00", "slurm", 93600), ("30:00", "slurm", 1800),
    ("45", "slurm", 2700), ("02:30", "lsf", 9000), (None, "pbs", None),
])
def test_walltimes(walltime, kind, seconds):
    assert walltime_seconds(walltime, kind) == seconds


def test_worker_lifetime_retires_before_the_walltime():
    # auto: 90% of the walltime, staggered by 5% either way (1 h: 51 to 57 min)
    assert lifetime_args("01:00:00") == ["--lifetime", "3240s", "--lifetime-stagger", "180s"]
    assert lifetime_args(None) == []  # no walltime, no lifetime
    with dask.config.set({"esnb.cluster.lifetime": "20m",
                          "esnb.cluster.lifetime-stagger": "1m"}):
        assert lifetime_args("01:00:00") == ["--lifetime", "1200s", "--lifetime-stagger", "60s"]
    with dask.config.set({"esnb.cluster.lifetime": None}):
        assert lifetime_args("01:00:00") == []
    with pytest.raises(ValueError, match="set esnb.cluster.lifetime explicitly"):
        lifetime_args("one hour")


def test_actor_worker_is_long_lived_and_never_downscaled():
    c = make_client(1, dashboard_address=":0", set_as_default=False, actor_worker=True,
                    silence_logs=logging.ERROR)
    try:
        c.wait_for_workers(2, timeout=60)
        assert actor_resources(c) == {ACTOR_RESOURCE: 1}
        workers = c.scheduler_info(n_workers=-1)["workers"]
        actor_addr = next(a for a, w in workers.items() if ACTOR_RESOURCE in w["resources"])

        with c.as_current():  # an actor handle talks through the current client
            counter = c.submit(collections.Counter, actor=True,
                               resources=actor_resources(c)).result()
            counter.update(["a", "b"]).result()
            assert counter.total().result() == 2
        assert c.who_has(counter._future)[counter.key] == (actor_addr,)

        # adaptive scaling asks the scheduler which workers it may close: never this one
        def closable(dask_scheduler):
            return dask_scheduler.workers_to_close(n=len(dask_scheduler.workers))

        assert actor_addr not in c.run_on_scheduler(closable)
        assert len(c.run_on_scheduler(closable)) == 1
        pid = c.run(os.getpid, workers=[actor_addr])[actor_addr]
    finally:
        c.close()
    # the actor worker (a process of its own) went with the client
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_local_clusters_have_no_actor_worker_by_default(client):
    assert actor_resources(client) is None

"""Every host of a run shares the driver's esnb, numpy, gymnasium, mujoco and torch (issue 34):
a worker of another version refuses the run in one line, naming the package, both versions and
both hosts. The other worker's Python is this one with a package's metadata saying another
version (a ``.dist-info`` folder first on its path), as another machine's environment would."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from distributed import Client, LocalCluster

from esnb.cluster.versions import VersionMismatch, check_versions, host_versions
from esnb.runners.executor.on_dask import DaskExecutor


def test_host_versions_name_every_package_without_importing_it():
    code = ("import sys; from esnb.cluster.versions import host_versions; v = host_versions(); "
            "print(v['numpy'] is not None, 'torch' in sys.modules, 'mujoco' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False", "False"]
    mine = host_versions()
    check_versions(mine)  # the same: nothing to say
    other = dict(mine, numpy="0.0.1", host="elsewhere")
    with pytest.raises(VersionMismatch) as err:
        check_versions(other)
    line = str(err.value)
    assert "\n" not in line and "numpy" in line and "0.0.1" in line and "elsewhere" in line
    check_versions(dict(mine, torch=None))  # what the driver lacks is not checked


def _fake_metadata(folder, package: str, version: str) -> None:
    info = folder / f"{package}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\n"
                                   f"Version: {version}\n")


def _other_worker(address, site, name):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site),
                                                       os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
         "--no-nanny", "--name", name], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_a_worker_of_another_version_refuses_the_run(tmp_path):
    """Present when the run starts: the run stops with the line. Joining later: the worker
    says the line in its log and leaves before it takes a task."""
    _fake_metadata(tmp_path / "site", "gymnasium", "0.0.7")
    mine = host_versions()["gymnasium"]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        worker = _other_worker(cluster.scheduler_address, tmp_path / "site", "present")
        try:
            client.wait_for_workers(2, timeout=120)
            with pytest.raises(VersionMismatch) as err:
                DaskExecutor(client)
            line = str(err.value)
            assert "\n" not in line and "gymnasium 0.0.7" in line and f"gymnasium {mine}" in line
        finally:
            worker.kill()
            worker.communicate()
        deadline = time.monotonic() + 60
        while len(client.scheduler_info()["workers"]) > 1 and time.monotonic() < deadline:
            time.sleep(0.2)

        DaskExecutor(client)  # the same versions: accepted, and checks every joiner
        joiner = _other_worker(cluster.scheduler_address, tmp_path / "site", "joiner")
        try:
            _, err = joiner.communicate(timeout=120)  # it leaves by itself
        finally:
            joiner.kill()
        said = [ln for ln in err.splitlines() if "leaves the cluster" in ln]
        assert len(said) == 1 and "gymnasium 0.0.7" in said[0] and f"gymnasium {mine}" in said[0]
        assert len(client.scheduler_info()["workers"]) == 1

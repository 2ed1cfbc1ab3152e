"""A run killed where it stands (SIGKILL of its process group: a hung run killed, a lost
session) leaves its theta file in shared memory; the next ES run on the host removes it, and
only the files of drivers that are gone."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from esnb.runners.es.host_theta import PREFIX, HostTheta, collect_stale

RUN = ["train", "es", "--env", "CartPole-v1", "--population", "10", "--noise-size", "200000",
       "--workers", "1", "--final-eval", "0", "--no-progress"]


def theta_files(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(PREFIX))


@pytest.mark.slow
def test_the_theta_file_of_a_killed_run_is_collected_at_the_next_start(tmp_path):
    shm = tmp_path / "shm"
    shm.mkdir()
    env = {**os.environ, "ESNB_SHM_DIR": str(shm)}
    killed = subprocess.Popen([sys.executable, "-m", "esnb.cli", *RUN, "--generations", "100000",
                               "--out", str(tmp_path / "killed")], env=env,
                              start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        while not theta_files(shm):  # the run has published a generation's theta
            assert killed.poll() is None, killed.communicate()[1]
            time.sleep(0.1)
    finally:
        os.killpg(killed.pid, signal.SIGKILL)  # the driver, its cluster and its workers
        killed.communicate()
    left = theta_files(shm)  # one, or two if the kill fell between a publish's replace and
    assert left and all(f.startswith(f"{PREFIX}{killed.pid}-") for f in left)  # its removal

    alive = shm / f"{PREFIX}{os.getpid()}-a-run-still-going-3.npy"  # this process: alive
    np.save(alive, np.zeros(3, np.float32))
    p = subprocess.run([sys.executable, "-m", "esnb.cli", *RUN, "--generations", "2",
                        "--out", str(tmp_path / "next")], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    # the dead driver's file is gone, the live one's kept, the new run removed its own
    assert theta_files(shm) == [alive.name]


def test_collect_stale_keeps_what_it_cannot_prove_dead(tmp_path, monkeypatch):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(gone.stdout)
    names = [f"{PREFIX}{dead_pid}-run-1.npy", f"{PREFIX}{dead_pid}-run-2.npy.77.tmp",
             f"{PREFIX}{os.getpid()}-run-1.npy",  # alive
             f"{PREFIX}1-run-1.npy",  # init: alive, or another user's (EPERM): kept
             f"{PREFIX}oldstyle-1.npy", "esnb-noise-123.f32"]  # not a driver's file: kept
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    removed = collect_stale(str(tmp_path))
    assert sorted(os.path.basename(p) for p in removed) == sorted(names[:2])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[2:])
    # a new run's HostTheta collects too, and names its files by its driver's pid
    (tmp_path / names[0]).write_bytes(b"x")
    monkeypatch.setenv("ESNB_SHM_DIR", str(tmp_path))
    host = HostTheta("tok")
    path = host.publish(1, np.zeros(4), None, None)
    assert not (tmp_path / names[0]).exists()
    assert os.path.basename(path) == f"{PREFIX}{os.getpid()}-tok-1.f32"
    host.close()


def test_workers_map_theta_without_parsing_python(tmp_path, monkeypatch):
    """Workers read each generation's theta from the driver's file in several threads at once.
    Reading an ``.npy`` header runs ``ast.literal_eval``, whose AST constructor in CPython 3.11
    keeps one recursion counter per interpreter: two threads reading at once failed now and then
    with ``SystemError: AST constructor recursion depth mismatch`` (a CI run's ES task). The file
    is raw float32, mapped without compiling anything; a file of another size is refused."""
    import builtins
    import socket

    from esnb.runners.es.host_theta import read
    from esnb.runners.es.replica import Update, checksum

    monkeypatch.setenv("ESNB_SHM_DIR", str(tmp_path))
    rng = np.random.default_rng(3)
    theta = rng.standard_normal(7).astype(np.float32)
    mean = rng.standard_normal(2).astype(np.float32)
    std = rng.random(2).astype(np.float32) + 0.5
    host = HostTheta("tok")
    path = host.publish(4, theta, mean, std)
    update = Update(4, None, (), None, 0.02, checksum(theta, mean, std), path,
                    socket.gethostname(), header=True)

    def no_compiling(*args, **kwargs):
        raise AssertionError("theta was read by compiling Python source")

    monkeypatch.setattr(builtins, "compile", no_compiling)
    got = read(update, dim=7, obs_dim=2, obs_norm=True)
    monkeypatch.undo()
    assert got is not None
    for a, b in zip(got, (theta, mean, std)):
        assert type(a) is np.ndarray and a.dtype == np.float32
        np.testing.assert_array_equal(a, b)
    assert read(update, dim=7, obs_dim=2, obs_norm=False) is None  # 7 != 11 values: a replica
    assert read(update, dim=6, obs_dim=2, obs_norm=True) is None
    host.close()
    assert not os.path.exists(path)

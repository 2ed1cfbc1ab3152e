"""Shared fixtures: real LocalClusters (worker processes), small noise tables."""

from __future__ import annotations

import logging
import os
import platform
import sys

import pytest


def _default_signal_dispositions() -> None:
    """Give the test process the signal dispositions a terminal gives it.

    A suite started as a background job of a non-interactive shell, or under ``nohup``,
    inherits SIGINT (and with nohup SIGHUP) as ignored, and an ignored disposition survives
    ``exec`` into every process a test starts; the tests that send a terminal's Ctrl-C to a
    process group, or check what a worker ignores, assume a terminal's. Set them here: Python's
    own SIGINT handler (KeyboardInterrupt), the default SIGTERM and SIGHUP.
    """
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)


_default_signal_dispositions()


def _pin_x86_kernels() -> None:
    """Make every x86-64 machine with AVX2 run the same numerical kernels in the tests.

    numpy, OpenBLAS, MKL (torch's BLAS) and ATen pick their kernels at run time from the CPU
    they find: on a machine with AVX-512 they take other kernels than on one with AVX2 only,
    with other summation orders, so the same seeded run differs in its last bits, and a
    chaotic RL run soon differs in everything. The recorded digests of tests/test_es_golden.py
    and the seeds of the learning tests were chosen on AVX2 kernels; pinning them here (before
    numpy or torch is imported; worker processes, notebook kernels and batch jobs inherit the
    environment) gives the same numbers on every such machine. Variables already set are kept.
    """
    if platform.machine() not in ("x86_64", "AMD64"):
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return
    if not {"avx2", "fma"} <= set(flags):
        return  # forcing AVX2 kernels on a CPU without them would kill the process
    loaded = {"numpy", "torch"} & set(sys.modules)
    if loaded:  # too late for these: say so rather than record numbers of other kernels
        raise RuntimeError(f"{sorted(loaded)} imported before tests/conftest.py pinned the "
                           "CPU kernels; a pytest plugin imports it?")
    pins = {
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy's own SIMD loops
        "OPENBLAS_CORETYPE": "Haswell",  # numpy's BLAS
        "MKL_CBWR": "AVX2",  # torch's BLAS: MKL's conditional numerical reproducibility
        "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorised kernels
        "ONEDNN_MAX_CPU_ISA": "AVX2",  # torch's oneDNN primitives
    }
    for name, value in pins.items():
        os.environ.setdefault(name, value)


_pin_x86_kernels()


def _private_noise_cache() -> None:
    """Noise tables cached (esnb.noise_cache) in a directory of this test process, removed at
    its exit, not in the user's ~/.cache: the suite still takes esnb's default path (build
    once, read after) and leaves nothing behind. Workers, CLI runs and kernels inherit it."""
    if "DASK_ESNB__NOISE__CACHE" in os.environ:
        return
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="esnb-test-noise-cache-")
    os.environ["DASK_ESNB__NOISE__CACHE"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


_private_noise_cache()

SMALL_NOISE = 1_000_000  # 4 MB: plenty for test policies, builds in ~10 ms


@pytest.fixture(scope="session")
def client():
    """A 2-worker LocalCluster of real processes, shared by the session.

    It is *not* the default client, so runners created with ``client=None`` in other tests
    really run inline. Tests that kill or add workers make their own cluster.
    """
    from esnb.cluster import make_client

    c = make_client(2, dashboard_address=":0", set_as_default=False,
                    silence_logs=logging.ERROR)
    yield c
    c.close()


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one intra-op thread for a module's tests: small networks on a shared 2-core
    machine only spin with more (measured 5x slower updates with 2 threads under load), and
    the workers run learners on one thread too (TorchThreadsPlugin)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def fresh_client():
    """A private 2-worker LocalCluster for tests that break or reshape it."""
    from esnb.cluster import make_client

    c = make_client(2, dashboard_address=":0", set_as_default=False,
                    silence_logs=logging.ERROR)
    yield c
    c.close()


@pytest.fixture(scope="module")
def two_hosts():
    """A Dask scheduler, a worker on this host and one on a simulated second host that shares
    no /tmp, /dev/shm, home or cache with this one (:mod:`twohost`), for a module's tests.
    Skipped, saying why, where ``unshare`` is not permitted; a failure with
    ``ESNB_REQUIRE_TWO_HOSTS=1``."""
    import twohost

    twohost.require_or_skip()
    with twohost.two_hosts() as hosts:
        yield hosts


@pytest.fixture
def kernel(monkeypatch):
    """A real ipykernel with this checkout importable: ``(kernel manager, client)``, as a
    frontend (JupyterLab) holds them; shut down after the test."""
    manager = pytest.importorskip("jupyter_client.manager")
    pytest.importorskip("ipykernel")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])]))
    km, kc = manager.start_new_kernel(kernel_name="python3")
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def run_with_control_changes(attach, **runner_kwargs):
    """An inline CartPole ES run of 6 generations with a tracker attached after the second
    (``attach(runner)`` makes it) and control changes used first by generations 3 and 6:
    what the trackers' tests read back. Returns ``(runner, tracker)``, the tracker closed."""
    import esnb

    runner = esnb.ES("CartPole-v1", population=10, noise_size=SMALL_NOISE, eval_interval=2,
                     eval_episodes=1, client=False, **runner_kwargs)
    runner.start(generations=2)
    runner.wait(60)
    tracker = attach(runner)  # attached mid-run: the rows so far are written too
    runner.controls.set(sigma=0.05)
    runner.start(generations=3)
    runner.wait(60)
    runner.controls.set(lr=0.005, shaping="raw")
    runner.start(generations=1)
    runner.wait(60)
    tracker.close()
    tracker.close()  # idempotent; detached
    assert tracker.rows == 6
    return runner, tracker

"""One noise table per host (issue 15): built once into shared memory, mapped read-only by
every process, removed when its last user closes, never seen half-written, and a private copy
where there is no shared memory. Values are bitwise those of a private build."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import shutil
import signal
import tempfile

import numpy as np
import pytest

from esnb.noise import NoiseConfig, NoiseTable

# 16 MB: large enough that the shared pages dominate the mapping's PSS
CFG = NoiseConfig(size=4_000_000, seed=31)


@pytest.fixture
def shm_dir():
    """A private directory on tmpfs (as /dev/shm is), so tests never meet each other's files."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    path = tempfile.mkdtemp(prefix="esnb-test-", dir=base)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _bits(table: NoiseTable) -> np.ndarray:
    return table.noise.view(np.uint32)


def _data_files(directory: str) -> list[str]:
    """Blocks in ``directory``; a noise table's description (``.json``) exists exactly when
    the table does."""
    files = os.listdir(directory)
    blocks = [f for f in files if not f.endswith((".lock", ".json"))]
    assert sorted(f for f in files if f.endswith(".json")) == \
        sorted(f + ".json" for f in blocks if f.endswith("-float32"))
    return blocks


def test_shared_values_are_bitwise_the_private_build(shm_dir):
    private = NoiseTable(CFG)
    shared = NoiseTable(CFG, shared=shm_dir)
    try:
        assert private.shared_path is None
        assert shared.shared_path == os.path.join(shm_dir, CFG.file_name)
        assert np.array_equal(_bits(shared), _bits(private))
        assert not shared.noise.flags.writeable
        with pytest.raises(ValueError):
            shared.noise[0] = 1.0
    finally:
        shared.close()


def _map_and_measure(directory, barrier, queue):
    table = NoiseTable(CFG, shared=directory)
    float(table.noise.astype(np.float64).sum())  # touch every page
    barrier.wait()  # both processes map the table now
    rss = pss = 0
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            if "-" in line.split(" ", 1)[0]:  # a mapping's header line
                inside = line.rstrip().endswith(table.shared_path)
            elif inside and line.startswith(("Rss:", "Pss:")):
                kb = int(line.split()[1])
                rss, pss = (rss + kb, pss) if line.startswith("Rss") else (rss, pss + kb)
    st = os.stat(table.shared_path)
    queue.put((st.st_dev, st.st_ino, rss, pss, float(table.noise.astype(np.float64).sum())))
    barrier.wait()  # nobody closes before both have measured
    table.close()


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux's smaps")
def test_two_processes_share_the_same_physical_pages(shm_dir):
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_map_and_measure, args=(shm_dir, barrier, queue))
             for _ in range(2)]
    for p in procs:
        p.start()
    got = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    (dev_a, ino_a, rss_a, pss_a, sum_a), (dev_b, ino_b, rss_b, pss_b, sum_b) = got
    assert (dev_a, ino_a) == (dev_b, ino_b)  # one file...
    table_kb = CFG.size * 4 // 1024
    for rss, pss in ((rss_a, pss_a), (rss_b, pss_b)):
        # ...whose pages each process maps whole but pays half of (PSS splits shared pages)
        assert rss >= 0.99 * table_kb
        assert pss <= 0.55 * rss
    assert sum_a == sum_b == float(NoiseTable(CFG).noise.astype(np.float64).sum())
    assert _data_files(shm_dir) == []  # the last user removed it


def test_removed_when_the_last_user_closes(shm_dir):
    a = NoiseTable(CFG, shared=shm_dir)
    b = NoiseTable(CFG, shared=shm_dir)
    assert a.shared_path == b.shared_path and _data_files(shm_dir) == [CFG.file_name]
    a.close()
    assert _data_files(shm_dir) == [CFG.file_name]  # b still uses it
    assert np.array_equal(_bits(a), _bits(b))  # a's mapping outlives its close
    b.close()
    assert _data_files(shm_dir) == []
    b.close()  # closing twice is harmless


def _open_then_die(directory):
    table = NoiseTable(CFG, shared=directory)  # noqa: F841  (held while the process dies)
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_user_does_not_keep_the_table(shm_dir):
    """A killed process's lock goes with it: the next last user removes the file."""
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_open_then_die, args=(shm_dir,))
    p.start()
    p.join(timeout=120)
    assert p.exitcode == -signal.SIGKILL
    assert _data_files(shm_dir) == [CFG.file_name]  # left behind, complete: reused
    table = NoiseTable(CFG, shared=shm_dir)
    assert np.array_equal(_bits(table), _bits(NoiseTable(CFG)))
    table.close()
    assert _data_files(shm_dir) == []


def _build_then_die(directory):
    from esnb import shm

    def half_then_kill(out):
        out[: out.size // 2] = 7.0
        os.kill(os.getpid(), signal.SIGKILL)

    shm.open_block(CFG.file_name, CFG.size, np.float32, half_then_kill, directory=directory)


def test_a_builder_killed_midway_leaves_no_table_anyone_uses(shm_dir):
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_build_then_die, args=(shm_dir,))
    p.start()
    p.join(timeout=120)
    assert p.exitcode == -signal.SIGKILL
    left = _data_files(shm_dir)
    assert len(left) == 1 and ".tmp-" in left[0]  # only its temporary file, never the name
    table = NoiseTable(CFG, shared=shm_dir)
    try:
        assert np.array_equal(_bits(table), _bits(NoiseTable(CFG)))
        assert _data_files(shm_dir) == [CFG.file_name]  # the dead builder's file is gone
    finally:
        table.close()


def test_a_build_that_fails_raises_its_own_error_and_leaves_nothing(shm_dir):
    """A fill that raises while something still holds its array (here a list; on a Dask
    worker, a log record's traceback) reports its own error, not a BufferError of a mapping
    that cannot close, and leaves no file; the next open builds the block."""
    from esnb import shm

    kept = []

    def keep_then_fail(out):
        kept.append(out)
        raise RuntimeError("the build's own error")

    with pytest.raises(RuntimeError, match="the build's own error"):
        shm.open_block(CFG.file_name, CFG.size, np.float32, keep_then_fail, directory=shm_dir)
    assert _data_files(shm_dir) == []
    table = NoiseTable(CFG, shared=shm_dir)
    try:
        assert np.array_equal(_bits(table), _bits(NoiseTable(CFG)))
    finally:
        table.close()


def test_no_shared_memory_means_a_private_copy_said_once(tmp_path, caplog):
    missing = str(tmp_path / "no-such-dir")
    with caplog.at_level(logging.WARNING, logger="esnb.shm"):
        a = NoiseTable(CFG, shared=missing)
        b = NoiseTable(CFG, shared=missing)
    assert a.shared_path is None and b.shared_path is None
    assert np.array_equal(_bits(a), _bits(NoiseTable(CFG)))
    lines = [r for r in caplog.records if "no shared memory" in r.getMessage()]
    assert len(lines) == 1 and missing in lines[0].getMessage()
    a.close()  # a private copy closes as a no-op


def test_esnb_shm_dir_empty_disables_sharing(monkeypatch, caplog):
    monkeypatch.setenv("ESNB_SHM_DIR", "")
    with caplog.at_level(logging.WARNING, logger="esnb.shm"):
        table = NoiseTable(NoiseConfig(size=1000, seed=3), shared=True)
    assert table.shared_path is None and not caplog.records


def test_a_wrong_sized_file_under_the_name_is_replaced(shm_dir):
    with open(os.path.join(shm_dir, CFG.file_name), "wb") as f:
        f.write(b"\0" * 100)
    table = NoiseTable(CFG, shared=shm_dir)
    try:
        assert table.shared_path is not None
        assert np.array_equal(_bits(table), _bits(NoiseTable(CFG)))
    finally:
        table.close()


def test_the_squared_norm_prefix_is_shared_too_and_bitwise_the_same(shm_dir):
    private = NoiseTable(CFG)
    a = NoiseTable(CFG, shared=shm_dir)
    b = NoiseTable(CFG, shared=shm_dir)
    idx = np.array([0, 5, 1_234_567, CFG.size - 300])
    want = private.squared_norms(idx, 300)
    assert np.array_equal(a.squared_norms(idx, 300), want)
    assert np.array_equal(b.squared_norms(idx, 300), want)
    assert sorted(_data_files(shm_dir)) == sorted(
        [CFG.file_name, CFG.file_name.replace("-float32", "-sqprefix-float64")])
    a.close()
    b.close()
    assert _data_files(shm_dir) == []

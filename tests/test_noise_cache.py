"""The noise table kept on disk between runs (esnb.noise_cache): a later build reads the values
the first one wrote, bitwise, with the same digest; a damaged, short or foreign file costs a
rebuild and one log line, never a wrong table; the cache can be turned off or be unwritable."""

import logging
import os
import subprocess
import sys
import tempfile

import dask
import numpy as np
import pytest

from esnb import normals
from esnb.noise import NoiseConfig, NoiseTable
from esnb.noise_cache import HEADER, cache_dir

CFG = NoiseConfig(size=300_000, seed=41)


def reference() -> np.ndarray:
    values = np.empty(CFG.size, dtype=np.float32)
    normals.fill_standard_normal(CFG.seed, values)
    return values


@pytest.fixture
def cache(tmp_path):
    with dask.config.set({"esnb.noise.cache": str(tmp_path / "cache")}):
        yield tmp_path / "cache"


def no_building(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the table was built although the cache holds it")

    monkeypatch.setattr(normals, "fill_standard_normal", refuse)


def test_the_first_build_writes_the_cache_and_later_ones_read_it(cache, monkeypatch, tmp_path):
    built = NoiseTable(CFG)  # private copy: builds, then writes the cache
    files = list(cache.iterdir())
    assert [f.name for f in files] == [CFG.file_name + ".cache"]
    assert files[0].stat().st_size == HEADER + 4 * CFG.size
    assert files[0].read_bytes()[:64].decode() == built.digest
    want = reference()
    np.testing.assert_array_equal(built.noise, want)

    (tmp_path / "shm").mkdir()
    with monkeypatch.context() as m:
        no_building(m)
        private = NoiseTable(CFG)
        shared = NoiseTable(CFG, shared=str(tmp_path / "shm"))  # a host's first process
    for table in (private, shared):
        assert table.noise.tobytes() == want.tobytes()
        assert table.digest == built.digest == normals.digest(want)
    assert shared.shared_path and os.path.exists(shared.shared_path)
    shared.close()


@pytest.mark.parametrize("damage", ["flip a value", "truncate", "header of another table"])
def test_a_damaged_cache_is_rebuilt_and_rewritten_with_one_log_line(cache, damage, caplog):
    NoiseTable(CFG)
    path = cache / (CFG.file_name + ".cache")
    data = bytearray(path.read_bytes())
    if damage == "flip a value":
        data[HEADER + 4 * 1234] ^= 0x40
    elif damage == "truncate":
        data = data[:-4]
    else:
        data[:HEADER] = normals.digest(np.zeros(3, np.float32)).encode()
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="esnb.noise"):
        table = NoiseTable(CFG)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and str(path) in warnings[0] and "building" in warnings[0]
    np.testing.assert_array_equal(table.noise, reference())
    assert table.digest == normals.digest(reference())
    assert path.read_bytes()[:HEADER].decode() == table.digest  # rewritten whole
    assert path.stat().st_size == HEADER + 4 * CFG.size


def test_the_cache_can_be_off_or_unwritable(tmp_path, caplog):
    with dask.config.set({"esnb.noise.cache": False}):
        assert cache_dir() is None
        NoiseTable(CFG)
    blocked = tmp_path / "a-file-not-a-folder"
    blocked.write_text("")
    with dask.config.set({"esnb.noise.cache": str(blocked / "noise")}), \
            caplog.at_level(logging.WARNING, logger="esnb.noise"):
        table = NoiseTable(CFG)
        NoiseTable(CFG)
    np.testing.assert_array_equal(table.noise, reference())
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "cannot cache the noise table" in warnings[0]
    assert "esnb.noise.cache: false" in warnings[0]
    assert list(tmp_path.iterdir()) == [blocked]  # nothing written anywhere else


def test_auto_is_the_users_cache_folder_and_a_bad_value_is_named(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("DASK_ESNB__NOISE__CACHE", None)
    code = "from esnb.noise_cache import cache_dir; print(cache_dir())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == str(tmp_path / "esnb" / "noise")
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**env, "DASK_ESNB__NOISE__CACHE": "''"})
    assert bad.returncode != 0
    assert "esnb.noise.cache" in bad.stderr and "'auto', a directory or false" in bad.stderr


def test_bench_noise_times_the_cached_read_beside_the_build(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "esnb.cli", "bench", "noise", "--size", "400000",
                        "--repeats", "2", "--json", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    import json

    r = json.loads(out.read_text())
    assert len(r["all"]["cached"]) == len(r["all"]["esnb"]) == 2
    assert r["seconds"]["cached"] > 0 and r["cached_over_build"] > 0
    assert "read from the disk cache with its SHA-256 check" in p.stdout
    left = [f for f in os.listdir(tempfile.gettempdir()) if f.startswith("esnb-bench-noise-")]
    assert left == []  # its cache folder removed

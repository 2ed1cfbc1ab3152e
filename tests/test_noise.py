import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from esnb import normals
from esnb.cluster import register_noise_table
from esnb.noise import (
    NoiseConfig,
    NoiseTable,
    NoiseTableMismatch,
    get_noise_table,
    has_noise_table,
)

CFG = NoiseConfig(size=200_000, seed=7)


def test_same_seed_same_table_other_seed_other_table():
    a, b = NoiseTable(CFG), NoiseTable(CFG)
    c = NoiseTable(NoiseConfig(size=200_000, seed=8))
    assert a.noise.dtype == np.float32
    assert np.array_equal(a.noise, b.noise)
    assert not np.array_equal(a.noise, c.noise)
    assert abs(a.noise.mean()) < 0.01 and abs(a.noise.std() - 1) < 0.01
    assert not a.noise.flags.writeable


def test_get_gather_and_sampling_agree():
    t = get_noise_table(CFG)
    rng = np.random.default_rng(0)
    idx = t.sample_indices(rng, 50, 1000)
    assert idx.min() >= 0 and idx.max() <= len(t) - 1000
    rows = t.gather(idx, 1000)
    for i, k in enumerate(idx):
        assert np.array_equal(rows[i], t.get(int(k), 1000))
    with pytest.raises(ValueError, match="does not fit"):
        t.sample_indices(rng, 1, len(t) + 1)


def test_squared_norms_exact_in_float64():
    t = get_noise_table(CFG)
    idx = np.array([0, 17, 150_000])
    direct = [np.sum(t.get(int(i), 5000).astype(np.float64) ** 2) for i in idx]
    np.testing.assert_allclose(t.squared_norms(idx, 5000), direct, rtol=1e-12)


def test_bad_size():
    with pytest.raises(ValueError, match="size"):
        NoiseConfig(size=1, seed=0)


def test_plugin_builds_the_same_table_on_every_worker(client):
    cfg = NoiseConfig(size=300_000, seed=11)
    register_noise_table(client, cfg)
    # built by the plugin at registration, not shipped and not built by a task
    assert all(client.run(has_noise_table, cfg).values())
    digests = client.run(lambda: float(get_noise_table(cfg).noise.astype(np.float64).sum()))
    local = float(NoiseTable(cfg).noise.astype(np.float64).sum())
    assert len(digests) == 2 and all(d == local for d in digests.values())
    # registering again is a no-op (idempotent) and keeps the table
    register_noise_table(client, cfg)
    assert all(client.run(has_noise_table, cfg).values())


def test_workers_and_driver_map_one_table_per_host(client):
    """Every worker on this host maps the driver's shared file (one copy of the pages)."""
    cfg = NoiseConfig(size=400_000, seed=12)
    table = get_noise_table(cfg)
    if table.shared_path is None:
        pytest.skip("no writable shared-memory directory on this machine")
    register_noise_table(client, cfg)

    def where():
        path = get_noise_table(cfg).shared_path
        st = os.stat(path)
        return path, st.st_dev, st.st_ino

    st = os.stat(table.shared_path)
    assert set(client.run(where).values()) == {(table.shared_path, st.st_dev, st.st_ino)}


# -- one table on every host (issue 28) ------------------------------------------------------
#: SHA-256 of NoiseConfig(size=1_000_000, seed=123)'s values and three of them: the bits every
#: machine must produce (esnb.normals uses integer and IEEE 754 operations only)
KNOWN = ("5b582e962eed6bde69d74c4d1f1e86f60466287db997a02f1adc60ef6bb9a31f",
         {0: -0.6046311259269714, 1: 0.4237501621246338, 999_999: 0.3527742028236389})


def _digests_in_a_subprocess(env: dict) -> tuple[str, str]:
    """The table's digest, and that of numpy's own float32 log of it, in a fresh process."""
    code = ("import hashlib, numpy as np;"
            "from esnb.noise import NoiseConfig, NoiseTable;"
            "t = NoiseTable(NoiseConfig(size=1_000_000, seed=123));"
            "print(t.digest, hashlib.sha256(np.log(np.abs(t.noise)).tobytes()).hexdigest())")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env={**os.environ, **env})
    assert p.returncode == 0, p.stderr
    table, log = p.stdout.split()
    return table, log


def test_the_table_is_the_recorded_bits():
    table = NoiseTable(NoiseConfig(size=1_000_000, seed=123))
    assert table.digest == normals.digest(table.noise) == KNOWN[0]
    assert {i: float(table.noise[i]) for i in KNOWN[1]} == KNOWN[1]


def test_the_table_does_not_depend_on_numpy_simd_code():
    """numpy's SIMD loops on, and off down to its baseline: the same table, while numpy's own
    float32 log of it (SIMD code) changes its bits."""
    from numpy._core._multiarray_umath import __cpu_features__ as features

    simd, simd_log = _digests_in_a_subprocess({"NPY_DISABLE_CPU_FEATURES": ""})
    assert simd == KNOWN[0]
    if not features.get("AVX2"):
        pytest.skip("a CPU without AVX2: no SIMD level to turn off")
    base, base_log = _digests_in_a_subprocess(
        {"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"})
    assert base_log != simd_log  # the switch did change numpy's kernels...
    assert base == KNOWN[0]  # ...and not the table


def test_normals_are_standard_normal():
    x = normals.standard_normal(9, 2_000_000).astype(np.float64)
    assert abs(x.mean()) < 3 / np.sqrt(x.size) * 1.5
    assert abs(x.var() - 1) < 0.005
    assert abs(((x ** 4).mean()) - 3) < 0.03
    # the quantiles of Φ: 2.5%, 50%, 97.5%
    np.testing.assert_allclose(np.quantile(x, [0.025, 0.5, 0.975]), [-1.96, 0, 1.96],
                               atol=0.01)
    # any block of the stream is computed on its own: the same values
    assert np.array_equal(normals.standard_normal(9, 1000, start=1_234_567),
                          x[1_234_567:1_235_567].astype(np.float32))


def test_the_inverse_cdf_and_log_match_the_standard_library():
    u = np.concatenate([normals.uniforms(3, 0, 20_000), [2.0 ** -53, 1 - 2.0 ** -53, 1e-300,
                                                          0.075, 0.925, 0.5]])
    want = np.array([statistics.NormalDist().inv_cdf(v) for v in u])
    np.testing.assert_allclose(normals.inverse_normal_cdf(u), want, rtol=1e-14, atol=1e-15)
    x = np.exp(np.linspace(-700, 0, 50_001))
    np.testing.assert_allclose(normals.log(x), np.log(x), rtol=1e-15, atol=0)


def test_the_digest_is_recorded_once_by_the_builder(tmp_path):
    shared = NoiseTable(CFG, shared=str(tmp_path))
    about = json.loads(Path(shared.shared_path + ".json").read_text())
    assert about["sha256"] == shared.digest == normals.digest(shared.noise)
    assert f"numpy {np.__version__}" in about["origin"] == shared.origin
    shared.close()


def _foreign_table(directory: Path, cfg: NoiseConfig) -> str:
    """What a host with other code would have built under the same name: numpy's stream, as
    esnb's first table was, with its own (honest) description."""
    values = np.random.default_rng(cfg.seed).standard_normal(cfg.size, dtype=np.float32)
    values.tofile(directory / cfg.file_name)
    digest = normals.digest(values)
    (directory / (cfg.file_name + ".json")).write_text(json.dumps(
        {"sha256": digest, "origin": "numpy 1.26.4, esnb 0.0.9, host elsewhere"}))
    return digest


def test_a_process_with_another_table_refuses_to_use_it(tmp_path):
    cfg = NoiseConfig(size=300_000, seed=21)
    ours = NoiseTable(cfg)
    theirs = _foreign_table(tmp_path, cfg)
    foreign = NoiseTable(cfg, shared=str(tmp_path))
    assert foreign.digest == theirs != ours.digest
    with pytest.raises(NoiseTableMismatch) as err:
        foreign.check(cfg.expecting(ours))
    text = str(err.value)
    for part in (ours.digest[:16], theirs[:16], f"numpy {np.__version__}", "numpy 1.26.4"):
        assert part in text
    foreign.check(cfg)  # no digest to compare with: nothing to refuse
    foreign.close()


def test_a_worker_with_another_table_refuses_the_run(tmp_path):
    """A worker whose host has another table (here: its shared-memory directory holds a table
    built with numpy's stream) refuses an ES run, naming both digests and numpy versions."""
    from esnb import ES, make_client

    cfg = NoiseConfig(size=400_000, seed=22)
    theirs = _foreign_table(tmp_path, cfg)
    client = make_client(1, dashboard_address=":0", set_as_default=False)
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", client.scheduler.address,
         "--nthreads", "1", "--no-nanny", "--no-dashboard"],
        env={**os.environ, "ESNB_SHM_DIR": str(tmp_path)}, stderr=subprocess.DEVNULL)
    try:
        client.wait_for_workers(2, timeout=120)
        with pytest.raises(NoiseTableMismatch) as err:
            ES("CartPole-v1", population=4, noise_size=cfg.size, noise_seed=cfg.seed,
               client=client)
        text = str(err.value)
        ours = get_noise_table(cfg).digest
        for part in (ours[:16], theirs[:16], f"numpy {np.__version__}", "numpy 1.26.4",
                     "worker tcp://"):
            assert part in text
    finally:
        worker.kill()
        worker.wait()
        client.close()


def test_a_checkpoint_of_another_table_is_refused_and_an_old_one_warns(tmp_path, caplog):
    from esnb import ES
    from esnb.record import load_checkpoint, save_checkpoint

    r = ES("CartPole-v1", population=4, noise_size=200_000, client=False, eval_interval=0,
           iw_k=2, lr=1e-4)
    r.step(2)
    path = r.save(tmp_path / "ck.npz")
    meta, arrays = load_checkpoint(path)
    assert meta["noise_digest"] == r.noise.digest and meta["iw_pending"]
    save_checkpoint(tmp_path / "other.npz", "ES", {**meta, "noise_digest": "ab" * 32}, arrays)
    with pytest.raises(ValueError, match="noise table of SHA-256 abababababababab"):
        ES.load(tmp_path / "other.npz", client=False)
    old = {k: v for k, v in meta.items() if k != "noise_digest"}
    save_checkpoint(tmp_path / "old.npz", "ES", old, arrays)
    with caplog.at_level("WARNING", logger="esnb.es"):
        back = ES.load(tmp_path / "old.npz", client=False)
    assert "predates esnb's portable noise table" in caplog.text
    assert back.iw.pending is None  # its offsets pointed into the old table
    back.step(1)


@pytest.mark.parametrize("bad", ["unknown env", "policy larger than the table"])
def test_a_run_refused_while_its_table_loads_leaves_no_table(tmp_path, monkeypatch, bad):
    """ES() reads (or builds) its noise table on a thread while it makes the env; when the run
    is refused meanwhile, the table it opened is dropped: nothing stays mapped in the process
    or in the host's shared memory, and the error is the run's own."""
    from esnb import ES

    monkeypatch.setenv("ESNB_SHM_DIR", str(tmp_path))
    cfg = NoiseConfig(size=5_000 if bad != "unknown env" else 300_000, seed=31)
    env = "NoSuchEnv-v9" if bad == "unknown env" else "Hopper-v5"
    with pytest.raises(Exception) as err:
        ES(env, noise_size=cfg.size, noise_seed=cfg.seed, client=False)
    # (Hopper's default policy has 5,123 parameters, CartPole's 4,610)
    assert ("NoSuchEnv" in str(err.value)) if bad == "unknown env" else \
        ("raise noise_size" in str(err.value))
    assert not has_noise_table(cfg)
    # (the builders' lock file stays, empty, as after any run)
    assert [p.name for p in tmp_path.iterdir()] == [cfg.file_name + ".lock"]
    ok = ES("CartPole-v1", noise_size=cfg.size, noise_seed=cfg.seed, client=False)
    assert has_noise_table(cfg) and ok.noise.shared_path.startswith(str(tmp_path))
    ok.close()

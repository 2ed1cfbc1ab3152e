import os

import numpy as np
import pytest

from esnb.cluster import NoiseTablePlugin
from esnb.noise import NoiseConfig, NoiseTable, get_noise_table, has_noise_table

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
        NoiseConfig(size=1)


def test_plugin_builds_the_same_table_on_every_worker(client):
    cfg = NoiseConfig(size=300_000, seed=11)
    client.register_plugin(NoiseTablePlugin(cfg))
    # built by the plugin at registration, not shipped and not built by a task
    assert all(client.run(has_noise_table, cfg).values())
    digests = client.run(lambda: float(get_noise_table(cfg).noise.astype(np.float64).sum()))
    local = float(NoiseTable(cfg).noise.astype(np.float64).sum())
    assert len(digests) == 2 and all(d == local for d in digests.values())
    # registering again is a no-op (idempotent) and keeps the table
    client.register_plugin(NoiseTablePlugin(cfg))
    assert all(client.run(has_noise_table, cfg).values())


def test_workers_and_driver_map_one_table_per_host(client):
    """Every worker on this host maps the driver's shared file (one copy of the pages)."""
    cfg = NoiseConfig(size=400_000, seed=12)
    table = get_noise_table(cfg)
    if table.shared_path is None:
        pytest.skip("no writable shared-memory directory on this machine")
    client.register_plugin(NoiseTablePlugin(cfg))

    def where():
        path = get_noise_table(cfg).shared_path
        st = os.stat(path)
        return path, st.st_dev, st.st_ino

    st = os.stat(table.shared_path)
    assert set(client.run(where).values()) == {(table.shared_path, st.st_dev, st.st_ino)}

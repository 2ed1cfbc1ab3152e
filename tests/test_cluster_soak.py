"""The soak benchmark's machinery in a few seconds (the real one: ``esnb bench soak``)."""

import numpy as np

from esnb.bench.soak.steady import MB, measure, slope_mb_per_min


def test_slope_is_megabytes_per_minute():
    t = np.array([0.0, 30.0, 60.0, 90.0])
    assert abs(slope_mb_per_min(t, 100 * MB + t / 60 * 3 * MB) - 3.0) < 1e-9
    assert np.isnan(slope_mb_per_min(t[:1], t[:1]))


def test_short_soak_samples_memory_and_loses_nothing():
    r = measure(minutes=0.1, interval=1.5, warmup=0.0, workers=2, es_env="CartPole-v1",
                population=10, apex_env=None, progress=lambda s: None)
    assert r["samples"] >= 4 and r["es_generations"] >= 1
    assert all(v == 0 for v in r["lost"].values()), r["lost"]
    assert np.isfinite(r["driver_slope"])
    slopes = r["es_worker_slopes"]
    assert len(slopes) == 2 and all(np.isfinite(v) for v in slopes.values())
    assert all(mb > 50 for mb in r["es_worker_mb_last"].values())  # a real worker process

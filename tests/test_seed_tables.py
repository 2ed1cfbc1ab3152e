"""Tables over seeds: means with bootstrap 95% confidence intervals, on data whose answer is
known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from esnb.runners.sweep import mean_ci, seed_table

pytest.importorskip("scipy")


def test_mean_ci_on_known_data():
    # a large normal sample: the 95% interval of the mean is mean +- 1.96 sd / sqrt(n)
    data = np.random.default_rng(1).normal(10.0, 2.0, size=400)
    mean, low, high = mean_ci(data, np.random.default_rng(0))
    assert mean == pytest.approx(data.mean())
    half = 1.96 * data.std(ddof=1) / np.sqrt(data.size)
    assert low == pytest.approx(mean - half, abs=0.1 * half)
    assert high == pytest.approx(mean + half, abs=0.1 * half)
    # the same generator seed gives the same interval; the interval lies within the data
    assert mean_ci(data, np.random.default_rng(0)) == (mean, low, high)
    small = [1.0, 2.0, 3.0, 4.0, 5.0]
    m, lo, hi = mean_ci(small, np.random.default_rng(0))
    assert m == 3.0 and 1.0 <= lo < 3.0 < hi <= 5.0


def test_mean_ci_edge_cases():
    rng = np.random.default_rng(0)
    assert mean_ci([7.0, 7.0, 7.0], rng) == (7.0, 7.0, 7.0)  # no spread: a point interval
    m, lo, hi = mean_ci([4.0], rng)  # one seed: a mean, no interval
    assert m == 4.0 and np.isnan(lo) and np.isnan(hi)
    m, lo, hi = mean_ci([1.0, np.nan, 3.0], rng)  # NaNs left out
    assert m == 2.0 and 1.0 <= lo <= hi <= 3.0


def test_seed_table_groups_variants():
    frame = pd.DataFrame({"variant": ["a"] * 3 + ["b"] * 3, "seed": [0, 1, 2] * 2,
                          "ret": [1.0, 2.0, 3.0, 10.0, 10.0, 10.0]})
    table = seed_table(frame, "variant", ["ret"], np.random.default_rng(0))
    assert list(table.columns) == ["variant", "seeds", "ret", "ret_lo", "ret_hi"]
    assert table.variant.tolist() == ["a", "b"] and table.seeds.tolist() == [3, 3]
    assert table.ret.tolist() == [2.0, 10.0]
    assert 1.0 <= table.ret_lo[0] < 2.0 < table.ret_hi[0] <= 3.0
    assert (table.ret_lo[1], table.ret_hi[1]) == (10.0, 10.0)

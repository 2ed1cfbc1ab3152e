"""Replay buffers in one process: trees, prioritised sampling, weights, eviction, keys, limits,
state, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from esnb.replay import (
    MinTree,
    PrioritizedReplayBuffer,
    RateLimiter,
    ReplayBuffer,
    ReplayNotReady,
    SumTree,
    join_state,
    split_state,
)

SPEC = {"obs": ((3,), "float32"), "action": "int64", "reward": "float32"}


def batch(n, start=0):
    i = np.arange(start, start + n)
    return {"obs": np.stack([i, i + 0.5, -i], axis=1).astype(np.float32),
            "action": i.astype(np.int64), "reward": (i * 0.1).astype(np.float32)}


def check_trees(buf):
    """Every inner node equals the reduction of its children; leaves match the priorities."""
    s = buf.sampler
    for tree, reduce, fill in ((s.sum_tree, np.sum, 0.0), (s.min_tree, np.min, np.inf)):
        levels = tree.levels
        for level in range(len(levels) - 1):
            children = levels[level + 1].reshape(-1, tree.branching)
            np.testing.assert_allclose(levels[level], reduce(children, axis=1))
        assert np.all(levels[-1][tree.capacity:] == fill)  # padding leaves
    stored = buf._valid
    leaves = s.sum_tree.leaves
    np.testing.assert_allclose(leaves[stored], s._priority[stored] ** s.alpha)
    assert np.all(leaves[~stored] == 0)
    assert s.sum_tree.total == pytest.approx(leaves.sum(), rel=1e-12)
    if stored.any():
        assert s.min_tree.min == pytest.approx(leaves[stored].min())
    else:
        assert s.min_tree.min == np.inf
    assert len(buf) == int(stored.sum())


def state_equal(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        if isinstance(a[k], np.ndarray):
            if not np.array_equal(a[k], b[k]):
                return False
        elif a[k] != b[k]:
            return False
    return True


# -- trees -----------------------------------------------------------------------------------
@pytest.mark.parametrize("capacity", [1, 5, 1000, 4097, 70_000])
def test_sum_tree_find_matches_cumulative_sums(capacity):
    rng = np.random.default_rng(capacity)
    t = SumTree(capacity)
    leaves = rng.random(capacity) * (rng.random(capacity) > 0.3)
    leaves[0] = 0.5  # never all zero
    t.update(np.arange(capacity), leaves)
    values = rng.random(5000) * t.total
    found = t.find(values)
    expected = np.searchsorted(np.cumsum(leaves), values, side="right")
    assert np.all(leaves[found] > 0)
    # rounding may move a value sitting on a boundary to its neighbour, nothing more
    assert np.mean(found == expected) > 0.999
    # the fallback descent (used when rounding lands on an empty leaf) agrees too
    safe = t._find_safe(values)
    assert np.all(leaves[safe] > 0) and np.mean(safe == expected) > 0.999
    # sparse batch updates keep every level the reduction of the next
    idx = rng.integers(0, capacity, 300)
    t.update(idx, rng.random(300))
    leaves[idx] = t.leaves[idx]
    assert t.total == pytest.approx(leaves.sum(), rel=1e-12)
    levels = t.levels
    for level in range(len(levels) - 1):
        np.testing.assert_allclose(levels[level], levels[level + 1].reshape(-1, 2).sum(axis=1))


def test_sum_tree_never_returns_an_empty_leaf_at_the_edges():
    t = SumTree(1000)
    t.update(np.arange(10), np.full(10, 0.1))  # only the first 10 leaves hold mass
    edge = np.array([0.0, np.nextafter(t.total, 0), t.total * (1 - 1e-16), 0.3, 0.7])
    found = t.find(edge)
    assert found.max() <= 9 and found.min() >= 0


def test_tree_update_with_duplicates_takes_the_last_value():
    t, m = SumTree(8), MinTree(8)
    t.update([3, 3, 5], [1.0, 2.0, 4.0])
    m.update([3, 3, 5], [1.0, 2.0, 4.0])
    assert t[3] == 2.0 and t.total == 6.0 and m.min == 2.0


def test_tree_bad_input():
    with pytest.raises(ValueError, match="capacity"):
        SumTree(0)
    t = SumTree(4)
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        t.update([4], [1.0])
    with pytest.raises(ValueError, match="integers"):
        t.update([0.5], [1.0])
    with pytest.raises(ValueError, match="total is 0"):
        t.sample(3, np.random.default_rng(0))


# -- prioritised sampling --------------------------------------------------------------------
def test_sampling_frequencies_match_priorities():
    rng = np.random.default_rng(0)
    buf = PrioritizedReplayBuffer(64, alpha=0.7, spec=SPEC)
    p = rng.uniform(0.05, 3.0, size=40)
    buf.add(batch(40), priorities=p)
    counts = np.zeros(40)
    draws = 0
    for _ in range(400):
        b, ids, _ = buf.sample(256, rng)
        np.testing.assert_array_equal(b["action"], ids)  # item i holds action i
        counts += np.bincount(ids, minlength=40)
        draws += 256
    expected = p ** 0.7 / (p ** 0.7).sum() * draws
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # 39 degrees of freedom: P(chi2 > 80) < 1e-4 under the null; stratified sampling is
    # less variable than independent draws, so a correct sampler lands far below
    assert chi2 < 80, chi2
    # and a wrong exponent would be rejected: frequencies follow p^0.7, not p
    wrong = p / p.sum() * draws
    assert ((counts - wrong) ** 2 / wrong).sum() > 500


def test_importance_weights_are_exact():
    rng = np.random.default_rng(1)
    buf = PrioritizedReplayBuffer(32, alpha=0.6, beta=0.4, spec=SPEC)
    p = np.array([0.5, 1.0, 2.0, 4.0, 0.25, 3.0])
    buf.add(batch(6), priorities=p)
    probs = p ** 0.6 / (p ** 0.6).sum()
    for beta in (0.4, 1.0, 0.0):
        _, ids, w = buf.sample(50, rng, beta=None if beta == 0.4 else beta)
        expected = (6 * probs[ids]) ** -beta / (6 * probs.min()) ** -beta
        np.testing.assert_allclose(w, expected, rtol=1e-6)
        assert w.dtype == np.float32
    # the normaliser is the smallest priority *stored*, even if never sampled
    _, ids, w = buf.sample(8, rng, beta=1.0)
    assert w.max() <= 1.0 + 1e-6


def test_new_items_get_the_largest_priority_seen():
    buf = PrioritizedReplayBuffer(16, spec=SPEC)
    ids = buf.add(batch(2), priorities=[0.5, 7.0])
    buf.update_priorities(ids[:1], [9.0])
    new = buf.add(batch(1, 2))
    assert buf.sampler.priorities(new % 16)[0] == 9.0


def test_random_operations_keep_the_trees_consistent():
    rng = np.random.default_rng(2)
    # 10,000 slots: a tree of 14 levels, so sparse updates run on several inner levels
    buf = PrioritizedReplayBuffer(10_000, soft_capacity=6000, eviction="priority", spec=SPEC)
    start = 0
    for step in range(300):
        op = rng.integers(4)
        if op == 0:
            n = int(rng.integers(1, 800))
            pr = None if rng.random() < 0.3 else rng.uniform(0.01, 5, n)
            buf.add(batch(n, start), priorities=pr)
            start += n
        elif op == 1 and len(buf):
            _, ids, _ = buf.sample(int(rng.integers(1, 64)), rng)
            buf.update_priorities(ids, rng.uniform(0.01, 5, len(ids)))
        elif op == 2:
            buf.evict(rng)
            assert len(buf) <= 6000
        else:
            old = rng.integers(0, max(1, start), 5)  # stale and live ids mixed
            buf.update_priorities(old, np.full(5, 0.3))
        if step % 10 == 0:
            check_trees(buf)
    check_trees(buf)


# -- ids, staleness, capacity, eviction ------------------------------------------------------
def test_update_of_an_overwritten_item_is_ignored():
    buf = PrioritizedReplayBuffer(4, spec=SPEC)
    first = buf.add(batch(4), priorities=1.0)
    buf.add(batch(2, 4), priorities=1.0)  # overwrites ids 0 and 1
    assert buf.update_priorities(first, [5.0, 5.0, 5.0, 5.0]) == 2
    assert buf.stats()["stale_updates"] == 2
    np.testing.assert_array_equal(buf.sampler.priorities(np.arange(4)), [1, 1, 5, 5])


def test_hard_capacity_overwrites_the_oldest_and_counts_it():
    buf = ReplayBuffer(10, spec=SPEC, soft_capacity=8)
    buf.add(batch(10))
    buf.add(batch(3, 10))  # ring full: ids 0..2 go
    assert len(buf) == 10
    assert buf.stats()["overwritten"] == 3
    rng = np.random.default_rng(0)
    b, _, _ = buf.sample(500, rng)
    assert set(b["action"]) == set(range(3, 13))
    assert buf.evict() == 2  # down to the soft capacity, oldest first
    b, _, _ = buf.sample(500, rng)
    assert set(b["action"]) == set(range(5, 13))


def test_fifo_eviction_skips_holes_and_keeps_the_newest():
    buf = PrioritizedReplayBuffer(100, soft_capacity=10, spec=SPEC)
    buf.add(batch(30))
    assert buf.evict() == 20
    buf.add(batch(5, 30))
    assert buf.evict() == 5
    kept = np.sort(buf.state_dict()["ids"])
    np.testing.assert_array_equal(kept, np.arange(25, 35))


def test_priority_eviction_prefers_low_priorities():
    rng = np.random.default_rng(3)
    low_gone = high_gone = 0
    for _ in range(20):
        buf = PrioritizedReplayBuffer(200, soft_capacity=100, eviction="priority", spec=SPEC)
        buf.add(batch(200), priorities=np.r_[np.full(100, 0.01), np.full(100, 10.0)])
        assert buf.evict(rng) == 100
        kept = buf.state_dict()["ids"]
        low_gone += 100 - int((kept < 100).sum())
        high_gone += 100 - int((kept >= 100).sum())
    # P(evict) ∝ p^-0.4: a low item is (1000)^0.4 ~ 16x likelier to go than a high one
    assert low_gone > 5 * high_gone
    with pytest.raises(ValueError, match="rng"):
        buf.add(batch(50, 200), priorities=1.0)
        buf.evict()


def test_duplicate_batches_are_dropped_even_after_eviction():
    buf = PrioritizedReplayBuffer(100, soft_capacity=5, spec=SPEC)
    keys = (7, np.arange(10))
    ids = buf.add(batch(10), priorities=1.0, keys=keys)
    assert (ids >= 0).all() and len(buf) == 10
    again = buf.add(batch(10), priorities=1.0, keys=keys)  # a retried delivery
    assert (again == -1).all() and len(buf) == 10
    buf.evict()
    assert len(buf) == 5
    third = buf.add(batch(10), priorities=1.0, keys=keys)  # first copies mostly gone now
    assert (third == -1).all() and len(buf) == 5
    # another actor with the same sequence numbers is not a duplicate; a partial overlap
    # keeps only the new part, and repeats inside one batch are stored once
    assert (buf.add(batch(3), keys=(8, np.arange(3))) >= 0).all()
    mixed = buf.add(batch(4), keys=(7, np.array([8, 9, 10, 10])))
    np.testing.assert_array_equal(mixed >= 0, [False, False, True, False])
    assert buf.high_water(7) == 10 and buf.high_water(8) == 2 and buf.high_water(99) == -1
    assert buf.stats()["duplicates"] == 10 + 10 + 3


# -- rate limiter ----------------------------------------------------------------------------
def test_min_size_and_samples_per_insert():
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(100, spec=SPEC, min_size=10, samples_per_insert=2.0)
    with pytest.raises(ReplayNotReady, match="empty|holds 0"):
        buf.sample(1, rng)
    buf.add(batch(9))
    assert not buf.ready(1)
    with pytest.raises(ReplayNotReady, match="at least 10"):
        buf.sample(1, rng)
    buf.add(batch(1, 9))
    # 10 inserted -> 2 * 10 items may be sampled (error buffer = 2 * min_size by default)
    buf.sample(20, rng)
    with pytest.raises(ReplayNotReady, match="samples per insert"):
        buf.sample(1, rng)
    buf.add(batch(1, 10))
    buf.sample(2, rng)
    assert not buf.ready(1)
    # inserts far ahead of samples are reported, never refused
    # inserted 11, sampled 22: inserts may run ahead of samples by
    # min_size + error_buffer / spi = 20 items (2 * 31 - 22 = 40 is the limit)
    buf.add(batch(20, 11))
    assert buf.insert_ready(0) and not buf.insert_ready(1)
    buf.add(batch(5, 31))
    assert len(buf) == 36
    assert ReplayBuffer(10, spec=SPEC).insert_ready(10 ** 6)


def test_rate_limiter_bad_input():
    for kwargs, match in ((dict(min_size=0), "min_size"), (dict(samples_per_insert=0), "samples"),
                          (dict(error_buffer=5), "needs samples_per_insert"),
                          (dict(min_size=2.5), "integer")):
        with pytest.raises(ValueError, match=match):
            RateLimiter(**kwargs)


# -- uniform buffer --------------------------------------------------------------------------
def test_uniform_sampling_is_uniform_over_stored_items_with_holes():
    rng = np.random.default_rng(4)
    buf = ReplayBuffer(50, spec=SPEC, soft_capacity=20, eviction="priority")
    buf.add(batch(50))
    buf.evict(rng)  # random holes
    stored = set(buf.state_dict()["ids"].tolist())
    b, ids, w = buf.sample(20_000, rng)
    assert set(ids.tolist()) == stored and (w == 1).all()
    counts = np.bincount(ids, minlength=50)[sorted(stored)]
    assert counts.min() > 800 and counts.max() < 1200  # 1000 expected each
    assert buf.update_priorities(ids[:3], [1.0, 2.0, 3.0]) == 3  # accepted, ignored


def test_spec_is_taken_from_the_first_batch():
    buf = ReplayBuffer(10)
    buf.add({"x": np.ones((2, 4, 2)), "y": np.array([True, False])})
    assert buf.storage.spec == {"x": ((4, 2), np.dtype("float64")), "y": ((), np.dtype(bool))}
    b, _, _ = buf.sample(3, np.random.default_rng(0))
    assert b["x"].shape == (3, 4, 2) and b["y"].dtype == bool


# -- state -----------------------------------------------------------------------------------
def test_state_dict_round_trip_continues_identically(tmp_path):
    from esnb.record import load_checkpoint, save_checkpoint

    rng = np.random.default_rng(5)
    buf = PrioritizedReplayBuffer(64, soft_capacity=40, alpha=0.5, spec=SPEC, min_size=3)
    for k in range(5):
        buf.add(batch(17, 17 * k), priorities=rng.uniform(0.1, 2, 17), keys=(k % 2, np.arange(
            17 * k, 17 * k + 17)))
        buf.evict()
    _, ids, _ = buf.sample(30, rng)
    buf.update_priorities(ids, rng.uniform(0.1, 2, 30))
    meta, arrays = split_state(buf.state_dict())
    save_checkpoint(tmp_path / "r.npz", "replay", meta, arrays)
    meta2, arrays2 = load_checkpoint(tmp_path / "r.npz", "replay")
    other = PrioritizedReplayBuffer(64, soft_capacity=40, alpha=0.5, min_size=3)
    other.load_state_dict(join_state(meta2, arrays2))
    assert len(other) == len(buf) and other.stats() == buf.stats()
    check_trees(other)
    for mine, theirs in zip(other.sampler.sum_tree.levels, buf.sampler.sum_tree.levels,
                            strict=True):
        np.testing.assert_allclose(mine, theirs)
    r1, r2 = np.random.default_rng(9), np.random.default_rng(9)
    for _ in range(3):
        b1, i1, w1 = buf.sample(16, r1)
        b2, i2, w2 = other.sample(16, r2)
        np.testing.assert_array_equal(i1, i2)
        np.testing.assert_array_equal(w1, w2)
        for k in b1:
            np.testing.assert_array_equal(b1[k], b2[k])
    assert other.high_water(0) == buf.high_water(0)
    assert (other.add(batch(3), keys=(1, np.arange(3))) == -1).all()  # marks came back
    np.testing.assert_array_equal(other.add(batch(3, 85))[:1], [buf.add(batch(3, 85))[0]])


def test_load_state_dict_refuses_another_buffer_and_changes_nothing():
    a = PrioritizedReplayBuffer(32, spec=SPEC)
    a.add(batch(5))
    state = a.state_dict()
    b = PrioritizedReplayBuffer(16, spec=SPEC)
    b.add(batch(2))
    before = b.state_dict()
    with pytest.raises(ValueError, match="capacity"):
        b.load_state_dict(state)
    with pytest.raises(ValueError, match="uniform"):
        ReplayBuffer(32).load_state_dict(state)
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedReplayBuffer(32, alpha=0.9).load_state_dict(state)
    assert state_equal(b.state_dict(), before)


# -- bad input leaves the buffer untouched ---------------------------------------------------
@pytest.mark.parametrize("kwargs,match", [
    (dict(batch={"obs": np.ones((3, 3)), "action": np.arange(2), "reward": np.ones(3)}),
     "different lengths"),
    (dict(batch={"obs": np.ones((3, 4)), "action": np.arange(3), "reward": np.ones(3)}),
     "shape"),
    (dict(batch={"obs": np.ones((3, 3)), "action": np.arange(3)}), "missing"),
    (dict(batch={"obs": np.ones((3, 3)), "action": np.arange(3), "reward": np.ones(3),
                 "extra": np.ones(3)}), "unknown"),
    (dict(batch={"obs": np.ones((3, 3)), "action": np.ones(3) * 0.5, "reward": np.ones(3)}),
     "cannot be stored"),
    (dict(batch={"obs": np.ones(3), "action": 1, "reward": 1.0}), "scalar"),
    (dict(batch=[1, 2]), "dict"),
    (dict(batch=batch(3), priorities=[1.0, 0.0, 1.0]), "> 0"),
    (dict(batch=batch(3), priorities=[1.0, np.nan, 1.0]), "finite"),
    (dict(batch=batch(3), priorities=[-1.0, 1.0, 1.0]), "> 0"),
    (dict(batch=batch(3), priorities=[1.0, 1.0]), "3 values"),
    (dict(batch=batch(3), keys=(0, np.arange(2))), "one value per item"),
    (dict(batch=batch(3), keys=(0, np.array([0.5, 1, 2]))), "integers"),
    (dict(batch=batch(3), keys=(-1, np.arange(3))), "non-negative"),
    (dict(batch=batch(3), keys=np.arange(3)), "pair"),
    (dict(batch=batch(40)), "does not fit"),
])
def test_bad_add_raises_and_changes_nothing(kwargs, match):
    buf = PrioritizedReplayBuffer(32, spec=SPEC, soft_capacity=20)
    buf.add(batch(5), priorities=[1, 2, 3, 4, 5], keys=(0, np.arange(5)))
    before = buf.state_dict()
    with pytest.raises(ValueError, match=match):
        buf.add(**kwargs)
    assert state_equal(buf.state_dict(), before)


def test_bad_sample_and_update_raise_and_change_nothing():
    rng = np.random.default_rng(0)
    buf = PrioritizedReplayBuffer(32, spec=SPEC)
    ids = buf.add(batch(5), priorities=1.0)
    before = buf.state_dict()
    for args, match in (((0, rng), "batch_size"), ((2.5, rng), "batch_size"),
                        ((4, 123), "Generator"), ((4, rng, -0.1), "beta"),
                        ((4, rng, np.nan), "beta")):
        with pytest.raises(ValueError, match=match):
            buf.sample(*args)
    for args, match in (((ids, [1.0, 2.0]), "5 values"), ((ids, np.zeros(5)), "> 0"),
                        ((ids, np.full(5, np.inf)), "finite"), ((ids * 0.5, np.ones(5)),
                                                                "integers"),
                        ((np.array([-1, 0]), np.ones(2)), ">= 0")):
        with pytest.raises(ValueError, match=match):
            buf.update_priorities(*args)
    assert state_equal(buf.state_dict(), before)


@pytest.mark.parametrize("kwargs,match", [
    (dict(capacity=0), "capacity"), (dict(capacity=-5), "capacity"),
    (dict(capacity=2.5), "capacity"), (dict(capacity=10, soft_capacity=11), "soft_capacity"),
    (dict(capacity=10, eviction="lifo"), "eviction"), (dict(capacity=10, alpha=-1), "alpha"),
    (dict(capacity=10, eps=0), "eps"), (dict(capacity=10, spec={"x": ((-1,), "f4")}),
                                        "negative"),
])
def test_bad_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PrioritizedReplayBuffer(**kwargs)


def test_stats_report_the_storage_memory():
    buf = ReplayBuffer(1000, spec={"obs": ((4,), "float32"), "action": "int64"})
    st = buf.stats()
    assert st["bytes"] == 1000 * (4 * 4 + 8) and st["bytes_per_transition"] == 24.0

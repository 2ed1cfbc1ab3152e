"""IW-ES: weights and gradient against their definitions, and the runner's use of them."""

import numpy as np
import pytest

from esnb.es import es_gradient
from esnb.es.iw import (
    Batch,
    effective_sample_size,
    importance_weights,
    iw_gradient,
    log_importance_weights,
    noise_dots,
)
from esnb.noise import NoiseConfig, get_noise_table
from esnb.runners.es import ES

TABLE = get_noise_table(NoiseConfig(size=200_000, seed=5))
RUN = dict(env="CartPole-v1", population=20, sigma=0.1, seed=1, noise_size=1_000_000,
           eval_interval=0)


def log_normal(x, mu, sigma):
    d = x.shape[-1]
    return (-np.sum((x - mu) ** 2, axis=-1) / (2 * sigma**2) - d * np.log(sigma)
            - 0.5 * d * np.log(2 * np.pi))


@pytest.mark.parametrize("sigma_new", [0.3, 0.25, 0.4])
def test_weights_are_the_density_ratio(sigma_new):
    rng = np.random.default_rng(0)
    d, n, sigma_old = 5, 8, 0.3
    eps, delta = rng.standard_normal((n, d)), 0.2 * rng.standard_normal(d)
    theta_old = rng.standard_normal(d)
    x = theta_old + sigma_old * eps
    direct = np.exp(log_normal(x, theta_old + delta, sigma_new)
                    - log_normal(x, theta_old, sigma_old))
    np.testing.assert_allclose(importance_weights(eps, delta, sigma_old, sigma_new, clip=1e300),
                               direct, rtol=1e-10)
    np.testing.assert_allclose(importance_weights(eps, delta, sigma_old, sigma_new, clip=1.0),
                               np.minimum(direct, 1.0), rtol=1e-10)
    # the same-sigma special case of the issue: (eps.delta)/sigma - |delta|^2/(2 sigma^2)
    if sigma_new == sigma_old:
        simple = eps @ delta / sigma_old - delta @ delta / (2 * sigma_old**2)
        np.testing.assert_allclose(np.log(direct), simple, rtol=1e-10)


def test_ess():
    assert effective_sample_size(np.zeros(10)) == pytest.approx(10)
    assert effective_sample_size(np.array([0.0, -1000.0, -1000.0])) == pytest.approx(1)
    assert effective_sample_size(np.array([800.0, 800.0])) == pytest.approx(2)  # no overflow
    assert np.isnan(effective_sample_size(np.array([0.0, np.nan])))


def make_batch(rng, pairs, dim, sigma_old=0.05):
    idx = TABLE.sample_indices(rng, pairs, dim)
    shaped = rng.standard_normal((pairs, 2))
    theta_old = rng.standard_normal(dim).astype(np.float32)
    return Batch(idx, shaped, theta_old, sigma_old, generation=1)


@pytest.mark.parametrize("normalize", ["sum", "n"])
@pytest.mark.parametrize("sigma_new", [0.05, 0.051])
def test_gradient_against_its_formula(normalize, sigma_new):
    rng = np.random.default_rng(1)
    dim, pairs = 40, 10
    b = make_batch(rng, pairs, dim)
    theta = (b.theta_old + 0.01 * rng.standard_normal(dim)).astype(np.float32)
    step = iw_gradient(TABLE, b, theta, sigma_new, clip=1.0, normalize=normalize)
    eps = TABLE.gather(b.indices, dim).astype(np.float64)
    eps = np.concatenate([eps, -eps])  # samples: +eps_j then -eps_j
    s = np.concatenate([b.shaped[:, 0], b.shaped[:, 1]])
    delta = theta.astype(np.float64) - b.theta_old
    w = importance_weights(eps, delta, b.sigma_old, sigma_new, clip=1.0)
    z = w.sum() if normalize == "sum" else len(w)
    g = (w * s) @ (b.sigma_old * eps - delta) / (sigma_new * z)
    # the weighted noise sum is a float32 product accumulated in float64: an element near 0
    # carries float32 rounding of terms of size ~|g|.max() (~1e-7 of it)
    np.testing.assert_allclose(step.grad, g, rtol=1e-6, atol=1e-7 * np.abs(g).max())
    raw = log_importance_weights(eps @ delta, np.sum(eps**2, 1), delta @ delta, dim,
                                 b.sigma_old, sigma_new)
    assert step.ess == pytest.approx(effective_sample_size(raw))
    assert step.clipped_frac == pytest.approx(np.mean(raw > 0))


def test_no_move_no_sigma_change_is_plain_es():
    rng = np.random.default_rng(2)
    b = make_batch(rng, 12, 60)
    step = iw_gradient(TABLE, b, b.theta_old.copy(), b.sigma_old)
    np.testing.assert_allclose(step.grad, es_gradient(TABLE, b.indices, b.shaped, 60),
                               rtol=1e-6)
    assert step.ess_frac == pytest.approx(1.0) and step.clipped_frac == 0


def test_clip_respected_and_reported():
    rng = np.random.default_rng(3)
    eps, delta = rng.standard_normal((50, 10)), 0.05 * rng.standard_normal(10)
    w = importance_weights(eps, delta, 0.1, clip=0.7)
    assert w.max() <= 0.7 and np.isclose(w, 0.7).sum() > 5


def test_overflow_and_underflow_are_detected_never_a_nan_gradient():
    rng = np.random.default_rng(4)
    b = make_batch(rng, 5, 30)
    b.theta_old[:] = -3e38  # weights underflow, the gradient leaves float32's range
    step = iw_gradient(TABLE, b, np.full(30, 3e38, np.float32), 0.05)
    assert step.weight_sum == 0 and step.grad is None and step.skipped == "non-finite gradient"
    b.theta_old[:] = 0  # weights underflow but the gradient is finite: still made
    step = iw_gradient(TABLE, b, np.full(30, 3.0, np.float32), 0.05)
    assert step.weight_sum == 0 and np.all(np.isfinite(step.grad)) and not step.skipped
    theta = np.zeros(30, np.float32)
    theta[3] = np.inf  # a diverged parameter: non-finite log-weights
    step = iw_gradient(TABLE, b, theta, 0.05)
    assert step.grad is None and step.skipped == "non-finite log-weights"


def test_noise_dots_do_not_depend_on_grouping():
    rng = np.random.default_rng(5)
    idx = TABLE.sample_indices(rng, 37, 500)
    delta = rng.standard_normal(500)
    whole = noise_dots(TABLE, idx, delta)
    parts = np.concatenate([noise_dots(TABLE, p, delta) for p in np.array_split(idx, 5)])
    assert np.array_equal(whole, parts)
    np.testing.assert_allclose(whole, TABLE.gather(idx, 500).astype(np.float64) @ delta,
                               rtol=1e-10)


# -- the runner --------------------------------------------------------------------------
def test_k0_equals_plain_es_and_first_generation_equals_plain_es():
    plain, k0, k3 = ES(**RUN), ES(**RUN, iw_k=0), ES(**RUN, iw_k=3)
    for r in (plain, k0, k3):
        r.step(1)
    assert np.array_equal(plain.theta, k0.theta) and np.array_equal(plain.theta, k3.theta)
    plain.step(2)
    k0.step(2)
    k3.step(2)
    assert np.array_equal(plain.theta, k0.theta) and not np.array_equal(plain.theta, k3.theta)
    h = k3.iw_history
    assert (h.k.tolist() == [1, 2, 3, 1, 2, 3]) and (h.batch_generation == h.generation - 1).all()
    assert k3.history.iw_updates.tolist() == [0, 3, 3]


def test_adaptive_k_stops_when_ess_falls():
    r = ES(**RUN, lr=2e-5, iw_k="auto", iw_k_max=8)
    r.controls.set(iw_ess_threshold=0.6)
    r.step(4)
    h = r.iw_history
    made, stopped = h[h.skipped == ""], h[h.skipped != ""]
    assert (made.ess_frac >= 0.6).all()
    assert len(stopped) >= 1 and (stopped.ess_frac < 0.6).all()
    assert stopped.skipped.str.contains("ESS/n").all()
    # each batch stops at its first failing update: per batch, skips come last
    for _, g in h.groupby("batch_generation"):
        assert (g.skipped != "").sum() <= 1 and g.k.is_monotonic_increasing
    # a larger step makes the weights spread faster: fewer updates per batch
    big = ES(**RUN, lr=2e-4, iw_k="auto", iw_k_max=8)
    big.controls.set(iw_ess_threshold=0.6)
    big.step(4)
    assert big.history.iw_updates.sum() < r.history.iw_updates.sum()


def test_sigma_changed_between_collection_and_update():
    r = ES(**{**RUN, "lr": 1e-5}, iw_k=2)  # small steps: same-sigma weights stay near 1
    r.step(2)
    r.controls.set(sigma=0.11)  # the pending batch was collected with 0.1
    r.step(1)
    h = r.iw_history
    last = h[h.generation == 3]
    assert (last.sigma_old == 0.1).all() and (last.sigma_new == 0.11).all()
    same = h[h.generation == 2]
    # the weights are right and the batch is spent: ESS collapses against the same-sigma one
    assert same.ess_frac.iloc[0] > 0.9 and last.ess_frac.iloc[0] < 0.5
    assert np.isfinite(r.theta).all()


@pytest.mark.filterwarnings("error::RuntimeWarning")  # detected and skipped, not warned
def test_overflowing_weights_skip_the_update_and_keep_theta(caplog):
    r = ES(**RUN, iw_k=2)
    r.step(1)
    r.iw.pending.theta_old[:] = np.inf  # an impossible batch: its weights are not numbers
    before = r.theta
    r.step(1)
    h = r.iw_history
    assert h.skipped.iloc[-1] == "non-finite log-weights"
    assert r.history.iw_updates.iloc[-1] == 0
    assert np.isfinite(r.theta).all() and not np.array_equal(before, r.theta)  # plain update ran
    assert "skipped" in caplog.text


def test_workers_replay_the_iw_updates_bitwise(client):
    """On a cluster each worker's replica replays the IW updates the driver took (its own dot
    products, from its own theta): the run equals the inline one bit for bit."""
    local = ES(**RUN, iw_k=3, obs_stat_prob=0.5)
    remote = ES(**RUN, iw_k=3, obs_stat_prob=0.5, client=client)
    local.step(4)
    remote.step(4)
    assert remote.history.iw_updates.tolist() == [0, 3, 3, 3]
    assert np.array_equal(local.theta, remote.theta)
    assert np.array_equal(local.iw_history.ess, remote.iw_history.ess)
    assert np.array_equal(local.obs_stats.sum, remote.obs_stats.sum)


def test_resume_with_a_pending_batch_is_bitwise(tmp_path):
    a = ES(**RUN, iw_k=2, obs_stat_prob=0.5)
    a.step(3)
    b = ES(**RUN, iw_k=2, obs_stat_prob=0.5)
    b.step(1)
    b.save(tmp_path / "ck.npz")
    c = ES.load(tmp_path / "ck.npz")
    assert c.iw.pending is not None and c.iw.pending.generation == 1
    c.step(2)
    assert np.array_equal(a.theta, c.theta)
    assert np.array_equal(a.obs_stats.sum, c.obs_stats.sum)
    assert a.iw_history.ess.tolist() == c.iw_history.ess.tolist()


@pytest.mark.parametrize("kw, message", [
    (dict(iw_k=-1), "iw_k must be an integer in"),
    (dict(iw_k="many"), r"iw_k must be an integer in \[0, 1000\], or 'auto'"),
    (dict(iw_distributed=True), "unknown setting 'iw_distributed'"),  # retired (replicas)
])
def test_bad_iw_arguments(kw, message):
    with pytest.raises(ValueError, match=message):
        ES(**{**RUN, **kw})


@pytest.mark.parametrize("kw, message", [
    (dict(iw_clip=0), "iw_clip must be"),
    (dict(iw_clip=-1), "iw_clip must be"),
    (dict(iw_ess_threshold=0), r"iw_ess_threshold must be a number in \(0, 1\]"),
    (dict(iw_ess_threshold=1.5), "iw_ess_threshold must be"),
    (dict(iw_normalize="mean"), "iw_normalize must be one of 'sum', 'n'"),
    (dict(iw_k=-2), "iw_k must be"),
])
def test_bad_live_values_leave_the_run_untouched(kw, message):
    r = ES(**RUN, iw_k=2)
    r.step(1)
    before = r.controls.as_dict()
    with pytest.raises(ValueError, match=message):
        r.controls.set(**kw)
    assert r.controls.as_dict() == before


def test_bad_clip_in_the_functions():
    with pytest.raises(ValueError, match="clip must be"):
        importance_weights(np.zeros((2, 2)), np.zeros(2), 0.1, clip=0)
    with pytest.raises(ValueError, match="normalize must be"):
        iw_gradient(TABLE, make_batch(np.random.default_rng(0), 2, 5), np.zeros(5, np.float32),
                    0.05, normalize="mean")

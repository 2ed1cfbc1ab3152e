import numpy as np
import pytest
import torch

from esnb.es import OpenAIES, Step, es_gradient, get_shaping, weighted_noise_sum
from esnb.es import gradient as es_mod
from esnb.es.shaping import centered_ranks, raw, sign
from esnb.noise import NoiseConfig, get_noise_table

TABLE = get_noise_table(NoiseConfig(size=100_000, seed=1))


def test_centered_ranks():
    r = np.array([[3.0, 1.0], [10.0, -5.0]])
    np.testing.assert_allclose(centered_ranks(r), [[1 / 6, -1 / 6], [0.5, -0.5]])
    ties = centered_ranks(np.array([[1.0, 1.0], [1.0, 1.0]]))
    assert ties.sum() == pytest.approx(0.0)  # stable, centred


def test_raw_and_sign():
    r = np.array([[3.0, 1.0], [2.0, 2.0], [-1.0, 4.0]])
    np.testing.assert_array_equal(raw(r), r)
    np.testing.assert_array_equal(sign(r), [[0.5, -0.5], [0, 0], [-0.5, 0.5]])
    with pytest.raises(ValueError, match="unknown fitness shaping 'rank'.*centered_ranks"):
        get_shaping("rank")


def test_gradient_is_the_openai_estimate():
    dim, pairs = 300, 7
    rng = np.random.default_rng(0)
    idx = TABLE.sample_indices(rng, pairs, dim)
    shaped = rng.standard_normal((pairs, 2))
    direct = np.zeros(dim)
    for j in range(pairs):
        eps = TABLE.get(int(idx[j]), dim).astype(np.float64)
        direct += shaped[j, 0] * eps + shaped[j, 1] * (-eps)
    direct /= 2 * pairs
    np.testing.assert_allclose(es_gradient(TABLE, idx, shaped, dim), direct, rtol=1e-5,
                               atol=1e-7)


def test_weighted_sum_independent_of_chunking(monkeypatch):
    rng = np.random.default_rng(1)
    idx = TABLE.sample_indices(rng, 1000, 50)
    w = rng.standard_normal(1000)
    a = weighted_noise_sum(TABLE, idx, w, 50)
    monkeypatch.setattr(es_mod, "CHUNK", 1000)
    b = weighted_noise_sum(TABLE, idx, w, 50)
    # chunks change the order of a float32 sum of 1000 terms: an element that cancels to near 0
    # keeps the rounding of terms of size |w| (absolute, not relative, agreement there)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(w).sum())


def test_adam_step_is_adam_on_negated_gradient_plus_decay():
    """esnb's Adam is the textbook update in IEEE float32 (the formula below, bit for bit) and
    agrees with torch's Adam to within float32 rounding over many steps; torch is not bitwise
    (its kernels fuse multiply-adds and its vectorised sqrt is not correctly rounded), and
    workers without torch must replicate the update exactly."""
    theta0 = np.linspace(-1, 1, 20).astype(np.float32)
    es = OpenAIES(theta0, TABLE, lr=0.1)
    p = torch.nn.Parameter(torch.tensor(theta0))
    opt = torch.optim.Adam([p], lr=0.05)
    th, m, v = theta0.copy(), np.zeros(20, np.float32), np.zeros(20, np.float32)
    f32 = np.float32
    rng = np.random.default_rng(2)
    for t in range(1, 31):
        g = rng.standard_normal(20)
        es.apply_gradient(g, lr=0.05, weight_decay=0.01)
        grad = -g.astype(np.float32) + f32(0.01) * th  # the formula, written out
        m = m * f32(0.9) + f32(1 - 0.9) * grad
        v = v * f32(0.999) + f32(1 - 0.999) * (grad * grad)
        denom = np.sqrt(v) / f32(np.sqrt(1 - 0.999 ** t)) + f32(1e-8)
        th = th - (f32(0.05 / (1 - 0.9 ** t)) * m) / denom
        np.testing.assert_array_equal(es.theta, th)
        p.grad = -torch.tensor(g, dtype=torch.float32) + 0.01 * p.detach()
        opt.step()
        np.testing.assert_allclose(es.theta, p.detach().numpy(), rtol=2e-6, atol=1e-7)


def test_ask_tell_climbs_a_quadratic():
    """OpenAI-ES on f(x) = -||x - target||^2: the distance falls by orders of magnitude."""
    dim = 20
    target = np.linspace(-2, 2, dim)
    es = OpenAIES(np.zeros(dim, np.float32), TABLE, lr=0.05)
    rng = np.random.default_rng(3)
    sigma = 0.1
    start = np.linalg.norm(es.theta - target)
    for _ in range(300):
        idx = es.ask(rng, 20)
        eps = TABLE.gather(idx, dim)
        f = lambda x: -np.sum((x - target) ** 2, axis=-1)  # noqa: E731
        returns = np.stack([f(es.theta + sigma * eps), f(es.theta - sigma * eps)], axis=1)
        es.tell(Step.of(idx, returns, lr=0.05))
    assert np.linalg.norm(es.theta - target) < start / 20


def test_state_dict_round_trip():
    es = OpenAIES(np.ones(10, np.float32), TABLE)
    es.apply_gradient(np.ones(10), lr=0.01)
    state = es.state_dict()
    other = OpenAIES(np.zeros(10, np.float32), TABLE)
    other.load_state_dict(state)
    g = np.arange(10.0)
    es.apply_gradient(g, lr=0.01)
    other.apply_gradient(g, lr=0.01)
    np.testing.assert_array_equal(es.theta, other.theta)
    with pytest.raises(ValueError, match="theta of shape"):
        other.load_state_dict({"theta": np.zeros(3, np.float32)})

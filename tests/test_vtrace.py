"""V-trace against a loop-by-loop float64 evaluation of its definition (no Dask)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from esnb.rl import VTraceReturns, vtrace


def reference(mu, pi, r, g, V, boot, rho_bar=1.0, pg_bar=1.0, c_bar=1.0, lam=1.0):
    """The definition, term by term, in float64: the sum form of v_s (paper eq. 1),
    v_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i c_i) delta_t, and A_s."""
    T, B = r.shape
    vs = np.zeros((T, B))
    adv = np.zeros((T, B))

    def clip(x, bar):
        return x if bar is None else min(bar, x)

    for b in range(B):
        Vn = [float(V[t, b]) for t in range(T)] + [float(boot[b])]
        for s in range(T):
            total, coef = 0.0, 1.0
            for t in range(s, T):
                ratio = math.exp(pi[t, b] - mu[t, b])
                delta = clip(ratio, rho_bar) * (r[t, b] + g[t, b] * Vn[t + 1] - Vn[t])
                total += coef * delta
                coef *= g[t, b] * lam * clip(ratio, c_bar)
            vs[s, b] = Vn[s] + total
        for s in range(T):
            ratio = math.exp(pi[s, b] - mu[s, b])
            v_next = vs[s + 1, b] if s + 1 < T else Vn[T]
            adv[s, b] = clip(ratio, pg_bar) * (r[s, b] + g[s, b] * v_next - Vn[s])
    return vs, adv


def random_inputs(rng, T=7, B=5, spread=1.0):
    mu = rng.normal(-1.0, 0.5, (T, B))
    pi = mu + rng.normal(0.0, spread, (T, B))  # ratios well above and below 1
    r = rng.normal(0.0, 1.0, (T, B))
    g = np.full((T, B), 0.97)
    g[rng.random((T, B)) < 0.2] = 0.0  # terminations mid-unroll
    V = rng.normal(0.0, 2.0, (T, B))
    boot = rng.normal(0.0, 2.0, B)
    return mu, pi, r, g, V, boot


def as_t(*arrays, dtype=torch.float64):
    return [torch.tensor(a, dtype=dtype) for a in arrays]


@pytest.mark.parametrize("clips", [
    dict(),
    dict(clip_rho_threshold=2.0, clip_pg_rho_threshold=0.5, clip_c_threshold=0.8,
         lambda_=0.9),
    dict(clip_rho_threshold=None, clip_pg_rho_threshold=None, clip_c_threshold=None),
    dict(lambda_=0.0),
])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vtrace_matches_loop_reference(seed, clips):
    rng = np.random.default_rng(seed)
    mu, pi, r, g, V, boot = random_inputs(rng)
    ratios = np.exp(pi - mu)
    assert (ratios > 1.5).any() and (ratios < 0.7).any()  # both sides of the clips
    assert (g == 0).any()
    out = vtrace(*as_t(mu, pi, r, g, V, boot), **clips)
    assert isinstance(out, VTraceReturns)
    ref_vs, ref_adv = reference(
        mu, pi, r, g, V, boot, rho_bar=clips.get("clip_rho_threshold", 1.0),
        pg_bar=clips.get("clip_pg_rho_threshold", 1.0),
        c_bar=clips.get("clip_c_threshold", 1.0), lam=clips.get("lambda_", 1.0))
    assert out.vs.dtype == torch.float64
    np.testing.assert_allclose(out.vs.numpy(), ref_vs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.pg_advantages.numpy(), ref_adv, rtol=1e-12, atol=1e-12)


def test_vtrace_float32_close_to_float64():
    rng = np.random.default_rng(3)
    inputs = random_inputs(rng, T=20, B=32)
    out = vtrace(*as_t(*inputs, dtype=torch.float32))
    ref_vs, ref_adv = reference(*inputs)
    assert out.vs.dtype == torch.float32
    np.testing.assert_allclose(out.vs.numpy(), ref_vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), ref_adv, rtol=1e-4, atol=1e-4)


def test_on_policy_gives_n_step_bellman_targets():
    """pi = mu and lambda = 1: v_s = sum_{t>=s} (prod gamma) r_t + (prod gamma) V(x_T)."""
    rng = np.random.default_rng(4)
    T, B = 9, 6
    mu, _, r, g, V, boot = random_inputs(rng, T, B)
    out = vtrace(*as_t(mu, mu, r, g, V, boot))
    expected = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            ret, disc = 0.0, 1.0
            for t in range(s, T):
                ret += disc * r[t, b]
                disc *= g[t, b]
            expected[s, b] = ret + disc * boot[b]
    np.testing.assert_allclose(out.vs.numpy(), expected, rtol=1e-12, atol=1e-12)
    # on-policy advantages are the one-step-ahead n-step TD errors r_s + g_s v_{s+1} - V(x_s)
    v_next = np.concatenate([expected[1:], boot[None]], axis=0)
    np.testing.assert_allclose(out.pg_advantages.numpy(), r + g * v_next - V, atol=1e-12)


def test_no_gradient_flows_and_inputs_untouched():
    rng = np.random.default_rng(5)
    tensors = as_t(*random_inputs(rng))
    for t in tensors:
        t.requires_grad_(True)
    copies = [t.detach().clone() for t in tensors]
    out = vtrace(*tensors)
    assert not out.vs.requires_grad and not out.pg_advantages.requires_grad
    for t, c in zip(tensors, copies, strict=True):
        assert torch.equal(t.detach(), c)


def test_single_step_unroll():
    rng = np.random.default_rng(6)
    inputs = random_inputs(rng, T=1, B=3)
    out = vtrace(*as_t(*inputs))
    ref_vs, ref_adv = reference(*inputs)
    np.testing.assert_allclose(out.vs.numpy(), ref_vs, atol=1e-12)
    np.testing.assert_allclose(out.pg_advantages.numpy(), ref_adv, atol=1e-12)


# -- bad input: a clear ValueError naming the thing -----------------------------------------
def good(T=4, B=3):
    return as_t(*random_inputs(np.random.default_rng(7), T, B))


@pytest.mark.parametrize("index, shape, match", [
    (0, (4, 2), "behavior_log_probs has shape"),
    (1, (3, 3), "target_log_probs has shape"),
    (2, (4, 3, 1), "rewards has shape"),
    (3, (5, 3), "discounts has shape"),
    (5, (4,), "bootstrap_value must have shape"),
    (4, (12,), "values must be time-major"),
])
def test_shapes_that_disagree(index, shape, match):
    args = good()
    args[index] = torch.zeros(shape, dtype=torch.float64)
    with pytest.raises(ValueError, match=match):
        vtrace(*args)


@pytest.mark.parametrize("T, B", [(0, 3), (4, 0)])
def test_empty_unrolls(T, B):
    args = [torch.zeros((T, B), dtype=torch.float64) for _ in range(5)]
    args.append(torch.zeros(B, dtype=torch.float64))
    with pytest.raises(ValueError, match="T and B must be >= 1"):
        vtrace(*args)


@pytest.mark.parametrize("index, name", [(0, "behavior_log_probs"), (1, "target_log_probs")])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_log_probs(index, name, bad):
    args = good()
    args[index][1, 2] = bad
    with pytest.raises(ValueError, match=f"{name} has 1 non-finite"):
        vtrace(*args)


@pytest.mark.parametrize("kw", ["clip_rho_threshold", "clip_pg_rho_threshold",
                                "clip_c_threshold"])
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), "big"])
def test_thresholds_must_be_positive(kw, value):
    with pytest.raises(ValueError, match=f"{kw} must be a number > 0"):
        vtrace(*good(), **{kw: value})


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan")])
def test_lambda_range(value):
    with pytest.raises(ValueError, match="lambda_ must be a number in \\[0, 1\\]"):
        vtrace(*good(), lambda_=value)


def test_non_tensors_and_integer_tensors_rejected():
    args = good()
    args[2] = args[2].numpy()
    with pytest.raises(ValueError, match="rewards must be a torch.Tensor"):
        vtrace(*args)
    args = good()
    args[3] = torch.ones((4, 3), dtype=torch.int64)
    with pytest.raises(ValueError, match="discounts must be a floating-point tensor"):
        vtrace(*args)

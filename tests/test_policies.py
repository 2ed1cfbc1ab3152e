import numpy as np
import pytest
import torch

from esnb.nets import MLPPolicy, NumpyPolicy, PolicySpec, init_params


def box_spec(**kw):
    return PolicySpec(5, 3, (16, 8), low=[-1, -2, -0.5], high=[1, 2, 0.5], **kw)


def test_param_count_and_layout():
    spec = box_spec()
    assert spec.num_params == (5 * 16 + 16) + (16 * 8 + 8) + (8 * 3 + 3)
    pol = MLPPolicy(spec, init_params(spec, np.random.default_rng(0)))
    (w0, b0), _, (w2, b2) = pol.layers()
    assert w0.shape == (16, 5) and b2.shape == (3,)
    # the layers are views of the one flat parameter: writing flat changes them
    with torch.no_grad():
        pol.flat[0] = 123.0
    assert pol.layers()[0][0][0, 0].item() == 123.0
    assert w0.data_ptr() == pol.flat.data_ptr()


def test_normc_init():
    spec = box_spec()
    flat = init_params(spec, np.random.default_rng(0))
    (w0, b0), _, (w2, b2) = MLPPolicy(spec, flat).layers()
    np.testing.assert_allclose(torch.linalg.norm(w0, dim=1).detach().numpy(), 1.0, rtol=1e-5)
    np.testing.assert_allclose(torch.linalg.norm(w2, dim=1).detach().numpy(), 0.01, rtol=1e-5)
    assert torch.all(b0 == 0)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("normalise", [False, True])
def test_numpy_forward_matches_torch(activation, normalise):
    spec = box_spec(activation=activation)
    rng = np.random.default_rng(1)
    flat = rng.standard_normal(spec.num_params).astype(np.float32)
    torch_pol = MLPPolicy(spec, flat)
    mean = std = None
    if normalise:
        mean, std = rng.standard_normal(5), rng.uniform(0.1, 3, 5)
        torch_pol.set_obs_norm(mean, std)
    np_pol = NumpyPolicy(spec, flat, mean, std)
    obs = rng.standard_normal((200, 5)) * 10  # large: exercises the obs and action clips
    expected = torch_pol.act(obs.astype(np.float32))
    got = np.stack([np_pol.act(o) for o in obs])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert got.min() >= -2 and got.max() <= 2
    assert np.all(np.abs(got[:, 2]) <= 0.5)
    # the fast path with torch's own numpy view gives the same actions
    np.testing.assert_allclose(np.stack([torch_pol.numpy_policy().act(o) for o in obs]), got,
                               rtol=1e-5, atol=1e-6)


def test_discrete_argmax():
    spec = PolicySpec(4, 3, (8,), discrete=True)
    flat = np.random.default_rng(2).standard_normal(spec.num_params).astype(np.float32)
    np_pol, torch_pol = NumpyPolicy(spec, flat), MLPPolicy(spec, flat)
    obs = np.random.default_rng(3).standard_normal((100, 4)).astype(np.float32)
    acts = [np_pol.act(o) for o in obs]
    assert all(isinstance(a, int) for a in acts)
    assert acts == list(torch_pol.act(obs))
    assert len(set(acts)) > 1


def test_bad_parameters():
    spec = box_spec()
    with pytest.raises(ValueError, match="float32"):
        NumpyPolicy(spec, np.zeros(spec.num_params))
    with pytest.raises(ValueError, match="shape"):
        NumpyPolicy(spec, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="activation"):
        PolicySpec(3, 2, activation="sigmoid")

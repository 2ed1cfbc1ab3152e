"""The one network family: numpy and torch compute the same function over one flat vector;
layouts split and join; populations equal their members; initialisations are seeded."""

import numpy as np
import pytest
import torch

from esnb.nets import MLP, Layout, init_fan_in, init_glorot, init_normc, torch_mlp


@pytest.mark.parametrize("activation", ["tanh", "relu", "leaky_relu"])
@pytest.mark.parametrize("output", ["linear", "tanh", "relu"])
def test_numpy_and_torch_agree(activation, output):
    mlp = MLP((5, 16, 8, 3), activation=activation, output=output)
    rng = np.random.default_rng(0)
    flat = init_fan_in(mlp, rng)
    x = rng.standard_normal((7, 5)).astype(np.float32)
    got = torch_mlp.forward(mlp, torch.from_numpy(flat), torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(mlp.forward(flat, x), got, rtol=1e-5, atol=1e-6)
    # by hand, for the first row
    h = x[0].astype(np.float64)
    acts = {"tanh": np.tanh, "relu": lambda v: np.maximum(v, 0),
            "leaky_relu": lambda v: np.maximum(v, 0.01 * v), "linear": lambda v: v}
    for k, (w, b) in enumerate(mlp.layers(flat)):
        h = acts[activation if k < 2 else output](w.astype(np.float64) @ h + b)
    np.testing.assert_allclose(mlp.forward(flat, x)[0], h, rtol=1e-4, atol=1e-5)


def test_a_population_is_its_members():
    mlp = MLP((4, 6, 2), activation="relu")
    rng = np.random.default_rng(1)
    pop = np.stack([init_glorot(mlp, rng) for _ in range(3)])
    x = rng.standard_normal((5, 4)).astype(np.float32)
    out = torch_mlp.forward(mlp, torch.from_numpy(pop), torch.from_numpy(x)).numpy()
    assert out.shape == (3, 5, 2)
    for i in range(3):
        np.testing.assert_allclose(out[i], mlp.forward(pop[i], x), rtol=1e-5, atol=1e-6)


def test_layout_splits_views_and_joins():
    lay = Layout([("torso", MLP((3, 4), output="relu")), ("value", MLP((4, 1))),
                  ("log_std", 2)])
    assert lay.num_params == 16 + 5 + 2
    flat = np.arange(lay.num_params, dtype=np.float32)
    parts = lay.split(flat)
    assert parts["log_std"].tolist() == [21.0, 22.0] and np.shares_memory(parts["torso"], flat)
    assert np.array_equal(lay.join(**parts), flat)
    with pytest.raises(ValueError, match="needs 2 values"):
        lay.join(torso=parts["torso"], value=parts["value"], log_std=[1.0])
    with pytest.raises(ValueError, match="unique"):
        Layout([("a", 1), ("a", 2)])


def test_initialisations_are_seeded_and_shaped():
    mlp = MLP((10, 32, 4))
    a, b = init_normc(mlp, np.random.default_rng(3)), init_normc(mlp, np.random.default_rng(3))
    assert np.array_equal(a, b) and a.dtype == np.float32
    (w1, b1), (w2, _) = mlp.layers(a)
    np.testing.assert_allclose(np.linalg.norm(w1, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(w2, axis=1), 0.01, rtol=1e-5)
    assert not b1.any()
    u = init_fan_in(mlp, np.random.default_rng(0))
    assert np.abs(mlp.layers(u)[0][0]).max() <= 1 / np.sqrt(10)
    t = torch_mlp.init_fan_in(mlp, torch.Generator().manual_seed(0), last_bound=3e-3)
    assert t.shape == (mlp.num_params,) and np.abs(mlp.layers(t.numpy())[1][0]).max() <= 3e-3


def test_bad_specs_and_shapes_are_refused():
    with pytest.raises(ValueError, match="two or more sizes"):
        MLP((3,))
    with pytest.raises(ValueError, match="activation must be one of"):
        MLP((3, 2), activation="sigmoid")
    with pytest.raises(ValueError, match="expected 8 parameters"):
        MLP((3, 2)).forward(np.zeros(7, np.float32), np.zeros((1, 3)))


def test_forward_hands_out_every_layers_input():
    """``inputs`` receives what a hand-written backward needs (EORL's): each layer's input."""
    mlp = MLP((4, 6, 5, 2), activation="relu")
    rng = np.random.default_rng(2)
    pop = torch.from_numpy(np.stack([init_glorot(mlp, rng) for _ in range(3)]))
    x = torch.from_numpy(rng.standard_normal((7, 4)).astype(np.float32))
    for flat, shape in ((pop[1], (7,)), (pop, (3, 7))):
        inputs = []
        out = torch_mlp.forward(mlp, flat, x, inputs)
        assert torch.equal(out, torch_mlp.forward(mlp, flat, x)) and len(inputs) == 3
        assert [tuple(h.shape) for h in inputs] == [(*shape, 4), (*shape, 6), (*shape, 5)]
        assert torch.equal(inputs[0], x.expand(*shape, 4))
        first = MLP((4, 6), activation="relu", output="relu")
        w = flat[..., :first.num_params]
        assert torch.allclose(inputs[1], torch_mlp.forward(first, w, x), atol=1e-6)


def test_a_layout_split_once_feeds_forward():
    """``torch_mlp.split`` takes every part's tensors with one split; ``forward`` on an MLP
    part's tensors is ``forward`` on its vector, gradient included (Ape-X's dueling network
    and DPG critic)."""
    a, b = MLP((4, 6, 3), activation="relu"), MLP((3, 2), output="tanh")
    layout = Layout([("a", a), ("log_std", 2), ("b", b)])
    rng = np.random.default_rng(3)
    values = np.concatenate([init_fan_in(a, rng), np.ones(2, np.float32), init_fan_in(b, rng)])
    flat = torch.from_numpy(values).requires_grad_()
    x = torch.from_numpy(rng.standard_normal((5, 4)).astype(np.float32))
    parts, views = torch_mlp.split(layout, flat), layout.split(flat)
    assert [len(parts[n]) for n in ("a", "log_std", "b")] == [4, 1, 2]
    assert torch.equal(parts["log_std"][0], views["log_std"])
    out = torch_mlp.forward(b, parts["b"], torch_mlp.forward(a, parts["a"], x))
    ref = torch_mlp.forward(b, views["b"], torch_mlp.forward(a, views["a"], x))
    assert torch.equal(out, ref)
    (grad,), (grad_ref,) = (torch.autograd.grad(y.sum(), flat) for y in (out, ref))
    assert torch.equal(grad, grad_ref)
    assert torch.all(grad[a.num_params:a.num_params + 2] == 0) and grad.abs().sum() > 0
    pop = torch.stack([flat.detach(), 0.5 * flat.detach()])  # a population splits on its rows
    got = torch_mlp.forward(a, torch_mlp.split(layout, pop)["a"], x)
    assert got.shape == (2, 5, 3)
    for k in range(2):
        assert torch.allclose(got[k], torch_mlp.forward(a, pop[k, :a.num_params], x), atol=1e-6)

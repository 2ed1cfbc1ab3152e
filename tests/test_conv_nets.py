"""The papers' convolutional torsos as parts of the flat-parameter family (issue 22 item 2's
foundation): their sizes are the papers', the functional forward over a flat slice is the same
function as torch's own layers holding the same weights, gradients reach the flat vector, and
a dueling Q-network is a Layout of a torso and two MLP streams."""

import numpy as np
import pytest
import torch
from torch import nn

from esnb.nets import MLP, Layout
from esnb.nets.conv import ConvTorso, torso_for
from esnb.nets.torch_conv import conv_forward, conv_tensors, memory_layout
from esnb.nets.torch_mlp import forward, split

ATARI = (4, 84, 84)


def test_sizes_are_the_papers():
    nature = ConvTorso("nature", ATARI)
    assert nature.out_shape == (64, 7, 7) and nature.out_dim == 3136
    # Mnih et al. 2015's network for 18 actions: the torso, FC 512, 18 outputs = 1,693,362
    head = MLP((3136, 512, 18), "relu")
    assert nature.num_params + head.num_params == 1_693_362
    deep = ConvTorso("impala-deep", ATARI)  # Espeholt et al. 2018, fig. 3: 15 convolutions
    assert len([n for n, _ in deep.tensors if n.endswith(".w")]) == 15
    assert deep.out_shape == (32, 11, 11) and deep.num_params == 97_744
    shallow = ConvTorso("impala-shallow", ATARI)
    assert shallow.out_shape == (32, 9, 9)
    assert shallow.num_params == (4 * 16 * 64 + 16) + (16 * 32 * 16 + 32)
    minatar = ConvTorso("minatar", (4, 10, 10))  # Young & Tian 2019: 16 3x3, then FC 128
    assert minatar.out_dim == 16 * 8 * 8 and minatar.num_params == 4 * 16 * 9 + 16


class Reference(nn.Module):
    """The same torso written with torch's own layers, loaded from the same flat vector."""

    def __init__(self, torso: ConvTorso, flat: torch.Tensor):
        super().__init__()
        self.torso = torso
        tensors = conv_tensors(torso, flat)
        self.convs = nn.ModuleDict()
        for name in (n[:-2] for n, _ in torso.tensors if n.endswith(".w")):
            w, b = tensors[name + ".w"], tensors[name + ".b"]
            stride = {"conv0": 4, "conv1": 2}.get(name, 1) if torso.kind != "minatar" else 1
            conv = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], stride=stride,
                             padding=1 if torso.kind == "impala-deep" else 0)
            with torch.no_grad():
                conv.weight.copy_(w)
                conv.bias.copy_(b)
            self.convs[name.replace(".", "_")] = conv

    def forward(self, x):
        c = {k: v for k, v in self.convs.items()}
        x = x.float() / (1.0 if self.torso.kind == "minatar" else 255.0)
        if self.torso.kind != "impala-deep":
            for k in sorted(c):
                x = torch.relu(c[k](x))
            return torch.flatten(x, 1)
        pool = nn.MaxPool2d(3, stride=2, padding=1)
        for i in range(3):
            x = pool(c[f"s{i}_conv"](x))
            for j in range(2):
                skip = x
                x = c[f"s{i}_res{j}_a"](torch.relu(x))
                x = skip + c[f"s{i}_res{j}_b"](torch.relu(x))
        return torch.flatten(torch.relu(x), 1)


@pytest.mark.parametrize("kind,shape", [("nature", ATARI), ("impala-shallow", ATARI),
                                        ("impala-deep", ATARI), ("minatar", (6, 10, 10))])
def test_the_flat_forward_is_torchs_own_layers(kind, shape):
    torso = ConvTorso(kind, shape)
    flat = torch.from_numpy(torso.init(np.random.default_rng(5)))
    frames = torch.from_numpy(np.random.default_rng(6).integers(0, 256, (3, *shape),
                                                               dtype=np.uint8))
    ours = conv_forward(torso, flat, frames)
    assert ours.shape == (3, torso.out_dim)
    torch.testing.assert_close(ours, Reference(torso, flat)(frames), rtol=1e-5, atol=1e-5)
    # seeded: the same generator state gives the same parameters
    assert np.array_equal(torso.init(np.random.default_rng(5)), flat.numpy())


@pytest.mark.parametrize("kind,shape", [("impala-shallow", ATARI), ("impala-deep", ATARI),
                                        ("minatar", (4, 10, 10))])
def test_both_memory_layouts_give_the_same_outputs_and_gradients(kind, shape):
    """Runs compute in the channels-last layout (faster on a CPU); torch's default layout gives
    the same outputs and gradients to float rounding, and the switch is undone on leaving."""
    torso = ConvTorso(kind, shape)
    frames = torch.from_numpy(np.random.default_rng(6).integers(0, 256, (5, *shape),
                                                               dtype=np.uint8))
    init = torch.from_numpy(torso.init(np.random.default_rng(5)))

    def out_and_grad():
        flat = init.clone().requires_grad_(True)
        out = conv_forward(torso, flat, frames)
        (out * torch.linspace(-1, 1, out.shape[1])).sum().backward()
        return out.detach(), flat.grad

    out, grad = out_and_grad()
    with memory_layout("contiguous"):
        out_c, grad_c = out_and_grad()
    torch.testing.assert_close(out, out_c, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, grad_c, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="unknown memory layout 'nhwc'"):
        with memory_layout("nhwc"):
            pass
    with pytest.raises(RuntimeError), memory_layout("contiguous"):
        raise RuntimeError
    torch.testing.assert_close(out_and_grad()[0], out, rtol=0, atol=0)  # channels-last again


def test_a_dueling_q_network_is_a_layout_and_gradients_reach_the_flat_vector():
    torso = ConvTorso("nature", ATARI)
    layout = Layout([("torso", torso), ("value", MLP((3136, 512, 1), "relu")),
                     ("advantage", MLP((3136, 512, 6), "relu"))])
    rng = np.random.default_rng(0)
    flat = torch.from_numpy(layout.join(
        torso=torso.init(rng), value=rng.normal(0, 0.01, layout["value"].num_params),
        advantage=rng.normal(0, 0.01, layout["advantage"].num_params))).requires_grad_()
    parts = split(layout, flat)
    frames = torch.zeros((2, *ATARI), dtype=torch.uint8)
    frames[1, :, 20:40, 30:50] = 200
    h = conv_forward(torso, parts["torso"][0], frames)
    v = forward(layout["value"], parts["value"], h)
    a = forward(layout["advantage"], parts["advantage"], h)
    q = v + a - a.mean(dim=1, keepdim=True)
    assert q.shape == (2, 6)
    q[1, 2].backward()  # one action: summed over actions the advantages cancel
    grads = layout.split(flat.grad)
    assert all(bool(grads[name].abs().sum() > 0) for name in ("torso", "value", "advantage"))


def test_the_torso_is_chosen_from_the_observations_and_bad_shapes_are_named():
    assert torso_for(ATARI, "apex").kind == "nature"
    assert torso_for(ATARI, "impala").kind == "impala-shallow"
    assert torso_for(ATARI, "impala", deep=True).kind == "impala-deep"
    assert torso_for((4, 10, 10), "apex").kind == "minatar"
    assert torso_for((17,), "apex") is None  # vector observations: an MLP
    with pytest.raises(ValueError, match="too small"):
        ConvTorso("nature", (4, 20, 20))
    with pytest.raises(ValueError, match="kind must be one of nature"):
        ConvTorso("resnet", ATARI)
    torso = ConvTorso("minatar", (4, 10, 10))
    with pytest.raises(ValueError, match=r"takes frames of shape \(4, 10, 10\)"):
        conv_forward(torso, torch.zeros(torso.num_params), torch.zeros((1, 3, 10, 10)))
    with pytest.raises(ValueError, match="needs 592 parameters"):
        conv_tensors(torso, torch.zeros(10))

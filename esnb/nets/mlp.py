"""The one network family of esnb: a spec, one flat float32 parameter vector, a numpy forward
(actors, rollouts: no torch) and a torch twin (learners) reading views of the same vector.

Layout of an :class:`MLP`'s flat vector: layer after layer, the weight matrix ``[out, in]``
(row-major) then the bias ``[out]``. Networks with several parts (a dueling head, a twin
critic, a policy and a value) are a :class:`~esnb.nets.layout.Layout` of named MLPs in one
vector; a population (EORL) is a matrix whose rows are such vectors. ES perturbs the vector,
learners publish it, checkpoints store it: one array everywhere.

This module imports numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: hidden activations and output activations understood by both forwards
ACTIVATIONS = ("tanh", "relu", "leaky_relu")
OUTPUTS = ("linear", "tanh", "relu")


@dataclass(frozen=True)
class MLP:
    """A multi-layer perceptron's shape.

    Attributes
    ----------
    sizes : tuple of int
        ``(in, hidden..., out)``; at least two.
    activation : {"tanh", "relu", "leaky_relu"}
        Between layers.
    output : {"linear", "tanh", "relu"}
        After the last layer.
    slope : float
        Negative slope of ``leaky_relu``.
    """

    sizes: tuple[int, ...]
    activation: str = "tanh"
    output: str = "linear"
    slope: float = 0.01

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))
        if len(self.sizes) < 2 or min(self.sizes) < 1:
            raise ValueError(f"an MLP needs two or more sizes >= 1, got {self.sizes}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got "
                             f"{self.activation!r}")
        if self.output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {self.output!r}")

    @property
    def in_dim(self) -> int:
        return self.sizes[0]

    @property
    def out_dim(self) -> int:
        return self.sizes[-1]

    @property
    def layer_shapes(self) -> list[tuple[int, int]]:
        """``(out, in)`` of every linear layer."""
        s = self.sizes
        return [(s[i + 1], s[i]) for i in range(len(s) - 1)]

    @property
    def num_params(self) -> int:
        return sum(o * i + o for o, i in self.layer_shapes)

    def slices(self) -> list[tuple[slice, tuple[int, int], slice]]:
        """For each layer: (weight slice, weight shape, bias slice) into the flat vector."""
        out, pos = [], 0
        for o, i in self.layer_shapes:
            w = slice(pos, pos + o * i)
            pos += o * i
            b = slice(pos, pos + o)
            pos += o
            out.append((w, (o, i), b))
        return out

    def layers(self, flat) -> list[tuple]:
        """``[(W [out, in], b [out]), ...]`` views of ``flat`` (numpy or torch)."""
        self.check(flat)
        return [(flat[w].reshape(shape), flat[b]) for w, shape, b in self.slices()]

    def check(self, flat) -> None:
        shape = tuple(flat.shape)
        if shape != (self.num_params,):
            raise ValueError(f"expected {self.num_params} parameters, got shape {shape}")

    def unpack(self, flat) -> list[tuple]:
        """``[(W [out, in], b [out], activation, slope), ...]``: every layer as views of
        ``flat`` (float32) with what follows it, as :func:`run` takes them. Unpack once per
        vector when it is run often: a forward of a few rows is overhead-bound."""
        layers = self.layers(flat)
        kinds = [self.activation] * (len(layers) - 1) + [self.output]
        return [(w, b, kind, self.slope) for (w, b), kind in zip(layers, kinds)]

    def forward(self, flat: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Outputs ``[batch, out]`` of a batch ``[batch, in]`` (float32, numpy)."""
        return run(self.unpack(np.asarray(flat, dtype=np.float32)),
                   np.asarray(x, dtype=np.float32).reshape(-1, self.in_dim))


def run(layers: list[tuple], x: np.ndarray) -> np.ndarray:
    """The numpy forward of an MLP: outputs ``[batch, out]`` of ``x`` ``[batch, in]``
    (float32) through :meth:`MLP.unpack` layers: Ape-X's and IMPALA's actors. (One observation
    at a time, :class:`esnb.nets.numpy_policy.NumpyPolicy` computes the same function about
    twice as fast: TD3's rollouts and EORL's acting use it; ES's lock-step episodes run
:class:`esnb.nets.batch_policy.BatchPolicy`.)"""
    for w, b, kind, slope in layers:
        x = x @ w.T + b
        if kind != "linear":
            activate(x, kind, slope)
    return x


def normalise_obs(x, mean, std, clip: float):
    """Observation normalisation, ``clip((x - mean) / std, -clip, clip)``, of numpy arrays or
    torch tensors alike: the torch modules (:class:`esnb.nets.torch_mlp.ObsNormModule`: ES's
    policy, IMPALA's actor-critic) and IMPALA's numpy actors call it.
    :class:`~esnb.nets.numpy_policy.NumpyPolicy` folds the same function into its first
    layer."""
    return ((x - mean) / std).clip(-clip, clip)


def activate(h: np.ndarray, kind: str, slope: float = 0.01) -> np.ndarray:
    """Apply an activation in place (numpy)."""
    if kind == "tanh":
        np.tanh(h, out=h)
    elif kind == "relu":
        np.maximum(h, 0.0, out=h)
    elif kind == "leaky_relu":
        np.maximum(h, slope * h, out=h)
    return h


# -- initialisations (numpy generators: seeded explicitly) -----------------------------------
def init_normc(mlp: MLP, rng: np.random.Generator, out_std: float = 0.01) -> np.ndarray:
    """OpenAI-ES's normalised-column init, zero biases: each unit's incoming weights are
    N(0, 1) scaled to norm 1 (hidden layers) or ``out_std`` (output layer)."""
    flat = np.zeros(mlp.num_params, dtype=np.float32)
    layers = mlp.slices()
    for k, (w, shape, _b) in enumerate(layers):
        std = out_std if k == len(layers) - 1 else 1.0
        m = rng.standard_normal(shape)
        m *= std / np.sqrt(np.square(m).sum(axis=1, keepdims=True))
        flat[w] = m.astype(np.float32).ravel()
    return flat


def init_fan_in(mlp: MLP, rng: np.random.Generator) -> np.ndarray:
    """torch ``nn.Linear``'s default: weights and biases ``U(-1/sqrt(in), 1/sqrt(in))``."""
    flat = np.empty(mlp.num_params, dtype=np.float32)
    for w, (o, i), b in mlp.slices():
        bound = 1.0 / math.sqrt(i)
        flat[w] = rng.uniform(-bound, bound, size=o * i)
        flat[b] = rng.uniform(-bound, bound, size=o)
    return flat


def init_glorot(mlp: MLP, rng: np.random.Generator) -> np.ndarray:
    """Keras' default: Glorot-uniform weights, zero biases. The draws fill each weight in
    ``[in, out]`` order (as Keras stores it), then are laid out ``[out, in]``."""
    flat = np.zeros(mlp.num_params, dtype=np.float32)
    for w, (o, i), _b in mlp.slices():
        limit = math.sqrt(6.0 / (i + o))
        flat[w] = rng.uniform(-limit, limit, (i, o)).T.astype(np.float32).ravel()
    return flat


def orthogonal(shape: tuple[int, ...], gain: float, rng: np.random.Generator) -> np.ndarray:
    """A weight of ``shape`` (``[out, in, ...]``) whose ``out`` rows, flattened, are orthonormal
    (or its columns, when ``out`` exceeds their length), times ``gain``: Saxe et al.'s
    orthogonal init as torch's ``nn.init.orthogonal_`` draws it (QR of a Gaussian matrix, signs
    from R's diagonal), from ``rng``; float32."""
    rows, cols = int(shape[0]), int(np.prod(shape[1:]))
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))
    q = q if rows >= cols else q.T
    return (gain * q).astype(np.float32).reshape(shape)


def init_orthogonal(mlp: MLP, rng: np.random.Generator, gain: float,
                    out_gain: float) -> np.ndarray:
    """Orthogonal weights (:func:`orthogonal`; ``gain`` for hidden layers, ``out_gain`` for the
    output layer), zero biases: A2C's and PPO's init in OpenAI baselines."""
    flat = np.zeros(mlp.num_params, dtype=np.float32)
    layers = mlp.slices()
    for k, (w, shape, _b) in enumerate(layers):
        flat[w] = orthogonal(shape, out_gain if k == len(layers) - 1 else gain, rng).ravel()
    return flat

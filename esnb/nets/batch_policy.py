"""Many policies of one spec acting on many observations at once: the lock-step rollouts' forward.

ES steps the episodes of a task in lock step (:func:`esnb.envs.lockstep.run_lockstep`); each
episode has its own parameters (``theta +- sigma * noise``), so a step is one stacked
matrix-vector product per layer (``np.matmul`` of ``[k, out, in + 1]`` by ``[k, in + 1, 1]``)
instead of ``k`` products and ``k`` times the ufunc calls of :class:`NumpyPolicy`. numpy runs
a stacked product as the same BLAS matrix-vector kernel per episode, so every episode's action
has :class:`NumpyPolicy`'s bits (``tests/test_lockstep.py``); a matrix-matrix product over a
shared matrix would sum in another order and change them.

Slots: the policy holds ``width`` parameter sets; the first ``k`` are the live episodes
(:meth:`BatchPolicy.move` packs them when one finishes). This module imports numpy only.
"""

from __future__ import annotations

import numpy as np

from esnb.nets.numpy_policy import fold_layers, normalisation
from esnb.nets.policy import PolicySpec


class BatchPolicy:
    """``width`` deterministic MLP policies of ``spec`` sharing one observation normalisation.

    Parameters
    ----------
    spec : PolicySpec
    width : int
        Slots (the most episodes acting at once).
    obs_mean, obs_std : ndarray, optional
        Observation normalisation, folded in as :class:`NumpyPolicy` does.
    """

    def __init__(self, spec: PolicySpec, width: int, obs_mean=None, obs_std=None):
        self.spec, self.width = spec, int(width)
        shapes = spec.layer_shapes
        self._mats = [np.empty((self.width, o, i + 1), dtype=np.float32) for o, i in shapes]
        # layer l's input, a trailing 1 per row; the products land in outs (kept contiguous:
        # a strided output would take numpy's non-BLAS loop, with other bits)
        self._inputs = [np.ones((self.width, i + 1), dtype=np.float32) for _, i in shapes]
        self._outs = [np.empty((self.width, o, 1), dtype=np.float32) for o, _ in shapes]
        # the normalised observations, contiguous (the clip's comparisons run faster there)
        self._x = np.empty((self.width, spec.obs_dim), dtype=np.float32)
        self._views, self._views_k = None, -1
        self._mean, self._bound, self._std = normalisation(spec, obs_mean, obs_std)
        self._relu = spec.activation == "relu"
        self._high = self._low = None
        if not spec.discrete and spec.high:
            self._high = np.asarray(spec.high, dtype=np.float32)
            self._low = np.asarray(spec.low, dtype=np.float32)

    def load(self, slot: int, flat: np.ndarray) -> None:
        """Give ``slot`` the parameters ``flat`` (float32, ``spec.num_params``)."""
        flat = np.asarray(flat)
        if flat.dtype != np.float32 or flat.shape != (self.spec.num_params,):
            raise ValueError(f"expected float32 parameters of shape ({self.spec.num_params},), "
                             f"got {flat.dtype} {flat.shape}")
        fold_layers(self.spec, flat, self._std, [m[slot] for m in self._mats])

    def move(self, src: int, dst: int) -> None:
        """Copy slot ``src``'s parameters into slot ``dst``."""
        for m in self._mats:
            m[dst] = m[src]

    def act(self, obs: np.ndarray, k: int, clip: bool = True) -> np.ndarray:
        """Actions of slots ``0..k-1`` for the observations ``obs[:k]`` (rows, float64):
        ``[k, act_dim]`` float32 clipped to the bounds (``clip=False``: the raw outputs, for
        noise added before the bounds), or ``[k]`` argmax indices (discrete). Row ``j`` has
        the bits of ``NumpyPolicy(spec, flat_j, mean, std).act(obs[j])``."""
        views = self._views if self._views_k == k else self._make_views(k)
        x, first, layers, y = views
        np.subtract(obs[:k], self._mean, out=x, casting="same_kind")
        if self._bound is not None:
            hi, lo = self._bound
            np.minimum(x, hi, out=x)
            np.maximum(x, lo, out=x)
        first[...] = x
        for m, inp, out, hidden, nxt in layers:
            np.matmul(m, inp, out=out)
            if nxt is not None:
                # in place on the contiguous rows, as NumpyPolicy applies it (tanh's SIMD
                # path on a row is not the one a strided output takes), then copied
                if self._relu:
                    np.maximum(hidden, 0.0, out=hidden)
                else:
                    np.tanh(hidden, out=hidden)
                nxt[...] = hidden
        if self.spec.discrete:
            return np.argmax(y, axis=1)
        if self._high is None or not clip:
            return y.copy()
        return self.clip(y)

    def _make_views(self, k: int) -> tuple:
        """The slices of the buffers for ``k`` live rows (kept: k changes only as episodes
        end)."""
        last = len(self._mats) - 1
        layers = []
        for layer, (m, inp, out) in enumerate(zip(self._mats, self._inputs, self._outs)):
            nxt = self._inputs[layer + 1][:k, :-1] if layer < last else None
            layers.append((m[:k], inp[:k, :, None], out[:k], out[:k, :, 0], nxt))
        n = self.spec.obs_dim
        self._views = (self._x[:k], self._inputs[0][:k, :n], tuple(layers),
                       self._outs[last][:k, :, 0])
        self._views_k = k
        return self._views

    def clip(self, y: np.ndarray) -> np.ndarray:
        """``y`` clipped to the action bounds (a new array; ``y`` itself if unbounded)."""
        if self._high is None:
            return y
        a = np.minimum(y, self._high)
        np.maximum(a, self._low, out=a)
        return a

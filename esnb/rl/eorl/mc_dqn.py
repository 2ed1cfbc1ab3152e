"""EORL's DQN: a population of small Q-networks regressed on Monte-Carlo returns.

Khadilkar 2023, sections 2 and 4: every learner (EORL and its baselines) is a fully connected
network ``obs -> 32 -> 8 -> actions`` (ReLU), learning rate 0.01, whose ``Q(s, a)`` is regressed
on the Monte-Carlo return ``G_t = r_t + r_{t+1} + ... + r_T`` of the episode (gamma = 1, the
paper's "Monte-Carlo backups"; no bootstrapping, so no target network). After each episode a
member draws a sample of ``min(4096, buffer size)`` transitions and makes 2 passes ("epochs")
over it. esnb reads a pass as one full-batch Adam step (the issue's reading); a Keras-style
reading with mini-batches of 32 is available (``minibatch=32``, ~128x the steps).

Why training is cheap here: the full-batch squared loss of a sample only depends, per distinct
``(s, a)``, on the count ``c``, the sum ``S`` and the sum of squares of its targets:
``sum_k (Q(s_k, a_k) - G_k)^2 = sum_(s,a) c Q^2 - 2 Q S + sum G^2``. EORL's environments have
few distinct states (64 for BitFlip m = 6, 1,600 for a 20 x 20 grid with its two flags), so the
members' forward and backward passes run on the distinct states of their samples instead of
4,096 rows each. Gradients are the same as on the rows (up to float rounding; tested), and
all ``n`` members train in one batched pass over stacked weights (``torch.bmm`` with a leading
member dimension), each with its own Adam state and step count.

A member is an :class:`esnb.nets.MLP` (ReLU; acting, a discrete
:class:`~esnb.nets.PolicySpec` on it) and the population a matrix whose rows are the
members' flat vectors in the family's layout (per layer ``W [out, in]`` then ``b``); the
forward is :func:`esnb.nets.torch_mlp.forward`'s population path. The networks are initialised
as Keras does (:func:`esnb.nets.init_glorot`: Glorot-uniform weights, zero biases) from a numpy
generator, and Adam uses Keras' epsilon 1e-7: the paper's wording ("epochs", "learning rate")
is Keras'.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from esnb.device import resolve_device, to_device
from esnb.nets import NumpyPolicy, PolicySpec, init_glorot, torch_mlp
from esnb.nets.torch_mlp import to_numpy
from esnb.rl.constants import ADAM_BETAS, ADAM_EPS


@contextlib.contextmanager
def one_thread():
    """Run torch on one intra-op thread for the duration (restored after).

    At these sizes a second thread only adds synchronisation: a training call took 8-14 ms on
    one thread and 80-210 ms on two on the loaded 2-core machine (workers already run one
    thread; this covers runs in a notebook or the CLI).
    """
    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def mc_returns(rewards: np.ndarray) -> np.ndarray:
    """Undiscounted returns-to-go ``G_t = sum_{k >= t} r_k`` (float64)."""
    r = np.asarray(rewards, dtype=np.float64)
    return np.cumsum(r[::-1])[::-1].copy()


class PopulationQNet:
    """``n`` Q-networks with stacked parameters, trained together, each with its own Adam.

    Parameters
    ----------
    n : int
        Members (1 for the single-network baselines).
    obs_dim, n_actions : int
        Input and output sizes.
    rng : numpy.random.Generator
        Draws the initial weights.
    hidden : tuple of int
        Hidden layer sizes (the paper: 32 and 8).
    lr : float
        Adam step size (the paper: 0.01).
    device : str or torch.device
        Where the parameters, Adam's moments and the samples live (``auto``: CUDA when
        available); the initial weights are drawn by ``rng`` (the same on every device), and
        parameters, Q-values and the state come back as CPU numpy.

    Attributes
    ----------
    mlp : esnb.nets.MLP
        A member's network, ``obs -> hidden... -> actions`` (ReLU, linear output).
    theta : torch.Tensor
        All parameters, shape ``(n, P)``: member ``i``'s flat vector (in ``mlp``'s layout:
        per layer ``W [out, in]`` row-major, then ``b``) is row ``i``. Operators act on rows.
    steps : numpy.ndarray
        Adam steps taken by each member since its optimiser was (re)set.

    Notes
    -----
    The backward pass is written out (two batched matmuls per layer) instead of using
    autograd: at EORL's sizes the per-operation overhead is the cost, and one flat ``(n, P)``
    parameter tensor makes Adam six tensor operations for the whole population.
    """

    def __init__(self, n: int, obs_dim: int, n_actions: int, rng: np.random.Generator,
                 hidden, lr: float, device="cpu"):
        if int(n) < 1:
            raise ValueError(f"number of networks must be >= 1, got {n}")
        self.n = int(n)
        self.obs_dim = int(obs_dim)
        self.n_actions = int(n_actions)
        self.hidden = tuple(int(h) for h in hidden)
        if not self.hidden or min(self.hidden) < 1:
            raise ValueError(f"hidden must be one or more layer sizes >= 1, got {hidden!r}")
        self.lr = float(lr)
        #: a member as a policy: its greedy action is the argmax of the Q-values
        self.policy = PolicySpec(self.obs_dim, self.n_actions, self.hidden, activation="relu",
                                 discrete=True)
        self.mlp = self.policy.mlp  # relu hidden layers, linear Q outputs
        self.num_params = self.mlp.num_params
        self.device = resolve_device(device)
        self.theta = torch.tensor(np.stack([init_glorot(self.mlp, rng) for _ in range(self.n)]),
                                  device=self.device)
        self._m = torch.zeros_like(self.theta)
        self._v = torch.zeros_like(self.theta)
        self.steps = np.zeros(self.n, dtype=np.int64)

    # -- parameters --------------------------------------------------------------------------
    def flat(self, i: int) -> np.ndarray:
        """Member ``i``'s parameters as one float32 vector (a copy)."""
        return to_numpy(self.theta[i])

    def set_flat(self, i: int, vec: np.ndarray) -> None:
        vec = np.asarray(vec, dtype=np.float32)
        if vec.shape != (self.num_params,):
            raise ValueError(f"flat parameters of shape {vec.shape}, expected "
                             f"({self.num_params},)")
        if not np.all(np.isfinite(vec)):
            raise ValueError("flat parameters must be finite")
        self.theta[i] = torch.from_numpy(vec.copy()).to(self.device)

    def reset_optimizer(self, i: int) -> None:
        """Member ``i`` starts over with a fresh Adam (zero moments, step 0)."""
        self._m[i] = 0.0
        self._v[i] = 0.0
        self.steps[i] = 0

    def layers(self, theta: torch.Tensor | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``[(W^T, b), ...]`` views of ``theta`` (default the parameters) such that a layer
        is ``baddbmm(b, h, W^T)``: ``W^T`` of shape ``(n, in, out)`` (the transpose of the
        rows' ``W [out, in]``), ``b`` of shape ``(n, 1, out)``."""
        t = self.theta if theta is None else theta
        n = t.shape[0]
        return [(t[:, w].view(n, o, i).transpose(1, 2), t[:, b].view(n, 1, o))
                for w, (o, i), b in self.mlp.slices()]

    def member_numpy(self, i: int) -> NumpyPolicy:
        """Member ``i`` for acting, one observation at a time: a
        :class:`~esnb.nets.NumpyPolicy` over a float32 copy of its row, whose ``act(x)`` is
        the greedy action (``argmax_a Q(x, a)``, the first maximum on ties)."""
        return NumpyPolicy(self.policy, self.flat(i))

    # -- forward and backward ----------------------------------------------------------------
    def _forward(self, x: torch.Tensor):
        """``x`` (U, d), shared by all members -> (Q of shape (n, U, A), the input of every
        layer, each of shape (n, U, in))."""
        inputs: list[torch.Tensor] = []
        return torch_mlp.forward(self.mlp, self.theta, x, inputs), inputs

    def q_values(self, x: np.ndarray) -> np.ndarray:
        """Q of every member at the rows of ``x`` (U, d): shape (n, U, A)."""
        with one_thread():
            q, _ = self._forward(to_device(x, self.device))
        return q.cpu().numpy()

    def _gradient(self, inputs: list[torch.Tensor], dq: torch.Tensor) -> torch.Tensor:
        """d loss / d theta (n, P) given d loss / d Q (n, U, A) and the layers' inputs."""
        n = self.n
        weights = [self.theta[:, w].view(n, o, i) for w, (o, i), _b in self.mlp.slices()]
        grads = []
        delta = dq
        for k in range(len(weights) - 1, -1, -1):
            inp = inputs[k]
            grads.append(delta.sum(dim=1))                                           # b
            # W: delta^T inp, [out, in]. On many rows bmm is faster with fewer result rows than
            # columns (measured: 2.5x for 4 -> 32 on 8 x 1000 rows; no gain below ~1000 rows),
            # so a wide layer's gradient is then computed as its transpose (same numbers)
            out, width = weights[k].shape[1:]
            if out > width and delta.shape[0] * delta.shape[1] >= 1024:
                gw = torch.bmm(inp.transpose(1, 2), delta).transpose(1, 2)
            else:
                gw = torch.bmm(delta.transpose(1, 2), inp)
            grads.append(gw.reshape(n, -1))
            if k > 0:
                # ReLU: the gradient passes where the activation (this layer's input) is > 0
                delta = torch.bmm(delta, weights[k]) * (inp > 0)
        return torch.cat(grads[::-1], dim=1)

    # -- training ----------------------------------------------------------------------------
    def fit(self, x: np.ndarray, count: np.ndarray, target_sum: np.ndarray,
            target_sumsq: np.ndarray, batch: np.ndarray, members: np.ndarray | None = None,
            epochs: int = 1, lr: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``epochs`` full-batch Adam steps of each selected member on its aggregated sample.

        Member ``i`` minimises ``(1/B_i) sum_k w_k (Q_i(s_k, a_k) - G_k)^2`` over its sample,
        given per distinct ``(s, a)`` the weight sum ``count`` and the weighted target sum,
        and, for the loss value only, the weighted sum of squared targets.

        Parameters
        ----------
        x : array (U, d)
            The distinct states of all members' samples.
        count, target_sum : arrays (n, U, A)
            Per member, state and action: sum of sample weights (counts when unweighted) and
            of weight x target.
        target_sumsq : array (n,)
            Per member: sum of weight x target^2 (makes the reported loss exact).
        batch : array (n,)
            Sample sizes ``B_i`` (the loss is a mean over the sample, as Keras').
        members : bool array (n,), optional
            Which members train (default all); the others are left untouched.
        epochs : int
            Steps on this same sample.
        lr : float, optional
            Step size (default ``self.lr``).

        Returns
        -------
        loss : numpy.ndarray (n,)
            Each member's loss before the last step (NaN for members that did not train).
        q : numpy.ndarray (n, U, A)
            Q before the last step (for priorities).
        """
        with one_thread():
            return self._fit(x, count, target_sum, target_sumsq, batch, members, epochs, lr)

    def _fit(self, x, count, target_sum, target_sumsq, batch, members, epochs, lr):
        lr = self.lr if lr is None else float(lr)
        members = np.ones(self.n, bool) if members is None else np.asarray(members, bool)
        xt = to_device(x, self.device)
        inv_b = 1.0 / np.maximum(np.asarray(batch, dtype=np.float64), 1.0)
        # d loss / d Q = 2 (c Q - S) / B: fold 2 / B into c and S once
        scale = to_device(2.0 * inv_b, self.device).view(self.n, 1, 1)
        c2 = to_device(count, self.device) * scale
        s2 = to_device(target_sum, self.device) * scale
        q = None
        for _ in range(int(epochs)):
            q, inputs = self._forward(xt)
            self._adam(self._gradient(inputs, c2 * q - s2), members, lr)
        # loss = (sum c Q^2 - 2 S Q + sum G^2) / B = (sum (c2 Q - 2 s2) Q) / 2 + tsq / B
        loss = (0.5 * ((c2 * q - 2.0 * s2) * q).sum(dim=(1, 2)).cpu().numpy().astype(np.float64)
                + np.asarray(target_sumsq, dtype=np.float64) * inv_b)
        loss[~members] = np.nan
        return loss, q.cpu().numpy()

    def _adam(self, grad: torch.Tensor, members: np.ndarray, lr: float) -> None:
        b1, b2 = ADAM_BETAS
        self.steps[members] += 1
        t = np.maximum(self.steps, 1).astype(np.float64)
        # Keras/TF form: bias corrections folded into the step size, eps added to sqrt(v)
        step_size = lr * np.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
        if members.all():
            self._m.mul_(b1).add_(grad, alpha=1.0 - b1)
            self._v.mul_(b2).addcmul_(grad, grad, value=1.0 - b2)
        else:
            keep = torch.as_tensor(members).view(self.n, 1).to(self.device)
            self._m.copy_(torch.where(keep, self._m * b1 + (1.0 - b1) * grad, self._m))
            self._v.copy_(torch.where(keep, self._v * b2 + (1.0 - b2) * grad * grad, self._v))
            step_size[~members] = 0.0
        size = to_device(step_size, self.device).view(self.n, 1)
        self.theta.sub_(size * self._m / (self._v.sqrt() + ADAM_EPS))

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        return {"theta": to_numpy(self.theta), "adam_m": to_numpy(self._m),
                "adam_v": to_numpy(self._v), "adam_steps": self.steps.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray], weights_in_out: bool = False) -> None:
        """``weights_in_out``: a state saved before esnb's network family, whose rows hold each
        weight ``[in, out]``; they are laid out ``[out, in]`` (Adam's moments with them)."""
        shape = tuple(self.theta.shape)
        for k in ("theta", "adam_m", "adam_v"):
            if np.shape(state[k]) != shape:
                raise ValueError(f"network state {k!r} of shape {np.shape(state[k])}, "
                                 f"expected {shape}")
        order = np.arange(self.num_params)
        if weights_in_out:
            order = np.concatenate([part for w, (o, i), b in self.mlp.slices()
                                    for part in (order[w].reshape(i, o).T.ravel(), order[b])])
        for k, t in (("theta", self.theta), ("adam_m", self._m), ("adam_v", self._v)):
            t.copy_(to_device(np.asarray(state[k], dtype=np.float32)[:, order], self.device))
        self.steps = np.asarray(state["adam_steps"], dtype=np.int64).copy()

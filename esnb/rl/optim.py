"""Optimizers of the RL learners and their state as flat arrays (for checkpoints).

**Why not torch.optim.** ``torch.optim.Optimizer`` imports ``torch._dynamo`` (torch's
compiler) the first time an optimizer is made or steps: about as long again as ``import
torch`` itself (2.6-3.2 CPU s a process on a loaded 2-core machine, ``esnb bench startup``),
paid by every process that trains a network -- each ``esnb train``, each Dask worker of AES-RL
and EORL, each notebook kernel. esnb never compiles. :class:`Optimizer` keeps torch.optim's
layout (``param_groups``, per-parameter ``state`` under torch's names), so the checkpoint code
reads and writes both alike, and
:class:`Adam` and :class:`RMSprop` are torch's CPU single-tensor updates, bit for bit
(tests/test_optim.py steps them beside torch's).

:class:`CenteredRMSprop` is TensorFlow 1's centred RMSProp, the optimizer of the Ape-X paper
(Horgan et al. 2018, appendix C: "Centered RMSProp ... learning rate of 0.00025 / 4, decay of
0.95, epsilon of 1.5e-7, and no momentum"). ``torch.optim.RMSprop(centered=True)`` is not the
same optimizer at the same epsilon:

- TensorFlow divides by ``sqrt(ms - mg^2 + eps)`` (epsilon *inside* the square root,
  ``tf.raw_ops.ApplyCenteredRMSProp``); torch by ``sqrt(v - g_avg^2) + eps``. For small
  second moments the paper's 1.5e-7 therefore acts like torch's ~3.9e-4;
- TensorFlow 1 starts the mean square ``ms`` at **one** (``rmsprop.py``, ``_create_slots``:
  ``init_ops.ones_initializer``), torch at zero: the first updates of the paper's optimizer are
  about ``lr * g``, small, and grow as ``ms`` decays towards the gradients' scale over
  ~1/(1 - decay) = 20 updates.

Implementing TensorFlow's rule keeps the paper's numbers meaningful as written. IMPALA's
released code (scalable_agent) uses TensorFlow 1's plain RMSProp, the same rule without the
centring (:class:`RMSpropTF` with ``centered=False``): ``ms`` starts at one and epsilon (0.1)
sits under the square root, so with a gradient of 1 its first step is ``0.95 lr`` where
``torch.optim.RMSprop(eps=0.1)`` steps ``5 lr``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class Optimizer:
    """One group of parameters, a state per parameter, and an update rule.

    The part of ``torch.optim.Optimizer`` esnb's learners use, without its import of torch's
    compiler (see the module's docstring): ``param_groups`` (one dict: ``params`` and the
    hyper-parameters; a learner changes ``lr`` there), ``state`` (parameter -> dict of
    tensors, torch's names), :meth:`zero_grad` and :meth:`step`.

    Parameters
    ----------
    params : iterable of torch.Tensor
    defaults : dict
        The hyper-parameters, copied into the group.
    """

    def __init__(self, params, defaults: dict):
        params = list(params)
        if not params or not all(isinstance(p, torch.Tensor) for p in params):
            raise TypeError("an optimizer takes a non-empty iterable of tensors")
        self.defaults = dict(defaults)
        self.param_groups = [{"params": params, **self.defaults}]
        self.state: dict = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients (``None``, or zeros in place)."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.detach_()
                    p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state.get(p)
                if not state:
                    state = self.state[p] = self.init_state(p, group)
                state["step"] += 1
                self.update(p, p.grad, state, group)

    def init_state(self, p: torch.Tensor, group: dict) -> dict:
        """A parameter's state before its first update (``step``: torch's float32 CPU 0)."""
        return {"step": torch.tensor(0.0)}

    def update(self, p: torch.Tensor, grad: torch.Tensor, state: dict, group: dict) -> None:
        """Change ``p`` in place from ``grad`` (``state["step"]`` already counts this one)."""
        raise NotImplementedError


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015), as ``torch.optim.Adam``'s single-tensor update (no
    weight decay, no AMSGrad): state ``exp_avg``, ``exp_avg_sq``, ``step``."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        if not lr >= 0:
            raise ValueError(f"lr must be >= 0, got {lr!r}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas!r}")
        if not eps >= 0:
            raise ValueError(f"eps must be >= 0, got {eps!r}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps))

    def init_state(self, p, group):
        return {"step": torch.tensor(0.0),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}

    def update(self, p, grad, state, group):
        beta1, beta2 = group["betas"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = state["step"].item()
        step_size = group["lr"] / (1 - beta1 ** step)
        denom = (exp_avg_sq.sqrt() / (1 - beta2 ** step) ** 0.5).add_(group["eps"])
        p.addcdiv_(exp_avg, denom, value=-step_size)


class RMSprop(Optimizer):
    """RMSProp as ``torch.optim.RMSprop``'s single-tensor update (epsilon added to the root,
    mean square from zero; no weight decay): state ``square_avg``, ``step``, and
    ``momentum_buffer`` / ``grad_avg`` with momentum / centring."""

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 momentum: float = 0.0, centered: bool = False):
        if not lr >= 0:
            raise ValueError(f"lr must be >= 0, got {lr!r}")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
        if not eps >= 0:
            raise ValueError(f"eps must be >= 0, got {eps!r}")
        if not momentum >= 0:
            raise ValueError(f"momentum must be >= 0, got {momentum!r}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, momentum=momentum,
                                      centered=bool(centered)))

    def init_state(self, p, group):
        state = {"step": torch.tensor(0.0),
                 "square_avg": torch.zeros_like(p, memory_format=torch.preserve_format)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if group["centered"]:
            state["grad_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    def update(self, p, grad, state, group):
        alpha = group["alpha"]
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.lerp_(grad, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(group["eps"])
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"]).addcdiv_(grad, avg)
            p.add_(buf, alpha=-group["lr"])
        else:
            p.addcdiv_(grad, avg, value=-group["lr"])


class RMSpropTF(Optimizer):
    """RMSProp with TensorFlow 1's semantics, plain or centred.

    ``ms <- decay ms + (1 - decay) g^2``; centred: ``mg <- decay mg + (1 - decay) g``;
    ``mom <- momentum mom + lr g / sqrt(ms - mg^2 + eps)`` (plain: ``sqrt(ms + eps)``),
    ``theta <- theta - mom``; ``ms`` starts at 1, ``mg`` and ``mom`` at 0
    (``tf.raw_ops.ApplyRMSProp`` / ``ApplyCenteredRMSProp``, TF1's ``rmsprop.py``).

    Parameters
    ----------
    params : iterable of tensors
    lr : float
    decay : float
        Decay of the moving averages (Ape-X: 0.95; IMPALA: 0.99).
    eps : float
        Added under the square root (Ape-X: 1.5e-7; IMPALA: 0.1).
    momentum : float
        Ape-X and IMPALA: none (0).
    centered : bool
        Subtract the mean gradient's square (Ape-X: yes; IMPALA: no).
    """

    def __init__(self, params, lr: float, decay: float, eps: float, momentum: float = 0.0,
                 centered: bool = False):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay!r}")
        if not eps >= 0:
            raise ValueError(f"eps must be >= 0, got {eps!r}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
        super().__init__(params, dict(lr=lr, decay=decay, eps=eps, momentum=momentum,
                                      centered=bool(centered)))

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            for p in params:
                state = self.state.setdefault(p, {})
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["mean_square"] = torch.ones_like(p)
                    if group["centered"]:
                        state["mean_grad"] = torch.zeros_like(p)
                    if group["momentum"]:
                        state["momentum"] = torch.zeros_like(p)
                state["step"] += 1
            ms = [self.state[p]["mean_square"] for p in params]
            decay = group["decay"]
            # one kernel per operation over all tensors: small nets are overhead-bound
            torch._foreach_mul_(ms, decay)
            torch._foreach_addcmul_(ms, grads, grads, value=1.0 - decay)
            if group["centered"]:
                mg = [self.state[p]["mean_grad"] for p in params]
                torch._foreach_mul_(mg, decay)
                torch._foreach_add_(mg, grads, alpha=1.0 - decay)
                denom = torch._foreach_addcmul(ms, mg, mg, value=-1.0)
                torch._foreach_clamp_min_(denom, 0.0)  # ms >= mg^2 up to rounding
            else:
                denom = [m.clone() for m in ms]
            torch._foreach_add_(denom, group["eps"])
            torch._foreach_sqrt_(denom)
            if group["momentum"]:
                mom = [self.state[p]["momentum"] for p in params]
                torch._foreach_mul_(mom, group["momentum"])
                torch._foreach_addcdiv_(mom, grads, denom, value=group["lr"])
                torch._foreach_sub_(params, mom)
            else:
                torch._foreach_addcdiv_(params, grads, denom, value=-group["lr"])
        return None


class CenteredRMSprop(RMSpropTF):
    """Centred :class:`RMSpropTF` with Ape-X's defaults (decay 0.95, epsilon 1.5e-7)."""

    def __init__(self, params, lr: float, decay: float = 0.95, eps: float = 1.5e-7,
                 momentum: float = 0.0):
        super().__init__(params, lr, decay=decay, eps=eps, momentum=momentum, centered=True)


def set_lr(opt: Optimizer, lr: float) -> None:
    """Change the step size of every parameter group (a live control)."""
    for group in opt.param_groups:
        group["lr"] = float(lr)


def retune(opt: Optimizer, lr: float | None, current: float) -> float:
    """The step size after a learner's update call: ``lr`` (set on ``opt``) when given and
    different from ``current``, else ``current``."""
    if lr is None or lr == current:
        return current
    set_lr(opt, lr)
    return float(lr)


def optimizer_arrays(opt: Optimizer, module: nn.Module,
                     prefix: str) -> dict[str, np.ndarray]:
    """The optimizer's per-parameter state as flat arrays in ``module``'s parameter order:
    ``<prefix>step`` (one count per tensor) and one array per state tensor name
    (``exp_avg``, ``mean_square``, ...); tensors without state yet count 0 steps."""
    params = list(module.parameters())
    states = [opt.state.get(p, {}) for p in params]
    names = sorted({k for st in states for k, v in st.items()
                    if k != "step" and torch.is_tensor(v)})
    out = {f"{prefix}step": np.array([float(st.get("step", 0.0)) for st in states])}
    for name in names:  # CPU arrays wherever the learner computes: checkpoints are portable
        out[prefix + name] = torch.cat([
            st[name].detach().reshape(-1).cpu() if name in st else torch.zeros(p.numel())
            for p, st in zip(params, states, strict=True)]).numpy().copy()
    return out


def load_optimizer_arrays(opt: Optimizer, module: nn.Module,
                          arrays: dict[str, np.ndarray], prefix: str) -> None:
    """Inverse of :func:`optimizer_arrays` (tensors with 0 steps keep a fresh state)."""
    params = list(module.parameters())
    steps = np.asarray(arrays[f"{prefix}step"], dtype=np.float64)
    if len(steps) > len(params) == 1 and np.all(steps == steps[0]):
        # the same vector saved as one tensor per layer (Ape-X before its flat modules): the
        # state is laid out alike and one count serves it all
        steps = steps[:1]
    names = [k[len(prefix):] for k in arrays if k.startswith(prefix) and k != f"{prefix}step"]
    total = sum(p.numel() for p in params)
    if len(steps) != len(params) or any(np.size(arrays[prefix + n]) != total for n in names):
        raise ValueError(f"optimizer state for {len(steps)} tensors does not fit this model "
                         f"({len(params)} tensors, {total} parameters)")
    flat = {n: torch.as_tensor(np.asarray(arrays[prefix + n], dtype=np.float32)) for n in names}
    # fused or capturable optimizers keep their step count on the parameters' device (torch's
    # own rule when it makes the state); the others on the CPU
    on_device = any(opt.defaults.get(k) for k in ("fused", "capturable"))
    pos = 0
    for p, count in zip(params, steps, strict=True):
        k = p.numel()
        if count > 0:
            state = {"step": torch.tensor(float(count), device=p.device if on_device else None)}
            state.update({n: flat[n][pos:pos + k].view_as(p).to(p.device, copy=True)
                          for n in names})
            opt.state[p] = state
        pos += k


def adam_state(opt: Adam, module: nn.Module) -> dict[str, np.ndarray]:
    """Adam's moments ``m``, ``v`` (flat, in parameter order; zeros before the first step)
    and ``step`` counts (one per tensor): :func:`optimizer_arrays` under Adam's names."""
    arrays = optimizer_arrays(opt, module, "")
    zeros = np.zeros(sum(p.numel() for p in module.parameters()), dtype=np.float32)
    return {"m": arrays.get("exp_avg", zeros), "v": arrays.get("exp_avg_sq", zeros.copy()),
            "step": arrays["step"]}


def load_adam_state(opt: Adam, module: nn.Module, state: dict) -> None:
    """Inverse of :func:`adam_state`."""
    load_optimizer_arrays(opt, module, {"step": state["step"], "exp_avg": state["m"],
                                        "exp_avg_sq": state["v"]}, "")

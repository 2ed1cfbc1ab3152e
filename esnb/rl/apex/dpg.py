"""Ape-X DPG's learner: an n-step TD critic and a deterministic policy gradient actor.

Horgan et al. 2018, "Distributed Prioritized Experience Replay", section 3.2 and appendix:
the critic ``q(s, a; psi)`` minimises the importance-weighted n-step TD loss

    1/2 (G + discount * q(s_{t+n}, pi(s_{t+n}; phi^-); psi^-) - q(s_t, a_t; psi))^2,

the actor ``pi(s; phi)`` ascends ``q(s, pi(s; phi); psi)`` (Silver et al. 2014, deterministic
policy gradient), its gradient clipped element-wise to [-1, 1]; both use Adam (1e-4 in the
paper) and target copies made every 100 batches. ``|TD error|`` of the critic is the new
priority.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from esnb.device import resolve_device, to_device
from esnb.rl.apex.nets import DPGSpec, dpg_td_errors  # noqa: F401 (re-exported)
from esnb.rl.apex.torch_nets import DPGActor, DPGCritic
from esnb.rl.optim import Adam, load_optimizer_arrays, optimizer_arrays, retune, set_lr


class DPGLearner:
    """Critic, actor, their target copies and two Adam optimisers.

    Parameters
    ----------
    spec : DPGSpec
        Network sizes and action bounds.
    actor_lr, critic_lr : float
        Adam step sizes (paper: 1e-4 both). Overridable per update (live controls).
    target_period : int
        Updates between target copies (paper: 100).
    actor_clip : float
        Element-wise clip of the actor's gradient (paper: 1).
    critic_grad_clip : float, optional
        Global norm clip of the critic's gradient (None: none; the paper names only the
        actor's clip).
    seed : int
        Seeds the initial parameters (drawn on the CPU: the same on every device).
    device : str or torch.device
        Where the networks, the optimizers' state and the batches live (``auto``: CUDA when
        available); :meth:`params`, TD errors and the state come back as CPU numpy.
    """

    def __init__(self, spec: DPGSpec, *, actor_lr: float, critic_lr: float, target_period: int,
                 actor_clip: float, critic_grad_clip: float | None, seed: int, device="cpu"):
        if int(target_period) < 1:
            raise ValueError(f"target_period must be >= 1, got {target_period!r}")
        if not actor_clip > 0:
            raise ValueError(f"actor_clip must be > 0, got {actor_clip!r}")
        self.spec = spec
        self.device = resolve_device(device)
        gen = torch.Generator().manual_seed(int(seed))
        self.actor = DPGActor(spec, gen).to(self.device)
        self.critic = DPGCritic(spec, gen).to(self.device)
        self.actor_target = DPGActor(spec, gen).to(self.device)
        self.critic_target = DPGCritic(spec, gen).to(self.device)
        self.actor_target.load(self.actor.flat)
        self.critic_target.load(self.critic.flat)
        self.actor_target.requires_grad_(False)
        self.critic_target.requires_grad_(False)
        self.actor_opt = Adam(self.actor.parameters(), lr=actor_lr)
        self.critic_opt = Adam(self.critic.parameters(), lr=critic_lr)
        self.actor_lr = float(actor_lr)
        self.critic_lr = float(critic_lr)
        self.target_period = int(target_period)
        self.actor_clip = float(actor_clip)
        self.critic_grad_clip = critic_grad_clip
        self.steps = 0
        self.last_target_copy = 0

    def params(self) -> np.ndarray:
        """``[actor | critic]`` as one float32 vector (actors need both for priorities)."""
        return np.concatenate([self.actor.params(), self.critic.params()])

    def act(self, obs) -> np.ndarray:
        with torch.no_grad():
            x = torch.as_tensor(np.asarray(obs, dtype=np.float32)).to(self.device)
            return self.actor(x).cpu().numpy()

    def update(self, batch: dict, weights, *, actor_lr: float | None = None,
               critic_lr: float | None = None, target_period: int | None = None
               ) -> tuple[np.ndarray, dict[str, Any]]:
        """One critic step and one actor step on a sampled batch; returns the TD errors
        (before the step) and diagnostics."""
        self.actor_lr = retune(self.actor_opt, actor_lr, self.actor_lr)
        self.critic_lr = retune(self.critic_opt, critic_lr, self.critic_lr)
        if target_period is not None:
            self.target_period = int(target_period)
        obs, nxt, act, rew, disc = (to_device(batch[k], self.device) for k in
                                    ("obs", "next_obs", "action", "reward", "discount"))
        act = act.view(len(obs), -1)
        w = to_device(weights, self.device)

        with torch.no_grad():
            target = rew + disc * self.critic_target(nxt, self.actor_target(nxt))
        q = self.critic(obs, act)
        td = target - q
        critic_loss = (w * 0.5 * td.pow(2)).mean()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        if self.critic_grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), self.critic_grad_clip)
        self.critic_opt.step()

        # the policy gradient flows through the critic into the actor only
        self.critic.requires_grad_(False)
        actor_loss = -self.critic(obs, self.actor(obs)).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.critic.requires_grad_(True)
        torch.nn.utils.clip_grad_value_(self.actor.parameters(), self.actor_clip)
        self.actor_opt.step()

        self.steps += 1
        copied = False
        if self.steps - self.last_target_copy >= self.target_period:
            self.actor_target.load(self.actor.flat)  # on the device
            self.critic_target.load(self.critic.flat)
            self.last_target_copy = self.steps
            copied = True
        return td.detach().cpu().numpy().astype(np.float64), {
            "loss": float(critic_loss.detach()), "actor_loss": float(actor_loss.detach()),
            "q_mean": float(q.detach().mean()), "target_copied": copied}

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict, dict[str, np.ndarray]]:
        arrays = {"actor": self.actor.params(), "critic": self.critic.params(),
                  "actor_target": self.actor_target.params(),
                  "critic_target": self.critic_target.params(),
                  **optimizer_arrays(self.actor_opt, self.actor, "actor_opt."),
                  **optimizer_arrays(self.critic_opt, self.critic, "critic_opt.")}
        meta = {"steps": self.steps, "last_target_copy": self.last_target_copy,
                "actor_lr": self.actor_lr, "critic_lr": self.critic_lr,
                "target_period": self.target_period}
        return meta, arrays

    def load_state_dict(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        for name in ("actor", "critic", "actor_target", "critic_target"):
            getattr(self, name).load(arrays[name])
        load_optimizer_arrays(self.actor_opt, self.actor, arrays, "actor_opt.")
        load_optimizer_arrays(self.critic_opt, self.critic, arrays, "critic_opt.")
        self.steps = int(meta["steps"])
        self.last_target_copy = int(meta["last_target_copy"])
        self.target_period = int(meta["target_period"])
        self.actor_lr = float(meta["actor_lr"])
        self.critic_lr = float(meta["critic_lr"])
        set_lr(self.actor_opt, self.actor_lr)
        set_lr(self.critic_opt, self.critic_lr)

"""The baselines of Khadilkar 2023 (EORL, section 4.1), on EORL's network, buffer and budget.

Every baseline is a :class:`~esnb.runners.eorl.learner.MCLearner`: the same Monte-Carlo DQN
(``32 -> 8``, ReLU, lr 0.01), buffer of ``100 x timeout`` transitions, samples of
``min(4096, size)`` and 2 passes per episode, epsilon decaying per episode.

- **VAN** (:class:`~esnb.runners.eorl.learner.MCLearner` with ``n = 1``): one DQN (Mnih et al.
  2015, with the paper's Monte-Carlo targets).
- **PER** (:class:`PERLearner`): prioritised replay (Schaul et al. 2016), ``alpha = 0.6``,
  ``beta`` annealed linearly from 0.4 to 1 over the planned episodes; a sample is drawn with
  replacement by priority, its loss weighted by the normalised importance weights, and the
  sampled items' priorities set to ``|Q(s, a) - G| + 1e-6`` after training (Q before the last
  pass). New transitions enter at the largest priority seen.
- **HER** (:class:`HERLearner`): goal-conditioned input ``[observation, goal]`` (2m on
  BitFlip, 8 on GridNav). The goal buffer holds the distinct terminal states of the 8 best
  episodes so far (by return). Each episode is stored once with the real goal and real
  rewards, and once more for each of ``her_k`` (4) goals drawn from the goal buffer, with the
  rewards the environment's rule gives for that goal (``hindsight_rewards``), cut at the step
  that reaches it. The paper fixes the goal buffer (8 best terminal states) but not how many
  goals relabel an episode: ``her_k = 4`` is the HER paper's choice.
- **CBE** (:class:`CBELearner`): count-based exploration, MBIE-EB (Strehl and Littman 2008):
  the targets are built from ``r + beta / sqrt(1 + N(s, a))`` with ``N`` the visits of
  ``(s, a)`` before this one (unnormalised), ``beta = 1``. Fitness and reported returns use
  the environment's reward.
- **CEM-RL** (:class:`CEMRRLearner`): the paper's round-robin variant of CEM-RL (Pourchot
  and Sigaud 2018). Policies take turns, one per episode. A policy whose return is in the
  bottom half of the latest returns of the population is, with probability 0.5, replaced by
  one "drawn from the best existing policies": a policy of the fitter half, chosen uniformly,
  plus Gaussian noise of variance 1e-3 per parameter (CEM-RL's initial noise); it leaves the
  RL pool. Otherwise the policy joins (stays in) the RL pool. Only pool members train (about
  3/4 of the population). The paper says no more; the draw's details are esnb's choice. A
  Gaussian fitted to the elites' parameters, as CEM-RL proper does, would average
  independently initialised networks (hidden units in unrelated orders) into a useless one.
- **CER** (contrastive experience replay, Khadilkar and Meisheri 2023) is
  :class:`esnb.runners.eorl.cer.CERLearner`, with how esnb reads its paper.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from esnb.replay import PrioritizedReplayBuffer
from esnb.rl.constants import (
    PER_EPS,
)
from esnb.rl.eorl.episodes import Episode, Sample
from esnb.rl.eorl.mc_dqn import mc_returns
from esnb.runners.eorl.learner import MCLearner


class PERLearner(MCLearner):
    """One Monte-Carlo DQN with proportional prioritised replay (Schaul et al. 2016).

    Parameters
    ----------
    alpha : float
        Priority exponent.
    beta0 : float
        Importance-sampling exponent at the first episode, annealed linearly to 1 at the last
        planned one.
    **kwargs
        As :class:`~esnb.runners.eorl.learner.MCLearner` (``n`` is 1).
    """

    algorithm = "PER"

    def __init__(self, env: str, env_kwargs: dict | None, episodes: int, seed: int, *,
                 alpha: float, beta0: float, **kwargs):
        self.alpha, self.beta0 = float(alpha), float(beta0)
        kwargs.pop("n", None)
        super().__init__(env, env_kwargs, episodes, seed, n=1, **kwargs)
        self.beta = self.beta0

    def _make_buffer(self):
        return PrioritizedReplayBuffer(self.capacity, alpha=self.alpha, beta=self.beta0,
                                       eps=PER_EPS, spec={"sid": "int64", "action": "int64",
                                                          "ret": "float64"})

    def beta_at(self, episode: int) -> float:
        """``beta`` during ``episode`` (1-based): 0.4 at the first, 1 at the last planned."""
        frac = 0.0 if self.episodes == 1 else (episode - 1) / (self.episodes - 1)
        return self.beta0 + (1.0 - self.beta0) * min(1.0, max(0.0, frac))

    def sample(self, member: int, size: int) -> Sample:
        self.beta = self.beta_at(self.episode + 1)
        batch, ids, weights = self.buffer.sample(size, self.rngs["sample"], beta=self.beta)
        return Sample(member, batch["sid"], batch["action"], batch["ret"],
                      weights.astype(np.float64), ids)

    def after_fit(self, samples: list[Sample], q_of) -> None:
        for s in samples:
            err = q_of(s) - s.returns
            self.buffer.update_priorities(s.ids, self.buffer.from_td(err))

    def run_episode(self, controls=None):
        row = super().run_episode(controls)
        row["beta"] = self.beta
        return row


class HERLearner(MCLearner):
    """One goal-conditioned Monte-Carlo DQN with hindsight relabelling (Andrychowicz 2017).

    Parameters
    ----------
    her_k : int
        Goals drawn from the goal buffer to relabel each episode.
    goal_buffer : int
        Terminal states kept (of the best episodes).
    **kwargs
        As :class:`~esnb.runners.eorl.learner.MCLearner` (``n`` is 1).
    """

    algorithm = "HER"

    def __init__(self, env: str, env_kwargs: dict | None, episodes: int, seed: int, *,
                 her_k: int, goal_buffer: int, **kwargs):
        self.her_k, self.goal_capacity = int(her_k), int(goal_buffer)
        kwargs.pop("n", None)
        super().__init__(env, env_kwargs, episodes, seed, n=1, **kwargs)
        self.desired_goal = np.asarray(self.core.desired_goal, dtype=np.float32).reshape(-1)
        self._goal = self.desired_goal
        self.goals: list[tuple[float, np.ndarray]] = []  # (best return, terminal state)

    @property
    def input_dim(self) -> int:
        return 2 * self.obs_dim

    def features(self, obs: np.ndarray) -> np.ndarray:
        return np.concatenate([np.asarray(obs, dtype=np.float32).reshape(-1), self._goal])

    def _remember_goal(self, ret: float, state: np.ndarray) -> None:
        for k, (r, g) in enumerate(self.goals):
            if np.array_equal(g, state):
                self.goals[k] = (max(r, ret), g)
                break
        else:
            self.goals.append((ret, state))
        # stable sort: among equal returns the earlier goal stays
        self.goals.sort(key=lambda item: -item[0])
        del self.goals[self.goal_capacity:]

    def store(self, ep: Episode, controls: dict) -> None:
        super().store(ep, controls)  # the real goal (the features used while acting)
        obs = np.asarray(ep.obs, dtype=np.float32).reshape(len(ep.obs), -1)
        self._remember_goal(ep.ret, obs[-1].copy())
        k = min(self.her_k, len(self.goals))
        if k == 0:
            return
        picks = self.rngs["sample"].choice(len(self.goals), size=k, replace=False)
        for p in picks:
            goal = self.goals[int(p)][1]
            rewards, _ = self.core.hindsight_rewards(ep.obs, goal)
            t = len(rewards)
            rows = np.concatenate([obs[:t], np.broadcast_to(goal, (t, len(goal)))], axis=1)
            self.buffer.add({"sid": self.states.ids(rows), "action": ep.actions[:t],
                             "ret": mc_returns(rewards)})

    def state_dict(self):
        meta, arrays = super().state_dict()
        meta["goal_returns"] = [float(r) for r, _ in self.goals]
        arrays["goals"] = np.array([g for _, g in self.goals], dtype=np.float32).reshape(
            len(self.goals), self.obs_dim)
        return meta, arrays

    def load_state_dict(self, meta, arrays):
        super().load_state_dict(meta, arrays)
        self.goals = [(float(r), np.asarray(g, dtype=np.float32).copy())
                      for r, g in zip(meta["goal_returns"], arrays["goals"])]


class CBELearner(MCLearner):
    """One Monte-Carlo DQN with the MBIE-EB count bonus ``beta / sqrt(1 + N(s, a))``.

    ``run_episode(controls)`` reads ``beta`` (default 1) from the controls.
    """

    algorithm = "CBE"

    def __init__(self, env: str, env_kwargs: dict | None, episodes: int, seed: int, **kwargs):
        kwargs.pop("n", None)
        super().__init__(env, env_kwargs, episodes, seed, n=1, **kwargs)
        self.visits = np.zeros(0, dtype=np.int64)  # N(s, a), flat index sid * A + a
        self.last_bonus = 0.0

    def training_rewards(self, ep: Episode, controls: dict) -> np.ndarray:
        beta = float(controls["beta"])
        a_n = self.n_actions
        need = self.states.size * a_n
        if len(self.visits) < need:
            self.visits = np.concatenate([self.visits,
                                          np.zeros(need - len(self.visits), np.int64)])
        keys = ep.sids * a_n + ep.actions
        # visits before each step = visits before the episode + earlier steps of this episode
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        first = np.r_[0, np.flatnonzero(np.diff(sorted_keys)) + 1]
        group_start = np.repeat(first, np.diff(np.r_[first, len(keys)]))
        earlier = np.empty(len(keys), dtype=np.int64)
        earlier[order] = np.arange(len(keys)) - group_start
        before = self.visits[keys] + earlier
        np.add.at(self.visits, keys, 1)
        self.last_bonus = float((beta / np.sqrt(1.0 + before)).sum())
        return ep.rewards + beta / np.sqrt(1.0 + before)

    def run_episode(self, controls=None):
        row = super().run_episode(controls)
        row["bonus"] = self.last_bonus
        return row

    def state_dict(self):
        meta, arrays = super().state_dict()
        arrays["visits"] = self.visits.copy()
        return meta, arrays

    def load_state_dict(self, meta, arrays):
        super().load_state_dict(meta, arrays)
        self.visits = np.asarray(arrays["visits"], dtype=np.int64).copy()


class CEMRRLearner(MCLearner):
    """The paper's round-robin CEM-RL: ``n`` policies in turn, bottom-half ones resampled.

    Parameters
    ----------
    n : int
        Policies.
    replace_prob : float
        Chance that a bottom-half policy is replaced.
    noise : float
        Variance of the Gaussian noise added to the elite a new policy is drawn from.
    **kwargs
        As :class:`~esnb.runners.eorl.learner.MCLearner`.
    """

    algorithm = "CEM-RL"

    def __init__(self, env: str, env_kwargs: dict | None, episodes: int, seed: int, *, n: int,
                 replace_prob: float, noise: float, **kwargs):
        self.replace_prob, self.noise = float(replace_prob), float(noise)
        super().__init__(env, env_kwargs, episodes, seed, n=n, **kwargs)
        self.last_return = np.full(self.n, np.nan)
        self.in_pool = np.ones(self.n, dtype=bool)
        self.replacements = 0

    def choose_member(self, epsilon: float) -> int:
        return self.episode % self.n

    def trained_members(self) -> np.ndarray:
        return self.in_pool.copy()

    def best_member(self) -> int:
        r = np.where(np.isnan(self.last_return), -np.inf, self.last_return)
        return int(np.argmax(r))

    def after_episode(self, e, member, ep, epsilon, controls) -> dict[str, Any]:
        rng = self.rngs["evo"]
        self.last_return[member] = ep.ret
        seen = ~np.isnan(self.last_return)
        # bottom half: at least half of the evaluated policies did strictly better
        bottom = seen.sum() >= 2 and np.mean(self.last_return[seen] > ep.ret) >= 0.5
        replaced = False
        u = rng.random()
        if bottom and u < self.replace_prob:
            others = np.flatnonzero(seen & (np.arange(self.n) != member))
            order = others[np.argsort(-self.last_return[others], kind="stable")]
            elites = order[:max(1, math.ceil(self.n / 2))]
            parent = int(elites[rng.integers(len(elites))])
            theta = self.net.flat(parent).astype(np.float64)
            child = theta + math.sqrt(self.noise) * rng.standard_normal(len(theta))
            self.net.set_flat(member, child.astype(np.float32))
            self.net.reset_optimizer(member)
            self.in_pool[member] = False
            self.last_return[member] = np.nan  # not evaluated yet
            self.replacements += 1
            replaced = True
        else:
            self.in_pool[member] = True
        return {"replaced": replaced, "pool": int(self.in_pool.sum()),
                "replacements": self.replacements}

    def state_dict(self):
        meta, arrays = super().state_dict()
        arrays["last_return"] = self.last_return.copy()
        arrays["in_pool"] = self.in_pool.copy()
        meta["replacements"] = self.replacements
        return meta, arrays

    def load_state_dict(self, meta, arrays):
        super().load_state_dict(meta, arrays)
        self.last_return = np.asarray(arrays["last_return"], dtype=np.float64).copy()
        self.in_pool = np.asarray(arrays["in_pool"], dtype=bool).copy()
        self.replacements = int(meta["replacements"])

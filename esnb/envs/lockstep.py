"""Several episodes of one task stepped together, their policies one stacked product per step.

ES's worker task runs the mirrored pairs it was given; one at a time, each step pays a policy
forward of ~10 ufunc calls for a single observation. Here the episodes advance in lock step:
each step gathers the live episodes' observations into rows, runs
:class:`esnb.nets.batch_policy.BatchPolicy` once, and steps every live environment with its
row. A finished episode leaves its slot to the next waiting one (or the last live slot moves
into it), so the live episodes are always slots ``0..k-1``. Every episode is the one
:func:`esnb.envs.rollout.run_episode` would run with the same policy, seed and flags: the same
actions bit for bit, the same :class:`Episode` (``tests/test_lockstep.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from esnb.envs.rollout import Episode, FastEnv, finish_episode
from esnb.nets.batch_policy import BatchPolicy


@dataclass
class EpisodeSpec:
    """One episode to run: its parameters (float32, or a function making them when the episode
    starts: a task's perturbed vectors need not all exist at once), reset seed, whether its
    observations are summed, and an optional ``perturb(action) -> action`` (exploration noise
    with its own generator, given the raw output: it applies the bounds itself)."""

    params: np.ndarray | Callable[[], np.ndarray]
    seed: int
    collect_obs: bool = False
    perturb: Callable | None = None


class _Live:
    """A running episode's loop state (what :func:`run_episode` keeps in locals)."""

    __slots__ = ("index", "env", "step", "obs", "total", "t", "finite", "terminated",
                 "truncated", "buf", "perturb")

    def __init__(self, index: int, env: FastEnv, spec: EpisodeSpec):
        self.index, self.env, self.perturb = index, env, spec.perturb
        self.step = env.core.step
        self.obs, _ = env.core.reset(seed=int(spec.seed))
        self.total, self.t, self.finite = 0.0, 0, True
        self.terminated = self.truncated = False
        self.buf = env.obs_buffer() if spec.collect_obs else None


def run_lockstep(envs: list[FastEnv], policy: BatchPolicy,
                 episodes: list[EpisodeSpec]) -> list[Episode]:
    """Run ``episodes`` in lock step, at most ``len(envs)`` at once (``policy.width`` slots).

    Parameters
    ----------
    envs : list of FastEnv
        One per slot, all of the same configuration.
    policy : BatchPolicy
        Its slots get each episode's parameters as it starts.
    episodes : list of EpisodeSpec

    Returns
    -------
    list of Episode
        In the order of ``episodes``.
    """
    width = min(len(envs), policy.width)
    limit = envs[0].limit
    discrete = policy.spec.discrete
    rows = np.zeros((width, policy.spec.obs_dim), dtype=np.float64)
    # each observation lands in its row as it comes (an image-shaped one as well: no ravel)
    shaped = rows.reshape((width,) + tuple(envs[0].observation_space.shape))
    isfinite = math.isfinite
    results: list[Episode | None] = [None] * len(episodes)
    live: list[_Live] = []
    waiting = iter(range(len(episodes)))
    free = list(envs[:width])

    def start(slot: int) -> bool:
        i = next(waiting, None)
        if i is None:
            return False
        params = episodes[i].params
        policy.load(slot, params() if callable(params) else params)
        state = _Live(i, free.pop(), episodes[i])
        if slot == len(live):
            live.append(state)
        else:
            live[slot] = state
        return True

    # exploration noise goes on the raw outputs, the bounds after it (perturb clips)
    noisy = any(e.perturb is not None for e in episodes)
    while len(live) < width and start(len(live)):
        pass
    while live:
        k = len(live)
        for j, ep in enumerate(live):
            shaped[j] = ep.obs
            if ep.buf is not None:
                ep.buf[ep.t] = rows[j]
        actions = policy.act(rows, k, clip=not noisy)
        done = []
        for j, ep in enumerate(live):
            a = int(actions[j]) if discrete else actions[j]
            if ep.perturb is not None:
                a = ep.perturb(a)
            elif noisy and not discrete:
                a = policy.clip(a)
            ep.obs, r, ep.terminated, ep.truncated, _ = ep.step(a)
            ep.t += 1
            r = float(r)
            if not isfinite(r):
                ep.finite = False
                done.append(j)
                continue
            ep.total += r
            if ep.terminated or ep.truncated or ep.t >= limit:
                done.append(j)
        for j in reversed(done):  # from the highest slot: moves never touch a finished one
            ep = live[j]
            results[ep.index] = finish_episode(ep.total, ep.t, limit, ep.terminated,
                                               ep.truncated, ep.finite, ep.obs, ep.buf)
            free.append(ep.env)
            if not start(j):
                last = live.pop()
                if j < len(live):
                    policy.move(len(live), j)
                    live[j] = last
    return results

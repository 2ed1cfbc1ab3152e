"""AES-RL's and CEM-RL's worker-side tasks: an individual's training and episode, the mean's
evaluation, and sampling from the shared replay (Lee et al. 2020, Algorithms 1 and 2;
Pourchot and Sigaud 2019).

- :func:`evaluate_individual` runs one episode of an individual (exploration noise ``a_noise``
  on its actions) on :func:`esnb.envs.rollout.run_episode` and pushes the transitions into the
  shared replay in one call. For an RL individual it first trains the actor against the critic
  weights it was given, on observations sampled from the replay in chunks (the next chunk is
  in flight while one trains). A replay that is gone while pushing does not lose the result:
  the fitness comes back with ``replay_ok=False`` (the transitions are counted as lost).
- :func:`evaluate_mean` runs ``m`` noise-free episodes of the mean (``f(mu)``).

The replay is reached through :func:`esnb.runners.executor.attach` on the handle the runner
passes (:meth:`~esnb.runners.replay_service.ReplayService.info`): its calls return futures in
this process and on a cluster alike, so every task runs the same code inline and on Dask.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from esnb.envs.rollout import (
    Episode,
    FastEnv,
    cached_env,
    run_episode,
    scaled_noise,
    uniform_actions,
)
from esnb.nets.policy import PolicySpec
from esnb.replay.server import is_loss, replaced_check, wait_result
from esnb.runners.executor import attach

#: observations per replay call when an RL individual trains (batches x batch size)
SAMPLE_CHUNK = 250
#: seconds before a replay call counts as failed (a dead replay's calls can hang until then)
CALL_TIMEOUT = 15.0


@dataclass(frozen=True)
class TaskConfig:
    """What every AES-RL / CEM-RL task shares (small; sent with each task).

    Attributes
    ----------
    env_id : str
    spec : PolicySpec
        The actor's layout (:func:`esnb.rl.td3.actor.actor_spec`).
    td3 : tuple of (key, value)
        :class:`~esnb.rl.td3.config.TD3Config` fields as a hashable tuple.
    max_episode_steps : int, optional
    env_kwargs : tuple of (key, value)
    sample_chunk : int
        Batches per replay call while an RL individual trains.
    """

    env_id: str
    spec: PolicySpec
    td3: tuple = ()
    max_episode_steps: int | None = None
    env_kwargs: tuple = ()
    sample_chunk: int = SAMPLE_CHUNK

    def env(self) -> FastEnv:
        """This thread's environment (made once, reset with a seed per episode)."""
        return cached_env(self.env_id, self.max_episode_steps, self.env_kwargs)

    @property
    def batch_size(self) -> int:
        return int(dict(self.td3)["batch_size"])

    def td3_config(self):
        from esnb.rl.td3.config import TD3Config

        return TD3Config.from_dict(dict(self.td3))


def sample_chunks(handle, batch_size: int, total: int, chunk: int,
                  fields=("obs",)) -> Iterator[dict[str, np.ndarray]]:
    """Yield ``{field: [k, B, ...]}`` chunks from the replay until ``total`` batches; the next
    call is in flight while the caller uses a chunk. Stops early if the replay has none."""
    replay, replaced = attach(handle), replaced_check(handle)
    left = int(total)
    nxt = replay.sample(batch_size, min(chunk, left)) if left > 0 else None
    while left > 0 and nxt is not None:
        data = wait_result(nxt, CALL_TIMEOUT, replaced)
        if data is None:
            return
        left -= len(data["ids"])
        nxt = replay.sample(batch_size, min(chunk, left)) if left > 0 else None
        yield {f: data["batch"][f] for f in fields}


def episode(cfg: TaskConfig, actor_flat: np.ndarray, seed: int, a_noise: float,
            random_actions: bool = False, record: bool = False) -> Episode:
    """One episode of the TD3 actor ``actor_flat`` from ``reset(seed)``.

    Actions get ``a_noise * half-range * N(0, 1)`` and are clipped to the bounds (Algorithm 2);
    ``random_actions`` draws them uniformly instead. Both draw from a generator seeded by the
    episode's seed.
    """
    from esnb.rl.td3.actor import NumpyTD3Actor

    actor = NumpyTD3Actor(cfg.spec, actor_flat)  # act() returns a fresh array: noise adds in place
    rng = np.random.default_rng([int(seed), 7])
    if random_actions:
        policy = uniform_actions(actor.low, actor.high, rng)
    elif a_noise:
        policy = scaled_noise(actor.act, np.float32(a_noise) * actor.half, actor.low,
                              actor.high, rng)
    else:
        policy = actor.act
    return run_episode(cfg.env(), policy, int(seed), record=record)


def _train_rl(cfg: TaskConfig, z: np.ndarray, replay, rl_steps: int,
              critic: np.ndarray) -> tuple[np.ndarray, dict]:
    """An RL individual's actor after ``rl_steps`` Adam steps against the published critic."""
    import torch

    from esnb.rl.td3.learner import train_actor
    from esnb.rl.td3.nets import critic_from_flat

    torch.set_num_threads(1)  # on a driver running CEM-RL serial too (measured ~10x)
    td3 = cfg.td3_config()
    net = critic_from_flat(cfg.spec, td3, critic)
    chunks = (c["obs"] for c in sample_chunks(replay, td3.batch_size, int(rl_steps),
                                              cfg.sample_chunk))
    return train_actor(cfg.spec, td3, z, net, chunks, int(rl_steps))


def evaluate_individual(cfg: TaskConfig, z: np.ndarray, seed: int, a_noise: float, replay,
                        rl_steps: int = 0, critic: np.ndarray | None = None,
                        critic_version: int = -1, random_actions: bool = False
                        ) -> dict[str, Any]:
    """Train (an RL individual: ``rl_steps > 0``) and evaluate one individual; push its
    transitions.

    Parameters
    ----------
    z : array
        The individual's flat actor.
    seed : int
        The episode's seed (also seeds its exploration noise).
    replay
        The replay's handle (:meth:`ReplayService.info`).
    rl_steps : int
        Actor steps against ``critic`` (the published flat twin critic) before the episode.

    Returns
    -------
    dict
        ``return``, ``length``, ``terminated``, ``finite``; ``z`` (the trained actor of an RL
        individual, else None); ``actor_steps``, ``actor_loss_first/last``,
        ``critic_version``; ``replay_ok`` and ``stored``, ``replay`` (the replay's reply to
        the push: its size, inserted count and generation, or None); ``train_seconds``,
        ``seconds``.
    """
    t0 = time.perf_counter()
    out: dict[str, Any] = {"z": None, "actor_steps": 0, "critic_version": -1,
                           "actor_loss_first": float("nan"), "actor_loss_last": float("nan")}
    actor = np.asarray(z, dtype=np.float32)
    if rl_steps > 0:
        actor, info = _train_rl(cfg, actor, replay, rl_steps, critic)
        out.update(z=actor, actor_steps=info["steps"], critic_version=int(critic_version),
                   actor_loss_first=info["actor_loss_first"],
                   actor_loss_last=info["actor_loss_last"])
    out["train_seconds"] = time.perf_counter() - t0
    ep = episode(cfg, actor, seed, a_noise, random_actions, record=True)
    out.update({"return": ep.ret, "length": ep.length, "terminated": ep.terminated,
                "finite": ep.finite, "replay_ok": True, "stored": 0, "replay": None})
    if ep.transitions is not None:
        # float32 as the replay stores them: half the bytes sent to the replay's worker
        trans = {k: np.asarray(v, dtype=np.float32) for k, v in ep.transitions.items()}
        try:
            out["replay"] = wait_result(attach(replay).add(trans), CALL_TIMEOUT,
                                        replaced_check(replay))
            out["stored"] = int(out["replay"]["stored"])
        except Exception as exc:  # the replay's worker is gone: keep the fitness
            if not is_loss(exc):
                raise
            out["replay_ok"] = False
    out["seconds"] = time.perf_counter() - t0
    return out


def evaluate_mean(cfg: TaskConfig, mu: np.ndarray, seeds) -> dict[str, Any]:
    """``f(mu)``: noise-free episodes of the mean, one per seed (not stored in the replay)."""
    t0 = time.perf_counter()
    mu = np.asarray(mu, dtype=np.float32)
    eps = [episode(cfg, mu, int(s), 0.0) for s in seeds]
    lengths = np.asarray([e.length for e in eps])
    return {"returns": np.asarray([e.ret for e in eps]), "lengths": lengths,
            "finite": np.asarray([e.finite for e in eps]), "steps": int(lengths.sum()),
            "seconds": time.perf_counter() - t0}

"""AES-RL and CEM-RL on workers: individuals' episodes, RL individuals' actor training, the
mean's evaluation, and the shared critic as a Dask actor.

Lee et al. 2020 (AES-RL), Algorithms 1 and 2; Pourchot and Sigaud 2019 (CEM-RL).

- :func:`evaluate_individual` runs one episode of an individual (exploration noise
  ``a_noise`` on its actions) and pushes the transitions into the shared replay in one call.
  For an RL individual it first trains the actor against the critic weights it was given,
  on observations sampled from the replay in chunks (the next chunk is in flight while one
  trains). A replay that is gone while pushing does not lose the result: the fitness comes
  back with ``replay_ok=False`` (the transitions are counted as lost).
- :func:`evaluate_mean` runs ``m`` noise-free episodes of the mean (``f(mu)``).
- :class:`CriticServer` holds the :class:`~esnb.rl.td3.CriticLearner`; each
  :meth:`CriticServer.train` call makes a chunk of updates on batches it samples from the
  replay actor itself and returns the learner's whole state (weights to publish, and what is
  needed to recreate the critic if its worker dies).

Every function also runs in-process with a local :class:`~esnb.replay.remote.ReplayServer` in
place of the replay's address (CEM-RL serial).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from esnb.policies.spec import PolicySpec
from esnb.replay.remote import attach, is_loss
from esnb.runners.es.tasks import RolloutConfig, get_env

#: observations per replay call when an RL individual trains (batches x batch size)
SAMPLE_CHUNK = 250


@dataclass(frozen=True)
class AESConfig:
    """What every AES-RL / CEM-RL task shares (small; sent with each task).

    Attributes
    ----------
    env_id : str
    spec : PolicySpec
        The actor's layout (:func:`esnb.rl.td3.actor_spec`).
    td3 : tuple of (key, value)
        :class:`~esnb.rl.td3.TD3Config` as a hashable tuple.
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

    @property
    def rollout(self) -> RolloutConfig:
        return RolloutConfig(self.env_id, self.spec, max_episode_steps=self.max_episode_steps,
                             env_kwargs=self.env_kwargs)

    def td3_config(self):
        from esnb.rl.td3 import TD3Config

        return TD3Config.from_dict(dict(self.td3))


# -- the replay, remote or local ------------------------------------------------------------
_local = threading.local()


def _replay(handle):
    """A replay to call: ``attach`` to ``{"address", "key"}`` (cached), or a local server."""
    if not isinstance(handle, dict):
        return handle
    cache = getattr(_local, "replays", None)
    if cache is None:
        cache = _local.replays = {}
    key = (handle["address"], handle["key"])
    if key not in cache:
        cache.clear()  # an older generation of the replay is gone
        cache[key] = attach(handle)
    return cache[key]


#: seconds before a replay call counts as failed (a dead replay's calls can hang until then)
CALL_TIMEOUT = 15.0


def _result(value, timeout: float = CALL_TIMEOUT):
    """The value of an actor call (an ActorFuture), or a local call's value itself."""
    return value.result(timeout=timeout) if hasattr(value, "result") else value


def sample_chunks(handle, batch_size: int, total: int, chunk: int,
                  fields=("obs",)) -> Iterator[dict[str, np.ndarray]]:
    """Yield ``{field: [k, B, ...]}`` chunks from the replay until ``total`` batches; the next
    call is in flight while the caller uses a chunk. Stops early if the replay has none."""
    replay = _replay(handle)
    left = int(total)
    nxt = replay.sample(batch_size, min(chunk, left)) if left > 0 else None
    while left > 0 and nxt is not None:
        data = _result(nxt)
        if data is None:
            return
        k = len(data["ids"])
        left -= k
        nxt = replay.sample(batch_size, min(chunk, left)) if left > 0 else None
        yield {f: data["batch"][f] for f in fields}


# -- episodes -------------------------------------------------------------------------------
def run_transitions(cfg: AESConfig, actor_flat: np.ndarray, seed: int, a_noise: float,
                    random_actions: bool = False, record: bool = True) -> dict[str, Any]:
    """One episode of the TD3 actor ``actor_flat`` from ``reset(seed)``.

    Actions get ``a_noise * half-range * N(0, 1)`` and are clipped to the bounds (Algorithm 2);
    ``random_actions`` draws them uniformly instead. With ``record`` the transitions come back
    as float32 arrays (``done`` is termination: a time limit is not one).
    """
    from esnb.rl.td3_actor import NumpyTD3Actor

    env = get_env(cfg.rollout)
    core, limit = env.core, env.limit
    actor = NumpyTD3Actor(cfg.spec, actor_flat)
    rng = np.random.default_rng([int(seed), 7])
    scale = np.float32(a_noise) * actor.half
    low, high = actor.low, actor.high
    obs_dim, act_dim = cfg.spec.obs_dim, cfg.spec.act_dim
    if record:
        obs_buf = np.empty((limit + 1, obs_dim), np.float32)
        act_buf = np.empty((limit, act_dim), np.float32)
        rew_buf = np.empty(limit, np.float32)
    obs, _ = core.reset(seed=int(seed))
    step, act = core.step, actor.act
    total, t, terminated, finite = 0.0, 0, False, True
    while t < limit:
        if record:
            obs_buf[t] = obs
        if random_actions:
            a = rng.uniform(low, high).astype(np.float32)
        else:
            a = act(obs)
            if a_noise:
                a += scale * rng.standard_normal(act_dim, dtype=np.float32)
                np.clip(a, low, high, out=a)
        obs, r, terminated, truncated, _ = step(a)
        r = float(r)
        if record:
            act_buf[t] = a
            rew_buf[t] = r
        t += 1
        if not math.isfinite(r):
            finite = False
            break
        total += r
        if terminated or truncated:
            break
    if finite and not np.all(np.isfinite(obs)):
        finite = False
    out = {"return": total, "length": t, "terminated": bool(terminated), "finite": finite}
    if record and finite:
        obs_buf[t] = obs
        done = np.zeros(t, np.float32)
        done[-1] = float(terminated)
        out["transitions"] = {"obs": obs_buf[:t].copy(), "action": act_buf[:t].copy(),
                              "reward": rew_buf[:t].copy(), "next_obs": obs_buf[1:t + 1].copy(),
                              "done": done}
    return out


def evaluate_individual(cfg: AESConfig, z: np.ndarray, seed: int, a_noise: float,
                        replay, rl_steps: int = 0, critic: np.ndarray | None = None,
                        critic_version: int = -1, random_actions: bool = False,
                        batch_size: int = 100) -> dict[str, Any]:
    """Train (an RL individual: ``rl_steps > 0``) and evaluate one individual; push its
    transitions.

    Parameters
    ----------
    z : array
        The individual's flat actor.
    seed : int
        The episode's seed (also seeds its exploration noise).
    replay : dict or ReplayServer
        The replay's ``RemoteReplay.info()`` (or a local server).
    rl_steps : int
        Actor steps against ``critic`` (the published flat twin critic) before the episode.

    Returns
    -------
    dict
        ``return``, ``length``, ``terminated``, ``finite``; ``z`` (the trained actor of an RL
        individual, else None); ``actor_steps``, ``actor_loss_first/last``,
        ``critic_version``; ``replay_ok`` and ``stored``; ``train_seconds``, ``seconds``.
    """
    t0 = time.perf_counter()
    out: dict[str, Any] = {"z": None, "actor_steps": 0, "critic_version": -1,
                           "actor_loss_first": float("nan"), "actor_loss_last": float("nan")}
    actor = np.asarray(z, dtype=np.float32)
    if rl_steps > 0:
        import torch

        from esnb.rl.td3 import critic_from_flat, train_actor

        torch.set_num_threads(1)  # on a driver running CEM-RL serial too (measured ~10x)
        td3 = cfg.td3_config()
        net = critic_from_flat(cfg.spec, td3, critic)
        chunks = (c["obs"] for c in sample_chunks(replay, batch_size, int(rl_steps),
                                                  cfg.sample_chunk))
        actor, info = train_actor(cfg.spec, td3, actor, net, chunks, int(rl_steps))
        out.update(z=actor, actor_steps=info["steps"], critic_version=int(critic_version),
                   actor_loss_first=info["actor_loss_first"],
                   actor_loss_last=info["actor_loss_last"])
    out["train_seconds"] = time.perf_counter() - t0
    ep = run_transitions(cfg, actor, seed, a_noise, random_actions)
    trans = ep.pop("transitions", None)
    out.update(ep)
    out["replay_ok"], out["stored"] = True, 0
    if trans is not None:
        try:
            res = _result(_replay(replay).add(trans))
            out["stored"] = int(res["stored"])
        except Exception as exc:  # the replay's worker is gone: keep the fitness
            if not is_loss(exc):
                raise
            out["replay_ok"] = False
    out["seconds"] = time.perf_counter() - t0
    return out


def evaluate_mean(cfg: AESConfig, mu: np.ndarray, seeds) -> dict[str, Any]:
    """``f(mu)``: noise-free episodes of the mean, one per seed (not stored in the replay)."""
    t0 = time.perf_counter()
    returns, lengths, finite = [], [], []
    for s in seeds:
        ep = run_transitions(cfg, np.asarray(mu, dtype=np.float32), int(s), 0.0, record=False)
        returns.append(ep["return"])
        lengths.append(ep["length"])
        finite.append(ep["finite"])
    return {"returns": np.asarray(returns), "lengths": np.asarray(lengths),
            "finite": np.asarray(finite), "steps": int(np.sum(lengths)),
            "seconds": time.perf_counter() - t0}


# -- the critic actor -----------------------------------------------------------------------
class CriticServer:
    """The shared critic as a Dask actor (plain Python: it runs in-process too).

    Parameters
    ----------
    spec : PolicySpec
    td3 : dict
        :class:`~esnb.rl.td3.TD3Config` as a dict.
    seed : int
    state : dict of arrays, optional
        A :meth:`~esnb.rl.td3.CriticLearner.state_dict` to continue from (after a loss).
    """

    def __init__(self, spec: PolicySpec, td3: dict, seed: int = 0, state: dict | None = None):
        import torch

        from esnb.rl.td3 import CriticLearner, TD3Config

        torch.set_num_threads(1)
        self.learner = CriticLearner(spec, TD3Config.from_dict(td3), seed)
        if state is not None:
            self.learner.load_state_dict(state)

    def train(self, replay, n_updates: int, target_policies, chunk: int = 250) -> dict[str, Any]:
        """``n_updates`` critic updates, split evenly over ``target_policies`` in turn (AES-RL:
        one, the mean; CEM-RL: the RL individuals, as its ``actor_steps // n_rl`` each).

        Returns the learner's state (publish ``state["critic"]``), ``updates`` made (fewer if
        the replay had too little), loss and Q statistics and where the time went.
        """
        t0 = time.perf_counter()
        policies = [np.asarray(p, dtype=np.float32) for p in target_policies]
        n = int(n_updates)
        shares = [n // len(policies) + (1 if i < n % len(policies) else 0)
                  for i in range(len(policies))]
        bs = self.learner.config.batch_size
        done, losses, qs, wait = 0, [], [], 0.0
        fields = ("obs", "action", "reward", "next_obs", "done")
        for policy, share in zip(policies, shares):
            if share <= 0:
                continue
            self.learner.set_target_policy(policy)
            it = sample_chunks(replay, bs, share, chunk, fields)
            while True:
                tw = time.perf_counter()
                data = next(it, None)
                wait += time.perf_counter() - tw
                if data is None:
                    break
                stats = self.learner.train(data)
                done += stats["updates"]
                losses.append(stats["critic_loss"] * stats["updates"])
                qs.append(stats["q_mean"] * stats["updates"])
        version, _ = self.learner.publish()
        return {"state": self.learner.state_dict(), "updates": done, "version": version,
                "total_updates": self.learner.updates,
                "critic_loss": float(np.sum(losses) / done) if done else float("nan"),
                "q_mean": float(np.sum(qs) / done) if done else float("nan"),
                "seconds": time.perf_counter() - t0, "wait_seconds": wait}

    def state(self) -> dict[str, np.ndarray]:
        return self.learner.state_dict()


def train_run(config: dict) -> dict:
    """A whole CEM-RL run inside one task (serial CEM-RL as "one worker", sweeps).

    ``config`` holds :class:`esnb.CEMRL` arguments plus ``budget`` (e.g.
    ``{"env_steps": 5e4}``); returns the history rows, wall time and the final counters.
    """
    from esnb.runners.cemrl import CEMRL

    config = dict(config)
    budget = config.pop("budget")
    t0 = time.perf_counter()
    runner = CEMRL(**config, client=False)
    runner.start(**budget).wait()
    return {"history": runner.records, "wall_time": time.perf_counter() - t0,
            "progress": runner._progress(), "final": runner.summary()}

"""Where AES-RL's and CEM-RL's shared parts live: the replay and the critic, on a Dask cluster
or in this process.

- :class:`RemoteCritic` owns the :class:`~esnb.workers.aes.CriticServer` actor: created on a
  worker of its own (not the replay's), it keeps the learner's latest full state (every
  :meth:`~esnb.workers.aes.CriticServer.train` returns it), so when the critic's worker dies
  it is recreated on a live worker from that state (losing at most the chunk in progress,
  which is counted).
- :class:`InlineCritic` / :class:`InlineReplay`: the same interfaces in this process (CEM-RL
  serial, tests).
- :func:`make_replay`: the shared replay, a :class:`~esnb.replay.remote.RemoteReplay` (uniform,
  capacity 2e5 by default) pinned to one worker.

Dask actors die with their worker and nothing in Dask recreates them: that is this module's
job. Placement: the replay on the first worker (by address), the critic on the last; with
``critic_exclusive`` evaluations avoid the critic's worker (all actors of a worker share one
thread, and a busy task thread in the same process slows the critic through the GIL).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Any

import numpy as np

from esnb.policies.spec import PolicySpec
from esnb.replay.remote import RemoteReplay, ReplayServer, is_loss
from esnb.runners.apex_backend import _Done
from esnb.workers.aes import CriticServer

log = logging.getLogger("esnb.aes")


class CriticLost(RuntimeError):
    """The worker holding the critic actor is gone (recreate it with
    :meth:`RemoteCritic.recover`)."""



def worker_info(client) -> dict[str, dict]:
    """``{address: info}`` of the live workers, fetched now.

    Not ``client.scheduler_info()["workers"]``: that returns the client's cached identity,
    which its periodic scheduler-info callback (``n_workers=0``: no workers) can overwrite
    between the fetch and the return, so it sometimes comes back empty (seen under load).
    """
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def live_workers(client) -> list[str]:
    return sorted(worker_info(client))


class RemoteCritic:
    """Driver-side owner of the critic actor.

    Parameters
    ----------
    client : distributed.Client
    spec : PolicySpec
    td3 : dict
        :class:`~esnb.rl.td3.TD3Config` as a dict.
    seed : int
    avoid : str, optional
        A worker address to avoid (the replay's) while another worker is alive.
    state : dict of arrays, optional
        Start from this learner state.
    timeout : float
        Seconds to wait for the actor's creation.
    """

    def __init__(self, client, spec: PolicySpec, td3: dict, seed: int = 0,
                 avoid: str | None = None, state: dict | None = None, timeout: float = 60.0):
        self.client = client
        self.spec = spec
        self.td3 = dict(td3)
        self.seed = int(seed)
        self.timeout = float(timeout)
        self.token = uuid.uuid4().hex[:8]
        self.generation = -1
        self.recreations = 0
        self.lost_updates = 0
        self.state = state
        self.updates = 0 if state is None else int(state["critic_counters"][0])
        self.address: str | None = None
        self._future = None
        self.actor = None
        self._create(avoid)

    def _create(self, avoid: str | None) -> None:
        self.generation += 1
        deadline = time.monotonic() + self.timeout
        workers = live_workers(self.client)
        while not workers and time.monotonic() < deadline:
            time.sleep(0.2)
            workers = live_workers(self.client)
        if not workers:
            raise RuntimeError("no live worker to hold the critic")
        choices = [w for w in workers if w != avoid] or workers
        target = choices[-1]
        # priority: the creation is a task and must not queue behind evaluations
        fut = self.client.submit(CriticServer, self.spec, self.td3, self.seed + self.generation,
                                 self.state, actor=True, pure=False, workers=[target],
                                 allow_other_workers=False, priority=100,
                                 key=f"esnb-critic-{self.token}-{self.generation}")
        with self.client.as_current():
            self.actor = fut.result(timeout=self.timeout)
        self._future = fut
        self.address = target

    @property
    def lost(self) -> bool:
        return self._future is None or self._future.status not in ("finished", "pending")

    def recover(self, avoid: str | None = None) -> dict[str, Any]:
        """Recreate the critic on a live worker from its last returned state."""
        old = self._future
        self._create(avoid)
        if old is not None:
            old.release()
        self.recreations += 1
        log.warning("critic actor lost; recreated on %s (generation %d) at %d updates",
                    self.address, self.generation, self.updates)
        return {"generation": self.generation, "updates": self.updates}

    def submit_train(self, replay_info, n_updates: int, policies, chunk: int):
        if self.lost:
            raise CriticLost(f"the critic actor (generation {self.generation}) is lost")
        return self.actor.train(replay_info, int(n_updates), list(policies), int(chunk))

    def result(self, future, timeout: float | None = None) -> dict[str, Any]:
        """A train call's result; keeps its state. A loss raises :class:`CriticLost`."""
        try:
            out = future.result(timeout=timeout)
        except Exception as exc:
            if self.lost or is_loss(exc):
                raise CriticLost(f"the critic actor (generation {self.generation}) is lost: "
                                 f"{exc}") from exc
            raise
        self.state = out["state"]
        self.updates = int(out["total_updates"])
        return out

    def close(self) -> None:
        if self._future is not None:
            self._future.release()
        self._future = None
        self.actor = None


class InlineCritic:
    """:class:`RemoteCritic`'s interface over a :class:`CriticServer` in this process."""

    lost = False
    generation = 0
    recreations = 0
    lost_updates = 0
    address = "inline"

    def __init__(self, spec: PolicySpec, td3: dict, seed: int = 0, state: dict | None = None):
        self.server = CriticServer(spec, dict(td3), seed, state)
        self.state = state
        self.updates = 0 if state is None else int(state["critic_counters"][0])

    def submit_train(self, replay_info, n_updates: int, policies, chunk: int):
        return _Done(self.server.train(replay_info, int(n_updates), list(policies), int(chunk)))

    def result(self, future, timeout=None) -> dict[str, Any]:
        out = future.result()
        self.state = out["state"]
        self.updates = int(out["total_updates"])
        return out

    def close(self) -> None:
        pass


class InlineReplay:
    """A :class:`ReplayServer` in this process with the :class:`RemoteReplay` calls the AES
    runners use; ``info()`` is the server itself (tasks call it directly)."""

    lost = False
    generation = 0
    recreations = 0
    lost_items = 0
    address = "inline"

    def __init__(self, config: dict, seed: int = 0, checkpoint: str | None = None):
        self.server = ReplayServer(config, seed, checkpoint, switch_interval=None)

    def info(self):
        return self.server

    def call(self, method: str, *args, **kwargs):
        return getattr(self.server, method)(*args, **kwargs)

    def close(self) -> None:
        pass


def replay_config(obs_dim: int, act_dim: int, capacity: int) -> dict:
    from esnb.rl.td3 import transition_spec

    return {"capacity": int(capacity), "spec": transition_spec(obs_dim, act_dim),
            "prioritized": False}


def make_replay(client, obs_dim: int, act_dim: int, capacity: int, seed: int,
                checkpoint_path: str | None = None, restore: bool = False):
    """The shared uniform replay: a Dask actor on the first worker, or in this process."""
    config = replay_config(obs_dim, act_dim, capacity)
    if client is None:
        return InlineReplay(config, seed, checkpoint_path if restore else None)
    workers = live_workers(client)
    return RemoteReplay(client, config, seed=seed, worker=workers[0] if workers else None,
                        checkpoint_path=checkpoint_path, restore=restore, timeout=120.0)


def state_arrays(state: dict | None) -> dict[str, np.ndarray]:
    """A critic state as checkpoint arrays (empty when there is none yet)."""
    return {} if state is None else {k: np.asarray(v) for k, v in state.items()}


def critic_state_from(arrays: dict[str, np.ndarray]) -> dict | None:
    keys = ("critic", "critic_target", "critic_adam_m", "critic_adam_v", "critic_adam_step",
            "target_policy", "critic_counters", "critic_rng")
    if not all(k in arrays for k in keys):
        return None
    return {k: arrays[k] for k in keys}


def build_setup(env: str, actor_hidden, critic_hidden, td3: dict | None,
                max_episode_steps: int | None, env_kwargs: dict | None):
    """``(TD3Config, actor PolicySpec, AESConfig)`` of a run; a clear error for envs without
    a bounded Box action space."""
    from gymnasium import spaces

    from esnb.envs.make import env_spaces
    from esnb.rl.td3 import TD3Config, actor_spec
    from esnb.workers.aes import AESConfig

    obs_space, act_space, _ = env_spaces(env, **(env_kwargs or {}))
    if not isinstance(act_space, spaces.Box):
        raise ValueError(f"AES-RL / CEM-RL need a Box action space; {env} has {act_space}")
    config = TD3Config(**{**(td3 or {}), "actor_hidden": tuple(actor_hidden),
                          "critic_hidden": tuple(critic_hidden)})
    spec = actor_spec(int(np.prod(obs_space.shape)), int(np.prod(act_space.shape)),
                      act_space.low, act_space.high, config.actor_hidden)
    cfg = AESConfig(env, spec, tuple(config.to_dict().items()), max_episode_steps,
                    tuple(sorted((env_kwargs or {}).items())))
    return config, spec, cfg


class ReplayCheckpoints:
    """Runner mixin (AES-RL, CEM-RL): a checkpoint keeps the replay's contents next to it
    (``<path>.replay.npz``), so a loaded run trains its critic on the same data."""

    def save(self, path):
        out = super().save(path)
        with self._iter_lock:
            if self._started and not self.replay.lost:
                self.replay.call("checkpoint", str(out) + ".replay.npz")
        return out

    @classmethod
    def load(cls, path, client=None, **overrides):
        runner = super().load(path, client=client, **overrides)
        replay = str(path) + ".replay.npz"
        runner._restore_replay = replay if os.path.exists(replay) else None
        return runner


class MeanActor:
    """Runner mixin (AES-RL, CEM-RL): the distribution's mean ``mu`` as a TD3 actor, and
    noise-free evaluations of it (on the cluster when the runner has a client)."""

    def policy(self):
        """The mean as a torch :class:`~esnb.rl.td3.TD3Actor`."""
        from esnb.rl.td3 import TD3Actor

        return TD3Actor(self.spec, self.mu)

    def evaluate(self, episodes: int = 10) -> np.ndarray:
        """Returns of ``episodes`` noise-free episodes of the current mean."""
        from esnb.workers.aes import evaluate_mean

        if int(episodes) < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        with self._iter_lock:  # the run's thread draws from the same generator
            seeds = self._eval_rng.integers(0, 2**31 - 1, size=int(episodes))
            mu = self.mu
        if self.client is None:
            return evaluate_mean(self.cfg, mu, seeds)["returns"]
        return self.client.submit(evaluate_mean, self.cfg, mu, seeds,
                                  pure=False).result()["returns"]

"""What AES-RL and CEM-RL share on the driver: the run's setup (TD3 config, actor layout, task
config), the replay and critic services, the mean as a policy, and checkpoints that keep the
replay's contents.

:class:`PopulationRunner` is the base of both runners: it builds the settings, the executor,
the actor layout and the run's generators, and creates the shared replay
(:class:`~esnb.runners.replay_service.ReplayService`, uniform, on the first worker) and critic
(:class:`~esnb.runners.aesrl.critic.Critic`, on another worker) when the run starts. Its
mixins: :class:`MeanActor` (``policy()``, ``evaluate()``) and :class:`ReplayCheckpoints`
(``save``/``load`` with the replay next to the checkpoint).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from esnb.runners.aesrl.config import PopulationRLConfig
from esnb.runners.aesrl.critic import Critic, critic_state_from, state_arrays
from esnb.runners.aesrl.tasks import TaskConfig, evaluate_mean
from esnb.runners.base import Runner
from esnb.runners.executor import make_executor
from esnb.runners.replay_service import ReplayService

#: seconds to wait for the replay's creation or a call (a busy worker takes a while)
REPLAY_TIMEOUT = 120.0


def build_setup(cfg: PopulationRLConfig):
    """``(TD3Config, actor PolicySpec, TaskConfig)`` of a run; a clear error for envs without a
    bounded Box action space."""
    from gymnasium import spaces

    from esnb.envs.make import env_spaces
    from esnb.rl.td3 import TD3Config, actor_spec

    obs_space, act_space, _ = env_spaces(cfg.env, **cfg.env_kwargs)
    if not isinstance(act_space, spaces.Box):
        raise ValueError(f"AES-RL / CEM-RL need a Box action space; {cfg.env} has {act_space}")
    td3 = TD3Config(**cfg.td3())
    spec = actor_spec(int(np.prod(obs_space.shape)), int(np.prod(act_space.shape)),
                      act_space.low, act_space.high, td3.actor_hidden)
    task = TaskConfig(cfg.env, spec, tuple(td3.to_dict().items()), cfg.max_episode_steps,
                      tuple(sorted(cfg.env_kwargs.items())))
    return td3, spec, task


def replay_config(obs_dim: int, act_dim: int, capacity: int) -> dict:
    """The shared replay: uniform, ``capacity`` transitions of TD3's fields."""
    from esnb.rl.td3_actor import transition_spec

    return {"capacity": int(capacity), "spec": transition_spec(obs_dim, act_dim),
            "prioritized": False}


class MeanActor:
    """Runner mixin: the distribution's mean ``mu`` as a TD3 actor, and noise-free evaluations
    of it (a task on the runner's executor)."""

    def policy(self):
        """The mean as a torch :class:`~esnb.rl.td3.TD3Actor`."""
        from esnb.rl.td3 import TD3Actor

        return TD3Actor(self.spec, self.mu)

    def evaluate(self, episodes: int = 10) -> np.ndarray:
        """Returns of ``episodes`` noise-free episodes of the current mean."""
        if int(episodes) < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        with self._iter_lock:  # the run's thread draws from the same generator
            seeds = self._eval_rng.integers(0, 2**31 - 1, size=int(episodes))
            mu = self.mu
        return self.executor.submit(evaluate_mean, self.task_config, mu,
                                    seeds).result()["returns"]


class ReplayCheckpoints:
    """Runner mixin: a checkpoint keeps the replay's contents next to it
    (``<path>.replay.npz``), so a loaded run trains its critic on the same data."""

    def save(self, path):
        out = super().save(path)
        with self._iter_lock:
            if self.replay is not None and not self.replay.lost:
                self.replay.call("checkpoint", str(out) + ".replay.npz")
        return out

    @classmethod
    def load(cls, path, client=None, **overrides):
        runner = super().load(path, client=client, **overrides)
        replay = str(path) + ".replay.npz"
        runner._restore_replay = replay if os.path.exists(replay) else None
        return runner


class PopulationRunner(ReplayCheckpoints, MeanActor, Runner):
    """The base of AES-RL and CEM-RL (settings, setup, generators, replay and critic).

    Attributes
    ----------
    executor : InlineExecutor or DaskExecutor
    td3 : TD3Config
    spec : PolicySpec
        The actors' layout.
    task_config : TaskConfig
        What every task of the run shares.
    replay : ReplayService or None
        The shared replay (created when the run starts).
    critic : Critic or None
        The shared critic (created when the run starts).
    """

    Config = PopulationRLConfig

    def __init__(self, cfg: PopulationRLConfig, client, name: str | None):
        super().__init__(cfg, name=name)
        self.executor = make_executor(client)
        self.td3, self.spec, self.task_config = build_setup(cfg)
        seeds = np.random.SeedSequence(cfg.seed).spawn(3)
        self._rng = np.random.Generator(np.random.PCG64(seeds[0]))
        self._eval_rng = np.random.Generator(np.random.PCG64(seeds[1]))
        self._init_rng = np.random.Generator(np.random.PCG64(seeds[2]))
        self._critic_state: dict | None = None
        self._restore_replay: str | None = None
        self.replay: ReplayService | None = None
        self.critic: Critic | None = None

    @property
    def client(self):
        """The Dask client the run uses (None in this process)."""
        return self.executor.client

    @property
    def critic_state(self) -> dict | None:
        """The critic learner's latest state (what a checkpoint keeps)."""
        return self.critic.state if self.critic is not None else self._critic_state

    def _start_services(self, critic_cls: type[Critic] = Critic, **critic_kw: Any) -> None:
        """Create the replay (restored from a loaded checkpoint's) and the critic (from the
        loaded state), keeping the critic off the replay's worker."""
        cfg = self.config
        restore = self._restore_replay
        self.replay = ReplayService(
            self.executor, replay_config(self.spec.obs_dim, self.spec.act_dim,
                                         cfg.replay_capacity),
            seed=cfg.seed, checkpoint_path=restore, restore=restore is not None,
            timeout=REPLAY_TIMEOUT)
        self.critic = critic_cls(self.executor, self.spec, self.td3.to_dict(), seed=cfg.seed,
                                 avoid=(self.replay.address,), state=self._critic_state,
                                 **critic_kw)

    def _close_services(self) -> None:
        """Release the critic and the replay (a later run creates new ones from the state
        kept here)."""
        if self.critic is not None:
            self._critic_state = self.critic.state
            self.critic.close()
            self.critic = None
        if self.replay is not None:
            self.replay.close()
            self.replay = None

    def _progress(self) -> dict[str, float]:
        c = self.counters
        return {self.iteration_column + "s": self.iteration, "env_steps": c["env_steps"],
                "episodes": c["episodes"], "critic_updates": c["critic_updates"],
                "eval_steps": c["eval_steps"]}

    # -- checkpoints: the algorithm's state (``_own_state``) plus what both runners keep -----
    def _own_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        raise NotImplementedError

    def _load_own_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def _state_dict(self):
        meta, arrays = self._own_state()
        arrays.update(state_arrays(self.critic_state))
        meta.update(counters=dict(self.counters), rng=self._rng.bit_generator.state,
                    eval_rng=self._eval_rng.bit_generator.state,
                    num_params=self.spec.num_params)
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        if int(meta["num_params"]) != self.spec.num_params:
            raise ValueError(f"checkpoint has {meta['num_params']} actor parameters, this run "
                             f"{self.spec.num_params}")
        self._load_own_state(meta, arrays)
        self.counters.update(meta["counters"])
        self._rng.bit_generator.state = meta["rng"]
        self._eval_rng.bit_generator.state = meta["eval_rng"]
        self._critic_state = critic_state_from(arrays)

"""What AES-RL and CEM-RL share on the driver: the run's setup (TD3 config, actor layout, task
config), the replay and critic services, the mean as a policy, and checkpoints that keep the
replay's contents.

:class:`PopulationRunner` is the base of both runners: it builds the settings, the executor,
the actor layout and the run's generators, and creates the shared replay
(:class:`~esnb.runners.replay_service.ReplayService`, uniform, on the first worker, with
recovery checkpoints when it can be lost) and critic (:class:`~esnb.runners.aesrl.critic.Critic`,
on another worker) when the run starts. Its mixins: :class:`MeanActor` (``policy()``,
``evaluate()``) and :class:`~esnb.runners.replay_files.ReplayCheckpoints` (``save``/``load``
with the replay in a file of its own next to the checkpoint, the pair kept consistent).
Checkpoints hold the critic learner's whole state (weights, targets, Adam, counters).

Data lost with a worker is counted: ``replay_lost`` (transitions: inserted before the loss
minus inserted in the checkpoint the recreated replay starts from) and ``critic_lost_updates``
(the updates of the chunk a lost critic was making).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from esnb.record import restore_rng
from esnb.replay.server import ReplayLost
from esnb.runners.aesrl.config import PopulationRLConfig
from esnb.runners.aesrl.critic import Critic, critic_state_from, state_arrays
from esnb.runners.aesrl.tasks import TaskConfig, evaluate_mean
from esnb.runners.base import Runner
from esnb.runners.executor import make_executor
from esnb.runners.placement import learner_resources
from esnb.runners.replay_files import ReplayCheckpoints
from esnb.runners.replay_service import ReplayService

log = logging.getLogger("esnb.aes")

#: seconds to wait for the replay's creation or a call (a busy worker takes a while)
REPLAY_TIMEOUT = 120.0
#: counters both runners keep of their replay and critic services
SERVICE_COUNTERS = ("replay_recreations", "replay_lost", "replay_checkpoints",
                    "critic_recreations", "critic_lost_updates")


def build_setup(cfg: PopulationRLConfig):
    """``(TD3Config, actor PolicySpec, TaskConfig)`` of a run; a clear error for envs without a
    bounded Box action space."""
    from gymnasium import spaces

    from esnb.envs.make import env_spaces
    from esnb.envs.pixels import check_vector_obs
    from esnb.rl.td3.actor import actor_spec
    from esnb.rl.td3.config import TD3Config

    check_vector_obs(cfg.env, cfg.algorithm)
    obs_space, act_space, _ = env_spaces(cfg.env, **cfg.env_kwargs)
    if not isinstance(act_space, spaces.Box):
        raise ValueError(f"AES-RL / CEM-RL need a Box action space; {cfg.env} has {act_space}")
    td3 = TD3Config.of(cfg)
    spec = actor_spec(int(np.prod(obs_space.shape)), int(np.prod(act_space.shape)),
                      act_space.low, act_space.high, td3.actor_hidden)
    task = TaskConfig(cfg.env, spec, tuple(td3.to_dict().items()), cfg.max_episode_steps,
                      tuple(sorted(cfg.env_kwargs.items())))
    return td3, spec, task


def replay_config(obs_dim: int, act_dim: int, capacity: int) -> dict:
    """The shared replay: uniform, ``capacity`` transitions of TD3's fields."""
    from esnb.rl.td3.actor import transition_spec

    return {"capacity": int(capacity), "spec": transition_spec(obs_dim, act_dim),
            "prioritized": False}


class MeanActor:
    """Runner mixin: the distribution's mean ``mu`` as a TD3 actor, and noise-free evaluations
    of it (a task on the runner's executor)."""

    def policy(self):
        """The mean as a torch :class:`~esnb.rl.td3.nets.TD3Actor`."""
        from esnb.rl.td3.nets import TD3Actor

        return TD3Actor(self.spec, self.mu)

    def acting_policy(self):
        """The mean actor as data (TD3's tanh squash as its head)."""
        from esnb.nets.acting import ActingPolicy

        return ActingPolicy(self.spec, self.mu, head="tanh")

    def evaluate(self, episodes: int = 10) -> np.ndarray:
        """Returns of ``episodes`` noise-free episodes of the current mean."""
        if int(episodes) < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        with self._iter_lock:  # the run's thread draws from the same generator
            seeds = self._eval_rng.integers(0, 2**31 - 1, size=int(episodes))
            mu = self.mu
        return self.executor.submit(evaluate_mean, self.task_config, mu,
                                    seeds).result()["returns"]


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
    replay_checkpoint_interval : float
        Seconds between the replay's recovery checkpoints (on a cluster; set it before the
        run starts).
    """

    Config = PopulationRLConfig
    replay_checkpoint_interval = 30.0

    def __init__(self, cfg: PopulationRLConfig, client, name: str | None):
        super().__init__(cfg, name=name)
        self.executor = make_executor(client)
        self.td3, self.spec, self.task_config = build_setup(cfg)
        seeds = np.random.SeedSequence(cfg.seed).spawn(3)
        self._rng = np.random.Generator(np.random.PCG64(seeds[0]))
        self._eval_rng = np.random.Generator(np.random.PCG64(seeds[1]))
        self._init_rng = np.random.Generator(np.random.PCG64(seeds[2]))
        self._critic_state: dict | None = None
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
        """Create the replay (restored from a loaded checkpoint's file) and the critic (from
        the loaded state), keeping the critic off the replay's worker."""
        cfg = self.config
        c = self.counters
        self.replay = ReplayService(
            self.executor, replay_config(self.spec.obs_dim, self.spec.act_dim,
                                         cfg.replay_capacity),
            seed=cfg.seed, restore=self._replay_restore, timeout=REPLAY_TIMEOUT,
            checkpoint_interval=self.replay_checkpoint_interval,
            counts={"recreations": c["replay_recreations"], "lost": c["replay_lost"],
                    "checkpoints": c["replay_checkpoints"]}, **self._recovery_files())
        resources = learner_resources(self.executor.workers(), cfg.device,
                                      cfg.critic_resources)
        self.critic = critic_cls(self.executor, self.spec, self.td3.to_dict(), seed=cfg.seed,
                                 avoid=(self.replay.address,), state=self._critic_state,
                                 resources=resources, **critic_kw)

    def _service_replay(self) -> None:
        """Recreate a lost replay (the transitions lost counted), start or collect a recovery
        checkpoint, and bring the replay's counters into the run's."""
        if self.replay.lost:
            self.replay.recover()
            self._replay_recreated()
        try:
            self.replay.maybe_checkpoint()
        except ReplayLost:  # recreated next time round, once the scheduler confirms the loss
            log.info("the replay was lost during a recovery checkpoint")
        self._count_services()

    def _replay_recreated(self) -> None:
        """Tasks holding the lost replay's handle must be given the new one (a hook)."""

    def _count_services(self) -> None:
        c = self.counters
        c["replay_recreations"] = self.replay.recreations
        c["replay_lost"] = self.replay.lost_items
        c["replay_checkpoints"] = self.replay.checkpoints

    def _observe_replay(self, result: dict) -> None:
        """Note the replay's counts an individual's task saw when it stored its episode."""
        if self.replay is not None:
            self.replay.observe(result.get("replay"))

    def _close_services(self) -> None:
        """Release the critic and the replay (a later run creates new ones from the state
        kept here and the replay file of the last checkpoint)."""
        if self.critic is not None:
            self._critic_state = self.critic.state
            self.critic.close()
            self.critic = None
        if self.replay is not None:
            self._count_services()
            self._replay_restore = self.replay.surviving()
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
                    num_params=self.spec.num_params, replay=self._replay_record)
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        if int(meta["num_params"]) != self.spec.num_params:
            raise ValueError(f"checkpoint has {meta['num_params']} actor parameters, this run "
                             f"{self.spec.num_params}")
        self._load_own_state(meta, arrays)
        self.counters.update(meta["counters"])
        restore_rng(self._rng, meta["rng"], "rng")
        restore_rng(self._eval_rng, meta["eval_rng"], "eval_rng")
        self._critic_state = critic_state_from(arrays)
        self._load_replay_record(meta)

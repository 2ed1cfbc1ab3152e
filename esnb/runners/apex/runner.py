"""``esnb.ApeX`` / ``esnb.ApeXDPG``: distributed prioritized experience replay (Horgan et al.
2018, "Distributed Prioritized Experience Replay", arXiv 1803.00933) on an executor.

Actor loops (:mod:`.tasks`) act with epsilon-greedy (DQN) or Gaussian-noise (DPG) copies of
the learner's network, build n-step transitions with their initial priorities and push them in
batches to a prioritized replay held as an actor (:mod:`.backend`). The learner runs here, on
the runner's thread: it samples several batches per replay call (the next call is in flight
while it trains), updates, sends the new priorities back in one call, evicts the excess over
the soft capacity every ``evict_interval`` updates and publishes its parameters every
``param_period`` updates.

One iteration, top to bottom (:meth:`ApeX._iteration`):

1. one snapshot of the controls; the loops are started (or told of exploration changes);
2. supervision: a lost replay is recreated from its last checkpoint (the items lost are
   counted), loops whose worker died are restarted on a live worker;
3. chunks of ``learner_chunk`` updates on prefetched batches (:mod:`.learner`), each after one
   ``executor.turn()`` (inline: the actor loop's pass; on a cluster the loops act by
   themselves), until ``iteration_seconds`` are up (inline: one chunk, so the run never
   depends on timing); while the replay holds fewer than ``min_size`` items, the learner
   waits (``waiting``);
4. greedy evaluation every ``eval_interval`` updates (here, on the runner's thread: the
   workers' threads are busy acting);
5. the history row (:mod:`.metrics`): returns of the episodes actors finished, evaluation,
   and the throughput of every part (actor env steps/s, replay inserts/s, learner updates/s,
   sampled transitions/s), as the paper insists.

Asynchronous by nature: runs on a cluster are not bitwise reproducible; inline the actors and
the replay run in this process, alternating with the learner, and a seed gives one run.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import numpy as np

from esnb.controls import ControlSnapshot
from esnb.envs.make import check_time_limit, env_spaces
from esnb.envs.rollout import cached_env
from esnb.record import restore_rng
from esnb.replay.config import check_config
from esnb.replay.server import ReplayLost
from esnb.replay.stacks import is_frame_stack
from esnb.runners.apex.actor import ActorConfig, GreedyNetPolicy, greedy_returns
from esnb.runners.apex.backend import ApeXBackend
from esnb.runners.apex.config import ApeXDPGConfig, ApeXDQNConfig
from esnb.runners.apex.learner import ChunkLearner, build_dpg, build_dqn
from esnb.runners.apex.metrics import Throughput, history_row
from esnb.runners.apex.tasks import LoopSettings
from esnb.runners.base import Runner
from esnb.runners.executor import make_executor
from esnb.runners.replay_files import ReplayCheckpoints

log = logging.getLogger("esnb.apex")


class ApeX(ReplayCheckpoints, Runner):
    """Ape-X DQN (see :class:`ApeXDPG` for continuous actions; ``variant="dpg"`` builds one).

    Parameters
    ----------
    env : str
        Gymnasium id (Discrete actions for DQN, bounded Box actions for DPG).
    client : distributed.Client, executor or False, optional
        Where actors and replay run; None uses the default Dask client if there is one, else
        this process; False always runs in this process.
    preset : {"laptop", "paper"}
        Defaults tuned for 2 cores, or the paper's published settings.
    config : ApeXDQNConfig, optional
        All settings at once (keyword settings are applied on top).
    name : str, optional
        Run name (task keys).
    **settings
        Any setting below.
    """

    algorithm = "ApeX"
    holds = "a Q-network, acted on greedily (videos play it; esnb export writes MLP policies)"
    iteration_column = "iteration"
    Config = ApeXDQNConfig
    #: the live step sizes the learner takes per update (and the history records)
    rate_controls: tuple[str, ...] = ("lr",)
    #: the variant's network, learner and replay transition spec
    _build = staticmethod(build_dqn)
    #: a checkpoint's replay file comes with the actors' reports of the same moment
    drain_with_replay = True

    def __new__(cls, env: str | None = None, **settings: Any):
        # ApeX(env, variant="dpg") builds the DPG runner, as it always did
        if cls is ApeX and settings.get("variant") == "dpg":
            cls = ApeXDPG
        return super().__new__(cls)

    def __init__(self, env: str | None = None, *, client=None, preset: str = "laptop",
                 config: ApeXDQNConfig | None = None, name: str | None = None,
                 **settings: Any):
        cfg = self.make_config(env, preset, config, **settings)
        super().__init__(cfg, name=name)
        obs_space, act_space, limit = env_spaces(cfg.env, **cfg.env_kwargs)
        check_time_limit(cfg.env, limit, cfg.max_episode_steps)  # before any actor makes it
        init_seed, replay_seed, _ = (int(s.generate_state(1)[0])
                                     for s in np.random.SeedSequence(cfg.seed).spawn(3))
        self.net, self.learner, spec = self._build(cfg, obs_space, act_space, init_seed)
        self.trainer = ChunkLearner(self.learner, cfg.priority_eps, self.rate_controls)
        self.replay_config = dict(
            capacity=cfg.capacity, prioritized=True, alpha=cfg.alpha, beta=cfg.beta,
            eps=cfg.priority_eps, spec=spec, soft_capacity=cfg.soft, eviction=cfg.eviction,
            min_size=cfg.min_size, samples_per_insert=cfg.samples_per_insert,
            # Atari's stacks: each frame stored once (~7 KB a transition, not 2 x 28 KB)
            frame_storage=is_frame_stack(*spec["obs"]))
        check_config(self.replay_config)  # fail here, not later on a worker
        self.actor_cfg = ActorConfig(
            cfg.env, cfg.variant, self.net, cfg.num_actors, cfg.n_step, cfg.gamma,
            cfg.priority_eps, cfg.actor_max_episode_steps or cfg.max_episode_steps,
            tuple(sorted(cfg.env_kwargs.items())), cfg.reward_clipping,
            getattr(cfg, "life_loss", False))  # Ape-X DPG's vector tasks have no lives
        self.executor = make_executor(client)
        self.backend = ApeXBackend(
            self.executor, self.actor_cfg, self.replay_config, seed=replay_seed,
            loops=cfg.loops, actor_workers=cfg.actor_workers, replay_worker=cfg.replay_worker,
            replay_resources=cfg.replay_resources,
            checkpoint_interval=cfg.replay_checkpoint_interval,
            settings=LoopSettings(flush_size=cfg.flush_size, param_period=cfg.actor_param_period,
                                  sleeps=self.executor.remote))
        self._eval_rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 7]))
        #: recreations, transitions lost and checkpoints of the run's earlier replays
        self._replay_counts: dict[str, int] = {}
        self._published: dict[str, Any] = {}
        self._last_drain = 0.0
        self._loop_steps: dict[str, int] = {}
        self._pending_episodes: list = []
        self.rates = Throughput()
        self.replay_stats: dict[str, Any] = {}
        self.env_steps = 0
        self.episodes = 0
        self.params_version = 0
        self.eval_return = np.nan
        self.best_eval = -np.inf
        self.solved_at: dict | None = None

    # -- public ------------------------------------------------------------------------------
    @property
    def client(self):
        return self.executor.client

    @property
    def replay(self):
        """The run's :class:`~esnb.runners.replay_service.ReplayService` (None before the
        first iteration and after :meth:`close`)."""
        return self.backend.replay

    def _progress(self) -> dict[str, float]:
        return {"iterations": self.iteration, "learner_steps": self.learner_steps,
                "env_steps": self.env_steps, "episodes": self.episodes,
                "seconds": self.wall_time}

    @property
    def learner_steps(self) -> int:
        return self.trainer.steps

    @property
    def sampled(self) -> int:
        """Transitions the learner sampled."""
        return self.trainer.sampled

    @property
    def learner_cpu(self) -> float:
        """CPU seconds of the learner's updates."""
        return self.trainer.cpu

    def params(self) -> np.ndarray:
        """The learner's current parameters as published to the actors (a copy)."""
        return self.learner.params()

    def acting_policy(self) -> GreedyNetPolicy:
        """The learner's network acting as greedy evaluations act (DQN: argmax Q; DPG: the
        noise-free action): ``.numpy()`` acts; videos play it; it is not exported."""
        return GreedyNetPolicy(self.net, self.learner.params(), self.config.env)

    def evaluate(self, episodes: int = 10) -> np.ndarray:
        """Returns of ``episodes`` greedy episodes of the learner's network (in this process;
        the workers' threads are busy acting)."""
        if int(episodes) < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        with self._iter_lock:
            return self._evaluate(int(episodes))

    def _evaluate(self, episodes: int) -> np.ndarray:
        cfg = self.actor_cfg  # evaluations: whole games, the run's own episode cap
        env = cached_env(cfg.env_id, self.config.max_episode_steps, cfg.env_kwargs)
        seeds = self._eval_rng.integers(0, 2**31 - 1, size=episodes)
        return greedy_returns(cfg, self.learner.params(), env, seeds)

    def pause(self) -> None:
        super().pause()
        self.backend.pause(True)

    def resume(self) -> None:
        self.backend.pause(False)
        super().resume()

    def close(self) -> list[dict]:
        """Stop the actor loops and release the replay (a later start() makes new ones, from
        the replay file of the last checkpoint if there is one)."""
        super().close()
        with self._iter_lock:
            if self.backend.started:
                self._replay_counts = self.replay.counts()
                self._replay_restore = self.replay.surviving()
            out = self.backend.stop()
            self.trainer.forget()
            return out

    def _quiesce(self) -> None:
        # no actor may insert after the last checkpoint: its replay file would lack what they
        # added, and a resumed run would lose it without counting it
        if self.backend.started:
            with self._iter_lock:
                self.backend.stop_loops()
                self._drain(force=True)

    def _loop(self) -> None:
        try:
            super()._loop()
        finally:
            # no actor acts while no learner learns: the loops end with the run (the replay
            # stays; a later start() or step() starts new loops that continue numbering)
            if self.backend.started:
                try:
                    with self._iter_lock:
                        self.backend.stop_loops()
                except Exception:  # the cluster may be closing
                    log.debug("could not stop the actor loops", exc_info=True)

    # -- one iteration -----------------------------------------------------------------------
    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        self._start_actors(snap)
        info: dict[str, Any] = {"diag": [], "wait_time": 0.0, "learn_time": 0.0,
                                "learn_cpu": 0.0, "eval_due": False, "events": {},
                                "waiting": False}
        after_update = functools.partial(self._after_update, snap, info)
        start = time.perf_counter()
        try:
            self._after_events(self.backend.supervise(), info)
            while True:
                self.executor.turn()  # inline: the actor loop acts before each chunk
                if not self.trainer.chunk(self.backend.replay, snap, info, after_update):
                    info["waiting"] = True
                    if self.executor.remote:
                        time.sleep(0.05)  # the actors fill the replay meanwhile
                    break
                if self.executor.reproducible or \
                        time.perf_counter() - start >= self.config.iteration_seconds:
                    break
            self._drain(force=info["waiting"] or self.executor.reproducible)
            done = self.backend.replay.maybe_checkpoint()
            if done is not None:
                info["checkpoint_seconds"] = done["seconds"]
        except ReplayLost as exc:
            log.warning("replay lost (%s); recovering", exc)
            self.trainer.forget()
            self._after_events(self.backend.supervise(force=True), info)
        eval_return = eval_std = np.nan
        if info["eval_due"]:
            ev = self._evaluate(snap.eval_episodes)
            eval_return, eval_std = float(ev.mean()), float(ev.std())
            self._record_eval(eval_return, time.perf_counter() - start)
        if self._paused:  # a step() while paused: actors acted for it, now they wait again
            self.backend.pause(True)
        self.env_steps = int(sum(self._loop_steps.values()))
        episodes, self._pending_episodes = self._pending_episodes, []
        self.episodes += len(episodes)
        return history_row(self, snap, info, episodes, eval_return, eval_std)

    def _start_actors(self, snap: ControlSnapshot) -> None:
        """Start the replay and the loops (first time), or the loops again (after a stop);
        publish exploration and pass-length changes."""
        control = {"exploration": snap.exploration, "exploration_alpha": snap.exploration_alpha,
                   "pass_steps": snap.inline_actor_steps}
        if not self.backend.started:
            if self.config.learner_threads is not None:
                import torch

                torch.set_num_threads(int(self.config.learner_threads))
            self.backend.start(self.learner.params(), self.params_version, control,
                               restore=self._replay_restore, counts=self._replay_counts,
                               **self._recovery_files(self.config.replay_checkpoint))
        else:
            self.backend.start_loops()
            self.backend.pause(False)
            if control != self._published:
                self.backend.publish_control(**control)
        self._published = control

    def _after_update(self, snap: ControlSnapshot, info: dict, steps: int) -> None:
        """After each update: publish the parameters, mark an evaluation, when due."""
        if steps % snap.param_period == 0:
            self._publish_params()
        if snap.eval_interval and steps % snap.eval_interval == 0:
            info["eval_due"] = True

    def _publish_params(self) -> None:
        self.params_version += 1
        self.backend.publish_params(self.learner.params(), self.params_version)

    def _after_events(self, events: dict, info: dict) -> None:
        info["events"].update(events)
        # the published parameters may have lived on the lost worker: publish them again
        if events:
            self._publish_params()
        if "replay" in events:  # the row shows the recreated replay's counters, not the lost
            self.replay_stats = self.backend.replay.call("stats")

    def _drain(self, force: bool = False) -> None:
        """The replay's counters and the loops' reports (env steps, finished episodes)."""
        now = time.monotonic()
        if not force and now - self._last_drain < 0.25:
            return
        self._last_drain = now
        self._take_drained(self.backend.replay.call("drain"))

    def _take_drained(self, out: dict) -> None:
        self.replay_stats = out["stats"]
        for report in out["infos"]:
            key = str(report["loop"])
            self._loop_steps[key] = max(self._loop_steps.get(key, 0), int(report["env_steps"]))
            self._pending_episodes.extend(report["episodes"])

    def _record_eval(self, eval_return: float, elapsed: float) -> None:
        self.eval_return = eval_return
        self.best_eval = max(self.best_eval, eval_return)
        target = self.config.target_return
        if target is not None and eval_return >= target and self.solved_at is None:
            self.solved_at = {"wall_time": self.wall_time + elapsed,
                              "learner_steps": self.learner_steps,
                              "env_steps": self.env_steps, "eval_return": eval_return}
            self.stop()

    # -- checkpoints (save/load: ReplayCheckpoints) -------------------------------------------
    def _before_replay_checkpoint(self) -> None:
        self.trainer.flush(self.backend.replay)  # the priorities of the last chunk first

    def _replay_checkpointed(self, reply: dict) -> None:
        self._take_drained(reply)  # what the actors reported up to the replay's moment
        self.env_steps = int(sum(self._loop_steps.values()))

    def _state_dict(self):
        meta, arrays = self.learner.state_dict()
        arrays = {f"learner.{k}": v for k, v in arrays.items()}
        replay = self.backend.replay
        meta = {"learner": meta, "learner_steps": self.learner_steps, "sampled": self.sampled,
                "learner_cpu": self.learner_cpu,
                "env_steps": self.env_steps, "episodes": self.episodes,
                "params_version": self.params_version, "loop_steps": dict(self._loop_steps),
                "eval_rng": self._eval_rng.bit_generator.state, "best_eval": (
                    None if not np.isfinite(self.best_eval) else self.best_eval),
                "solved_at": self.solved_at, "replay": self._replay_record,
                "pending_episodes": list(self._pending_episodes),
                "replay_counts": replay.counts() if replay is not None else self._replay_counts}
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        self.learner.load_state_dict(meta["learner"], {
            k[len("learner."):]: v for k, v in arrays.items() if k.startswith("learner.")})
        self.trainer.steps = int(meta["learner_steps"])
        self.trainer.sampled = int(meta["sampled"])
        self.trainer.cpu = float(meta.get("learner_cpu", 0.0))
        self.env_steps = int(meta["env_steps"])
        self.episodes = int(meta["episodes"])
        self.params_version = int(meta["params_version"])
        # a resumed run's loops count from zero: keep the old total under its own key
        self._loop_steps = {"before-resume": self.env_steps}
        restore_rng(self._eval_rng, meta["eval_rng"], "eval_rng")
        self.best_eval = -np.inf if meta["best_eval"] is None else float(meta["best_eval"])
        self.solved_at = meta["solved_at"]
        self._pending_episodes = list(meta.get("pending_episodes", []))
        self._replay_counts = {k: int(v) for k, v in (meta.get("replay_counts") or {}).items()}
        self._load_replay_record(meta)


class ApeXDPG(ApeX):
    """Ape-X DPG (continuous actions): :class:`ApeX` with a DPG learner.

    Defaults from the paper's appendix: critic 400-tanh-300, actor 300-tanh-200, Adam 1e-4,
    target copies every 100 updates, actor gradient clipped element-wise to [-1, 1], replay
    eviction sampled with ``P ~ p^-0.4``, Gaussian exploration noise with one sigma (0.3 of the
    action half-range) for all actors (``exploration_alpha > 0`` spreads it like epsilon).
    """

    algorithm = "ApeX-DPG"
    holds = "a DPG actor and its critic (videos play the actor; esnb export writes MLP policies)"
    Config = ApeXDPGConfig
    rate_controls = ("actor_lr", "critic_lr")
    _build = staticmethod(build_dpg)

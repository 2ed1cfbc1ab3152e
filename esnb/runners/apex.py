"""``esnb.ApeX`` / ``esnb.ApeXDPG``: distributed prioritized experience replay (Horgan et al.
2018, "Distributed Prioritized Experience Replay", arXiv 1803.00933) on Dask.

Actor loops on the workers act with ε-greedy (DQN) or Gaussian-noise (DPG) copies of the
learner's network, build n-step transitions with their initial priorities and push them in
batches to a prioritized replay held by a Dask actor. The learner runs here, on the runner's
thread: it samples several batches per replay call (the next call is in flight while it
trains), updates, sends the new priorities back in one call, evicts the excess over the soft
capacity every ``evict_interval`` updates and publishes its parameters every ``param_period``
updates.

One iteration (about ``iteration_seconds`` of learning), top to bottom:

1. one snapshot of the controls; publish exploration changes to the actors;
2. supervision: a lost replay is recreated from its last checkpoint (the items lost are
   counted), loops whose worker died are restarted on a live worker;
3. chunks of ``learner_chunk`` updates on prefetched batches until the iteration's time is up;
   while the replay holds fewer than ``min_size`` items, the learner waits (``waiting``);
4. greedy evaluation every ``eval_interval`` updates (here, on the runner's thread: the
   workers' threads are busy acting);
5. the history row: returns of the episodes actors finished, evaluation, and the throughput of
   every part (actor env steps/s, replay inserts/s, learner updates/s, sampled transitions/s),
   as the paper insists.

Asynchronous by nature: runs on a cluster are not bitwise reproducible. Without a client the
actors and the replay run in this process, alternating with the learner (reproducible).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from esnb.controls import ControlSnapshot
from esnb.envs.make import env_spaces
from esnb.envs.rollout import FastEnv
from esnb.replay.buffer import check_config
from esnb.replay.remote import ReplayLost
from esnb.rl.apex_actor import ActorConfig, greedy_returns
from esnb.rl.dpg import DPGLearner
from esnb.rl.dqn import DQNLearner
from esnb.rl.nets import (
    DPGSpec,
    QNetSpec,
    dpg_action,
    q_values,
    split_dpg_params,
    transition_spec,
    unflatten,
)
from esnb.runners.apex_backend import ClusterBackend, InlineBackend
from esnb.runners.apex_controls import DEFAULTS, Throughput, apex_controls, history_row
from esnb.runners.base import Runner
from esnb.runners.executor import resolve_client
from esnb.workers.apex import LoopSettings

log = logging.getLogger("esnb.apex")

class ApeX(Runner):
    """Ape-X DQN (``variant="dqn"``) or DPG (``variant="dpg"``, see :class:`ApeXDPG`).

    Parameters
    ----------
    env : str
        Gymnasium id (Discrete actions for DQN, bounded Box actions for DPG).
    num_actors : int
        N actors, each with its own environment and exploration rate.
    seed : int
        Seeds the networks, environments, exploration, replay and evaluations.
    client : distributed.Client, optional
        None uses the default client if there is one, else runs everything in this process.
    variant : {"dqn", "dpg"}
    hidden : tuple of int
        DQN torso (dueling heads on top). Default (64, 64).
    actor_hidden, critic_hidden : tuple of int
        DPG networks (paper: (300, 200) and (400, 300)).
    lr / actor_lr, critic_lr : float
        Adam step sizes (live).
    batch_size : int
        Transitions per update (live).
    gamma : float
        Discount.
    n_step : int
        Steps per transition (paper: 3).
    target_period : int
        Updates between target copies (live; paper: 2500 Atari, 100 DPG). DQN default 100:
        the value horizon grows by n steps per copy, and on CartPole 100 solved in ~6k
        updates where 500 needed ~12.5k (measured, inline, 2 seeds).
    grad_clip : float
        DQN's gradient-norm clip (40).
    loss : {"huber", "mse"}
        DQN's per-item loss.
    dueling, double : bool
        DQN architecture and target.
    actor_clip : float
        DPG's element-wise clip of the actor gradient (1).
    exploration, exploration_alpha : float
        DQN: ε = exploration^(1 + exploration_alpha i/(N-1)) (0.4, 7). DPG: noise std as a
        fraction of the action half-range, spread the same way; default one σ = 0.3 for all
        (``exploration_alpha=0``), as the paper. Live.
    capacity, soft_capacity : int
        Replay hard and soft capacities (default soft = capacity // 2).
    eviction : {"fifo", "priority"}
        Excess removal (DQN: oldest first; DPG: ``P ∝ p^-0.4``).
    alpha, beta, priority_eps : float
        Prioritisation exponent, importance exponent (live), ``|td| + eps``.
    min_size : int
        Items before the learner starts (and after a replay recovery).
    samples_per_insert : float, optional
        Rate limit between learner and actors: the learner waits when it has sampled more
        than this many transitions per inserted one, the actors back off when they are
        ahead of it (None: no limit, actors run flat out as in the paper). Default: None for
        DQN, 16 for DPG (on 2 cores a flat-out DPG learner starved, see ``DEFAULTS``).
    learner_chunk, param_period, evict_interval : int
        See the controls (live).
    flush_size : int
        Transitions per actor push.
    actor_param_period : int
        Env steps of an actor loop between reads of the control (parameters, exploration).
    eval_interval, eval_episodes : int
        Greedy evaluations (live).
    target_return : float, optional
        Stop the run once an evaluation's mean return reaches it (``solved_at`` records when).
    loops : int, optional
        Actor loop tasks (default: one per worker).
    actor_workers : {"all", "others"}
        Whether loops may share the replay's worker.
    replay_worker, replay_resources
        Where the replay actor lives: an address, or worker resources. ``"auto"`` (default):
        the long-lived actor worker of :func:`esnb.cluster.actor_resources` if the cluster has
        one (jobqueue clusters), else the first worker.
    replay_checkpoint : str, optional
        The replay's checkpoint file (default: ``<tmp>/esnb-replay/<name>/replay.npz``;
        "" for none).
    replay_checkpoint_interval : float
        Seconds between replay checkpoints.
    iteration_seconds : float
        Learning time per iteration (one history row) on a cluster; an inline iteration is
        one chunk (so an inline run is reproducible).
    learner_threads : int, optional
        ``torch.set_num_threads`` for this process when the run starts (None: leave it).
        Small networks gain nothing from intra-op threads, and on a machine whose cores the
        actors keep busy two threads made updates 5x slower (measured).
    max_episode_steps : int, optional
        Episode cap.
    env_kwargs : dict, optional
        Extra ``gymnasium.make`` arguments.
    name : str, optional
    """

    algorithm = "ApeX"
    iteration_column = "iteration"

    def __init__(self, env: str = "CartPole-v1", num_actors: int = 8, seed: int = 0,
                 client=None, *, variant: str = "dqn", hidden=None, actor_hidden=None,
                 critic_hidden=None, lr=None, actor_lr=None, critic_lr=None,
                 batch_size: int = 256, gamma: float = 0.99, n_step: int = 3,
                 target_period=None, grad_clip: float = 40.0, loss: str = "huber",
                 dueling: bool = True, double: bool = True, actor_clip: float = 1.0,
                 exploration=None, exploration_alpha=None, capacity: int = 2**17,
                 soft_capacity: int | None = None, eviction=None, alpha: float = 0.6,
                 beta: float = 0.4, priority_eps: float = 1e-6, min_size: int = 2000,
                 samples_per_insert: float | None | str = "default", learner_chunk: int = 16,
                 param_period: int = 50, evict_interval: int = 100, flush_size: int = 200,
                 actor_param_period: int = 400, eval_interval: int = 1000,
                 eval_episodes: int = 10, target_return: float | None = None,
                 loops: int | None = None, actor_workers: str = "all",
                 replay_worker: str | None = None, replay_resources: dict | str | None = "auto",
                 replay_checkpoint: str | None = None,
                 replay_checkpoint_interval: float = 30.0, inline_actor_steps: int = 256,
                 iteration_seconds: float = 0.25, learner_threads: int | None = 1,
                 max_episode_steps: int | None = None,
                 env_kwargs: dict | None = None, name: str | None = None):
        if variant not in DEFAULTS:
            raise ValueError(f"variant must be one of {tuple(DEFAULTS)}, got {variant!r}")
        d = DEFAULTS[variant]
        pick = lambda v, k: d[k] if v is None else v  # noqa: E731
        target_period = pick(target_period, "target_period")
        exploration = pick(exploration, "exploration")
        exploration_alpha = pick(exploration_alpha, "exploration_alpha")
        eviction = pick(eviction, "eviction")
        if samples_per_insert == "default":
            samples_per_insert = d["samples_per_insert"]
        values = dict(batch_size=batch_size, learner_chunk=learner_chunk,
                      target_period=target_period, beta=beta, exploration=exploration,
                      exploration_alpha=exploration_alpha, param_period=param_period,
                      evict_interval=evict_interval, eval_interval=eval_interval,
                      eval_episodes=eval_episodes, inline_actor_steps=inline_actor_steps,
                      env=env, seed=seed, num_actors=num_actors)
        if variant == "dqn":
            values["lr"] = pick(lr, "lr")
        else:
            values.update(actor_lr=pick(actor_lr, "actor_lr"),
                          critic_lr=pick(critic_lr, "critic_lr"))
        controls = apex_controls(variant, values)
        if iteration_seconds <= 0:
            raise ValueError(f"iteration_seconds must be > 0, got {iteration_seconds!r}")
        if int(min_size) < 1:
            raise ValueError(f"min_size must be >= 1, got {min_size!r}")
        super().__init__(controls, name=name)
        self.variant = variant
        obs_space, act_space, _ = env_spaces(env, **(env_kwargs or {}))
        obs_dim = int(np.prod(obs_space.shape))
        init_seed, self._seed_replay, self._seed_actors = (
            int(s.generate_state(1)[0]) for s in np.random.SeedSequence(int(seed)).spawn(3))
        if variant == "dqn":
            if not hasattr(act_space, "n"):
                raise ValueError(f"Ape-X DQN needs discrete actions; {env} has {act_space} "
                                 f"(use ApeXDPG)")
            hidden = tuple(pick(hidden, "hidden"))
            self.net = QNetSpec(obs_dim, int(act_space.n), hidden, dueling=dueling)
            self.learner = DQNLearner(self.net, lr=values["lr"], grad_clip=grad_clip,
                                      target_period=target_period, loss=loss, double=double,
                                      seed=init_seed)
            spec = transition_spec(obs_dim)
        else:
            if not hasattr(act_space, "low") or hasattr(act_space, "n"):
                raise ValueError(f"Ape-X DPG needs Box actions; {env} has {act_space}")
            self.net = DPGSpec(obs_dim, int(np.prod(act_space.shape)),
                               tuple(np.ravel(act_space.low)), tuple(np.ravel(act_space.high)),
                               tuple(pick(actor_hidden, "actor_hidden")),
                               tuple(pick(critic_hidden, "critic_hidden")))
            self.learner = DPGLearner(self.net, actor_lr=values["actor_lr"],
                                      critic_lr=values["critic_lr"], target_period=target_period,
                                      actor_clip=actor_clip, seed=init_seed)
            spec = transition_spec(obs_dim, (self.net.act_dim,), "float32")
        capacity = int(capacity)
        soft = capacity // 2 if soft_capacity is None else int(soft_capacity)
        self.replay_config = dict(
            capacity=capacity, prioritized=True, alpha=alpha, beta=beta, eps=priority_eps,
            spec=spec, soft_capacity=soft, eviction=eviction, min_size=int(min_size),
            samples_per_insert=samples_per_insert)
        check_config(self.replay_config)  # fail here, not later on a worker
        self.actor_cfg = ActorConfig(env, variant, self.net, int(num_actors), int(n_step),
                                     float(gamma), float(priority_eps), max_episode_steps,
                                     tuple(sorted((env_kwargs or {}).items())))
        if replay_checkpoint is None:
            # not <tmp>/esnb: a folder named like the package would shadow it (as a namespace
            # package) for anyone who runs Python from the temporary directory
            replay_checkpoint = str(Path(tempfile.gettempdir()) / "esnb-replay" / self.name /
                                    "replay.npz")
        self.replay_checkpoint = replay_checkpoint or None
        self.min_size = int(min_size)
        self.target_return = target_return
        self.iteration_seconds = float(iteration_seconds)
        self.learner_threads = learner_threads
        self._config = dict(
            env=env, num_actors=int(num_actors), seed=int(seed), variant=variant,
            hidden=None if variant == "dpg" else list(self.net.hidden),
            actor_hidden=list(self.net.actor_hidden) if variant == "dpg" else None,
            critic_hidden=list(self.net.critic_hidden) if variant == "dpg" else None,
            gamma=float(gamma), n_step=int(n_step), grad_clip=float(grad_clip), loss=loss,
            dueling=bool(dueling), double=bool(double), actor_clip=float(actor_clip),
            capacity=capacity, soft_capacity=soft, eviction=eviction, alpha=float(alpha),
            priority_eps=float(priority_eps), min_size=int(min_size),
            samples_per_insert=samples_per_insert, flush_size=int(flush_size),
            actor_param_period=int(actor_param_period), target_return=target_return,
            loops=loops, actor_workers=actor_workers, replay_worker=replay_worker,
            replay_resources=replay_resources, replay_checkpoint=replay_checkpoint,
            replay_checkpoint_interval=float(replay_checkpoint_interval),
            iteration_seconds=float(iteration_seconds), learner_threads=learner_threads,
            max_episode_steps=max_episode_steps,
            env_kwargs=dict(env_kwargs or {}))
        client = resolve_client(client)
        if replay_resources == "auto":
            replay_resources = None
            if client is not None and replay_worker is None:
                from esnb.cluster import actor_resources

                replay_resources = actor_resources(client)
        if client is None:
            self.backend = InlineBackend(self.actor_cfg, self.replay_config,
                                         seed=self._seed_replay,
                                         checkpoint_path=self.replay_checkpoint,
                                         checkpoint_interval=replay_checkpoint_interval,
                                         flush_size=flush_size)
        else:
            self.backend = ClusterBackend(
                client, self.actor_cfg, self.replay_config, seed=self._seed_replay,
                loops=loops, actor_workers=actor_workers, replay_worker=replay_worker,
                replay_resources=replay_resources, checkpoint_path=self.replay_checkpoint,
                checkpoint_interval=replay_checkpoint_interval,
                settings=LoopSettings(flush_size=int(flush_size),
                                      param_period=int(actor_param_period)))
        self.client = client
        self._eval_rng = np.random.default_rng(np.random.SeedSequence([int(seed), 7]))
        self._eval_env: FastEnv | None = None
        self._restore_replay = False
        self._published = {"exploration": exploration, "exploration_alpha": exploration_alpha}
        self._prefetch = None
        self._pending_priorities: tuple | None = None
        self._evict_due = False
        self._last_drain = 0.0
        self._loop_steps: dict[str, int] = {}
        self._rates = Throughput()
        self.learner_steps = 0
        self.learner_cpu = 0.0
        self.sampled = 0
        self.env_steps = 0
        self.episodes = 0
        self.params_version = 0
        self.eval_return = np.nan
        self.best_eval = -np.inf
        self.solved_at: dict | None = None
        self._replay_stats: dict[str, Any] = {}
        self._pending_episodes: list = []

    # -- public ------------------------------------------------------------------------------
    def config_dict(self) -> dict[str, Any]:
        return {**self._config, "name": self.name}

    def _progress(self) -> dict[str, float]:
        return {"iterations": self.iteration, "learner_steps": self.learner_steps,
                "env_steps": self.env_steps, "episodes": self.episodes,
                "seconds": self.wall_time}

    def params(self) -> np.ndarray:
        """The learner's current parameters as published to the actors (a copy)."""
        return self.learner.params()

    def act(self, obs: np.ndarray) -> np.ndarray:
        """Greedy (DQN) or noise-free (DPG) actions of the learner's network for a batch."""
        flat = self.learner.params()
        if self.variant == "dqn":
            return q_values(self.net, unflatten(flat, self.net.shapes()), obs).argmax(axis=1)
        return dpg_action(self.net, split_dpg_params(self.net, flat)[0], obs)

    def evaluate(self, episodes: int = 10) -> np.ndarray:
        """Returns of ``episodes`` greedy episodes of the learner's network (in this process;
        the workers' threads are busy acting)."""
        if int(episodes) < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        with self._iter_lock:
            return self._evaluate(int(episodes))

    def _evaluate(self, episodes: int) -> np.ndarray:
        if self._eval_env is None:
            self._eval_env = FastEnv(self.actor_cfg.env_id, self.actor_cfg.max_episode_steps,
                                     dict(self.actor_cfg.env_kwargs))
        seeds = self._eval_rng.integers(0, 2**31 - 1, size=episodes)
        return greedy_returns(self.actor_cfg, self.learner.params(), self._eval_env, seeds)

    def pause(self) -> None:
        super().pause()
        if self.backend.started:
            self.backend.pause(True)

    def resume(self) -> None:
        if self.backend.started:
            self.backend.pause(False)
        super().resume()

    def close(self) -> list[dict]:
        """Stop the actor loops and release the replay (a later start() makes new ones)."""
        with self._iter_lock:
            out = self.backend.stop()
            self._prefetch = None
            self._pending_priorities = None
            return out

    def _loop(self) -> None:
        try:
            super()._loop()
        finally:
            # no actor acts while no learner learns: the loops end with the run (the replay
            # stays; a later start() or step() submits new loops that continue numbering)
            if self.backend.started:
                try:
                    with self._iter_lock:
                        self.backend.stop_loops()
                except Exception:  # the cluster may be closing
                    log.debug("could not stop the actor loops", exc_info=True)

    # -- one iteration -----------------------------------------------------------------------
    def _learn_kwargs(self, snap: ControlSnapshot) -> dict:
        if self.variant == "dqn":
            return {"lr": snap.lr, "target_period": snap.target_period}
        return {"actor_lr": snap.actor_lr, "critic_lr": snap.critic_lr,
                "target_period": snap.target_period}

    def _ensure_started(self, snap: ControlSnapshot) -> None:
        if not self.backend.started:
            if self.learner_threads is not None:
                import torch

                torch.set_num_threads(int(self.learner_threads))
            self.backend.start(self.learner.params(), self.params_version, snap.exploration,
                               snap.exploration_alpha, restore=self._restore_replay)
            self._published = {"exploration": snap.exploration,
                               "exploration_alpha": snap.exploration_alpha}
        else:
            if not self.backend.loops_started:
                self.backend.start_loops()
            self.backend.pause(False)
            want = {"exploration": snap.exploration, "exploration_alpha": snap.exploration_alpha}
            if want != self._published:
                self.backend.publish_control(**want)
                self._published = want

    def _drain(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_drain < 0.25:
            return
        self._last_drain = now
        out = self.backend.replay.call("drain")
        self._replay_stats = out["stats"]
        for info in out["infos"]:
            key = str(info["loop"])
            self._loop_steps[key] = max(self._loop_steps.get(key, 0), int(info["env_steps"]))
            self._pending_episodes.extend(info["episodes"])

    def _exchange(self, snap: ControlSnapshot):
        """Send the last chunk's priorities (and an eviction, when due) and ask for the next
        chunk, in one replay call."""
        ids, priorities = self._pending_priorities or (None, None)
        self._pending_priorities = None
        evict, self._evict_due = self._evict_due, False
        return self.backend.replay.submit("exchange", ids, priorities, snap.batch_size,
                                          snap.learner_chunk, snap.beta, evict)

    def _flush_priorities(self) -> None:
        if self._pending_priorities is not None:
            ids, priorities = self._pending_priorities
            self._pending_priorities = None
            self.backend.replay.call("update_priorities", ids, priorities)

    def _chunk(self, snap: ControlSnapshot, info: dict) -> bool:
        """One chunk of updates; False when the replay had nothing to give."""
        replay = self.backend.replay
        if isinstance(self.backend, InlineBackend):
            self.backend.act(snap.inline_actor_steps)
        fut = self._prefetch if self._prefetch is not None else self._exchange(snap)
        t0 = time.perf_counter()
        data = replay.result(fut)
        # the next chunk is sampled while this one trains: its call carries the previous
        # chunk's priorities (so priorities reach the replay one chunk late, as in Ape-X's
        # asynchronous learner)
        self._prefetch = self._exchange(snap)
        info["wait_time"] += time.perf_counter() - t0
        if data is None:
            return False
        t0, c0 = time.perf_counter(), time.thread_time()
        batch, ids, weights = data["batch"], data["ids"], data["weights"]
        kwargs = self._learn_kwargs(snap)
        priorities = np.empty(ids.shape, dtype=np.float64)
        eps = self.actor_cfg.priority_eps
        for j in range(len(ids)):
            td, diag = self.learner.update({k: v[j] for k, v in batch.items()}, weights[j],
                                           **kwargs)
            priorities[j] = np.abs(td) + eps
            self.learner_steps += 1
            self.sampled += ids.shape[1]
            info["diag"].append(diag)
            self._evict_due |= self.learner_steps % snap.evict_interval == 0
            if self.learner_steps % snap.param_period == 0:
                self.params_version += 1
                self.backend.publish_params(self.learner.params(), self.params_version)
            if snap.eval_interval and self.learner_steps % snap.eval_interval == 0:
                info["eval_due"] = True
        priorities[~np.isfinite(priorities)] = 1.0
        info["learn_time"] += time.perf_counter() - t0
        # CPU time of this thread: what the updates cost, however loaded the machine is
        cpu = time.thread_time() - c0
        info["learn_cpu"] += cpu
        self.learner_cpu += cpu
        self._pending_priorities = (ids, priorities)
        return True

    def _recover(self, exc: BaseException, info: dict) -> None:
        log.warning("replay lost (%s); recovering", exc)
        self._prefetch = None
        self._pending_priorities = None  # ids of the lost replay
        events = self.backend.supervise(force=True)
        info["events"].update(events)
        self._after_events(events)

    def _after_events(self, events: dict) -> None:
        # the published parameters may have lived on the lost worker: publish them again
        if events:
            self.params_version += 1
            self.backend.publish_params(self.learner.params(), self.params_version)

    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        self._ensure_started(snap)
        info: dict[str, Any] = {"diag": [], "wait_time": 0.0, "learn_time": 0.0,
                                "learn_cpu": 0.0,
                                "eval_due": False, "events": {}, "waiting": False}
        start = time.perf_counter()
        try:
            events = self.backend.supervise()
            info["events"].update(events)
            self._after_events(events)
            inline = isinstance(self.backend, InlineBackend)
            while True:
                if not self._chunk(snap, info):
                    info["waiting"] = True
                    if not inline:
                        time.sleep(0.05)
                    break
                # inline: one chunk per iteration, so a run never depends on timing
                if inline or time.perf_counter() - start >= self.iteration_seconds:
                    break
            self._drain(force=info["waiting"] or inline)
            done = self.backend.replay.maybe_checkpoint()
            if done is not None:
                info["checkpoint_seconds"] = done["seconds"]
        except ReplayLost as exc:
            self._recover(exc, info)
        eval_return = eval_std = np.nan
        if info["eval_due"]:
            ev = self._evaluate(snap.eval_episodes)
            eval_return, eval_std = float(ev.mean()), float(ev.std())
            self.eval_return = eval_return
            self.best_eval = max(self.best_eval, eval_return)
            if self.target_return is not None and eval_return >= self.target_return \
                    and self.solved_at is None:
                self.solved_at = {"wall_time": self.wall_time + time.perf_counter() - start,
                                  "learner_steps": self.learner_steps,
                                  "env_steps": self.env_steps, "eval_return": eval_return}
                self.stop()
        if self._paused:  # a step() while paused: actors acted for it, now they wait again
            self.backend.pause(True)
        return self._row(snap, info, eval_return, eval_std)

    def _row(self, snap, info, eval_return, eval_std) -> dict[str, Any]:
        self.env_steps = int(sum(self._loop_steps.values()))
        eps, self._pending_episodes = self._pending_episodes, []
        self.episodes += len(eps)
        return history_row(self, snap, info, eps, eval_return, eval_std)

    # -- checkpoints -------------------------------------------------------------------------
    def save(self, path):
        """Write the run's checkpoint; the replay's contents go to its own checkpoint file
        (``replay_checkpoint``) at the same time, and a loaded run starts from it."""
        with self._iter_lock:
            if self.backend.started:
                try:
                    self._flush_priorities()
                    self.backend.replay.maybe_checkpoint(force=True)
                except ReplayLost:
                    log.warning("replay lost while saving: the run resumes from the last "
                                "replay checkpoint")
            return super().save(path)

    def _state_dict(self):
        meta, arrays = self.learner.state_dict()
        arrays = {f"learner.{k}": v for k, v in arrays.items()}
        meta = {"learner": meta, "learner_steps": self.learner_steps, "sampled": self.sampled,
                "learner_cpu": self.learner_cpu,
                "env_steps": self.env_steps, "episodes": self.episodes,
                "params_version": self.params_version, "loop_steps": dict(self._loop_steps),
                "eval_rng": self._eval_rng.bit_generator.state, "best_eval": (
                    None if not np.isfinite(self.best_eval) else self.best_eval),
                "solved_at": self.solved_at, "variant": self.variant,
                "replay_checkpoint": self.replay_checkpoint}
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        if meta["variant"] != self.variant:
            raise ValueError(f"checkpoint of an Ape-X {meta['variant']} run, this is "
                             f"{self.variant}")
        self.learner.load_state_dict(meta["learner"], {
            k[len("learner."):]: v for k, v in arrays.items() if k.startswith("learner.")})
        self.learner_steps = int(meta["learner_steps"])
        self.sampled = int(meta["sampled"])
        self.learner_cpu = float(meta.get("learner_cpu", 0.0))
        self.env_steps = int(meta["env_steps"])
        self.episodes = int(meta["episodes"])
        self.params_version = int(meta["params_version"])
        # a resumed run's loops count from zero: keep the old total under its own key
        self._loop_steps = {"before-resume": self.env_steps}
        self._eval_rng.bit_generator.state = meta["eval_rng"]
        self.best_eval = -np.inf if meta["best_eval"] is None else float(meta["best_eval"])
        self.solved_at = meta["solved_at"]
        path = meta.get("replay_checkpoint")
        self._restore_replay = bool(path) and os.path.exists(path) and \
            path == self.replay_checkpoint


class ApeXDPG(ApeX):
    """Ape-X DPG (continuous actions): :class:`ApeX` with ``variant="dpg"``.

    Defaults from the paper's appendix: critic 400-tanh-300, actor 300-tanh-200, Adam 1e-4,
    target copies every 100 updates, actor gradient clipped element-wise to [-1, 1], replay
    eviction sampled with ``P ∝ p^-0.4``, Gaussian exploration noise with one σ (0.3 of the
    action half-range) for all actors (``exploration_alpha > 0`` spreads it like ε).
    """

    algorithm = "ApeX-DPG"

    def __init__(self, env: str = "InvertedPendulum-v5", num_actors: int = 4, seed: int = 0,
                 client=None, **kwargs):
        if kwargs.pop("variant", "dpg") != "dpg":
            raise ValueError("ApeXDPG is the 'dpg' variant; use ApeX for DQN")
        super().__init__(env, num_actors, seed, client, variant="dpg", **kwargs)

    def config_dict(self) -> dict[str, Any]:
        cfg = super().config_dict()
        cfg.pop("variant", None)
        for k in ("hidden",):
            cfg.pop(k, None)
        return cfg

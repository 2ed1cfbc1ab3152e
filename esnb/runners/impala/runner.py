"""``esnb.Impala``: IMPALA with V-trace (Espeholt et al. 2018, arXiv 1802.01561) on an executor.

Actors and the learner are decoupled. Actor *slots* (``actors_per_worker`` per worker, each
stepping ``envs_per_actor`` environments) run as tasks (:mod:`.tasks`, driven by
:class:`~.slots.ActorSlots`); each task produces several unroll segments with the parameters it
was handed (the newest published version, or an older one when lag is injected) and returns
them with that version. The learner runs here, on the runner's thread, and never waits for all
actors: it trains as soon as B unrolls are queued.

One iteration (:meth:`Impala._iteration`, ``updates_per_iteration`` learner steps), top to
bottom:

1. one snapshot of the controls (lr, entropy cost, clip thresholds, T, B, lag, ...);
2. for each learner step: receive finished actor tasks without blocking, give every idle slot
   a new task (with the newest parameters) unless ``queue_batches`` batches are already
   queued, wait for the first task to end only while fewer than B unrolls of length T are
   queued (:class:`~.feed.UnrollFeed`);
3. take the oldest B unrolls, record their policy lag (learner version - behaviour version),
   one V-trace learner step (:class:`esnb.rl.impala.learner.ImpalaLearner`), publish the new
   version;
4. every ``eval_interval`` learner steps, greedy episodes of the newest parameters
   (:class:`~.evaluation.Evaluations`; on a cluster the result lands in a later row);
5. the history row: returns of episodes actors finished, frames/s, learner updates/s, lag
   statistics and loss diagnostics.

Asynchronous by nature: a cluster run is not bitwise reproducible, every event is logged. On
the inline executor every task runs at once, in slot order, and the segments per task do not
depend on the clock (``executor.reproducible``): the run is reproducible.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np

from esnb.controls import ControlSnapshot
from esnb.envs.make import check_time_limit, env_spaces
from esnb.nets.conv import choose_torso
from esnb.rl.impala.actor_critic import ActorCriticSpec, init_actor_critic
from esnb.rl.impala.learner import ImpalaLearner, LossConfig
from esnb.rl.impala.unrolls import UnrollQueue
from esnb.runners.base import Runner
from esnb.runners.budget import remaining_fraction
from esnb.runners.executor import make_executor
from esnb.runners.impala.config import ImpalaConfig
from esnb.runners.impala.evaluation import COLUMNS, Evaluations
from esnb.runners.impala.feed import UnrollFeed, fresh_recent
from esnb.runners.impala.slots import ActorSlots
from esnb.runners.impala.tasks import ActorConfig
from esnb.runners.plotspec import return_columns


class Impala(UnrollFeed, Runner):
    """IMPALA: decoupled actors on the executor's workers, a V-trace learner on the runner's
    thread.

    Parameters
    ----------
    env : str
        Gymnasium id with Box observations and Discrete or Box actions.
    client : distributed.Client, executor or False, optional
        Where actors run; None uses the default Dask client if there is one, else this
        process; False always runs here (tasks inline, one after another: slow, but
        reproducible).
    preset : {"laptop", "paper"}
        Defaults tuned for 2 cores, or the released code's settings.
    config : ImpalaConfig, optional
        All settings at once (keyword settings are applied on top).
    name : str, optional
        Run name.
    **settings
        Any setting below.
    """

    algorithm = "Impala"
    iteration_column = "iteration"
    Config = ImpalaConfig

    def __init__(self, env: str | None = None, *, client=None, preset: str = "laptop",
                 config: ImpalaConfig | None = None, name: str | None = None, **settings: Any):
        cfg = self.make_config(env, preset, config, **settings)
        obs_space, act_space, limit = env_spaces(cfg.env, **cfg.env_kwargs)
        check_time_limit(cfg.env, limit, cfg.max_episode_steps)  # before any actor makes it
        spec = ActorCriticSpec.for_spaces(
            obs_space, act_space, hidden=cfg.hidden, activation=cfg.activation,
            init_log_std=cfg.init_log_std,
            torso=choose_torso(cfg.torso, cfg.env, obs_space, "impala"))
        if spec.torso is not None and cfg.obs_norm:
            raise ValueError(f"obs_norm takes vector observations; {cfg.env} gives frames, "
                             f"scaled inside the network (obs_norm=False)")
        if cfg.obs_norm is None:
            cfg = cfg.replace(obs_norm=not spec.discrete and spec.torso is None)
        super().__init__(cfg, name=name)
        self.spec = spec
        if cfg.learner_threads is not None:
            import torch

            if torch.get_num_threads() != cfg.learner_threads:
                torch.set_num_threads(cfg.learner_threads)
        seeds = np.random.SeedSequence(cfg.seed).spawn(3)
        init_rng = np.random.Generator(np.random.PCG64(seeds[0]))
        # actors draw from SeedSequence([actor_seed, slot, task]): own streams per slot
        actor_seed = int(np.random.Generator(np.random.PCG64(seeds[2])).integers(2**31 - 1))
        self.learner = impala_learner(cfg, spec, init_actor_critic(spec, init_rng, cfg.init_scheme))

        self.executor = make_executor(client)
        self._run = f"{self.name}-{uuid.uuid4().hex[:8]}"
        self.n_actors = int(cfg.actors or cfg.actors_per_worker * self.executor.n_workers)
        self.actor_config = ActorConfig(
            run=self._run, env_id=cfg.env, spec=spec, envs_per_actor=cfg.envs_per_actor,
            seed=actor_seed, max_episode_steps=cfg.max_episode_steps,
            env_kwargs=tuple(sorted(cfg.env_kwargs.items())), life_loss=cfg.life_loss)
        self.slots = ActorSlots(self.executor, self.actor_config, self.n_actors)
        self.evals = Evaluations(self.executor, self.actor_config,
                                 np.random.Generator(np.random.PCG64(seeds[1])))
        self.queue = UnrollQueue()
        self._payloads: dict[int, dict] = {}
        self._publish()
        self._sec_per_frame: float | None = None
        self.lag_counts = np.zeros(1, dtype=np.int64)
        self.env_steps = 0        # frames actors produced and the learner received
        self.frames_trained = 0   # frames in learner batches
        # frames received but never trained: queued when the run stopped (a checkpoint keeps
        # no queue, so a resumed run goes on without them) and dropped unrolls of earlier
        # sessions; env_steps = frames_trained + queued + dropped + discarded
        self.frames_discarded = 0
        self.episodes = 0
        self.tasks_done = 0
        self.actor_seconds = 0.0
        self._recent = fresh_recent()

    # -- public ------------------------------------------------------------------------------
    @property
    def client(self):
        return self.executor.client

    @property
    def best(self) -> dict | None:
        """The best periodic evaluation so far: ``eval_return``, ``version``, ``env_steps``
        and the evaluated ``payload``."""
        return self.evals.best

    @property
    def version(self) -> int:
        """Parameter version of the learner (one per learner step)."""
        return self.learner.version

    @property
    def learner_steps(self) -> int:
        return self.learner.version

    @property
    def params(self) -> np.ndarray:
        """A copy of the learner's flat parameters."""
        return self.learner.flat

    def lag_histogram(self) -> dict[int, int]:
        """Unrolls trained on, by policy lag (learner version - behaviour version)."""
        return {int(k): int(v) for k, v in enumerate(self.lag_counts) if v}

    def acting_policy(self):
        """The learner's greedy policy as data: the policy MLP (argmax, or the mean clipped to
        the bounds, as greedy evaluations act) with the actors' normalisation; the value
        network and the log-stds are the learner's, not the policy's. On frames a
        :class:`~esnb.rl.impala.acting.FramePolicy` (the actors' conv network: videos and
        ``esnb play`` take it, ``esnb export`` does not)."""
        from esnb.nets.acting import ActingPolicy

        with self._iter_lock:
            payload = self.learner.actor_payload()
        if self.spec.torso is not None:
            from esnb.rl.impala.acting import FramePolicy

            return FramePolicy(self.spec, payload["params"], self.config.env)
        parts = self.spec.actor_layout.split(payload["params"])
        return ActingPolicy(self.spec.policy, parts["policy"], payload["obs_mean"],
                            payload["obs_std"])

    def evaluate(self, episodes: int = 10, best: bool = False) -> np.ndarray:
        """Greedy returns on new seeds (on the workers, blocking).

        Parameters
        ----------
        episodes : int
        best : bool
            Evaluate the parameters of the best periodic evaluation (:attr:`best`) instead of
            the learner's current ones.
        """
        if int(episodes) != episodes or episodes < 1:
            raise ValueError(f"episodes must be an integer >= 1, got {episodes!r}")
        if best and self.best is None:
            raise ValueError("best=True needs a periodic evaluation first (eval_interval > 0)")
        with self._iter_lock:
            payload = self.best["payload"] if best else self.learner.actor_payload()
            return self.evals.returns(payload, int(episodes))

    def close(self) -> None:
        """Cancel in-flight actor tasks and close this run's environments on the workers."""
        super().close()
        with self._iter_lock:
            self.slots.close(extra=self.evals.pending)
            self.evals.forget_pending()
            self.queue.clear()

    def _progress(self) -> dict[str, float]:
        return {"iterations": self.iteration, "learner_steps": self.learner.version,
                "env_steps": self.env_steps, "episodes": self.episodes}

    def _lr(self, snap: ControlSnapshot) -> float:
        """The step's learning rate: the live ``lr``, decayed linearly to 0 over the run's
        budget with ``lr_schedule="linear"`` (the released code's, over its frames)."""
        if self.config.lr_schedule == "constant":
            return snap.lr
        return snap.lr * remaining_fraction(self._progress(), self._target)

    # -- one iteration -----------------------------------------------------------------------
    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        T, B = snap.unroll_length, snap.batch_size
        cfg = LossConfig.of(snap)
        t_start = time.perf_counter()
        learn_time = wait_time = 0.0
        stats: list[dict] = []
        lags: list[np.ndarray] = []
        evaluation = None
        for _ in range(self.config.updates_per_iteration):
            t0 = time.perf_counter()
            self._collect(snap, block=False)
            while self.queue.ready(T) < B:
                self._collect(snap, block=True)
            wait_time += time.perf_counter() - t0

            t0 = time.perf_counter()
            batch = self.queue.take(B, T)
            lags.append(self.learner.version - batch.versions)
            lr = self._lr(snap)
            stats.append(self.learner.step(batch, cfg, lr, snap.max_grad_norm))
            self.frames_trained += T * B
            self._publish()
            learn_time += time.perf_counter() - t0

            if snap.eval_interval and self.learner.version % snap.eval_interval == 0:
                self.evals.start(self._payloads[self.learner.version], self.env_steps,
                                 snap.eval_episodes)
            evaluation = self.evals.poll() or evaluation
        elapsed = time.perf_counter() - t_start

        lag = np.concatenate(lags)
        self._count_lags(lag)
        rec, self._recent = self._recent, fresh_recent()
        rets = np.asarray(rec["returns"], dtype=np.float64)
        per_s = (lambda x: x / elapsed) if elapsed > 0 else (lambda x: np.nan)
        row = {
            "learner_steps": self.learner.version,
            "env_steps": self.env_steps,
            "frames_trained": self.frames_trained,
            "episodes": self.episodes,
            **return_columns(rets),
            "len_mean": float(np.mean(rec["lengths"])) if rec["lengths"] else np.nan,
            **dict.fromkeys(COLUMNS, np.nan), "eval_steps": self.evals.steps,
            "lag_mean": float(lag.mean()), "lag_min": int(lag.min()), "lag_max": int(lag.max()),
            "actor_fps": per_s(rec["frames"]),
            "learner_fps": per_s(self.config.updates_per_iteration * T * B),
            "updates_per_s": per_s(self.config.updates_per_iteration),
            "learn_time": learn_time,
            "wait_time": wait_time,
            "iter_time": elapsed,
            "tasks_done": rec["tasks"],
            "segments_per_task": self._segments(T, B),
            "queued_unrolls": len(self.queue),
            "queued_frames": self.queue.frames,
            "dropped_unrolls": self.queue.dropped_nonfinite + self.queue.dropped_length,
            "dropped_frames": self.queue.dropped_frames,
            "discarded_frames": self.frames_discarded,
            "lr": self._lr(snap), "entropy_cost": snap.entropy_cost,
            "unroll_length": T, "batch_size": B, "actor_lag": snap.actor_lag,
            "correction": snap.correction,
            **{k: float(np.mean([s[k] for s in stats])) for k in stats[0]},
        }
        if evaluation is not None:
            row.update(evaluation)
        return row

    def _count_lags(self, lag: np.ndarray) -> None:
        counts = np.bincount(lag)
        if len(counts) > len(self.lag_counts):
            self.lag_counts = np.pad(self.lag_counts, (0, len(counts) - len(self.lag_counts)))
        self.lag_counts[:len(counts)] += counts

    # -- checkpoints -------------------------------------------------------------------------
    def _state_dict(self):
        meta, arrays = self.learner.state_dict()
        arrays["lag_counts"] = self.lag_counts.copy()
        eval_meta, eval_arrays = self.evals.state_dict()
        meta.update(eval_meta)
        arrays.update(eval_arrays)
        meta.update(
            env_steps=self.env_steps, frames_trained=self.frames_trained,
            # a resumed run has no queue: what was queued or dropped counts as discarded there
            frames_discarded=self.frames_discarded + self.queue.frames
            + self.queue.dropped_frames,
            episodes=self.episodes, tasks_done=self.tasks_done,
            actor_seconds=self.actor_seconds, task_count=self.slots.task_count.tolist(),
            num_params=self.spec.num_params, sec_per_frame=self._sec_per_frame)
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        if int(meta["num_params"]) != self.spec.num_params:
            raise ValueError(f"checkpoint has {meta['num_params']} parameters, this network "
                             f"{self.spec.num_params}")
        self.learner.load_state_dict(meta, arrays)
        self.lag_counts = np.asarray(arrays["lag_counts"], dtype=np.int64).copy()
        self.evals.load_state_dict(meta, arrays)
        self.env_steps = int(meta["env_steps"])
        self.frames_trained = int(meta["frames_trained"])
        self.frames_discarded = int(meta.get("frames_discarded", 0))
        self.episodes = int(meta["episodes"])
        self.tasks_done = int(meta["tasks_done"])
        self.actor_seconds = float(meta["actor_seconds"])
        counts = np.asarray(meta["task_count"], dtype=np.int64)
        if counts.shape == self.slots.task_count.shape:
            # actors resume with fresh episodes and new random streams (task numbers go on)
            self.slots.task_count = counts.copy()
        self._sec_per_frame = meta["sec_per_frame"]
        self._payloads = {}
        self._publish()


def impala_learner(cfg, spec, flat) -> ImpalaLearner:
    """The learner of settings ``cfg`` (an IMPALA config whose ``obs_norm`` is resolved) for
    the actor-critic ``spec`` with parameters ``flat``."""
    return ImpalaLearner(spec, flat, lr=cfg.lr, optimizer=cfg.optimizer, obs_norm=cfg.obs_norm,
                         rmsprop_eps=cfg.rmsprop_eps, rmsprop_decay=cfg.rmsprop_decay,
                         device=cfg.device)

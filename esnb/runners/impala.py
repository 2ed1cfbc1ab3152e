"""``esnb.Impala``: IMPALA with V-trace (Espeholt et al. 2018, arXiv 1802.01561) on Dask.

Actors and the learner are decoupled. Actor *slots* (``actors_per_worker`` per worker, each
stepping ``envs_per_actor`` environments) run as tasks on workers; each task produces several
unroll segments with the parameters it was handed (the newest published version, or an older
one when lag is injected) and returns them with that version. The learner runs here, on the
runner's thread, and never waits for all actors: it trains as soon as B unrolls are queued.

One iteration (``updates_per_iteration`` learner steps), top to bottom:

1. one snapshot of the controls (lr, entropy cost, clip thresholds, T, B, lag, ...);
2. for each learner step: collect finished actor tasks without blocking, give every idle slot
   a new task (with the newest parameters) unless ``queue_batches`` batches are already
   queued, block only while fewer than B unrolls of length T are queued;
3. take the oldest B unrolls, record their policy lag (learner version - behaviour version),
   one V-trace learner step (:class:`esnb.rl.impala.ImpalaLearner`), publish the new version;
4. every ``eval_interval`` learner steps, greedy episodes of the newest parameters on the
   workers (asynchronously: the result lands in a later row);
5. append the history row: returns of episodes actors finished, frames/s, learner updates/s,
   lag statistics and loss diagnostics.

Asynchronous by nature: a cluster run is not bitwise reproducible, every event is logged. An
inline run (no client) runs each task at once, in slot order, and is reproducible.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from typing import Any

import numpy as np

from esnb.controls import Control, Controls, ControlSnapshot
from esnb.envs.make import env_spaces
from esnb.rl.actor_critic import ActorCriticSpec, init_actor_critic
from esnb.rl.impala import CORRECTIONS, OPTIMIZERS, ImpalaLearner, LossConfig
from esnb.rl.unrolls import UnrollQueue
from esnb.runners.base import Runner
from esnb.runners.executor import resolve_client
from esnb.workers.impala import ActorConfig, drop_actors, impala_evaluate, impala_unrolls

log = logging.getLogger("esnb.impala")

#: a slot's task that failed this many times in a row ends the run
MAX_TASK_FAILURES = 3


def impala_controls() -> list[Control]:
    """The schema of :class:`Impala`'s controls."""
    ratio = dict(low=0.0, low_open=True, high=1e6, log=True)
    return [
        Control("lr", "float", 1e-3, low=0.0, low_open=True, high=1.0, log=True,
                help="learning rate of the optimiser"),
        Control("entropy_cost", "float", 0.01, low=0.0, high=10.0,
                help="weight of the entropy bonus"),
        Control("baseline_cost", "float", 0.5, low=0.0, high=100.0,
                help="weight of 1/2 sum (v_s - V)^2"),
        Control("clip_rho_threshold", "float", 1.0, **ratio,
                help="rho bar: clip of the importance ratio in the V-trace TD errors"),
        Control("clip_pg_rho_threshold", "float", 1.0, **ratio,
                help="rho bar pg: clip of the ratio weighting policy-gradient advantages"),
        Control("clip_c_threshold", "float", 1.0, **ratio,
                help="c bar: clip of the trace coefficients"),
        Control("vtrace_lambda", "float", 1.0, low=0.0, high=1.0,
                help="lambda: scales the trace coefficients c_t"),
        Control("correction", "choice", "vtrace", choices=CORRECTIONS,
                help="'none' forces rho = c = 1 (no off-policy correction)"),
        Control("unroll_length", "int", 20, low=1, high=10_000,
                help="T: steps per unroll (queued unrolls of another length are dropped)"),
        Control("batch_size", "int", 32, low=1, high=100_000,
                help="B: unrolls per learner step"),
        Control("max_grad_norm", "float", 40.0, low=0.0, high=1e9,
                help="clip the gradient's global norm (0: no clipping)"),
        Control("actor_lag", "int", 0, low=0, high=100_000,
                help="lag injection: actors get parameters this many versions old"),
        Control("queue_batches", "int", 2, low=1, high=1000,
                help="actors wait while this many batches of unrolls are queued"),
        Control("eval_interval", "int", 100, low=0, high=10**9,
                help="greedy evaluation every n learner steps (0: never)"),
        Control("eval_episodes", "int", 10, low=1, high=10_000,
                help="episodes per greedy evaluation"),
        Control("env", "str", "CartPole-v1", live=False, help="gymnasium environment id"),
        Control("seed", "int", 0, low=0, live=False, help="seed of every random draw"),
        Control("discount", "float", 0.99, low=0.0, high=1.0, live=False,
                help="gamma"),
        Control("reward_scale", "float", 1.0, low=0.0, low_open=True, high=1e6, live=False,
                help="rewards are multiplied by this in the loss"),
        Control("obs_norm", "bool", False, live=False,
                help="normalise observations with running statistics"),
        Control("optimizer", "choice", "adam", choices=OPTIMIZERS, live=False,
                help="adam, or the reference's rmsprop"),
    ]


class Impala(Runner):
    """IMPALA: decoupled actors on Dask workers, a V-trace learner on the runner's thread.

    Parameters
    ----------
    env : str
        Gymnasium id with Box observations and Discrete or Box actions.
    client : distributed.Client or False, optional
        Where actors run; None uses the default client if there is one, else this process;
        False always runs here (tasks inline, one after another: slow, but reproducible).
    seed : int
        Seeds the initial network and every draw of the run.
    lr, entropy_cost, baseline_cost, clip_rho_threshold, clip_pg_rho_threshold,
    clip_c_threshold, vtrace_lambda, correction, unroll_length, batch_size, max_grad_norm,
    actor_lag, queue_batches, eval_interval, eval_episodes
        Live controls (see :func:`impala_controls`).
    discount : float
        gamma (fixed).
    reward_scale : float
        Rewards are multiplied by this in the loss (fixed).
    obs_norm : bool, optional
        Normalise observations with running statistics (default: True for Box actions).
    optimizer : {"adam", "rmsprop"}
    hidden : tuple of int
        Hidden sizes of both MLPs (policy and value are separate networks).
    activation : {"tanh", "relu"}
    init_log_std : float
        Initial log-std of Gaussian policies.
    actors : int, optional
        Actor slots (default: ``actors_per_worker`` x workers; inline: 2).
    actors_per_worker : int
        Slots per worker: 2 keeps a worker busy while a finished task's result travels.
    envs_per_actor : int
        Environments per slot, stepped in lockstep with one numpy forward.
    updates_per_iteration : int
        Learner steps per history row (and per controls snapshot).
    min_task_runtime : float
        Seconds an actor task should at least run (segments are batched to reach it: a Dask
        round trip is ~10 ms); shorter tasks lower the policy lag.
    max_segments : int
        Most unroll segments per task.
    segments_per_task : int, optional
        Fix the segments per task instead. Default: adaptive on a cluster (timing-dependent);
        inline, ``ceil(batch_size / envs_per_actor)`` so an inline run is reproducible.
    max_episode_steps : int, optional
        Episode cap (default: the env's own time limit; reaching it is a truncation).
    env_kwargs : dict, optional
        Extra ``gymnasium.make`` arguments.
    learner_threads : int, optional
        torch intra-op threads of this process, set when the runner is made (process-wide;
        None leaves torch alone). Default 1: the learner's matrices are small and the cores
        belong to the actors; with 2 threads on the busy 2-core machine a learner step took
        223 ms instead of 15 ms (threads spin waiting for each other).
    name : str, optional
        Run name.
    """

    algorithm = "Impala"
    iteration_column = "iteration"

    def __init__(self, env: str = "CartPole-v1", client=None, seed: int = 0, *,
                 lr: float = 1e-3, entropy_cost: float = 0.01, baseline_cost: float = 0.5,
                 clip_rho_threshold: float = 1.0, clip_pg_rho_threshold: float = 1.0,
                 clip_c_threshold: float = 1.0, vtrace_lambda: float = 1.0,
                 correction: str = "vtrace", unroll_length: int = 20, batch_size: int = 32,
                 max_grad_norm: float = 40.0, actor_lag: int = 0, queue_batches: int = 2,
                 eval_interval: int = 100, eval_episodes: int = 10, discount: float = 0.99,
                 reward_scale: float = 1.0, obs_norm: bool | None = None,
                 optimizer: str = "adam", hidden=(64, 64), activation: str = "tanh",
                 init_log_std: float = -0.5, actors: int | None = None,
                 actors_per_worker: int = 2, envs_per_actor: int = 16,
                 updates_per_iteration: int = 10, min_task_runtime: float = 0.05,
                 max_segments: int = 64, segments_per_task: int | None = None,
                 max_episode_steps: int | None = None,
                 env_kwargs: dict | None = None, learner_threads: int | None = 1,
                 name: str | None = None):
        for label, value, low in (("actors_per_worker", actors_per_worker, 1),
                                  ("envs_per_actor", envs_per_actor, 1),
                                  ("updates_per_iteration", updates_per_iteration, 1),
                                  ("max_segments", max_segments, 1),
                                  ("segments_per_task", segments_per_task or 1, 1)):
            if int(value) != value or value < low:
                raise ValueError(f"{label} must be an integer >= {low}, got {value!r}")
        if actors is not None and (int(actors) != actors or actors < 1):
            raise ValueError(f"actors must be an integer >= 1 or None, got {actors!r}")
        if learner_threads is not None and (int(learner_threads) != learner_threads
                                            or learner_threads < 1):
            raise ValueError(f"learner_threads must be an integer >= 1 or None, got "
                             f"{learner_threads!r}")
        if not min_task_runtime >= 0:
            raise ValueError(f"min_task_runtime must be >= 0, got {min_task_runtime!r}")
        obs_space, act_space, _ = env_spaces(env, **(env_kwargs or {}))
        spec = ActorCriticSpec.for_spaces(obs_space, act_space, hidden=hidden,
                                          activation=activation, init_log_std=init_log_std)
        if obs_norm is None:
            obs_norm = not spec.discrete
        controls = Controls(impala_controls(), dict(
            lr=lr, entropy_cost=entropy_cost, baseline_cost=baseline_cost,
            clip_rho_threshold=clip_rho_threshold, clip_pg_rho_threshold=clip_pg_rho_threshold,
            clip_c_threshold=clip_c_threshold, vtrace_lambda=vtrace_lambda,
            correction=correction, unroll_length=unroll_length, batch_size=batch_size,
            max_grad_norm=max_grad_norm, actor_lag=actor_lag, queue_batches=queue_batches,
            eval_interval=eval_interval, eval_episodes=eval_episodes, env=env, seed=seed,
            discount=discount, reward_scale=reward_scale, obs_norm=obs_norm,
            optimizer=optimizer))
        super().__init__(controls, name=name)
        self.spec = spec
        self._config = dict(
            env=env, seed=int(seed), discount=float(discount), reward_scale=float(reward_scale),
            obs_norm=bool(obs_norm), optimizer=optimizer, hidden=list(spec.policy.hidden),
            activation=activation, init_log_std=float(init_log_std), actors=actors,
            actors_per_worker=int(actors_per_worker), envs_per_actor=int(envs_per_actor),
            updates_per_iteration=int(updates_per_iteration),
            min_task_runtime=float(min_task_runtime), max_segments=int(max_segments),
            segments_per_task=segments_per_task,
            max_episode_steps=max_episode_steps, env_kwargs=dict(env_kwargs or {}))
        self.updates_per_iteration = int(updates_per_iteration)
        self.min_task_runtime = float(min_task_runtime)
        self.max_segments = int(max_segments)
        self.segments_per_task = segments_per_task

        if learner_threads is not None:
            import torch

            if torch.get_num_threads() != int(learner_threads):
                torch.set_num_threads(int(learner_threads))
        seeds = np.random.SeedSequence(int(seed)).spawn(3)
        init_rng = np.random.Generator(np.random.PCG64(seeds[0]))
        self._eval_rng = np.random.Generator(np.random.PCG64(seeds[1]))
        # actors draw from SeedSequence([actor_seed, slot, task]): own streams per slot
        actor_seed = int(np.random.Generator(np.random.PCG64(seeds[2])).integers(2**31 - 1))
        self.learner = ImpalaLearner(spec, init_actor_critic(spec, init_rng), lr=lr,
                                     optimizer=optimizer, obs_norm=obs_norm)

        self.client = None if client is False else resolve_client(client)
        self._run = f"{self.name}-{uuid.uuid4().hex[:8]}"
        n_workers = 1 if self.client is None else max(1, len(self._workers(force=True)))
        self.n_actors = int(actors or (2 if self.client is None
                                       else actors_per_worker * n_workers))
        self.actor_config = ActorConfig(
            run=self._run, env_id=env, spec=spec, envs_per_actor=int(envs_per_actor),
            seed=actor_seed, max_episode_steps=max_episode_steps,
            env_kwargs=tuple(sorted((env_kwargs or {}).items())))

        self.queue = UnrollQueue()
        self._payloads: dict[int, dict] = {}
        self._publish()
        self._inflight: dict[int, Any] = {}  # slot -> future (cluster) or result (inline)
        self._task_count = np.zeros(self.n_actors, dtype=np.int64)
        self._failures = np.zeros(self.n_actors, dtype=np.int64)
        self._eval_pending: tuple[dict, int, list] | None = None
        #: the best periodic evaluation so far: eval_return, version, env_steps, payload
        self.best: dict | None = None
        self._sec_per_frame: float | None = None
        self.lag_counts = np.zeros(1, dtype=np.int64)
        self.env_steps = 0        # frames actors produced and the learner received
        self.frames_trained = 0   # frames in learner batches
        self.episodes = 0
        self.eval_steps = 0
        self.tasks_done = 0
        self.actor_seconds = 0.0
        self._recent = {"returns": [], "lengths": [], "frames": 0, "tasks": 0}

    # -- public ------------------------------------------------------------------------------
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

    def evaluate(self, episodes: int = 10, best: bool = False) -> np.ndarray:
        """Greedy returns on new seeds (on the cluster, blocking).

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
            seeds = self._eval_rng.integers(0, 2**31 - 1, size=int(episodes))
            results = self._eval_run(payload, seeds)
        return np.concatenate([r["returns"] for r in results])

    def close(self) -> None:
        """Cancel in-flight actor tasks and close this run's environments on the workers."""
        with self._iter_lock:
            if self.client is None:
                drop_actors(self._run)
            else:
                futures = [f for f in self._inflight.values()]
                if self._eval_pending is not None:
                    futures += self._eval_pending[2]
                if futures:
                    self.client.cancel(futures)
                try:
                    self.client.run(drop_actors, self._run)
                except Exception:  # a closed cluster has nothing left to close
                    log.debug("could not drop actors of %s", self._run, exc_info=True)
            self._inflight.clear()
            self._eval_pending = None
            self.queue.clear()

    def config_dict(self) -> dict[str, Any]:
        return {**self._config, "name": self.name}

    def _progress(self) -> dict[str, float]:
        return {"iterations": self.iteration, "learner_steps": self.learner.version,
                "env_steps": self.env_steps, "episodes": self.episodes}

    # -- actors ------------------------------------------------------------------------------
    def _workers(self, force: bool = False) -> list[str]:
        now = time.monotonic()
        if force or now - getattr(self, "_workers_at", -1e9) > 5.0:
            info = self.client.scheduler_info(n_workers=-1)
            self._worker_list = sorted(info["workers"])
            self._workers_at = now
        return self._worker_list

    def _publish(self) -> None:
        self._payloads[self.learner.version] = self.learner.actor_payload()

    def _payload_for_actor(self, lag: int) -> dict:
        """The newest payload, or the one ``lag`` versions older (lag injection)."""
        newest = self.learner.version
        for v in [v for v in self._payloads if v < newest - lag]:
            del self._payloads[v]  # nobody will be handed these again
        return self._payloads[max(newest - lag, min(self._payloads))]

    def _segments(self, T: int, B: int) -> int:
        """Unroll segments per actor task: enough to run >= ``min_task_runtime``."""
        if self.segments_per_task is not None:
            return int(self.segments_per_task)
        if self.client is None:  # no timing: an inline run must not depend on the clock
            return int(min(self.max_segments, math.ceil(B / self.actor_config.envs_per_actor)))
        if self._sec_per_frame is None:
            return 1
        frames = max(1, T * self.actor_config.envs_per_actor)
        want = math.ceil(self.min_task_runtime / max(self._sec_per_frame * frames, 1e-9))
        return int(min(self.max_segments, max(1, want)))

    def _submit(self, slot: int, snap: ControlSnapshot) -> None:
        task = int(self._task_count[slot])
        self._task_count[slot] += 1
        args = (self.actor_config, self._payload_for_actor(snap.actor_lag), slot, task,
                self._segments(snap.unroll_length, snap.batch_size), snap.unroll_length)
        if self.client is None:
            self._inflight[slot] = impala_unrolls(*args)
            return
        # pin the slot to one worker so its episodes continue there; allow others, so a
        # dead or retired worker's slots move on (and start fresh episodes)
        workers = self._workers()
        where = dict(workers=[workers[slot % len(workers)]], allow_other_workers=True) \
            if workers else {}
        self._inflight[slot] = self.client.submit(
            impala_unrolls, *args, key=f"impala-{self._run}-a{slot}-t{task}", pure=False,
            **where)

    def _top_up(self, snap: ControlSnapshot) -> None:
        """Give every idle slot a task, unless enough unrolls are already queued."""
        for slot in range(self.n_actors):
            if slot in self._inflight:
                continue
            if self.queue.ready(snap.unroll_length) >= snap.queue_batches * snap.batch_size:
                return
            self._submit(slot, snap)

    def _receive(self, result: dict) -> None:
        self.queue.add(result)
        self.env_steps += int(result["frames"])
        self.tasks_done += 1
        self.actor_seconds += float(result["seconds"])
        self.episodes += len(result["episode_returns"])
        rate = result["seconds"] / max(result["frames"], 1)
        self._sec_per_frame = rate if self._sec_per_frame is None else (
            0.8 * self._sec_per_frame + 0.2 * rate)
        rec = self._recent
        rec["returns"].extend(result["episode_returns"].tolist())
        rec["lengths"].extend(result["episode_lengths"].tolist())
        rec["frames"] += int(result["frames"])
        rec["tasks"] += 1

    def _collect(self, snap: ControlSnapshot, block: bool) -> None:
        """Receive finished actor tasks (waiting for one if ``block``); refill idle slots."""
        if self.client is None:
            for slot in sorted(self._inflight):
                self._receive(self._inflight.pop(slot))
                self._failures[slot] = 0
            self._top_up(snap)
            return
        from distributed import wait

        done = [s for s, f in self._inflight.items() if f.done()]
        started, warn_at = time.monotonic(), 60.0
        while block and not done:
            if not self._inflight:
                self._top_up(snap)
                if not self._inflight:
                    raise RuntimeError("no actor task in flight and too few unrolls queued")
            try:
                with self.client.as_current():  # wait() looks for the default client
                    wait(list(self._inflight.values()), timeout=10,
                         return_when="FIRST_COMPLETED")
            except TimeoutError:
                pass
            if time.monotonic() - started > warn_at:
                log.warning("the learner has waited %.0f s for actors: is the cluster alive?",
                            time.monotonic() - started)
                warn_at += 60.0
            done = [s for s, f in self._inflight.items() if f.done()]
        ok = [s for s in done if self._inflight[s].status == "finished"]
        for slot in (s for s in done if s not in ok):
            self._task_failed(slot, self._inflight.pop(slot))
        if ok:
            futures = [self._inflight.pop(s) for s in ok]
            for slot, result in zip(ok, self.client.gather(futures), strict=True):
                self._receive(result)
                self._failures[slot] = 0
        self._top_up(snap)

    def _task_failed(self, slot: int, future) -> None:
        exc = future.exception() if future.status == "error" else None
        self._failures[slot] += 1
        if self._failures[slot] >= MAX_TASK_FAILURES:
            raise RuntimeError(f"actor {slot} failed {MAX_TASK_FAILURES} times in a row; "
                               f"last error: {exc!r}") from exc
        log.warning("actor %d task %s (%s): resubmitting", slot, future.status, exc)

    # -- evaluation --------------------------------------------------------------------------
    def _eval_calls(self, payload: dict, seeds: np.ndarray) -> list:
        parts = np.array_split(seeds, min(len(seeds), max(1, len(self._workers()))
                                          if self.client is not None else 1))
        return [(impala_evaluate, (self.actor_config, payload, p)) for p in parts if len(p)]

    def _eval_run(self, payload: dict, seeds: np.ndarray) -> list[dict]:
        calls = self._eval_calls(payload, seeds)
        if self.client is None:
            return [fn(*args) for fn, args in calls]
        futures = [self.client.submit(fn, *args, pure=False, priority=10) for fn, args in calls]
        return self.client.gather(futures)

    def _eval_start(self, snap: ControlSnapshot) -> None:
        payload = self._payloads[self.learner.version]
        seeds = self._eval_rng.integers(0, 2**31 - 1, size=snap.eval_episodes)
        if self.client is None:
            self._eval_pending = (payload, self.env_steps, self._eval_run(payload, seeds))
            return
        futures = [self.client.submit(fn, *args, pure=False, priority=10)
                   for fn, args in self._eval_calls(payload, seeds)]
        self._eval_pending = (payload, self.env_steps, futures)

    def _eval_poll(self) -> dict | None:
        if self._eval_pending is None:
            return None
        payload, steps, parts = self._eval_pending
        if self.client is not None:
            if not all(f.done() for f in parts):
                return None
            parts = self.client.gather(parts)
        self._eval_pending = None
        returns = np.concatenate([p["returns"] for p in parts])
        finite = np.concatenate([p["finite"] for p in parts])
        self.eval_steps += int(sum(p["steps"] for p in parts))
        ok = returns[finite]
        mean = float(ok.mean()) if ok.size else np.nan
        if ok.size and (self.best is None or mean > self.best["eval_return"]):
            # the evaluated parameters themselves: by now the learner has moved on
            self.best = {"eval_return": mean, "version": int(payload["version"]),
                         "env_steps": int(steps), "payload": payload}
        return {"eval_return": mean,
                "eval_return_std": float(ok.std()) if ok.size else np.nan,
                "eval_return_min": float(ok.min()) if ok.size else np.nan,
                "eval_version": payload["version"], "eval_env_steps": steps}

    # -- one iteration -----------------------------------------------------------------------
    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        T, B = snap.unroll_length, snap.batch_size
        cfg = LossConfig(discount=snap.discount, baseline_cost=snap.baseline_cost,
                         entropy_cost=snap.entropy_cost,
                         clip_rho_threshold=snap.clip_rho_threshold,
                         clip_pg_rho_threshold=snap.clip_pg_rho_threshold,
                         clip_c_threshold=snap.clip_c_threshold, lambda_=snap.vtrace_lambda,
                         correction=snap.correction, reward_scale=snap.reward_scale)
        t_start = time.perf_counter()
        learn_time = wait_time = 0.0
        stats: list[dict] = []
        lags: list[np.ndarray] = []
        evaluation = None
        for _ in range(self.updates_per_iteration):
            t0 = time.perf_counter()
            self._collect(snap, block=False)
            while self.queue.ready(T) < B:
                self._collect(snap, block=True)
            wait_time += time.perf_counter() - t0

            t0 = time.perf_counter()
            batch = self.queue.take(B, T)
            lag = self.learner.version - batch.versions
            lags.append(lag)
            stats.append(self.learner.step(batch, cfg, snap.lr, snap.max_grad_norm))
            self.frames_trained += T * B
            self._publish()
            learn_time += time.perf_counter() - t0

            if (snap.eval_interval and self.learner.version % snap.eval_interval == 0
                    and self._eval_pending is None):
                self._eval_start(snap)
            evaluation = self._eval_poll() or evaluation
        elapsed = time.perf_counter() - t_start

        lag = np.concatenate(lags)
        counts = np.bincount(lag)
        if len(counts) > len(self.lag_counts):
            self.lag_counts = np.pad(self.lag_counts, (0, len(counts) - len(self.lag_counts)))
        self.lag_counts[:len(counts)] += counts
        rec, self._recent = self._recent, {"returns": [], "lengths": [], "frames": 0,
                                           "tasks": 0}
        rets = np.asarray(rec["returns"], dtype=np.float64)
        mean_stats = {k: float(np.mean([s[k] for s in stats])) for k in stats[0]}
        row = {
            "learner_steps": self.learner.version,
            "env_steps": self.env_steps,
            "frames_trained": self.frames_trained,
            "episodes": self.episodes,
            "return_mean": float(rets.mean()) if rets.size else np.nan,
            "return_max": float(rets.max()) if rets.size else np.nan,
            "return_min": float(rets.min()) if rets.size else np.nan,
            "len_mean": float(np.mean(rec["lengths"])) if rec["lengths"] else np.nan,
            "eval_return": np.nan, "eval_return_std": np.nan, "eval_return_min": np.nan,
            "eval_version": np.nan, "eval_env_steps": np.nan,
            "eval_steps": self.eval_steps,
            "lag_mean": float(lag.mean()), "lag_min": int(lag.min()), "lag_max": int(lag.max()),
            "actor_fps": rec["frames"] / elapsed if elapsed > 0 else np.nan,
            "learner_fps": self.updates_per_iteration * T * B / elapsed if elapsed > 0
            else np.nan,
            "updates_per_s": self.updates_per_iteration / elapsed if elapsed > 0 else np.nan,
            "learn_time": learn_time,
            "wait_time": wait_time,
            "iter_time": elapsed,
            "tasks_done": rec["tasks"],
            "segments_per_task": self._segments(T, B),
            "queued_unrolls": len(self.queue),
            "dropped_unrolls": self.queue.dropped_nonfinite + self.queue.dropped_length,
            "lr": snap.lr, "entropy_cost": snap.entropy_cost,
            "unroll_length": T, "batch_size": B, "actor_lag": snap.actor_lag,
            "correction": snap.correction,
            **mean_stats,
        }
        if evaluation is not None:
            row.update(evaluation)
        return row

    # -- checkpoints -------------------------------------------------------------------------
    def _state_dict(self):
        meta, arrays = self.learner.state_dict()
        arrays["lag_counts"] = self.lag_counts.copy()
        if self.best is not None:
            pl = self.best["payload"]
            arrays["best_params"] = pl["params"]
            if pl["obs_mean"] is not None:
                arrays.update(best_obs_mean=pl["obs_mean"], best_obs_std=pl["obs_std"])
            meta["best"] = {k: self.best[k] for k in ("eval_return", "version", "env_steps")}
        meta.update(
            eval_rng=self._eval_rng.bit_generator.state, env_steps=self.env_steps,
            frames_trained=self.frames_trained, episodes=self.episodes,
            eval_steps=self.eval_steps, tasks_done=self.tasks_done,
            actor_seconds=self.actor_seconds, task_count=self._task_count.tolist(),
            num_params=self.spec.num_params, sec_per_frame=self._sec_per_frame)
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        if int(meta["num_params"]) != self.spec.num_params:
            raise ValueError(f"checkpoint has {meta['num_params']} parameters, this network "
                             f"{self.spec.num_params}")
        self.learner.load_state_dict(meta, arrays)
        self.lag_counts = np.asarray(arrays["lag_counts"], dtype=np.int64).copy()
        self._eval_rng.bit_generator.state = meta["eval_rng"]
        self.env_steps = int(meta["env_steps"])
        self.frames_trained = int(meta["frames_trained"])
        self.episodes = int(meta["episodes"])
        self.eval_steps = int(meta["eval_steps"])
        self.tasks_done = int(meta["tasks_done"])
        self.actor_seconds = float(meta["actor_seconds"])
        counts = np.asarray(meta["task_count"], dtype=np.int64)
        if counts.shape == self._task_count.shape:
            # actors resume with fresh episodes and new random streams (task numbers go on)
            self._task_count = counts.copy()
        self._sec_per_frame = meta["sec_per_frame"]
        if meta.get("best") is not None:
            payload = {"version": int(meta["best"]["version"]), "params": arrays["best_params"],
                       "obs_mean": arrays.get("best_obs_mean"),
                       "obs_std": arrays.get("best_obs_std")}
            self.best = {**meta["best"], "payload": payload}
        self._payloads = {}
        self._publish()

"""``esnb.ES``: OpenAI-ES (Salimans et al. 2017) with a shared noise table, on an executor.

One generation, top to bottom (:meth:`ES._iteration`):

1. IW-ES: importance-weighted updates from the previous batch (``iw_k > 0``), then that
   batch's observation sums join the normalisation;
2. ``ask``: ``population/2`` noise offsets, env seeds and observation-statistic flags, drawn
   from the run's generator on the driver (workers never draw);
3. rollouts: every worker keeps a replica of theta, Adam's state and the observation
   statistics (:mod:`.replica`); the generation's small update (the last ordinary update as
   offsets and shaped returns, this generation's IW updates, observation sums) is sent once,
   with ``tasks_per_worker`` tasks of mirrored pairs per worker (one by default: all of a
   worker's episodes step in lock step in one task), placed on the workers in turn
   (:mod:`.dispatch`), and every ``eval_interval`` generations noise-free episodes of theta;
   results come back in submission order;
4. ``tell``: pairs with a non-finite return are left out (counted and logged), the rest are
   shaped, one Adam step is taken, and the batch is kept for IW-ES;
5. the history row.

Every number depends only on the seed and the controls, never on how pairs were split into
tasks or where they ran, so theta is bitwise the same inline, with 1 worker or with N; the
driver sends O(population) numbers per generation whatever the policy's size.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from esnb.controls import ControlSnapshot
from esnb.envs.make import env_spaces
from esnb.envs.obs_stats import ObsStats
from esnb.envs.pixels import check_vector_obs
from esnb.es.openai_es import OpenAIES, Step
from esnb.nets.policy import PolicySpec, init_params
from esnb.noise import (
    NoiseConfig,
    TableLoad,
    check_noise_table,
    drop_noise_table,
)
from esnb.runners.base import Runner
from esnb.runners.es.config import ESConfig
from esnb.runners.es.dispatch import Generations, sync_state
from esnb.runners.es.iw import IWReuse
from esnb.runners.es.replica import normalisation
from esnb.runners.es.state import load_run_state, run_state
from esnb.runners.es.tasks import (
    PolicyPayload,
    RolloutConfig,
    evaluate,
    pack_pairs,
    replica_evaluate,
    replica_pairs,
    warm_up,
)
from esnb.runners.executor import make_executor
from esnb.runners.plotspec import PlotPanel, Series, return_columns

log = logging.getLogger("esnb.es")

#: per-pair result arrays of an ``es_pairs`` task, concatenated in pair order
PAIR_FIELDS = ("returns", "lengths", "terminated", "truncated", "finite", "obs_sum",
               "obs_sumsq", "obs_count")


class ES(Runner):
    """OpenAI-ES with a shared noise table, mirrored sampling and Adam (IW-ES with ``iw_k``).

    Parameters
    ----------
    env : str
        Gymnasium id (``"HalfCheetah-v5"``, ``"CartPole-v1"``, ...).
    client : distributed.Client, executor or False, optional
        Where rollouts run; None uses the default Dask client if there is one, else this
        process; False always runs in this process.
    preset : {"laptop", "paper"}
        Defaults tuned for 2 cores, or the papers' published settings.
    config : ESConfig, optional
        All settings at once (keyword settings are applied on top).
    name : str, optional
        Run name (output folder, task keys).
    **settings
        Any setting below.
    """

    algorithm = "ES"
    iteration_column = "generation"
    Config = ESConfig

    def __init__(self, env: str | None = None, *, client=None, preset: str = "laptop",
                 config: ESConfig | None = None, name: str | None = None, **settings: Any):
        cfg = self.make_config(env, preset, config, **settings)
        noise = NoiseConfig.configured(cfg.noise_size, cfg.noise_seed)
        cfg = cfg.replace(noise_size=noise.size, noise_seed=noise.seed)
        super().__init__(cfg, name=name)
        check_vector_obs(cfg.env, self.algorithm)  # before any worker makes the env
        self.executor = make_executor(client)
        env_kwargs = tuple(sorted(cfg.env_kwargs.items()))
        # workers import the rollout stack and MuJoCo meanwhile (~0.25 s of a first generation)
        self.executor.warm(warm_up, cfg.env, cfg.max_episode_steps, env_kwargs)
        # mapped (or read, or built) here first, while the env is made: this host's workers
        # then map it, never wait on a builder; workers get its digest, and one whose table
        # differs refuses the run
        loading = TableLoad(noise)
        try:
            obs_space, act_space, _ = env_spaces(cfg.env, **cfg.env_kwargs)
            self.spec = PolicySpec.for_spaces(obs_space, act_space, hidden=cfg.hidden,
                                              activation=cfg.activation)
            if self.spec.num_params > noise.size:
                raise ValueError(f"the policy has {self.spec.num_params} parameters but the "
                                 f"noise table only {noise.size} entries: raise noise_size")
            self.noise = loading.result()
        except BaseException:
            loading.discard()
            raise
        noise = noise.expecting(self.noise)
        self.noise_config = noise
        self.rollout_config = RolloutConfig(
            env_id=cfg.env, spec=self.spec, noise=noise, max_episode_steps=cfg.max_episode_steps,
            env_kwargs=env_kwargs, action_noise=cfg.action_noise,
            obs_norm=cfg.obs_norm)

        seeds = np.random.SeedSequence(cfg.seed).spawn(3)
        init_rng = np.random.Generator(np.random.PCG64(seeds[0]))
        self._rng = np.random.Generator(np.random.PCG64(seeds[1]))
        self._eval_rng = np.random.Generator(np.random.PCG64(seeds[2]))

        # every worker maps (or builds) it, and refuses the run if its table differs: those
        # present now stop the run, those that join later leave the cluster, saying why
        self.executor.on_every_worker(check_noise_table, noise, name=f"esnb-noise-{noise.key}",
                                      teardown=drop_noise_table)
        self.es = OpenAIES(init_params(self.spec, init_rng), self.noise, lr=cfg.lr)
        self.obs_stats = ObsStats(self.spec.obs_dim)
        self.iw = IWReuse()
        self.generations = Generations(self.executor, self.name, self.rollout_config)
        # the last ordinary update and its observation sums, as workers replay them
        self._step: Step | None = None
        self._step_obs: tuple | None = None
        self.env_steps = 0
        self.eval_steps = 0
        self.episodes = 0

    # -- public ------------------------------------------------------------------------------
    @property
    def client(self):
        return self.executor.client

    @property
    def theta(self) -> np.ndarray:
        """A copy of the current flat parameters."""
        return self.es.theta.copy()

    def policy(self):
        """The current mean policy as the canonical torch :class:`~esnb.nets.MLPPolicy`."""
        from esnb.nets.torch_mlp import MLPPolicy

        pol = MLPPolicy(self.spec, self.es.theta)
        if self.config.obs_norm:
            pol.set_obs_norm(self.obs_stats.mean, self.obs_stats.std)
        return pol

    def acting_policy(self):
        """The current mean policy with the normalisation its rollouts use, as data."""
        from esnb.nets.acting import ActingPolicy

        return ActingPolicy(self.spec, self.es.theta, *self._normalisation())

    def evaluate(self, episodes: int = 10) -> np.ndarray:
        """Returns of ``episodes`` noise-free episodes of the current theta (on the cluster)."""
        if int(episodes) < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        with self._iter_lock:
            handle = self.executor.put(self._payload(self.controls["sigma"]))
            try:
                res = self.executor.run(self._eval_calls(handle, int(episodes)),
                                        f"{self.name}-eval{self.iteration}")
            finally:
                self.executor.release(handle)
        return np.concatenate([r["returns"] for r in res])

    def plot_panels(self) -> list[PlotPanel]:
        """IW-ES runs add a panel of updates per batch and one of ESS/n."""
        if self.controls["iw_k"] == 0 and not self.iw.log:
            return []
        return [
            PlotPanel("IW-ES updates per batch vs {x}", [Series("iw_updates", "IW updates")],
                      y_label="updates"),
            PlotPanel("IW-ES ESS/n vs {x}",
                      [Series("iw_ess_frac", "ESS/n of the first IW update", points=True)],
                      y_label="ESS / n"),
        ]

    @property
    def iw_history(self):
        """Every attempted IW update: generation, batch, k, ESS, clipped share, norms."""
        import pandas as pd

        return pd.DataFrame(list(self.iw.log))

    def _progress(self) -> dict[str, float]:
        return {"generations": self.iteration, "env_steps": self.env_steps,
                "episodes": self.episodes}

    # -- one generation ----------------------------------------------------------------------
    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        generation, label = self.iteration + 1, f"{self.name}-g{self.iteration}"
        iw_row, iw_taken = self.iw.run(snap, self.es, generation)
        self.iw.release_obs(self.obs_stats)  # frozen during the batch's IW updates, added now
        update = self.generations.update(generation, self._step, iw_taken, self._step_obs,
                                         snap.sigma, self.es.theta, *self._normalisation())

        pairs = snap.population // 2
        indices = self.es.ask(self._rng, pairs)
        env_seeds = self._rng.integers(0, 2**31 - 1, size=pairs)
        flags = self._rng.random((pairs, 2))
        collect = (flags < snap.obs_stat_prob) if snap.obs_norm else np.zeros_like(flags, bool)

        train, evals, rollout = self._rollouts(snap, update, indices, env_seeds, collect, label)
        merged = {k: np.concatenate([r[k] for r in train]) for k in PAIR_FIELDS}
        valid = merged["finite"].all(axis=1)
        if not valid.all():
            log.warning("generation %d: %d of %d pairs had a non-finite return or observation "
                        "and were left out of the update", generation, (~valid).sum(), pairs)
        returns = merged["returns"][valid]
        obs = _obs_sums(merged, valid)

        self._step = Step.of(indices[valid], returns, lr=snap.lr, weight_decay=snap.weight_decay,
                             shaping=snap.shaping, sigma=snap.sigma, generation=generation)
        self._step_obs = obs
        info, batch = self.es.tell(self._step)
        self.iw.keep(batch, obs)
        if info is None:
            log.warning("generation %d: no valid pair, parameters left unchanged", generation)
            info = {"grad_norm": np.nan, "update_norm": 0.0,
                    "theta_norm": float(np.linalg.norm(self.es.theta)), "update_ratio": 0.0}

        self.env_steps += int(merged["lengths"].sum())
        self.episodes += 2 * pairs
        row = {"env_steps": self.env_steps, "episodes": self.episodes,
               **return_columns(returns, std=True), **rollout, **_episode_stats(merged, valid),
               "obs_count": self.obs_stats.count, "sigma": snap.sigma, "lr": snap.lr,
               "population": snap.population, "shaping": snap.shaping, "iw_k": snap.iw_k,
               **iw_row, **info}
        row.update(self._eval_columns(evals))
        return row

    def _rollouts(self, snap: ControlSnapshot, update, indices, env_seeds, collect,
                  label: str):
        """Run the generation's pair tasks (and a due evaluation) on the workers' replicas;
        returns the training results, the evaluation results and the timing columns."""
        pairs = len(indices)
        per_task = self._pairs_per_task(pairs)
        calls = [(replica_pairs, (pack_pairs(indices[s:s + per_task], env_seeds[s:s + per_task],
                                             collect[s:s + per_task]),))
                 for s in range(0, pairs, per_task)]
        n_train = len(calls)
        if snap.eval_interval > 0 and self.iteration % snap.eval_interval == 0:
            calls += [(replica_evaluate, (part,)) for part in
                      self._eval_seeds(snap.eval_episodes)]
        sent = self.executor.sent_bytes
        t0 = time.perf_counter()
        results = self.generations.run(update, calls, label, lambda: sync_state(
            update.generation, self.es, self.obs_stats, update.checksum), first=n_train)
        dispatch = time.perf_counter() - t0
        steps = sum(int(r["lengths"].sum()) for r in results[:n_train])
        workers = self.generations.n_workers
        seconds = sum(r["seconds"] for r in results)
        timing = {"steps_per_s": steps / dispatch if dispatch > 0 else np.nan,
                  "gen_time": dispatch,
                  "busy": seconds / (workers * dispatch) if dispatch > 0 else np.nan,
                  # the longest task, its replica's update included (compute, not overhead)
                  "task_max": max(r["replica_seconds"] for r in results),
                  # CPU seconds of the tasks (wall seconds count a preempted worker's wait)
                  "task_cpu": sum(r["replica_cpu"] for r in results),
                  "task_cpu_max": max(r["replica_cpu"] for r in results),
                  # worker processes that ran the generation's pairs (every worker, when spread)
                  "task_workers": len({r["pid"] for r in results[:n_train]}),
                  # tasks that read theta from the driver's host memory, not a replica
                  "host_theta_tasks": sum(bool(r["host_theta"]) for r in results),
                  "tasks": n_train, "pairs_per_task": per_task, "workers": workers,
                  "syncs": self.generations.syncs}
        if sent is not None:
            timing["sent_bytes"] = self.executor.sent_bytes - sent
        return results[:n_train], results[n_train:], timing

    def _eval_columns(self, evals: list[dict]) -> dict[str, Any]:
        out = {"eval_return": np.nan, "eval_return_std": np.nan}
        if evals:
            ev = np.concatenate([r["returns"] for r in evals])
            ok = np.concatenate([r["finite"] for r in evals])
            self.eval_steps += int(sum(r["steps"] for r in evals))
            if ok.any():
                out.update(eval_return=float(ev[ok].mean()), eval_return_std=float(ev[ok].std()))
        out["eval_steps"] = self.eval_steps
        return out

    def close(self) -> None:
        """Stop the run and drop its replicas on the workers."""
        super().close()
        self.generations.close()

    def _normalisation(self):
        return normalisation(self.obs_stats, self.config.obs_norm)

    def _payload(self, sigma: float) -> PolicyPayload:
        return PolicyPayload(self.es.theta.copy(), *self._normalisation(), float(sigma))

    def _pairs_per_task(self, pairs: int) -> int:
        """Pairs per task: the generation's pairs in ``tasks_per_worker`` tasks per worker."""
        tasks = self.generations.n_workers * self.config.tasks_per_worker
        return max(1, math.ceil(pairs / tasks))

    def _eval_seeds(self, episodes: int) -> list[np.ndarray]:
        """The evaluation episodes' seeds, split over the workers."""
        seeds = self._eval_rng.integers(0, 2**31 - 1, size=episodes)
        parts = np.array_split(seeds, min(episodes, self.generations.n_workers))
        return [part for part in parts if len(part)]

    def _eval_calls(self, handle, episodes: int) -> list:
        return [(evaluate, (self.rollout_config, handle, part))
                for part in self._eval_seeds(episodes)]

    # -- checkpoints (:mod:`.state`) -------------------------------------------------------
    def _state_dict(self):
        return run_state(self)

    def _load_state_dict(self, meta, arrays):
        load_run_state(self, meta, arrays)


def _obs_sums(merged: dict, valid: np.ndarray):
    """Observation sums of the valid pairs that collected some, summed in pair order."""
    use = valid & (merged["obs_count"] > 0)
    if not use.any():
        return None
    return (merged["obs_sum"][use].sum(axis=0), merged["obs_sumsq"][use].sum(axis=0),
            float(merged["obs_count"][use].sum()))


def _episode_stats(merged: dict, valid: np.ndarray) -> dict[str, Any]:
    return {"len_mean": float(merged["lengths"].mean()), "n_excluded": int((~valid).sum()),
            "n_terminated": int(merged["terminated"].sum()),
            "n_truncated": int(merged["truncated"].sum())}


def train_es(config: dict) -> dict:
    """A whole ES run inside one task (sweeps, paper figures): ``config`` holds ES settings plus
    ``budget`` (e.g. ``{"env_steps": 1e6}``) and ``final_eval`` episodes.

    Returns the history rows, the IW log and the final evaluation's returns.
    """
    config = dict(config)
    budget = config.pop("budget")
    episodes = int(config.pop("final_eval", 10))
    runner = ES(**config, client=False)
    runner.start(**budget).wait()
    returns = runner.evaluate(episodes) if episodes else np.array([])
    return {"history": runner.records, "iw": list(runner.iw.log),
            "final_eval": returns.tolist()}

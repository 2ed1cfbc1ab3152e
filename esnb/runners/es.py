"""``esnb.ES``: OpenAI-ES (Salimans et al. 2017) on a Dask cluster, or inline.

One generation, top to bottom:

1. take one snapshot of the controls (sigma, lr, ... as they are now);
2. draw ``population/2`` noise offsets, env seeds and observation-statistic flags from the
   run's generator (on the driver: workers never draw);
3. scatter theta (+ observation normalisation) once, submit tasks of several mirrored pairs
   each (sized so a task runs >= ``min_task_runtime``), and, every ``eval_interval``
   generations, noise-free episodes of theta;
4. gather in submission order, drop pairs with a non-finite return (counted and logged),
   shape fitness, take one Adam step, add the observation sums;
5. append the history row.

Every number depends only on the seed and the controls, never on how pairs were split into
tasks, so theta is bitwise the same inline, with 1 worker or with N.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from esnb import config
from esnb.controls import Control, Controls, ControlSnapshot
from esnb.envs.make import env_spaces
from esnb.envs.obs_stats import ObsStats
from esnb.es.iw import Batch
from esnb.es.openai_es import OpenAIES, es_gradient
from esnb.es.shaping import SHAPINGS, get_shaping
from esnb.noise import DEFAULT_SEED, DEFAULT_SIZE, NoiseConfig, get_noise_table
from esnb.policies.spec import PolicySpec, init_params
from esnb.runners.base import Runner
from esnb.runners.executor import make_executor
from esnb.runners.iw import IWUpdater, iw_controls
from esnb.workers import PolicyPayload, RolloutConfig, es_pairs, evaluate

log = logging.getLogger("esnb.es")


def _even(value: int) -> str | None:
    return None if value % 2 == 0 else "must be even (mirrored sampling evaluates pairs)"


def es_controls() -> list[Control]:
    """The schema of :class:`ES`'s controls."""
    return [
        Control("sigma", "float", 0.02, low=0.0, low_open=True, high=10.0, log=True,
                help="std of the parameter perturbations"),
        Control("lr", "float", 0.01, low=0.0, low_open=True, high=1.0, log=True,
                help="Adam step size"),
        Control("weight_decay", "float", 0.005, low=0.0, high=1.0,
                help="L2 coefficient added to the negated gradient"),
        Control("population", "int", 40, low=2, high=100_000, check=_even,
                help="episodes per generation (mirrored pairs x 2)"),
        Control("shaping", "choice", "centered_ranks", choices=tuple(SHAPINGS),
                help="fitness shaping applied to the returns"),
        Control("eval_interval", "int", 5, low=0, high=100_000,
                help="evaluate the mean policy every n generations (0: never)"),
        Control("eval_episodes", "int", 5, low=1, high=1000,
                help="noise-free episodes per evaluation"),
        Control("obs_stat_prob", "float", 0.01, low=0.0, high=1.0,
                help="fraction of rollouts whose observations update the normalisation"),
        Control("env", "str", "CartPole-v1", live=False, help="gymnasium environment id"),
        Control("seed", "int", 0, low=0, live=False, help="seed of every random draw"),
        Control("obs_norm", "bool", True, live=False, help="normalise observations"),
    ]


class ES(Runner):
    """OpenAI-ES with a shared noise table, mirrored sampling and Adam.

    Parameters
    ----------
    env : str
        Gymnasium id (``"HalfCheetah-v5"``, ``"CartPole-v1"``, ...).
    population : int
        Episodes per generation; even (mirrored pairs). Live.
    sigma, lr, weight_decay : float
        Noise std, Adam step size and L2 coefficient (OpenAI-ES defaults). Live.
    seed : int
        Seeds the initial parameters and every draw of the run.
    client : distributed.Client, optional
        Where rollouts run; None uses the default client if there is one, else this process;
        False always runs in this process.
    hidden : tuple of int
        Hidden layer sizes of the MLP (two of 64, tanh, as the IW-ES paper).
    activation : {"tanh", "relu"}
    shaping : str
        Fitness shaping (``"centered_ranks"``, ``"raw"``, ``"sign"``). Live.
    eval_interval, eval_episodes : int
        Noise-free evaluation of theta every ``eval_interval`` generations. Live.
    obs_norm : bool
        Normalise observations with running statistics gathered from rollouts.
    obs_stat_prob : float
        Fraction of rollouts that contribute observation statistics (OpenAI: 0.01). Live.
    max_episode_steps : int, optional
        Episode cap (default: the env's own time limit).
    env_kwargs : dict, optional
        Extra ``gymnasium.make`` arguments.
    noise_size, noise_seed : int, optional
        The shared noise table; default from dask config ``esnb.noise.size``/``.seed``
        (25M float32 = 100 MB, seed 123).
    min_task_runtime : float
        Seconds a task should at least run; pairs are batched to reach it (measured).
    action_noise : float
        Std of Gaussian noise on Box actions in training rollouts (OpenAI's ``ac_noise_std``).
    iw_k : int or "auto"
        IW-ES (Campos et al. 2018): up to K importance-weighted updates from each batch (0: plain
        OpenAI-ES). ``"auto"`` keeps updating while ESS/n stays above ``iw_ess_threshold``, at
        most ``iw_k_max`` times. K, the clip, the normalisation and the threshold are live
        controls (``iw_k``, ``iw_adaptive``, ``iw_clip``, ``iw_normalize``,
        ``iw_ess_threshold``); see :mod:`esnb.runners.iw` for when the updates happen.
    iw_k_max : int
        The most IW updates per batch in ``"auto"`` mode.
    iw_distributed : {"auto", True, False}
        Compute the weights' dot products on the workers (paper section 3.2); "auto" does so
        when ``pairs * d`` is large. Both paths give the same numbers.
    name : str, optional
        Run name (output folder, task keys).
    """

    algorithm = "ES"
    iteration_column = "generation"

    def __init__(self, env: str = "CartPole-v1", population: int = 40, sigma: float = 0.02,
                 lr: float = 0.01, weight_decay: float = 0.005, seed: int = 0, client=None, *,
                 hidden=(64, 64), activation: str = "tanh", shaping: str = "centered_ranks",
                 eval_interval: int = 5, eval_episodes: int = 5, obs_norm: bool = True,
                 obs_stat_prob: float = 0.01, max_episode_steps: int | None = None,
                 env_kwargs: dict | None = None, noise_size: int | None = None,
                 noise_seed: int | None = None, min_task_runtime: float = 0.1,
                 action_noise: float = 0.0, iw_k: int | str = 0, iw_k_max: int = 10,
                 iw_distributed: bool | str = "auto", name: str | None = None):
        if iw_k == "auto":
            iw_k, adaptive = iw_k_max, True
        elif isinstance(iw_k, str):
            raise ValueError(f"iw_k must be an integer >= 0 or 'auto', got {iw_k!r}")
        else:
            adaptive = False
        controls = Controls(es_controls() + iw_controls(0, False), dict(
            iw_k=iw_k, iw_adaptive=adaptive,
            sigma=sigma, lr=lr, weight_decay=weight_decay, population=population,
            shaping=shaping, eval_interval=eval_interval, eval_episodes=eval_episodes,
            obs_stat_prob=obs_stat_prob, env=env, seed=seed, obs_norm=obs_norm))
        if min_task_runtime < 0:
            raise ValueError(f"min_task_runtime must be >= 0, got {min_task_runtime}")
        if action_noise < 0:
            raise ValueError(f"action_noise must be >= 0, got {action_noise}")
        super().__init__(controls, name=name)
        noise_size = int(config.get("noise.size", DEFAULT_SIZE) if noise_size is None
                         else noise_size)
        noise_seed = int(config.get("noise.seed", DEFAULT_SEED) if noise_seed is None
                         else noise_seed)
        obs_space, act_space, _ = env_spaces(env, **(env_kwargs or {}))
        self.spec = PolicySpec.for_spaces(obs_space, act_space, hidden=hidden,
                                          activation=activation)
        self.noise_config = NoiseConfig(size=int(noise_size), seed=int(noise_seed))
        if self.spec.num_params > self.noise_config.size:
            raise ValueError(
                f"the policy has {self.spec.num_params} parameters but the noise table only "
                f"{self.noise_config.size} entries: raise noise_size"
            )
        self.rollout_config = RolloutConfig(
            env_id=env, spec=self.spec, noise=self.noise_config,
            max_episode_steps=max_episode_steps,
            env_kwargs=tuple(sorted((env_kwargs or {}).items())), action_noise=action_noise)
        self._config = dict(
            env=env, seed=int(seed), hidden=list(self.spec.hidden), activation=activation,
            obs_norm=bool(obs_norm), max_episode_steps=max_episode_steps,
            env_kwargs=dict(env_kwargs or {}), noise_size=int(noise_size),
            noise_seed=int(noise_seed), min_task_runtime=float(min_task_runtime),
            action_noise=float(action_noise), iw_k_max=int(iw_k_max),
            iw_distributed=iw_distributed)
        self.min_task_runtime = float(min_task_runtime)

        seeds = np.random.SeedSequence(int(seed)).spawn(3)
        init_rng = np.random.Generator(np.random.PCG64(seeds[0]))
        self._rng = np.random.Generator(np.random.PCG64(seeds[1]))
        self._eval_rng = np.random.Generator(np.random.PCG64(seeds[2]))

        self.executor = make_executor(client)
        self.executor.prepare_noise(self.noise_config)
        self.noise = get_noise_table(self.noise_config)
        self.es = OpenAIES(init_params(self.spec, init_rng), self.noise, lr=lr)
        self.obs_stats = ObsStats(self.spec.obs_dim)
        self.iw = IWUpdater(iw_distributed)
        self.env_steps = 0
        self.eval_steps = 0
        self.episodes = 0
        self._sec_per_step: float | None = None
        self._mean_len: float | None = None

    # -- public ------------------------------------------------------------------------------
    @property
    def client(self):
        return self.executor.client

    @property
    def theta(self) -> np.ndarray:
        """A copy of the current flat parameters."""
        return self.es.theta.copy()

    def policy(self):
        """The current mean policy as the canonical torch :class:`~esnb.policies.MLPPolicy`."""
        from esnb.policies.torch_mlp import MLPPolicy

        pol = MLPPolicy(self.spec, self.es.theta)
        if self.controls["obs_norm"]:
            pol.set_obs_norm(self.obs_stats.mean, self.obs_stats.std)
        return pol

    def evaluate(self, episodes: int = 10) -> np.ndarray:
        """Returns of ``episodes`` noise-free episodes of the current theta (on the cluster)."""
        if int(episodes) < 1:
            raise ValueError(f"episodes must be >= 1, got {episodes}")
        with self._iter_lock:
            payload = self._payload(self.controls["sigma"])
            handle = self.executor.put(payload)
            try:
                res = self.executor.run(self._eval_calls(handle, int(episodes)),
                                        f"{self.name}-eval{self.iteration}")
            finally:
                self.executor.release(handle)
        return np.concatenate([r["returns"] for r in res])

    def plot_panels(self):
        """IW-ES runs add a panel of ESS and updates per batch (see :mod:`esnb.ui.spec`)."""
        from esnb.ui.spec import PlotPanel, Series

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

    def config_dict(self) -> dict[str, Any]:
        return {**self._config, "name": self.name}

    def _progress(self) -> dict[str, float]:
        return {"generations": self.iteration, "env_steps": self.env_steps,
                "episodes": self.episodes}

    # -- one generation ----------------------------------------------------------------------
    def _payload(self, sigma: float) -> PolicyPayload:
        mean = std = None
        if self.controls["obs_norm"]:
            mean = self.obs_stats.mean.astype(np.float32)
            std = self.obs_stats.std.astype(np.float32)
        return PolicyPayload(self.es.theta.copy(), mean, std, float(sigma))

    def _pairs_per_task(self, pairs: int) -> int:
        workers = self.executor.n_workers
        most = max(1, math.ceil(pairs / workers))
        if self._sec_per_step is None or self._mean_len is None:
            return max(1, math.ceil(pairs / (2 * workers)))
        pair_time = max(self._sec_per_step * 2 * self._mean_len, 1e-9)
        return int(min(most, max(1, math.ceil(self.min_task_runtime / pair_time))))

    def _eval_calls(self, handle, episodes: int) -> list:
        seeds = self._eval_rng.integers(0, 2**31 - 1, size=episodes)
        parts = np.array_split(seeds, min(episodes, self.executor.n_workers))
        return [(evaluate, (self.rollout_config, handle, part)) for part in parts if len(part)]

    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        label = f"{self.name}-g{self.iteration}"
        iw_row = self.iw.run(snap, self.es, self.executor, self.noise_config,
                             self.iteration + 1, label)
        self.iw.release_obs(self.obs_stats)  # frozen during the batch's updates, added now

        pairs = snap.population // 2
        indices = self.es.ask(self._rng, pairs)
        env_seeds = self._rng.integers(0, 2**31 - 1, size=pairs)
        flags = self._rng.random((pairs, 2))
        collect = (flags < snap.obs_stat_prob) if snap.obs_norm else np.zeros_like(flags, bool)

        per_task = self._pairs_per_task(pairs)
        handle = self.executor.put(self._payload(snap.sigma))
        calls = [
            (es_pairs, (self.rollout_config, handle, indices[s:s + per_task],
                        env_seeds[s:s + per_task], collect[s:s + per_task]))
            for s in range(0, pairs, per_task)
        ]
        eval_due = snap.eval_interval > 0 and self.iteration % snap.eval_interval == 0
        n_train = len(calls)
        if eval_due:
            calls += self._eval_calls(handle, snap.eval_episodes)
        t0 = time.perf_counter()
        try:
            results = self.executor.run(calls, label)
        finally:
            self.executor.release(handle)
        dispatch = time.perf_counter() - t0
        train, evals = results[:n_train], results[n_train:]
        merged = {k: np.concatenate([r[k] for r in train]) for k in
                  ("returns", "lengths", "terminated", "truncated", "finite", "obs_sum",
                   "obs_sumsq", "obs_count")}
        seconds = sum(r["seconds"] for r in results)
        steps = int(merged["lengths"].sum())

        valid = merged["finite"].all(axis=1)
        n_excluded = int((~valid).sum())
        if n_excluded:
            log.warning("generation %d: %d of %d pairs had a non-finite return or observation "
                        "and were left out of the update", self.iteration + 1, n_excluded, pairs)
        returns = merged["returns"][valid]
        use = valid & (merged["obs_count"] > 0)
        obs = None
        if use.any():
            obs = (merged["obs_sum"][use].sum(axis=0), merged["obs_sumsq"][use].sum(axis=0),
                   float(merged["obs_count"][use].sum()))
        if valid.any():
            shaped = get_shaping(snap.shaping)(returns)
            theta_old = self.es.theta.copy()
            g = es_gradient(self.noise, indices[valid], shaped, self.es.dim)
            info = self.es.apply_gradient(g, lr=snap.lr, weight_decay=snap.weight_decay)
            batch = Batch(indices[valid], shaped, theta_old, snap.sigma, self.iteration + 1)
            self.iw.keep(batch, obs)
        else:
            self.iw.keep(None, obs)
            log.warning("generation %d: no valid pair, parameters left unchanged",
                        self.iteration + 1)
            info = {"grad_norm": np.nan, "update_norm": 0.0,
                    "theta_norm": float(np.linalg.norm(self.es.theta)), "update_ratio": 0.0}

        self.env_steps += steps
        self.episodes += 2 * pairs
        train_seconds = sum(r["seconds"] for r in train)
        if steps:
            rate = train_seconds / steps
            self._sec_per_step = rate if self._sec_per_step is None else (
                0.7 * self._sec_per_step + 0.3 * rate)
            self._mean_len = float(merged["lengths"].mean())
        row = {
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "return_mean": float(returns.mean()) if returns.size else np.nan,
            "return_max": float(returns.max()) if returns.size else np.nan,
            "return_min": float(returns.min()) if returns.size else np.nan,
            "return_std": float(returns.std()) if returns.size else np.nan,
            "len_mean": float(merged["lengths"].mean()),
            "eval_return": np.nan,
            "eval_return_std": np.nan,
            "eval_steps": self.eval_steps,
            "steps_per_s": steps / dispatch if dispatch > 0 else np.nan,
            "gen_time": dispatch,
            "busy": seconds / (self.executor.n_workers * dispatch) if dispatch > 0 else np.nan,
            "tasks": n_train,
            "pairs_per_task": per_task,
            "workers": self.executor.n_workers,
            "n_excluded": n_excluded,
            "n_terminated": int(merged["terminated"].sum()),
            "n_truncated": int(merged["truncated"].sum()),
            "obs_count": self.obs_stats.count,
            "sigma": snap.sigma,
            "lr": snap.lr,
            "population": snap.population,
            "shaping": snap.shaping,
            "iw_k": snap.iw_k,
            **iw_row,
            **info,
        }
        if evals:
            ev = np.concatenate([r["returns"] for r in evals])
            ok = np.concatenate([r["finite"] for r in evals])
            ev_steps = int(sum(r["steps"] for r in evals))
            self.eval_steps += ev_steps
            row["eval_steps"] = self.eval_steps
            if ok.any():
                row["eval_return"] = float(ev[ok].mean())
                row["eval_return_std"] = float(ev[ok].std())
        return row

    # -- checkpoints -------------------------------------------------------------------------
    def _state_dict(self):
        arrays = self.es.state_dict()
        obs = self.obs_stats.state_dict()
        arrays.update(obs_sum=obs["sum"], obs_sumsq=obs["sumsq"])
        meta = {
            "obs_count": obs["count"],
            "rng": self._rng.bit_generator.state,
            "eval_rng": self._eval_rng.bit_generator.state,
            "env_steps": self.env_steps,
            "eval_steps": self.eval_steps,
            "episodes": self.episodes,
            "sec_per_step": self._sec_per_step,
            "mean_len": self._mean_len,
            "num_params": self.spec.num_params,
        }
        iw_meta, iw_arrays = self.iw.state()
        meta.update(iw_meta)
        arrays.update(iw_arrays)
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        if int(meta["num_params"]) != self.spec.num_params or arrays["theta"].shape != (
            self.spec.num_params,
        ):
            raise ValueError(
                f"checkpoint has {arrays['theta'].shape[0]} parameters, this policy "
                f"{self.spec.num_params}"
            )
        self.es.load_state_dict(arrays)
        self.obs_stats.load_state_dict(
            {"sum": arrays["obs_sum"], "sumsq": arrays["obs_sumsq"], "count": meta["obs_count"]})
        self._rng.bit_generator.state = meta["rng"]
        self._eval_rng.bit_generator.state = meta["eval_rng"]
        self.env_steps = int(meta["env_steps"])
        self.eval_steps = int(meta["eval_steps"])
        self.episodes = int(meta["episodes"])
        self._sec_per_step = meta["sec_per_step"]
        self._mean_len = meta["mean_len"]
        self.iw.load(meta, arrays)

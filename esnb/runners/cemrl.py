"""``esnb.CEMRL``: CEM-RL (Pourchot and Sigaud 2019, "CEM-RL: Combining evolutionary and
gradient-based methods for policy search"), serial or parallel-synchronous (P-CEM-RL, Lee et
al. 2020's baseline), with the same TD3 critic, networks and replay as :class:`esnb.AESRL`.

One generation, top to bottom:

1. ``pop_size`` individuals from sep-CEM (:class:`esnb.aes.SepCEM`);
2. after ``rl_start_step`` env steps, the first ``n_rl`` (half) are RL individuals: the critic
   makes as many updates as the previous generation's env steps (split evenly, each share with
   one RL individual as the TD3 target policy) and each RL individual's actor takes that many
   steps against the critic, with a fresh Adam;
3. every individual is evaluated for one episode (its transitions go into the replay);
4. the elites update ``(mu, var)``; every ``eval_interval`` generations ``eval_episodes``
   noise-free episodes of the mean (counted in ``eval_steps``, apart from the budget).

``parallel=False`` (CEM-RL): everything in this process, in CEM-RL's order (critic share of
RL individual i, then its actor, then the next). ``parallel=True`` (P-CEM-RL): the critic
trains on its actor (on a worker) while the evaluation workers wait, then all actors train and
all individuals are evaluated as parallel tasks, synchronised per generation.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from esnb.aes.sep_cem import VARIANCE_FORMS, SepCEM
from esnb.controls import Control, Controls, ControlSnapshot
from esnb.replay.remote import ReplayLost, is_loss
from esnb.rl.td3 import init_actor
from esnb.runners.aes_backend import (
    CriticLost,
    InlineCritic,
    MeanActor,
    RemoteCritic,
    ReplayCheckpoints,
    build_setup,
    critic_state_from,
    live_workers,
    make_replay,
    state_arrays,
)
from esnb.runners.base import Runner
from esnb.runners.executor import put, resolve_client
from esnb.workers.aes import evaluate_individual, evaluate_mean

log = logging.getLogger("esnb.cemrl")


def cemrl_controls() -> list[Control]:
    return [
        Control("a_noise", "float", 0.0, low=0.0, high=10.0,
                help="exploration noise on actions (CEM-RL: 0; AES-RL's paper: 0.1)"),
        Control("eval_interval", "int", 1, low=0, high=100_000,
                help="evaluate the mean every n generations (0: never)"),
        Control("eval_episodes", "int", 5, low=1, high=1000,
                help="noise-free episodes per evaluation of the mean"),
        Control("env", "str", "HalfCheetah-v5", live=False, help="gymnasium environment id"),
        Control("seed", "int", 0, low=0, live=False, help="seed of every random draw"),
        Control("pop_size", "int", 10, low=2, high=10_000, live=False,
                help="individuals per generation"),
        Control("n_rl", "int", 5, low=0, high=10_000, live=False,
                help="RL individuals per generation (CEM-RL: half)"),
        Control("rl_start_step", "int", 10_000, low=0, live=False,
                help="env steps before the first RL individual"),
        Control("parallel", "bool", False, live=False,
                help="P-CEM-RL: evaluate the generation in parallel on the cluster"),
    ]


class CEMRL(ReplayCheckpoints, MeanActor, Runner):
    """CEM-RL (``parallel=False``) or P-CEM-RL (``parallel=True``).

    Parameters
    ----------
    env : str
    seed : int
    client : distributed.Client, optional
        Needed for ``parallel=True``; the serial form always runs in this process.
    parallel : bool
    pop_size, n_rl : int
        CEM-RL: 10 and half of them.
    var_init, eps_init, eps_limit, eps_tau : float
        sep-CEM's initial variance and its decaying additive variance (1e-3 -> 1e-5, 0.95).
    variance_form : {"code", "paper"}
        sep-CEM's variance with the released codes' extra ``1/K_e`` (default) or eq. 2.
    antithetic : bool
        Mirrored sampling.
    a_noise : float
        Exploration noise in the individuals' episodes (live; CEM-RL used none).
    rl_start_step : int
    actor_hidden, critic_hidden, td3, replay_capacity
        As :class:`esnb.AESRL` (400-300 by default; ``CPU_FRIENDLY`` for CPU runs).
    eval_interval, eval_episodes : int
        Evaluation of the mean (live).
    critic_exclusive : bool
        P-CEM-RL: keep evaluations off the critic's worker (default False: the released
        P-CEM-RL trained its critic on an actor worker).
    max_episode_steps, env_kwargs, name
    """

    algorithm = "CEMRL"
    iteration_column = "generation"

    def __init__(self, env: str = "HalfCheetah-v5", seed: int = 0, client=None, *,
                 parallel: bool = False, pop_size: int = 10, n_rl: int | None = None,
                 var_init: float = 1e-3, eps_init: float = 1e-3, eps_limit: float = 1e-5,
                 eps_tau: float = 0.95, variance_form: str = "code", antithetic: bool = False,
                 a_noise: float = 0.0, rl_start_step: int = 10_000, actor_hidden=(400, 300),
                 critic_hidden=(400, 300), td3: dict | None = None,
                 replay_capacity: int = 200_000, eval_interval: int = 1,
                 eval_episodes: int = 5, critic_exclusive: bool = False,
                 max_episode_steps: int | None = None, env_kwargs: dict | None = None,
                 name: str | None = None):
        n_rl = int(pop_size) // 2 if n_rl is None else n_rl
        controls = Controls(cemrl_controls(), dict(
            a_noise=a_noise, eval_interval=eval_interval, eval_episodes=eval_episodes, env=env,
            seed=seed, pop_size=pop_size, n_rl=n_rl, rl_start_step=rl_start_step,
            parallel=bool(parallel)))
        if n_rl > pop_size:
            raise ValueError(f"n_rl must be <= pop_size={pop_size}, got {n_rl}")
        if variance_form not in VARIANCE_FORMS:
            raise ValueError(f"variance_form must be one of {VARIANCE_FORMS}, got "
                             f"{variance_form!r}")
        if int(replay_capacity) < 1:
            raise ValueError(f"replay_capacity must be >= 1, got {replay_capacity!r}")
        client = resolve_client(client) if parallel else None
        if parallel and client is None:
            raise ValueError("CEMRL(parallel=True) needs a Dask client (esnb.make_client())")
        super().__init__(controls, name=name)
        self.td3, self.spec, self.cfg = build_setup(env, actor_hidden, critic_hidden, td3,
                                                    max_episode_steps, env_kwargs)
        self._config = dict(
            env=env, seed=int(seed), parallel=bool(parallel), pop_size=int(pop_size),
            n_rl=int(n_rl), var_init=float(var_init), eps_init=float(eps_init),
            eps_limit=float(eps_limit), eps_tau=float(eps_tau), variance_form=variance_form,
            antithetic=bool(antithetic), rl_start_step=int(rl_start_step),
            actor_hidden=list(self.td3.actor_hidden), critic_hidden=list(self.td3.critic_hidden),
            td3={k: v for k, v in self.td3.to_dict().items()
                 if k not in ("actor_hidden", "critic_hidden")},
            replay_capacity=int(replay_capacity), critic_exclusive=bool(critic_exclusive),
            max_episode_steps=max_episode_steps, env_kwargs=dict(env_kwargs or {}))
        self.client = client
        seeds = np.random.SeedSequence(int(seed)).spawn(3)
        self._rng = np.random.Generator(np.random.PCG64(seeds[0]))
        self._eval_rng = np.random.Generator(np.random.PCG64(seeds[1]))
        init_rng = np.random.Generator(np.random.PCG64(seeds[2]))
        self.cem = SepCEM(init_actor(self.spec, init_rng), pop_size=pop_size,
                          var_init=var_init, eps_init=eps_init, eps_limit=eps_limit,
                          eps_tau=eps_tau, antithetic=antithetic, variance_form=variance_form)
        self.counters = dict.fromkeys(("env_steps", "eval_steps", "episodes", "critic_updates",
                                       "actor_steps", "resubmitted", "nonfinite",
                                       "replay_recreations", "critic_recreations"), 0)
        self.prev_steps = 0
        self.eval_return = float("nan")
        self._critic_state: dict | None = None
        self._restore_replay: str | None = None
        self.replay = None
        self.critic = None
        self._started = False

    # -- public ------------------------------------------------------------------------------
    @property
    def mu(self) -> np.ndarray:
        return self.cem.mu.astype(np.float32)

    def summary(self) -> dict[str, Any]:
        return {**self.counters, "generations": self.iteration,
                "eval_return": self.eval_return}

    def config_dict(self) -> dict[str, Any]:
        return {**self._config, "name": self.name}

    def _progress(self) -> dict[str, float]:
        c = self.counters
        return {"generations": self.iteration, "env_steps": c["env_steps"],
                "episodes": c["episodes"], "critic_updates": c["critic_updates"],
                "eval_steps": c["eval_steps"]}

    plot_panels = ({"title": "sep-CEM variance", "y": ["var_mean", "var_min", "var_max"],
                    "y_axis_type": "log"},)

    # -- plumbing ----------------------------------------------------------------------------
    def _ensure_started(self) -> None:
        if self._started:
            return
        seed = self._config["seed"]
        self.replay = make_replay(self.client, self.spec.obs_dim, self.spec.act_dim,
                                  self._config["replay_capacity"], seed,
                                  checkpoint_path=self._restore_replay,
                                  restore=self._restore_replay is not None)
        if self.client is None:
            self.critic = InlineCritic(self.spec, self.td3.to_dict(), seed, self._critic_state)
        else:
            self.critic = RemoteCritic(self.client, self.spec, self.td3.to_dict(), seed=seed,
                                       avoid=self.replay.address, state=self._critic_state)
        self._started = True

    def _train_critic(self, n: int, policies) -> dict[str, Any]:
        for _ in range(3):
            try:
                out = self.critic.result(self.critic.submit_train(
                    self.replay.info(), n, policies, 250))
                break
            except CriticLost:
                self.critic.recover(avoid=self.replay.address)
                self.counters["critic_recreations"] += 1
        else:
            raise RuntimeError("the critic was lost three times in a row")
        self._critic_state = out["state"]
        self.counters["critic_updates"] = int(out["total_updates"])
        return out

    def _supervise(self) -> None:
        if self.client is not None and self.replay.lost:
            self.replay.recover()
            self.counters["replay_recreations"] += 1

    def _workers(self) -> list[str] | None:
        if self.client is None:
            return None
        workers = live_workers(self.client)
        if self._config["critic_exclusive"] and len(workers) > 1:
            workers = [w for w in workers if w != self.critic.address] or workers
        return workers

    def _run(self, calls: list[tuple], label: str) -> list[dict]:
        """Run ``(fn, args)`` calls: inline in order, or as tasks gathered in order (a task lost
        with its worker or the replay is submitted again, at most three times)."""
        if self.client is None:
            return [fn(*args) for fn, args in calls]
        workers = self._workers()
        results: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        for attempt in range(4):
            futs = {i: self.client.submit(calls[i][0], *calls[i][1], pure=False,
                                          key=f"esnb-cemrl-{self.name}-{label}-{i}-a{attempt}",
                                          workers=workers, allow_other_workers=True)
                    for i in todo}
            failed = []
            for i, fut in futs.items():
                try:
                    results[i] = fut.result()
                except Exception as exc:
                    if not (is_loss(exc) or isinstance(exc, ReplayLost)):
                        raise
                    failed.append(i)
                finally:
                    fut.release()
            if not failed:
                return results
            self.counters["resubmitted"] += len(failed)
            self._supervise()
            calls = [(fn, self._refresh_args(args)) for fn, args in calls]
            todo = failed
        raise RuntimeError(f"{label}: tasks lost four times in a row")

    def _refresh_args(self, args: tuple) -> tuple:
        """The same call with the current replay (after a recovery)."""
        return tuple(self.replay.info() if isinstance(a, dict) and "key" in a else a
                     for a in args)

    # -- one generation ----------------------------------------------------------------------
    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        self._ensure_started()
        self._supervise()
        c = self.counters
        t0 = time.perf_counter()
        z = self.cem.ask(self._rng)
        seeds = self._rng.integers(0, 2**31 - 1, size=len(z))
        steps = self.prev_steps
        rl = c["env_steps"] >= snap.rl_start_step and steps > 0 and snap.n_rl > 0
        n_rl = snap.n_rl if rl else 0
        info = self.replay.info()
        bs = self.td3.batch_size
        critic_time = 0.0
        crit: dict[str, Any] = {}

        def call(i: int, rl_steps: int, critic=None, version=-1):
            return (evaluate_individual, (self.cfg, z[i], int(seeds[i]), snap.a_noise, info,
                                          rl_steps, critic, version, False, bs))

        if self.client is None:
            # CEM-RL's order: critic share of RL individual i, its actor, then the next one
            results = []
            shares = [steps // n_rl + (1 if i < steps % n_rl else 0) for i in range(n_rl)]
            for i in range(len(z)):
                if i < n_rl:
                    tc = time.perf_counter()
                    crit = self._train_critic(shares[i], [z[i]])
                    critic_time += time.perf_counter() - tc
                    results.append(evaluate_individual(*call(i, steps, crit["state"]["critic"],
                                                             crit["version"])[1]))
                else:
                    results.append(evaluate_individual(*call(i, 0)[1]))
        else:
            critic_data = None
            if n_rl:
                tc = time.perf_counter()
                crit = self._train_critic(steps, list(z[:n_rl]))
                critic_time = time.perf_counter() - tc
                critic_data = put(self.client, crit["state"]["critic"], prefix="esnb-critic")
            calls = [call(i, steps if i < n_rl else 0, critic_data if i < n_rl else None,
                          crit.get("version", -1)) for i in range(len(z))]
            results = self._run(calls, f"g{self.iteration}")
            if critic_data is not None:
                critic_data.release()

        individuals = np.stack([r["z"] if r["z"] is not None else z[i]
                                for i, r in enumerate(results)])
        returns = np.array([r["return"] for r in results], dtype=np.float64)
        lengths = np.array([r["length"] for r in results])
        finite = np.array([r["finite"] for r in results])
        gen_steps = int(lengths.sum())
        c["env_steps"] += gen_steps
        c["episodes"] += len(results)
        c["actor_steps"] += int(sum(r["actor_steps"] for r in results))
        c["nonfinite"] += int((~finite).sum())
        self.prev_steps = gen_steps
        tell = {"best": np.nan, "var_mean": np.nan, "var_min": np.nan, "var_max": np.nan,
                "step_norm": 0.0}
        if finite.sum() >= self.cem.n_elites:
            tell = self.cem.tell(individuals[finite], returns[finite])
        else:
            log.warning("generation %d: too few finite returns to update", self.iteration + 1)
        eval_return = eval_std = np.nan
        if snap.eval_interval and (self.iteration + 1) % snap.eval_interval == 0:
            ev_seeds = self._eval_rng.integers(0, 2**31 - 1, size=snap.eval_episodes)
            ev = (evaluate_mean(self.cfg, self.mu, ev_seeds) if self.client is None else
                  self._run([(evaluate_mean, (self.cfg, self.mu, ev_seeds))],
                            f"e{self.iteration}")[0])
            c["eval_steps"] += ev["steps"]
            ok = ev["finite"]
            if ok.any():
                eval_return, eval_std = float(ev["returns"][ok].mean()), float(
                    ev["returns"][ok].std())
                self.eval_return = eval_return
        gen_time = time.perf_counter() - t0
        rl_mask = np.arange(len(results)) < n_rl
        return {
            "env_steps": c["env_steps"], "episodes": c["episodes"], "eval_steps": c["eval_steps"],
            "critic_updates": c["critic_updates"], "actor_steps": c["actor_steps"],
            "critic_updates_per_step": c["critic_updates"] / max(c["env_steps"], 1),
            "return_mean": float(returns[finite].mean()) if finite.any() else np.nan,
            "return_max": float(returns[finite].max()) if finite.any() else np.nan,
            "return_rl_mean": float(returns[rl_mask & finite].mean())
            if (rl_mask & finite).any() else np.nan,
            "return_es_mean": float(returns[~rl_mask & finite].mean())
            if (~rl_mask & finite).any() else np.nan,
            "eval_return": eval_return, "eval_return_std": eval_std, "n_rl": n_rl,
            "gen_steps": gen_steps, "len_mean": float(lengths.mean()), "gen_time": gen_time,
            "critic_time": critic_time, "critic_loss": crit.get("critic_loss", np.nan),
            "best": tell["best"], "var_mean": tell["var_mean"], "var_min": tell["var_min"],
            "var_max": tell["var_max"], "eps": self.cem.eps, "step_norm": tell["step_norm"],
            "resubmitted": c["resubmitted"],
        }

    def close(self) -> None:
        """Stop the run and release the replay and the critic."""
        super().close()
        with self._iter_lock:
            if self.critic is not None:
                self.critic.close()
            if self.replay is not None:
                self.replay.close()
            self._started = False

    # -- checkpoints (save/load: ReplayCheckpoints) ------------------------------------
    def _state_dict(self):
        meta, arrays = self.cem.state_dict()
        arrays = {f"cem_{k}": v for k, v in arrays.items()}
        arrays.update(state_arrays(self._critic_state))
        meta = {"cem": meta, "counters": dict(self.counters), "prev_steps": self.prev_steps,
                "eval_return": self.eval_return, "rng": self._rng.bit_generator.state,
                "eval_rng": self._eval_rng.bit_generator.state,
                "num_params": self.spec.num_params}
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        if int(meta["num_params"]) != self.spec.num_params:
            raise ValueError(f"checkpoint has {meta['num_params']} actor parameters, this run "
                             f"{self.spec.num_params}")
        self.cem.load_state_dict(meta["cem"], {k[4:]: v for k, v in arrays.items()
                                               if k.startswith("cem_")})
        self.counters.update(meta["counters"])
        self.prev_steps = int(meta["prev_steps"])
        self.eval_return = float(meta["eval_return"])
        self._rng.bit_generator.state = meta["rng"]
        self._eval_rng.bit_generator.state = meta["eval_rng"]
        self._critic_state = critic_state_from(arrays)

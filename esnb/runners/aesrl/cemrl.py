"""``esnb.CEMRL``: CEM-RL (Pourchot and Sigaud 2019, "CEM-RL: Combining evolutionary and
gradient-based methods for policy search"), serial or parallel-synchronous (P-CEM-RL, Lee et
al. 2020's baseline), with the same TD3 critic, networks and replay as :class:`esnb.AESRL`.

One generation, top to bottom (:meth:`CEMRL._iteration`):

1. ``pop_size`` individuals from sep-CEM (:class:`esnb.aes.SepCEM`);
2. after ``rl_start_step`` env steps, the first ``n_rl`` (half) are RL individuals: the critic
   makes as many updates as the previous generation's env steps (split evenly, each share with
   one RL individual as the TD3 target policy) and each RL individual's actor takes that many
   steps against the critic, with a fresh Adam;
3. every individual is evaluated for one episode (its transitions go into the replay);
4. the elites update ``(mu, var)``; every ``eval_interval`` generations ``eval_episodes``
   noise-free episodes of the mean (counted in ``eval_steps``, apart from the budget).

Serial or parallel is the algorithm's choice, not the executor's. ``parallel=False``
(CEM-RL): everything in this process, in CEM-RL's order (critic share of RL individual i,
then its actor and episode, then the next). ``parallel=True`` (P-CEM-RL): the critic trains
on its actor while the evaluation tasks wait, then all actors train and all individuals are
evaluated as tasks of the executor (in this process too, in the same order), synchronised per
generation; a task lost with its worker or the replay is submitted again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from esnb.aes.sep_cem import SepCEM
from esnb.controls import ControlSnapshot
from esnb.replay.server import is_loss
from esnb.rl.td3.actor import init_actor
from esnb.runners.aesrl.common import SERVICE_COUNTERS, PopulationRunner
from esnb.runners.aesrl.config import CEMRLConfig
from esnb.runners.aesrl.tasks import evaluate_individual, evaluate_mean

log = logging.getLogger("esnb.cemrl")

COUNTERS = ("env_steps", "eval_steps", "episodes", "critic_updates", "actor_steps",
            "resubmitted", "nonfinite", *SERVICE_COUNTERS)
#: submissions of a generation's task lost with a worker before the run fails
ATTEMPTS = 4


class CEMRL(PopulationRunner):
    """CEM-RL (``parallel=False``) or P-CEM-RL (``parallel=True``).

    Parameters
    ----------
    env : str
        Gymnasium id with a Box action space.
    client : distributed.Client, executor or False, optional
        Where P-CEM-RL's tasks, replay and critic run (None: the default Dask client if any,
        else this process). Serial CEM-RL always runs in this process.
    preset : {"laptop", "paper"}
        Defaults tuned for 2 cores, or the paper's published settings.
    config : CEMRLConfig, optional
        All settings at once (keyword settings are applied on top).
    name : str, optional
    **settings
        Any setting below.
    """

    algorithm = "CEMRL"
    iteration_column = "generation"
    Config = CEMRLConfig
    plot_panels = ({"title": "sep-CEM variance", "y": ["var_mean", "var_min", "var_max"],
                    "y_axis_type": "log"},)

    def __init__(self, env: str | None = None, *, client=None, preset: str = "laptop",
                 config: CEMRLConfig | None = None, name: str | None = None, **settings: Any):
        cfg = self.make_config(env, preset, config, **settings)
        super().__init__(cfg, client if cfg.parallel else False, name)
        self.cem = SepCEM(init_actor(self.spec, self._init_rng), pop_size=cfg.pop_size,
                          var_init=cfg.var_init, eps_init=cfg.eps_init,
                          eps_limit=cfg.eps_limit, eps_tau=cfg.eps_tau,
                          antithetic=cfg.antithetic, variance_form=cfg.variance_form)
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.prev_steps = 0
        self.eval_return = float("nan")

    # -- public ------------------------------------------------------------------------------
    @property
    def mu(self) -> np.ndarray:
        return self.cem.mu.astype(np.float32)

    def summary(self) -> dict[str, Any]:
        return {**self.counters, "generations": self.iteration,
                "eval_return": self.eval_return}

    # -- one generation ----------------------------------------------------------------------
    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        if self.replay is None:
            self._start_services()
        self._supervise()
        c = self.counters
        t0 = time.perf_counter()
        z = self.cem.ask(self._rng)
        seeds = self._rng.integers(0, 2**31 - 1, size=len(z))
        steps = self.prev_steps
        rl = c["env_steps"] >= snap.rl_start_step and steps > 0 and snap.n_rl > 0
        n_rl = snap.n_rl if rl else 0
        generation = self._parallel if self.config.parallel else self._serial
        results, crit, critic_time = generation(snap, z, seeds, steps, n_rl)
        for r in results:
            self._observe_replay(r)
        self._count_services()

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
        rl_mask = np.arange(len(results)) < n_rl
        return {
            "env_steps": c["env_steps"], "episodes": c["episodes"],
            "critic_updates": c["critic_updates"], "actor_steps": c["actor_steps"],
            "critic_updates_per_step": c["critic_updates"] / max(c["env_steps"], 1),
            "return_mean": _mean(returns, finite), "return_max": _max(returns, finite),
            "return_rl_mean": _mean(returns, rl_mask & finite),
            "return_es_mean": _mean(returns, ~rl_mask & finite), "n_rl": n_rl,
            "gen_steps": gen_steps, "len_mean": float(lengths.mean()),
            **self._evaluate_mean(snap), "eval_steps": c["eval_steps"],
            "gen_time": time.perf_counter() - t0, "critic_time": critic_time,
            "critic_loss": crit.get("critic_loss", np.nan), "best": tell["best"],
            "var_mean": tell["var_mean"], "var_min": tell["var_min"],
            "var_max": tell["var_max"], "eps": self.cem.eps, "step_norm": tell["step_norm"],
            "resubmitted": c["resubmitted"], "replay_lost": c["replay_lost"],
            "replay_inserted": self.replay.inserted,
            "replay_recreations": c["replay_recreations"],
            "critic_recreations": c["critic_recreations"],
            "critic_lost_updates": c["critic_lost_updates"],
        }

    def _individual(self, snap, z, seeds, i: int, rl_steps: int = 0, weights=None,
                    version: int = -1) -> tuple[Callable, tuple]:
        return evaluate_individual, (self.task_config, z[i], int(seeds[i]), snap.a_noise,
                                     self.replay.info(), rl_steps, weights, version)

    def _serial(self, snap, z, seeds, steps: int, n_rl: int):
        """CEM-RL's order in this process: critic share of RL individual i, its actor and
        episode, then the next; the ES individuals after them."""
        results, crit, critic_time = [], {}, 0.0
        shares = [steps // n_rl + (1 if i < steps % n_rl else 0) for i in range(n_rl)]
        for i in range(len(z)):
            if i < n_rl:
                tc = time.perf_counter()
                crit = self._train_critic(shares[i], [z[i]])
                critic_time += time.perf_counter() - tc
                fn, args = self._individual(snap, z, seeds, i, steps, crit["state"]["critic"],
                                            crit["version"])
            else:
                fn, args = self._individual(snap, z, seeds, i)
            results.append(fn(*args))
        return results, crit, critic_time

    def _parallel(self, snap, z, seeds, steps: int, n_rl: int):
        """P-CEM-RL: the whole critic first (the evaluation tasks wait), then every actor and
        episode as tasks of the executor, gathered in order."""
        crit, critic_time, weights = {}, 0.0, None
        if n_rl:
            tc = time.perf_counter()
            crit = self._train_critic(steps, list(z[:n_rl]))
            critic_time = time.perf_counter() - tc
            weights = self.critic.publish(prefix=f"esnb-critic-{self.name}-g{self.iteration}")
        version = crit.get("version", -1)

        def build(i: int):
            if i < n_rl:
                return self._individual(snap, z, seeds, i, steps, weights, version)
            return self._individual(snap, z, seeds, i)

        return self._run(build, len(z), f"g{self.iteration}"), crit, critic_time

    def _evaluate_mean(self, snap: ControlSnapshot) -> dict[str, float]:
        out = {"eval_return": np.nan, "eval_return_std": np.nan}
        if not snap.eval_interval or (self.iteration + 1) % snap.eval_interval:
            return out
        seeds = self._eval_rng.integers(0, 2**31 - 1, size=snap.eval_episodes)
        ev = self._run(lambda i: (evaluate_mean, (self.task_config, self.mu, seeds)), 1,
                       f"e{self.iteration}")[0]
        self.counters["eval_steps"] += ev["steps"]
        ok = ev["finite"]
        if ok.any():
            out = {"eval_return": float(ev["returns"][ok].mean()),
                   "eval_return_std": float(ev["returns"][ok].std())}
            self.eval_return = out["eval_return"]
        return out

    # -- plumbing ----------------------------------------------------------------------------
    def _train_critic(self, n: int, policies) -> dict[str, Any]:
        before = self.critic.recreations, self.critic.lost_updates
        try:
            out = self.critic.train(self.replay.info(), n, policies,
                                    avoid=(self.replay.address,))
        finally:
            self.counters["critic_recreations"] += self.critic.recreations - before[0]
            self.counters["critic_lost_updates"] += self.critic.lost_updates - before[1]
        self.counters["critic_updates"] = int(out["total_updates"])
        return out

    def _supervise(self) -> None:
        self._service_replay()

    def _workers(self) -> list[str]:
        """Where the generation's tasks go: every worker, but the critic's with
        ``critic_exclusive`` (while there is another)."""
        workers = sorted(self.executor.workers())
        if self.config.critic_exclusive and len(workers) > 1:
            workers = [w for w in workers if w != self.critic.address] or workers
        return workers

    def _run(self, build: Callable[[int], tuple], n: int, label: str) -> list[dict]:
        """Run the calls ``build(0..n-1)`` as tasks gathered in order; a task lost with its
        worker or the replay is built again (with the current replay) and submitted again."""
        workers = self._workers()
        results: list[Any] = [None] * n
        todo = list(range(n))
        for attempt in range(ATTEMPTS):
            futures = {}
            for i in todo:
                fn, args = build(i)
                futures[i] = self.executor.submit(
                    fn, *args, key=f"esnb-cemrl-{self.name}-{label}-{i}-a{attempt}",
                    workers=workers)
            failed = []
            for i, fut in futures.items():
                try:
                    results[i] = fut.result()
                except Exception as exc:
                    if not is_loss(exc):
                        raise
                    failed.append(i)
                finally:
                    fut.release()
            if not failed:
                return results
            self.counters["resubmitted"] += len(failed)
            self._supervise()
            todo = failed
        raise RuntimeError(f"{label}: tasks lost {ATTEMPTS} times in a row")

    def close(self) -> None:
        """Stop the run and release the replay and the critic."""
        super().close()
        with self._iter_lock:
            self._close_services()

    # -- checkpoints (save/load: ReplayCheckpoints; counters, generators, critic: base) -----
    def _own_state(self):
        meta, arrays = self.cem.state_dict()
        meta = {"cem": meta, "prev_steps": self.prev_steps, "eval_return": self.eval_return}
        return meta, {f"cem_{k}": v for k, v in arrays.items()}

    def _load_own_state(self, meta, arrays):
        self.cem.load_state_dict(meta["cem"], {k[4:]: v for k, v in arrays.items()
                                               if k.startswith("cem_")})
        self.prev_steps = int(meta["prev_steps"])
        self.eval_return = float(meta["eval_return"])


def _mean(values: np.ndarray, mask: np.ndarray) -> float:
    return float(values[mask].mean()) if mask.any() else np.nan


def _max(values: np.ndarray, mask: np.ndarray) -> float:
    return float(values[mask].max()) if mask.any() else np.nan


def train_cemrl(config: dict) -> dict:
    """A whole CEM-RL run inside one task (serial CEM-RL as "one worker", sweeps).

    ``config`` holds :class:`CEMRL` settings plus ``budget`` (e.g. ``{"env_steps": 5e4}``);
    returns the history rows, wall time and the final counters.
    """
    config = dict(config)
    budget = config.pop("budget")
    t0 = time.perf_counter()
    runner = CEMRL(**config, client=False)
    try:
        runner.start(**budget).wait()
    finally:
        runner.close()
    return {"history": runner.records, "wall_time": time.perf_counter() - t0,
            "progress": runner._progress(), "final": runner.summary()}

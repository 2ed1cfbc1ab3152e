"""``esnb.AESRL``: asynchronous ES + TD3 with a shared critic (Lee et al. 2020, "An Efficient
Asynchronous Method for Integrating Evolutionary and Gradient-based Policy Search", AES-RL).

One iteration = one completed individual = one history row, top to bottom
(:meth:`AESRL._iteration`): supervise the replay and the critic (recreate what a dead worker
took), collect a finished critic chunk and start the next, then apply the oldest finished
individual to the *current* ``(mu, var)`` (:meth:`AESRL._apply`: the live mean and variance
rules of :mod:`esnb.aes.rules`; the staleness, updates since ``z`` was sampled, is recorded),
and top up the evaluations in flight. Meanwhile:

- ``inflight_per_thread`` evaluations per evaluation thread are in flight
  (:class:`~esnb.runners.aesrl.pool.EvaluationPool`). Each individual ``z ~ N(mu, var)`` is,
  with probability ``p_rl`` (eq. 3), an RL individual whose actor is first trained against the
  latest published critic in the task that evaluates it;
- the critic (:class:`~esnb.runners.aesrl.critic.Critic`) trains in chunks of
  ``critic_chunk`` updates against the current mean as target policy, never past
  ``critic_ratio`` updates per collected env step, and publishes versioned weights;
- ``f(mu)``, the mean return of ``eval_episodes`` noise-free episodes of the mean, is
  re-evaluated after updates, at most ``mean_eval_inflight`` at a time (an update arriving
  while they are all busy is covered by the next one, for the then-current mean); its steps
  are counted apart from the training budget (``eval_steps``);
- for the first ``rl_start_step`` env steps there are no RL individuals.

Any executor: inline, every task has finished when it is submitted, so a run is reproducible
(the same seed gives the same history); on a cluster the updates are asynchronous and a run is
not bitwise reproducible (the history logs every update). Faults: an evaluation whose worker
died is rerun or resubmitted (at most ``max_retries`` failed runs, then dropped and counted);
the replay and the critic are recreated on a live worker (:mod:`esnb.runners.aesrl.supervision`).
No update state lives on a worker.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

import numpy as np

from esnb.aes.distribution import AsyncDistribution, PopulationControl
from esnb.controls import ControlSnapshot
from esnb.rl.td3.actor import init_actor
from esnb.runners.aesrl.common import SERVICE_COUNTERS, PopulationRunner
from esnb.runners.aesrl.config import AESRLConfig
from esnb.runners.aesrl.critic import ChunkedCritic
from esnb.runners.aesrl.pool import EvaluationPool, Pending
from esnb.runners.aesrl.supervision import AESRLSupervision
from esnb.runners.aesrl.tasks import evaluate_individual, evaluate_mean

log = logging.getLogger("esnb.aes")

COUNTERS = ("env_steps", "eval_steps", "episodes", "critic_updates", "created", "resubmitted",
            "dropped", "nonfinite", "duplicates", "lost_transitions", "cancelled",
            *SERVICE_COUNTERS)


class AESRL(AESRLSupervision, PopulationRunner):
    """AES-RL on an executor (a Dask cluster, or this process).

    Parameters
    ----------
    env : str
        Gymnasium id with a Box action space (MuJoCo v5 envs).
    client : distributed.Client, executor or False, optional
        Where evaluations, the replay and the critic run; None uses the default Dask client if
        there is one, else this process; False always runs in this process.
    preset : {"laptop", "paper"}
        Defaults tuned for 2 cores, or the paper's published settings.
    config : AESRLConfig, optional
        All settings at once (keyword settings are applied on top).
    name : str, optional
        Run name (task keys, output folder).
    **settings
        Any setting below. The paper's best rules are the defaults: ``relative_baseline`` +
        ``online_adaptive``; ``r``, the baselines and ``p_desired`` default to Table 5.
    """

    algorithm = "AESRL"
    iteration_column = "update"
    Config = AESRLConfig

    def __init__(self, env: str | None = None, *, client=None, preset: str = "laptop",
                 config: AESRLConfig | None = None, name: str | None = None, **settings: Any):
        cfg = self.make_config(env, preset, config, **settings)
        super().__init__(cfg, client, name)
        self.dist = AsyncDistribution(init_actor(self.spec, self._init_rng),
                                      var_init=cfg.var_init, var_floor=cfg.var_floor,
                                      rank_window=cfg.rank_window)
        self.pop = PopulationControl()
        self.lengths: deque[int] = deque(maxlen=cfg.last_episodes)
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.f_mu: float | None = None
        self.f_mu_std = float("nan")
        self.f_mu_update = -1
        self._applied: set[int] = set()
        self._next_id = 0
        self.pool: EvaluationPool | None = None
        self._ready: deque[tuple[Pending, dict]] = deque()
        self._mean_eval_due = False
        self._bad_evals = 0

    # -- public ------------------------------------------------------------------------------
    @property
    def mu(self) -> np.ndarray:
        return self.dist.mu.astype(np.float32)

    @property
    def var(self) -> np.ndarray:
        return self.dist.var.copy()

    def plot_panels(self):
        return [
            {"title": "update ratio p and staleness", "y": ["p", "staleness", "p_rl"]},
            {"title": "variance", "y": ["var_mean", "var_min", "var_max"],
             "y_axis_type": "log"},
            {"title": "critic", "y": ["critic_updates_per_step"]},
        ]

    @property
    def in_flight(self) -> int:
        """Individuals submitted and not yet applied."""
        pool = self.pool.count("individuals") if self.pool is not None else 0
        return pool + len(self._ready)

    # -- one iteration: one completed individual ---------------------------------------------
    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        self._ensure_started()
        t0 = time.perf_counter()
        while True:
            self._supervise()
            self._service_critic()
            if self._ready and self.f_mu is not None:
                pend, res = self._ready.popleft()
                return self._apply(snap, pend, res, time.perf_counter() - t0)
            self._top_up(snap)
            done = self.pool.poll()
            if not done:
                time.sleep(0.003)
                continue
            for pend, res in done:
                self._on_done(pend, res)

    def _apply(self, snap: ControlSnapshot, pend: Pending, res: dict, waited: float) -> dict:
        c = self.counters
        length = int(res["length"])
        duplicate = pend.id in self._applied
        if not duplicate:
            c["env_steps"] += length
            c["episodes"] += 1
        if not res["replay_ok"]:
            c["lost_transitions"] += length
        row: dict[str, Any] = {
            "env_steps": c["env_steps"], "episodes": c["episodes"], "kind": pend.kind,
            "individual": pend.id, "mean_rule": snap.mean_rule, "var_rule": snap.var_rule,
            "f_z": float(res["return"]), "f_mu": self.f_mu, "f_mu_std": self.f_mu_std,
            "f_mu_age": self.dist.updates - self.f_mu_update,
            "staleness": self.dist.updates - pend.sampled_update, "p": np.nan,
            "applied": False, "length": length, "p_rl": pend.p_rl,
            "actor_steps": int(res["actor_steps"]), "critic_version_used": pend.critic_version,
            "task_seconds": float(res["seconds"]), "train_seconds": float(res["train_seconds"]),
            "wait_seconds": waited, "attempts": pend.attempts,
        }
        if duplicate:
            c["duplicates"] += 1  # never expected: logged loudly, never applied twice
            log.error("individual %d completed twice; ignored", pend.id)
        elif not res["finite"]:
            c["nonfinite"] += 1
            log.warning("individual %d had a non-finite return or observation; not used",
                        pend.id)
        elif not pend.random_actions:  # random warm-up actions say nothing about z
            z = res["z"] if res["z"] is not None else pend.z
            info = self.dist.tell(z, res["return"], self.f_mu, snap.mean_rule, snap.var_rule,
                                  var_floor=snap.var_floor, **self._rule_params(snap))
            row.update(p=info["p"], applied=True, success=info["success"],
                       step_norm=info["step_norm"])
            self._submit_mean_eval()
        self._applied.add(pend.id)
        if res["finite"] and not duplicate:
            self.lengths.append(length)
        self._top_up(snap)
        row.update(self.dist.var_stats())
        row.update({
            "mu_version": self.dist.updates, "n_rl": self.pop.n_rl, "n_es": self.pop.n_es,
            "rl_share": self.pop.rl_share, "in_flight": self.in_flight,
            "target_in_flight": self._target_in_flight(),
            "critic_updates": c["critic_updates"], "critic_version": self.critic.version,
            "critic_updates_per_step": c["critic_updates"] / max(c["env_steps"], 1),
            "eval_steps": c["eval_steps"], "return_mean": float(res["return"]),
            "eval_return": self.f_mu, "resubmitted": c["resubmitted"], "dropped": c["dropped"],
            "lost_transitions": c["lost_transitions"], "replay_lost": c["replay_lost"],
            "replay_inserted": self.replay.inserted,
            "replay_recreations": c["replay_recreations"],
            "critic_lost_updates": c["critic_lost_updates"],
            "critic_recreations": c["critic_recreations"], "workers": self.pool.n_eval_workers,
            **{f"critic_{k}" if not k.startswith("critic") else k: v
               for k, v in self.critic.stats.items()},
        })
        return row

    @staticmethod
    def _rule_params(snap: ControlSnapshot) -> dict[str, Any]:
        f_b = snap.f_b_absolute if snap.mean_rule == "absolute_baseline" else snap.f_b_relative
        return {"r": snap.r, "p_pos": snap.p_pos, "p_neg": snap.p_neg, "f_b": f_b,
                "n": snap.var_n}

    # -- individuals and evaluations of the mean ---------------------------------------------
    def _ensure_started(self) -> None:
        if self.pool is not None:
            return
        self._start_services(ChunkedCritic, name=self.name, chunk=self.config.critic_chunk,
                             ratio=self.config.critic_ratio)
        self.pool = EvaluationPool(self.executor, self.name, self._build,
                                   self.config.max_retries, self._dropped, self.counters)
        self._refresh(force=True)
        self._submit_mean_eval()

    def _build(self, pend: Pending) -> tuple:
        """The task of a pending evaluation, with the replay and critic of now."""
        if pend.kind == "mean":
            return evaluate_mean, (self.task_config, pend.z, pend.seeds), 10  # f(mu) first
        weights = None
        if pend.kind == "RL":
            weights = self.critic.weights
            pend.critic_version = self.critic.version
        return evaluate_individual, (
            self.task_config, pend.z, pend.seed, float(self.controls["a_noise"]),
            self.replay.info(), pend.rl_steps, weights, pend.critic_version,
            pend.random_actions), 0

    def _top_up(self, snap: ControlSnapshot) -> None:
        while self.in_flight < self._target_in_flight() and self._budget_allows():
            warm = self.counters["env_steps"] < snap.rl_start_step
            rl, p_rl = self.pop.decide(self._rng, snap.p_desired, snap.k_rl, warm)
            z = self.dist.sample(self._rng)
            seed = int(self._rng.integers(0, 2**31 - 1))
            self._next_id += 1
            pend = Pending(self._next_id, "RL" if rl else "ES", z, seed, self.dist.updates,
                           p_rl=p_rl, counted=not warm, random_actions=warm and
                           self.config.warmup_actions == "random")
            if rl:
                pend.rl_steps = int(sum(self.lengths))
            self.counters["created"] += 1
            self.pool.submit(pend)

    def _target_in_flight(self) -> int:
        return self.config.inflight_per_thread * self.pool.threads

    def _budget_allows(self) -> bool:
        """Whether another individual is needed to reach the run's budget."""
        n = self.in_flight
        if n == 0:
            return True
        c = self.counters
        mean_len = float(np.mean(self.lengths)) if self.lengths else 1.0
        now = {"env_steps": c["env_steps"], "updates": self.iteration,
               "episodes": c["episodes"]}
        ahead = {"env_steps": n * mean_len, "updates": n, "episodes": n}
        for key, goal in self._target.items():
            # a budget already reached belongs to a finished start(): step(n) goes on
            if key in now and now[key] < goal <= now[key] + ahead[key]:
                return False
        return True

    def _dropped(self, pend: Pending) -> None:
        if pend.counted:
            self.pop.uncount(pend.kind == "RL")

    def _submit_mean_eval(self) -> None:
        means = [p for p in self.pool.pending.values() if p.kind == "mean"]
        if any(p.sampled_update == self.dist.updates for p in means):
            self._mean_eval_due = False  # this mean is being evaluated already
            return
        if len(means) >= (self.config.mean_eval_inflight or self.pool.threads):
            self._mean_eval_due = True
            return
        self._mean_eval_due = False
        seeds = self._eval_rng.integers(0, 2**31 - 1, size=int(self.controls["eval_episodes"]))
        self._next_id += 1
        self.pool.submit(Pending(self._next_id, "mean", self.mu, 0, self.dist.updates,
                                 seeds=seeds))

    def _on_done(self, pend: Pending, res: dict) -> None:
        if pend.kind != "mean":
            self._observe_replay(res)
            self._ready.append((pend, res))
            return
        self.counters["eval_steps"] += int(res["steps"])
        ok = res["finite"]
        self._bad_evals = 0 if ok.any() else self._bad_evals + 1
        if self._bad_evals >= 5:
            raise RuntimeError(f"{self.config.env}: 5 evaluations of the mean in a row had no "
                               f"finite episode")
        if pend.sampled_update >= self.f_mu_update and ok.any():
            self.f_mu = float(res["returns"][ok].mean())
            self.f_mu_std = float(res["returns"][ok].std())
            self.f_mu_update = pend.sampled_update
        if self._mean_eval_due or self.f_mu_update < self.dist.updates:
            self._submit_mean_eval()

    # -- checkpoints (save/load: ReplayCheckpoints; counters, generators, critic: base) -----
    def _own_state(self):
        meta, arrays = self.dist.state_dict()
        # individuals in flight are not in a checkpoint: count them out, as a cancel would
        rl = [p.kind == "RL" for p in [*(self.pool.pending.values() if self.pool else ()),
                                       *(p for p, _ in self._ready)] if p.counted]
        meta = {"dist": meta, "n_rl": self.pop.n_rl - sum(rl),
                "n_es": self.pop.n_es - len(rl) + sum(rl),
                "lengths": list(self.lengths), "f_mu": self.f_mu, "f_mu_std": self.f_mu_std,
                "f_mu_update": self.f_mu_update, "next_id": self._next_id}
        return meta, {f"dist_{k}": v for k, v in arrays.items()}

    def _load_own_state(self, meta, arrays):
        self.dist.load_state_dict(meta["dist"], {k[5:]: v for k, v in arrays.items()
                                                 if k.startswith("dist_")})
        self.pop.n_rl, self.pop.n_es = int(meta["n_rl"]), int(meta["n_es"])
        self.lengths.extend(meta["lengths"])
        self.f_mu, self.f_mu_std = meta["f_mu"], meta["f_mu_std"]
        self.f_mu_update = int(meta["f_mu_update"])
        self._next_id = int(meta["next_id"])
        self._applied = set()

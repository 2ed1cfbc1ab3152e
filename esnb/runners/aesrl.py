"""``esnb.AESRL``: asynchronous ES + TD3 with a shared critic (Lee et al. 2020, "An Efficient
Asynchronous Method for Integrating Evolutionary and Gradient-based Policy Search", AES-RL).

The driver keeps ``inflight_per_thread`` (2) evaluations per worker thread in flight with
``as_completed(...).add()``. Each individual ``z ~ N(mu, var)`` is, with probability ``p_rl``
(eq. 3), an RL individual whose actor is first trained against the latest published critic on
the worker that evaluates it. Every completion updates the *current* ``(mu, var)`` at once
(the staleness, updates since ``z`` was sampled, is recorded) with the live mean and variance
rules of :mod:`esnb.aes.rules`, then a new individual is submitted. Meanwhile:

- the critic (a :class:`~esnb.workers.aes.CriticServer` actor on a worker of its own) trains
  in chunks of ``critic_chunk`` updates against the current mean as target policy, never past
  ``critic_ratio`` updates per collected env step, and publishes versioned weights;
- ``f(mu)``, the mean return of ``eval_episodes`` (5) noise-free episodes of the mean, is
  re-evaluated after updates on a worker, at most ``mean_eval_inflight`` at a time (an update
  arriving while they are all busy is covered by the next one, for the then-current mean);
  its steps are counted apart from the training budget (``eval_steps``);
- for the first ``rl_start_step`` (10,000) env steps there are no RL individuals.

One iteration = one completed individual = one history row (the update: rule, p, f(z), f(mu),
kind RL/ES, staleness, variance statistics, ...). A control changed while the run goes takes
effect at the next completion and is logged with it.

Faults: an evaluation whose worker died is resubmitted (Dask reruns it; a task that fails
because its worker or the replay's was lost is submitted again, at most ``max_retries`` times,
then dropped and counted). The replay (:class:`~esnb.replay.remote.RemoteReplay`) and the
critic (:class:`~esnb.runners.aes_backend.RemoteCritic`) are recreated on a live worker. No
update state lives on a worker: ``(mu, var)``, the counters and the critic's last state are on
the driver. Asynchronous: runs are not bitwise reproducible; the history logs every update.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

import dask
import numpy as np

from esnb.aes.distribution import AsyncDistribution, PopulationControl, env_defaults
from esnb.aes.rules import MEAN_RULES, VARIANCE_RULES
from esnb.controls import Control, Controls, ControlSnapshot
from esnb.rl.td3 import init_actor
from esnb.runners.aes_backend import (
    CriticLost,
    MeanActor,
    RemoteCritic,
    ReplayCheckpoints,
    build_setup,
    critic_state_from,
    make_replay,
    state_arrays,
)
from esnb.runners.aes_pool import EvaluationPool, Pending
from esnb.runners.base import Runner
from esnb.runners.executor import put, resolve_client
from esnb.workers.aes import evaluate_individual, evaluate_mean

log = logging.getLogger("esnb.aes")


def aesrl_controls(defaults: dict[str, Any]) -> list[Control]:
    """AES-RL's controls; the update rules and their parameters are live."""
    return [
        Control("mean_rule", "choice", "relative_baseline", choices=tuple(MEAN_RULES),
                help="how far the mean moves toward each individual (p)"),
        Control("var_rule", "choice", "online_adaptive", choices=tuple(VARIANCE_RULES),
                help="how the variance follows each update"),
        Control("r", "float", defaults["r"], low=0.0, low_open=True, high=1e9, log=True,
                help="fixed range r of fixed_linear / fixed_sigmoid (Table 5)"),
        Control("f_b_absolute", "float", defaults["f_b_absolute"], low=-1e9, high=1e9,
                help="baseline f_b of absolute_baseline (Table 5: -r)"),
        Control("f_b_relative", "float", defaults["f_b_relative"], low=0.0, low_open=True,
                high=1e9, log=True, help="baseline f_b of relative_baseline (Table 5: r)"),
        Control("p_pos", "float", 1.0, low=0.0, high=1.0, help="p_sg for an improving z"),
        Control("p_neg", "float", 0.0, low=0.0, high=1.0,
                help="p_sg for a non-improving z (> 0 moves the mean away from it)"),
        Control("var_n", "float", 10.0, low=1.0, high=1e6, log=True,
                help="n of the online_fixed variance rule"),
        Control("p_desired", "float", defaults["p_desired"], low=0.0, high=1.0,
                help="desired share of RL individuals (eq. 3)"),
        Control("k_rl", "float", 50.0, low=0.0, high=1e6, help="gain K_rl of eq. 3"),
        Control("a_noise", "float", 0.1, low=0.0, high=10.0,
                help="exploration noise on actions in units of the half-range (paper 0.1, "
                     "released code 0)"),
        Control("var_floor", "float", 1e-5, low=0.0, low_open=True, high=1.0, log=True,
                help="lower limit of every variance (sigma_limit, a variance)"),
        Control("eval_episodes", "int", 5, low=1, high=1000,
                help="m: noise-free episodes per evaluation of f(mu)"),
        Control("env", "str", "HalfCheetah-v5", live=False, help="gymnasium environment id"),
        Control("seed", "int", 0, low=0, live=False, help="seed of every random draw"),
        Control("rl_start_step", "int", 10_000, low=0, live=False,
                help="env steps before the first RL individual"),
    ]


#: task states in which an individual can no longer run (on a worker or the scheduler)
_SETTLED = frozenset({"memory", "error", "erred", "released", "forgotten"})


class AESRL(ReplayCheckpoints, MeanActor, Runner):
    """AES-RL on a Dask cluster.

    Parameters
    ----------
    env : str
        Gymnasium id with a Box action space (MuJoCo v5 envs).
    seed : int
    client : distributed.Client
        Required (the default client if None).
    mean_rule, var_rule : str
        Initial rules (live). The paper's best: ``relative_baseline`` + ``online_adaptive``.
    r, f_b_absolute, f_b_relative, p_desired : float, optional
        Default: the paper's values for the environment (:func:`esnb.aes.env_defaults`).
    p_pos, p_neg, var_n, k_rl, a_noise, var_floor, eval_episodes
        See :func:`aesrl_controls` (all live).
    var_init : float
        Initial variance (1e-3).
    rl_start_step : int
        Warm-up env steps without RL individuals (10,000).
    actor_hidden, critic_hidden : tuple of int
        The paper's 400-300 by default; ``esnb.rl.td3.CPU_FRIENDLY`` (64-64) is what the CLI
        demo and benchmarks use on CPUs.
    td3 : dict, optional
        Other :class:`~esnb.rl.td3.TD3Config` fields (batch_size, lrs, tau, ...).
    replay_capacity : int
        Transitions in the shared replay (2e5).
    critic_chunk : int
        Critic updates per call of the critic actor (1,000).
    critic_ratio : float
        Critic updates allowed per collected env step (1).
    last_episodes : int
        An RL individual takes as many actor steps as the env steps of this many last episodes.
    inflight_per_thread : int
        Individuals in flight per evaluation worker thread (2).
    mean_eval_inflight : int, optional
        Evaluations of the mean in flight at most (default: the evaluation threads).
    critic_exclusive : bool
        Keep evaluations off the critic's worker when there are other workers.
    rank_window : int
        Window of the rank_async rule.
    warmup_actions : {"policy", "random"}
        Warm-up individuals act with their own policy (the paper's Algorithm 1) or uniformly at
        random (the released code); random warm-up episodes fill the replay but update nothing.
    max_retries : int
        Submissions of an individual lost to a dead worker before it is dropped.
    max_episode_steps : int, optional
    env_kwargs : dict, optional
    name : str, optional
    """

    algorithm = "AESRL"
    iteration_column = "update"

    def __init__(self, env: str = "HalfCheetah-v5", seed: int = 0, client=None, *,
                 mean_rule: str = "relative_baseline", var_rule: str = "online_adaptive",
                 r: float | None = None, f_b_absolute: float | None = None,
                 f_b_relative: float | None = None, p_pos: float = 1.0, p_neg: float = 0.0,
                 var_n: float = 10.0, p_desired: float | None = None, k_rl: float = 50.0,
                 a_noise: float = 0.1, var_init: float = 1e-3, var_floor: float = 1e-5,
                 eval_episodes: int = 5, rl_start_step: int = 10_000,
                 actor_hidden=(400, 300), critic_hidden=(400, 300), td3: dict | None = None,
                 replay_capacity: int = 200_000, critic_chunk: int = 1000,
                 critic_ratio: float = 1.0, last_episodes: int = 10,
                 inflight_per_thread: int = 2, mean_eval_inflight: int | None = None,
                 critic_exclusive: bool = True, rank_window: int = 10,
                 warmup_actions: str = "policy", max_retries: int = 2,
                 max_episode_steps: int | None = None, env_kwargs: dict | None = None,
                 name: str | None = None):
        defaults = env_defaults(env)
        given = {"r": r, "f_b_absolute": f_b_absolute, "f_b_relative": f_b_relative,
                 "p_desired": p_desired}
        values = {k: (defaults[k] if v is None else v) for k, v in given.items()}
        controls = Controls(aesrl_controls(defaults), dict(
            values, mean_rule=mean_rule, var_rule=var_rule, p_pos=p_pos, p_neg=p_neg,
            var_n=var_n, k_rl=k_rl, a_noise=a_noise, var_floor=var_floor,
            eval_episodes=eval_episodes, env=env, seed=seed, rl_start_step=rl_start_step))
        checks = {"critic_chunk": critic_chunk >= 1, "critic_ratio": critic_ratio > 0,
                  "last_episodes": last_episodes >= 1, "replay_capacity": replay_capacity >= 1,
                  "inflight_per_thread": inflight_per_thread >= 1,
                  "max_retries": max_retries >= 0,
                  "mean_eval_inflight": mean_eval_inflight is None or mean_eval_inflight >= 1}
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"{key} must be positive, got {locals()[key]!r}")
        if warmup_actions not in ("policy", "random"):
            raise ValueError(f"warmup_actions must be 'policy' or 'random', got "
                             f"{warmup_actions!r}")
        client = resolve_client(client)
        if client is None:
            raise ValueError("AESRL needs a Dask client (esnb.make_client()); CEMRL runs "
                             "without one")
        super().__init__(controls, name=name)
        self.td3, self.spec, self.cfg = build_setup(env, actor_hidden, critic_hidden, td3,
                                                    max_episode_steps, env_kwargs)
        self._config = dict(
            env=env, seed=int(seed), var_init=float(var_init), rl_start_step=int(rl_start_step),
            actor_hidden=list(self.td3.actor_hidden), critic_hidden=list(self.td3.critic_hidden),
            td3={k: v for k, v in self.td3.to_dict().items()
                 if k not in ("actor_hidden", "critic_hidden")},
            replay_capacity=int(replay_capacity), critic_chunk=int(critic_chunk),
            critic_ratio=float(critic_ratio), last_episodes=int(last_episodes),
            inflight_per_thread=int(inflight_per_thread), mean_eval_inflight=mean_eval_inflight,
            critic_exclusive=bool(critic_exclusive), rank_window=int(rank_window),
            warmup_actions=warmup_actions, max_retries=int(max_retries),
            max_episode_steps=max_episode_steps, env_kwargs=dict(env_kwargs or {}))
        self.client = client
        seeds = np.random.SeedSequence(int(seed)).spawn(3)
        self._rng = np.random.Generator(np.random.PCG64(seeds[0]))
        self._eval_rng = np.random.Generator(np.random.PCG64(seeds[1]))
        init_rng = np.random.Generator(np.random.PCG64(seeds[2]))
        self.dist = AsyncDistribution(init_actor(self.spec, init_rng), var_init=var_init,
                                      var_floor=var_floor, rank_window=rank_window)
        self.pop = PopulationControl()
        self.lengths: deque[int] = deque(maxlen=int(last_episodes))
        self.counters = dict.fromkeys(
            ("env_steps", "eval_steps", "episodes", "critic_updates", "created", "resubmitted",
             "dropped", "nonfinite", "duplicates", "lost_transitions", "cancelled",
             "critic_lost_updates", "replay_recreations", "critic_recreations"), 0)
        self.f_mu: float | None = None
        self.f_mu_std = float("nan")
        self.f_mu_update = -1
        self.critic_version = 0
        self._critic_state: dict | None = None
        self._restore_replay: str | None = None
        self._started = False
        self._applied: set[int] = set()
        self._next_id = 0
        self.pool: EvaluationPool | None = None
        self._ready: deque[tuple[Pending, dict]] = deque()
        self.replay = None
        self.critic = None
        self._critic_call = None
        self._critic_call_n = 0
        self._critic_data = None
        self._critic_stats: dict[str, float] = {}
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

    def config_dict(self) -> dict[str, Any]:
        return {**self._config, "name": self.name}

    def _progress(self) -> dict[str, float]:
        c = self.counters
        return {"updates": self.iteration, "env_steps": c["env_steps"],
                "episodes": c["episodes"], "critic_updates": c["critic_updates"],
                "eval_steps": c["eval_steps"]}

    @property
    def in_flight(self) -> int:
        """Individuals submitted and not yet applied."""
        pool = self.pool.count("individuals") if self.pool is not None else 0
        return pool + len(self._ready)

    # -- cluster plumbing --------------------------------------------------------------------
    def _ensure_started(self) -> None:
        if self._started:
            return
        self.replay = make_replay(self.client, self.spec.obs_dim, self.spec.act_dim,
                                  self._config["replay_capacity"], self._config["seed"],
                                  checkpoint_path=self._restore_replay,
                                  restore=self._restore_replay is not None)
        self.critic = RemoteCritic(self.client, self.spec, self.td3.to_dict(),
                                   seed=self._config["seed"], avoid=self.replay.address,
                                   state=self._critic_state)
        if self._critic_state is None:
            with self.client.as_current():
                self._critic_state = self.critic.actor.state().result()
        self._publish(self._critic_state["critic"], self.critic_version)
        self.pool = EvaluationPool(self.client, self.name, self._build,
                                   self._config["max_retries"], self._dropped, self.counters)
        self._refresh(force=True)
        self._started = True
        self._submit_mean_eval()

    def _refresh(self, force: bool = False) -> None:
        exclude = self.critic.address if self._config["critic_exclusive"] else None
        self.pool.refresh(exclude, force)

    def _publish(self, flat: np.ndarray, version: int) -> None:
        old = self._critic_data
        # ahead of queued evaluations: they wait for it
        self._critic_data = put(self.client, np.asarray(flat, dtype=np.float32),
                                prefix=f"esnb-critic-{self.name}-v{int(version)}", priority=100)
        self.critic_version = int(version)
        if old is not None:
            old.release()  # tasks that use it hold their own reference

    def _build(self, pend: Pending) -> tuple:
        """The task of a pending evaluation, with the replay and critic of now."""
        if pend.kind == "mean":
            return evaluate_mean, (self.cfg, pend.z, pend.seeds), 10  # f(mu) goes first
        critic = None
        if pend.kind == "RL":
            critic = self._critic_data
            pend.critic_version = self.critic_version
        return evaluate_individual, (
            self.cfg, pend.z, pend.seed, float(self.controls["a_noise"]), self.replay.info(),
            pend.rl_steps, critic, pend.critic_version, pend.random_actions,
            self.td3.batch_size), 0

    def _dropped(self, pend: Pending) -> None:
        if pend.counted:
            self.pop.uncount(pend.kind == "RL")

    def _submit_mean_eval(self) -> None:
        means = [p for p in self.pool.pending.values() if p.kind == "mean"]
        if any(p.sampled_update == self.dist.updates for p in means):
            self._mean_eval_due = False  # this mean is being evaluated already
            return
        cap = self._config["mean_eval_inflight"] or self.pool.threads
        if len(means) >= cap:
            self._mean_eval_due = True
            return
        self._mean_eval_due = False
        seeds = self._eval_rng.integers(0, 2**31 - 1, size=int(self.controls["eval_episodes"]))
        self._next_id += 1
        self.pool.submit(Pending(self._next_id, "mean", self.mu, 0, self.dist.updates,
                                 seeds=seeds))

    def _target_in_flight(self) -> int:
        return self._config["inflight_per_thread"] * self.pool.threads

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

    def _top_up(self, snap: ControlSnapshot) -> None:
        while self.in_flight < self._target_in_flight() and self._budget_allows():
            warm = self.counters["env_steps"] < snap.rl_start_step
            rl, p_rl = self.pop.decide(self._rng, snap.p_desired, snap.k_rl, warm)
            z = self.dist.sample(self._rng)
            seed = int(self._rng.integers(0, 2**31 - 1))
            self._next_id += 1
            pend = Pending(self._next_id, "RL" if rl else "ES", z, seed, self.dist.updates,
                           p_rl=p_rl, counted=not warm, random_actions=warm and
                           self._config["warmup_actions"] == "random")
            if rl:
                pend.rl_steps = int(sum(self.lengths))
            self.counters["created"] += 1
            self.pool.submit(pend)

    def _service_critic(self, force_target: int | None = None) -> None:
        """Collect a finished critic chunk (publish it); start the next one if allowed."""
        c = self.counters
        if self._critic_call is not None:
            if not self._critic_call.done():
                return
            try:
                out = self.critic.result(self._critic_call)
            except CriticLost:
                self._recover_critic()
                return
            finally:
                self._critic_call = None
            c["critic_updates"] = int(out["total_updates"])
            self._critic_state = out["state"]
            self._publish(out["state"]["critic"], out["version"])
            self._critic_stats = {k: out[k] for k in ("critic_loss", "q_mean", "seconds",
                                                      "wait_seconds")}
        if c["env_steps"] < self.controls["rl_start_step"] and force_target is None:
            return
        allowed = int(self._config["critic_ratio"] * c["env_steps"]) - c["critic_updates"]
        chunk = self._config["critic_chunk"]
        if force_target is not None:
            allowed = min(allowed, force_target - c["critic_updates"])
            chunk = min(chunk, max(allowed, 0))
        if allowed >= chunk > 0:
            try:
                self._critic_call = self.critic.submit_train(
                    self.replay.info(), chunk, [self.mu], 250)
                self._critic_call_n = chunk
            except CriticLost:
                self._recover_critic()

    def _recover_critic(self) -> None:
        self.counters["critic_lost_updates"] += self._critic_call_n
        self._critic_call = None
        with dask.annotate(priority=100):
            self.critic.recover(avoid=self.replay.address)
        self.counters["critic_recreations"] += 1
        self._refresh(force=True)

    def _supervise(self) -> None:
        if self._critic_data is not None and self._critic_data.status in ("error",
                                                                          "cancelled"):
            # the published weights were lost for good: publish them again
            self._critic_data = None
            self._publish(self._critic_state["critic"], self.critic_version)
        if self.replay.lost:
            try:
                # the new actor's creation is a task: put it ahead of queued evaluations
                with dask.annotate(priority=100):
                    self.replay.recover()
            except Exception:  # no live worker yet: try again next time round
                log.exception("could not recreate the replay yet")
                return
            self.counters["replay_recreations"] += 1
            # tasks holding the old replay's address would wait for it until CALL_TIMEOUT:
            # resubmit them with the new one (a running one finishes unheard)
            self.pool.resubmit_all("the replay was recreated")
        if self.critic.lost and self._critic_call is None:
            self._recover_critic()
        self._refresh()

    def _on_done(self, pend: Pending, res: dict) -> None:
        if pend.kind != "mean":
            self._ready.append((pend, res))
            return
        self.counters["eval_steps"] += int(res["steps"])
        ok = res["finite"]
        self._bad_evals = 0 if ok.any() else self._bad_evals + 1
        if self._bad_evals >= 5:
            raise RuntimeError(f"{self.cfg.env_id}: 5 evaluations of the mean in a row had no "
                               f"finite episode")
        if pend.sampled_update >= self.f_mu_update and ok.any():
            self.f_mu = float(res["returns"][ok].mean())
            self.f_mu_std = float(res["returns"][ok].std())
            self.f_mu_update = pend.sampled_update
        if self._mean_eval_due or self.f_mu_update < self.dist.updates:
            self._submit_mean_eval()

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

    def _rule_params(self, snap: ControlSnapshot) -> dict[str, Any]:
        f_b = snap.f_b_absolute if snap.mean_rule == "absolute_baseline" else snap.f_b_relative
        return {"r": snap.r, "p_pos": snap.p_pos, "p_neg": snap.p_neg, "f_b": f_b,
                "n": snap.var_n}

    def _apply(self, snap: ControlSnapshot, pend: Pending, res: dict, waited: float) -> dict:
        c = self.counters
        length = int(res["length"])
        duplicate = pend.id in self._applied
        if not duplicate:
            c["env_steps"] += length
            c["episodes"] += 1
        if not res["replay_ok"]:
            c["lost_transitions"] += length
        staleness = self.dist.updates - pend.sampled_update
        row: dict[str, Any] = {
            "env_steps": c["env_steps"], "episodes": c["episodes"], "kind": pend.kind,
            "individual": pend.id, "mean_rule": snap.mean_rule, "var_rule": snap.var_rule,
            "f_z": float(res["return"]), "f_mu": self.f_mu, "f_mu_std": self.f_mu_std,
            "f_mu_age": self.dist.updates - self.f_mu_update, "staleness": staleness,
            "p": np.nan, "applied": False, "length": length, "p_rl": pend.p_rl,
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
        elif pend.random_actions:
            pass  # random warm-up actions say nothing about z
        else:
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
            "critic_updates": c["critic_updates"], "critic_version": self.critic_version,
            "critic_updates_per_step": c["critic_updates"] / max(c["env_steps"], 1),
            "eval_steps": c["eval_steps"], "return_mean": float(res["return"]),
            "eval_return": self.f_mu, "resubmitted": c["resubmitted"], "dropped": c["dropped"],
            "lost_transitions": c["lost_transitions"],
            "replay_recreations": c["replay_recreations"],
            "critic_recreations": c["critic_recreations"], "workers": self.pool.n_eval_workers,
            **{f"critic_{k}" if not k.startswith("critic") else k: v
               for k, v in self._critic_stats.items()},
        })
        return row

    # -- ending, finishing -------------------------------------------------------------------
    def finish_critic(self, updates: int, timeout: float | None = None) -> float:
        """Keep the critic training (no new individuals) until it has made ``updates`` in all
        (at most ``critic_ratio`` per collected env step); returns the seconds it took."""
        t0 = time.perf_counter()
        with self._iter_lock:
            self._ensure_started()
            cap = int(self._config["critic_ratio"] * self.counters["env_steps"])
            target = min(int(updates), cap)
            while self.counters["critic_updates"] < target or self._critic_call is not None:
                if timeout is not None and time.perf_counter() - t0 > timeout:
                    raise TimeoutError(f"critic at {self.counters['critic_updates']} updates "
                                       f"after {timeout} s")
                self._supervise()
                self._service_critic(force_target=target)
                if self._critic_call is None and self.counters["critic_updates"] >= target:
                    break
                time.sleep(0.005)
        return time.perf_counter() - t0

    def _loop(self) -> None:
        try:
            super()._loop()
        finally:
            self._cancel_in_flight()

    def _cancel_in_flight(self) -> None:
        """Cancel the individuals still running (they updated nothing) when a run ends."""
        with self._iter_lock:
            cancelled = self.pool.cancel_all() if self.pool is not None else []
            for pend, _ in self._ready:
                cancelled.append(pend)  # finished but not applied: never seen by the run
            self._ready.clear()
            for pend in cancelled:
                if pend.kind != "mean":
                    self.counters["cancelled"] += 1
                    self._dropped(pend)
            self._mean_eval_due = self.f_mu_update < self.dist.updates

    def close(self) -> None:
        """Stop the run, cancel what runs and release the replay and the critic."""
        super().close()
        self._cancel_in_flight()
        with self._iter_lock:
            if self._critic_call is not None:
                # let the chunk in progress end: it samples from the replay released below
                try:
                    self._critic_call.result(timeout=60)
                except Exception:  # noqa: BLE001 - closing: nothing to do about it
                    log.debug("critic chunk failed while closing", exc_info=True)
                self._critic_call = None
            if self._critic_data is not None:
                self._critic_data.release()
                self._critic_data = None
            if self.critic is not None:
                self.critic.close()
            if self.replay is not None:
                self._drain_cancelled()
                self.replay.close()
            self._started = False

    def _drain_cancelled(self, timeout: float = 60.0, settle: float = 0.5) -> None:
        """Wait (bounded) until the individuals cancelled above have left the workers.

        Dask cannot interrupt a running task: a cancelled evaluation goes on and pushes its
        transitions to the replay, and an actor released under it makes the worker log a
        ``KeyError`` traceback for every such call.
        """
        if self.client is None or self.pool is None:
            return
        prefix = f"esnb-aes-{self.pool.name}-"

        # Not only the executing ones, and twice: the scheduler's messages to a worker are
        # batched, so a task the scheduler sent just before it was cancelled can reach its
        # worker (and start: a worker runs a task it was told to, cancelled or not) after a
        # check that found nothing anywhere. Seen in CI: pushes 20 ms after the replay was
        # released. The second check, ``settle`` seconds later, finds such a task running.
        def on_workers(dask_worker, prefix=prefix):
            return sum(str(key).startswith(prefix) and ts.state not in _SETTLED
                       for key, ts in list(dask_worker.state.tasks.items()))

        def on_scheduler(dask_scheduler, prefix=prefix):
            return sum(str(key).startswith(prefix) and ts.state not in _SETTLED
                       for key, ts in list(dask_scheduler.tasks.items()))

        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline:
            try:
                busy = (self.client.run_on_scheduler(on_scheduler)
                        or sum(self.client.run(on_workers).values()))
            except Exception:  # noqa: BLE001 - closing: a lost worker runs nothing
                return
            quiet = 0 if busy else quiet + 1
            if quiet == 2:
                return
            time.sleep(settle if quiet else 0.1)
        log.info("closing %s: individuals still running after %.0f s", self.name, timeout)

    # -- checkpoints (save/load: ReplayCheckpoints) ------------------------------------
    def _state_dict(self):
        meta, arrays = self.dist.state_dict()
        arrays = {f"dist_{k}": v for k, v in arrays.items()}
        arrays.update(state_arrays(self._critic_state))
        meta = {"dist": meta, "counters": dict(self.counters), "n_rl": self.pop.n_rl,
                "n_es": self.pop.n_es, "lengths": list(self.lengths), "f_mu": self.f_mu,
                "f_mu_std": self.f_mu_std, "f_mu_update": self.f_mu_update,
                "critic_version": self.critic_version, "next_id": self._next_id,
                "rng": self._rng.bit_generator.state,
                "eval_rng": self._eval_rng.bit_generator.state,
                "num_params": self.spec.num_params}
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        if int(meta["num_params"]) != self.spec.num_params:
            raise ValueError(f"checkpoint has {meta['num_params']} actor parameters, this run "
                             f"{self.spec.num_params}")
        self.dist.load_state_dict(meta["dist"], {k[5:]: v for k, v in arrays.items()
                                                 if k.startswith("dist_")})
        self.counters.update(meta["counters"])
        self.pop.n_rl, self.pop.n_es = int(meta["n_rl"]), int(meta["n_es"])
        self.lengths.extend(meta["lengths"])
        self.f_mu, self.f_mu_std = meta["f_mu"], meta["f_mu_std"]
        self.f_mu_update = int(meta["f_mu_update"])
        self.critic_version = int(meta["critic_version"])
        self._next_id = int(meta["next_id"])
        self._applied = set()
        self._rng.bit_generator.state = meta["rng"]
        self._eval_rng.bit_generator.state = meta["eval_rng"]
        self._critic_state = critic_state_from(arrays)

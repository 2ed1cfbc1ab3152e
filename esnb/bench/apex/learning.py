"""Ape-X learning speed on a LocalCluster: wall time for Ape-X DQN to solve CartPole-v1 and for
Ape-X DPG to reach 900 on InvertedPendulum-v5, with the throughput of every part.

Each run stops at its target (greedy evaluations on the runner's thread: mean of 20 episodes
>= 475 for CartPole, of 10 episodes >= 900 for InvertedPendulum) or at its time limit.
``--env`` runs one variant on another task (``MinAtar/Breakout-v1``: Ape-X DQN on frames, with
``--max-episode-steps``), to ``--target`` if given, else for the whole time limit; the report
then is the learning curve's best and final greedy evaluations.
Reported: the wall time and learner updates at the first evaluation that reached the target,
then actor env steps/s, replay inserts/s, learner updates/s and sampled transitions/s
(medians over the run's rows), and the learner's updates per second of its own CPU time
(``time.thread_time`` of the runner's thread), which does not depend on how loaded the shared
machine is. Targets: CartPole < 3 min, InvertedPendulum < 5 min, 2 workers.
"""

from __future__ import annotations

import logging
import os
import time

import dask
import numpy as np

from esnb.bench.common.flags import add_json, add_settings, chosen, given_settings
from esnb.bench.common.report import Session
from esnb.runners.apex.config import CONFIGS, ApeXDQNConfig
from esnb.settings import integer, number

#: per variant: the target, the time limit and the settings the benchmark (and BENCHMARKS.md)
#: gives the runner where it does not take its config's defaults. The env is named whatever
#: the config's default: the target is that env's. Evaluations come every 500 updates, more
#: often than the configs' default, so the time to the target is measured finer; Ape-X DQN's
#: are 20 episodes, more than its config's default: CartPole-v1 counts as solved at a mean of
#: 475 over 20.
SETTINGS = {
    "dqn": dict(target=475.0, limit=180.0,
                settings=dict(env="CartPole-v1", eval_interval=500, eval_episodes=20)),
    "dpg": dict(target=900.0, limit=300.0,
                settings=dict(env="InvertedPendulum-v5", eval_interval=500)),
}
#: the Ape-X settings offered as flags (both variants declare the same); ``env`` and
#: ``max_episode_steps`` default to the variant's task, the learner's to the config's
FLAGS = ("seed", "env", "max_episode_steps")
LEARNER_FLAGS = ("lr", "batch_size", "target_period", "samples_per_insert", "min_size",
                 "num_actors")


def add_arguments(p) -> None:
    p.add_argument("--variant", choices=("dqn", "dpg", "both"), default="both",
                   help="Ape-X DQN on CartPole-v1, Ape-X DPG on InvertedPendulum-v5, or both")
    p.add_argument("--workers", type=integer(1), default=2, help="LocalCluster worker processes")
    add_settings(p, ApeXDQNConfig, FLAGS + LEARNER_FLAGS)
    p.add_argument("--target", type=number(), default=None,
                   help="with --env: stop once a greedy evaluation's mean reaches it (default: "
                        "none, the whole time limit)")
    p.add_argument("--dqn-seconds", type=number(0, low_open=True), default=None,
                   help="time limit of the DQN run in seconds (default: 180)")
    p.add_argument("--dpg-seconds", type=number(0, low_open=True), default=None,
                   help="time limit of the DPG run in seconds (default: 300)")
    add_json(p)


def measure(variant: str, workers: int = 2, seed: int | None = None,
            limit: float | None = None, progress=print, env: str | None = None,
            target: float | None = None, max_episode_steps: int | None = None,
            **learner) -> dict:
    """``seed`` None: the config's; ``env`` None: the variant's task and target (another env
    runs to ``target``, none: the whole limit); ``learner``: more settings of the variant."""
    from esnb.cluster import make_client
    from esnb.runners.apex import ApeX, ApeXDPG

    s = dict(SETTINGS[variant])
    if env is not None and env != s["settings"]["env"]:
        s = {**s, "target": target, "settings": {**s["settings"], "env": env}}
    elif target is not None:
        s["target"] = float(target)
    limit = s["limit"] if limit is None else float(limit)
    # stop at the target; no replay checkpoint files (nothing is resumed)
    cfg = CONFIGS[variant].build(**s["settings"], target_return=s["target"],
                                 replay_checkpoint="", **learner,
                                 **chosen(seed=seed, max_episode_steps=max_episode_steps))
    # actor calls from this process go straight to the worker (see esnb bench replay)
    with dask.config.set({"distributed.client.direct-to-workers": True}):
        client = make_client(workers, dashboard_address=":0", set_as_default=False,
                             silence_logs=logging.ERROR)
    try:
        cls = ApeX if variant == "dqn" else ApeXDPG
        t0 = time.perf_counter()
        runner = cls(config=cfg, client=client)
        last = [0.0]

        def report(row):
            if row["wall_time"] - last[0] >= 15:
                last[0] = row["wall_time"]
                progress(f"  {variant} {row['wall_time']:5.0f} s: {row['learner_steps']:,} "
                         f"updates, {row['env_steps']:,} env steps, best eval "
                         f"{runner.best_eval:.0f}")

        runner.add_observer(report)
        runner.start(seconds=limit)
        runner.wait()
        elapsed = time.perf_counter() - t0
        h = runner.history
        learning = h[~h.waiting]

        def med(col):
            return float(np.nanmedian(learning[col])) if len(learning) else float("nan")

        final = runner.evaluate(cfg.eval_episodes)
        out = {
            "variant": variant, "env": cfg.env, "workers": workers, "seed": cfg.seed,
            "target": s["target"], "time_limit": limit,
            "solved": runner.solved_at is not None,
            "solve_wall_time": None if runner.solved_at is None
            else runner.solved_at["wall_time"],
            "solve_learner_steps": None if runner.solved_at is None
            else runner.solved_at["learner_steps"],
            "solve_env_steps": None if runner.solved_at is None
            else runner.solved_at["env_steps"],
            "run_wall_time": runner.wall_time, "elapsed_with_startup": elapsed,
            "best_eval": runner.best_eval, "final_eval_mean": float(final.mean()),
            "actor_steps_per_s": med("actor_steps_per_s"), "inserts_per_s": med("inserts_per_s"),
            "updates_per_s": med("updates_per_s"), "sampled_per_s": med("sampled_per_s"),
            "learner_steps": runner.learner_steps, "env_steps": runner.env_steps,
            "updates_per_learner_cpu_s": runner.learner_steps / max(runner.learner_cpu, 1e-9),
            "replay_size": int(h.replay_size.iloc[-1]),
            # the learning curve: each greedy evaluation at its env steps and wall time
            "curve": h.loc[h.eval_return.notna(), ["env_steps", "wall_time", "learner_steps",
                                                   "eval_return"]].to_dict("records"),
        }
        runner.close()
    finally:
        client.close()
    return out


def run(args) -> int:
    session = Session()
    given = given_settings(args, ApeXDQNConfig, FLAGS + LEARNER_FLAGS)
    learner = {k: v for k, v in given.items() if k in LEARNER_FLAGS}
    if args.variant == "both" and ("env" in given or args.target is not None):
        raise ValueError("--env and --target take one variant: --variant dqn or dpg")
    seed = ApeXDQNConfig.build(**{k: v for k, v in given.items() if k == "seed"}).seed
    print(f"apex bench: {args.workers} workers, seed {seed}; load average "
          f"{session.load:.2f} on {os.cpu_count()} cores")
    variants = ("dqn", "dpg") if args.variant == "both" else (args.variant,)
    results = []
    for v in variants:
        limit = args.dqn_seconds if v == "dqn" else args.dpg_seconds
        r = measure(v, args.workers, seed, limit, env=given.get("env"), target=args.target,
                    max_episode_steps=given.get("max_episode_steps"), **learner)
        results.append(r)
        own = r["env"] == SETTINGS[v]["settings"]["env"]
        goal = ("; target < 3 min" if v == "dqn" else "; target < 5 min") if own else ""
        if r["target"] is None:
            head = (f"{r['run_wall_time']:.0f} s, {r['learner_steps']:,} updates, "
                    f"{r['env_steps']:,} env steps; best greedy eval {r['best_eval']:.2f}")
        elif r["solved"]:
            head = (f"reached {r['target']:.0f} after {r['solve_wall_time']:.0f} s "
                    f"({r['solve_learner_steps']:,} updates, {r['solve_env_steps']:,} env steps)")
        else:
            head = (f"did NOT reach {r['target']:.0f} in {r['time_limit']:.0f} s "
                    f"(best eval {r['best_eval']:.0f})")
        print(f"Ape-X {v.upper()} on {r['env']}: {head}{goal}")
        upc = r["updates_per_learner_cpu_s"]
        line = f"  learner: {upc:,.0f} updates per second of its own CPU time"
        if r["solve_learner_steps"]:
            line += (f"; the {r['solve_learner_steps']:,} updates to the target are "
                     f"{r['solve_learner_steps'] / upc:.0f} s of learner CPU")
        print(line)
        print(f"  final greedy eval {r['final_eval_mean']:.1f}; actor {r['actor_steps_per_s']:,.0f}"
              f" env steps/s, replay {r['inserts_per_s']:,.0f} inserts/s, learner "
              f"{r['updates_per_s']:,.0f} updates/s = {r['sampled_per_s']:,.0f} sampled "
              f"transitions/s")
    return session.done(args, results, rerun="esnb bench apex")

"""IMPALA on a 2-worker LocalCluster: time to solve CartPole-v1, throughput, policy lag.

Part 1 (always): ``esnb.Impala`` learns CartPole-v1 for a learner-step budget (2,000: its
learning rate decays linearly to 0 at the end, as the released code's does). Reported: when a
periodic greedy evaluation of 20 episodes first averaged >= 475 (target: under 3 minutes), the
*final* parameters re-evaluated on 50 new seeds (what the run ends with must hold >= 475, not
only its best moment), the best evaluated ones on 20 new seeds, actor frames/s, learner
updates/s and frames/s, and the histogram of policy lag (learner version - behaviour version
of every unroll trained on).

``--env`` runs it on another task: ``--env MinAtar/Breakout-v1 --max-episode-steps N`` (MinAtar
has no time limit of its own) trains IMPALA's conv network on its frames; only CartPole-v1 has
a target (``SOLVED``), elsewhere the returns are reported as they are.

Part 2 (``--lag-compare``): actors deliberately lagging (the ``actor_lag`` control hands them
parameters N versions old), V-trace against no correction (rho = c = 1 forced), the same
learner-step budget each, every (lag, seed) pair run with both corrections back to back.
Reported: greedy evaluation at the end, mean training return over the last quarter, the
ratio statistics the learner saw. Whatever it shows is the result.
"""

from __future__ import annotations

import time

import numpy as np

from esnb.bench.common.flags import add_json, add_settings, given_settings
from esnb.bench.common.report import write_json
from esnb.runners.impala.config import ImpalaConfig
from esnb.settings import integer, number

SOLVED = 475.0
#: the greedy return that counts as solved, by env (others: reported without a target)
TARGETS = {"CartPole-v1": SOLVED}
#: greedy episodes per evaluation of part 1, more than ImpalaConfig's default: solved is a mean
#: of 475 over 20
EVAL_EPISODES = 20
#: the ImpalaConfig settings offered as flags
FLAGS = ("env", "max_episode_steps", "torso", "seed", "eval_interval", "lr_schedule")
#: the flags handed to every run as they are (the env's shape of the network and episodes)
PASSED = ("max_episode_steps", "torso")
#: the benchmark's own values of its flags: the env is named whatever ImpalaConfig's default (the
#: target, SOLVED, is CartPole-v1's); evaluations every 25 learner steps, more often than
#: ImpalaConfig's default, time the solve finer
BENCH = dict(env="CartPole-v1", eval_interval=25)


def add_arguments(p) -> None:
    add_settings(p, ImpalaConfig, FLAGS, **BENCH)
    p.add_argument("--workers", type=integer(1), default=2, help="LocalCluster worker processes")
    p.add_argument("--learner-steps", type=integer(1), default=2000,
                   help="part 1: the run's learner-step budget (the learning rate reaches 0 "
                        "there)")
    p.add_argument("--time-limit", type=number(0, low_open=True), default=600.0,
                   help="part 1: seconds after which the run is stopped short of its budget")
    p.add_argument("--lag-compare", action="store_true", help="also run part 2")
    p.add_argument("--lags", type=integer(0), nargs="+", default=[0, 25, 100],
                   help="part 2: policy lags injected, in parameter versions")
    p.add_argument("--compare-steps", type=integer(1), default=500,
                   help="part 2: learner steps per run")
    p.add_argument("--compare-seeds", type=integer(1), default=2,
                   help="part 2: seeds per (lag, correction)")
    add_json(p)


#: the learner settings of every run: ImpalaConfig's defaults (the runs set none of them; shown
#: by notebooks/impala_vtrace_lag.ipynb)
SETTINGS = {name: value for name, value in vars(ImpalaConfig.build()).items() if name in (
    "lr", "entropy_cost", "unroll_length", "batch_size", "envs_per_actor", "hidden")}


def _hist_text(hist: dict[int, int], width: int = 40) -> list[str]:
    total = sum(hist.values())
    if not total:
        return []
    edges = [0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 10**9]
    bins = [(lo, hi, sum(v for k, v in hist.items() if lo <= k < hi))
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    top = max(n for _, _, n in bins)
    lines = []
    for lo, hi, n in bins:
        if n == 0 and lo > max(hist):
            break
        label = f"{lo}" if hi == lo + 1 else (f"{lo}-{hi - 1}" if hi < 10**9 else f">={lo}")
        bar = "#" * max(1 if n else 0, round(width * n / top))
        lines.append(f"    lag {label:>7}: {n / total:6.1%} {bar}")
    return lines


#: greedy episodes on new seeds that the final parameters are judged by
FINAL_EPISODES = 50


def solve(client, env: str, seed: int, time_limit: float, eval_interval: int,
          learner_steps: int = 2000, lr_schedule: str = "linear", progress=print,
          **settings) -> dict:
    """Part 1; ``settings``: further ImpalaConfig settings (:data:`PASSED`)."""
    from esnb.runners.impala import Impala

    cfg = ImpalaConfig.build(env=env, seed=seed, eval_interval=eval_interval,
                             eval_episodes=EVAL_EPISODES, lr_schedule=lr_schedule, **settings)
    r = Impala(config=cfg, client=client, name=f"bench-impala-{seed}")
    target = TARGETS.get(env)
    solved_at = None
    try:
        t0 = time.perf_counter()
        r.start(learner_steps=learner_steps)
        next_report = 10.0
        while r.running and time.perf_counter() - t0 < time_limit:
            time.sleep(0.2)
            h = r.records
            evals = [row for row in h if row["eval_return"] == row["eval_return"]]
            if (solved_at is None and target is not None and evals
                    and evals[-1]["eval_return"] >= target):
                solved_at = {"seconds": time.perf_counter() - t0, **evals[-1]}
            if time.perf_counter() - t0 > next_report and h:
                next_report += 10.0
                last = h[-1]
                progress(f"  {time.perf_counter() - t0:5.0f} s  env steps {last['env_steps']:>9,}"
                         f"  return {last['return_mean']:7.1f}  last eval "
                         f"{evals[-1]['eval_return'] if evals else float('nan'):6.1f}")
        r.stop()
        r.wait()
        elapsed = time.perf_counter() - t0
        confirm = r.evaluate(FINAL_EPISODES)  # what the run ends with, on new seeds
        # the best evaluated parameters, on 20 new seeds
        confirm_best = r.evaluate(20, best=True) if r.best is not None else None
        h = r.history
    finally:
        r.close()
    hist = r.lag_histogram()
    lags = np.repeat(list(hist), list(hist.values()))
    wall = float(h.wall_time.iloc[-1])
    out = {
        "env": env, "seed": seed, "target": target, "solved": solved_at is not None,
        "seconds_to_solve": solved_at["seconds"] if solved_at else None,
        "env_steps_at_solve": int(solved_at["eval_env_steps"]) if solved_at else None,
        "eval_at_solve": solved_at["eval_return"] if solved_at else None,
        "eval_min_at_solve": solved_at["eval_return_min"] if solved_at else None,
        "run_seconds": elapsed,
        "confirm_eval_mean": float(confirm.mean()), "confirm_eval_min": float(confirm.min()),
        "best_version": r.best["version"] if r.best else None,
        "confirm_best_mean": float(confirm_best.mean()) if confirm_best is not None else None,
        "confirm_best_min": float(confirm_best.min()) if confirm_best is not None else None,
        "env_steps": int(h.env_steps.iloc[-1]), "learner_steps": int(h.learner_steps.iloc[-1]),
        "actor_frames_per_s": float(h.env_steps.iloc[-1] / wall),
        "learner_updates_per_s": float(h.learner_steps.iloc[-1] / wall),
        "learner_frames_per_s": float(h.frames_trained.iloc[-1] / wall),
        "learner_busy": float(h.learn_time.sum() / wall),
        "lag_mean": float(lags.mean()), "lag_p50": float(np.percentile(lags, 50)),
        "lag_p95": float(np.percentile(lags, 95)), "lag_max": int(lags.max()),
        "lag_histogram": hist,
    }
    return out


def compare(client, env: str, lags: list[int], steps: int, seeds: int,
            progress=print, **settings) -> list[dict]:
    from esnb.runners.impala import Impala

    rows = []
    for lag in lags:
        for seed in range(seeds):
            for correction in ("vtrace", "none"):
                # no evaluations while learning: one at the end, on 20 episodes
                cfg = ImpalaConfig.build(env=env, seed=100 + seed, actor_lag=lag,
                                         correction=correction, eval_interval=0, **settings)
                r = Impala(config=cfg, client=client, name=f"bench-lag{lag}-{correction}-{seed}")
                try:
                    t0 = time.perf_counter()
                    r.start(learner_steps=steps)
                    r.wait()
                    ev = r.evaluate(20)
                    h = r.history
                finally:
                    r.close()
                tail = h.iloc[-max(1, len(h) // 4):]
                rows.append({
                    "lag": lag, "seed": seed, "correction": correction,
                    "eval_mean": float(ev.mean()), "eval_min": float(ev.min()),
                    "train_return_last_quarter": float(np.nanmean(tail.return_mean)),
                    "lag_mean": float(h.lag_mean.mean()),
                    "log_ratio_abs": float(h.log_ratio_abs.mean()),
                    "rho_clipped": float(h.rho_clipped.mean()),
                    "env_steps": int(h.env_steps.iloc[-1]),
                    "seconds": time.perf_counter() - t0,
                })
                progress(f"  lag {lag:>4} seed {seed} {correction:>6}: greedy eval "
                         f"{ev.mean():6.1f}, training return (last quarter) "
                         f"{rows[-1]['train_return_last_quarter']:6.1f}, mean |log pi/mu| "
                         f"{rows[-1]['log_ratio_abs']:.3f} ({rows[-1]['seconds']:.0f} s)")
    return rows


def run(args) -> int:
    import logging
    import os

    import torch

    from esnb.cluster import make_client

    torch.set_num_threads(1)
    from esnb.envs.make import check_time_limit, env_spaces

    cfg = ImpalaConfig.build(**given_settings(args, ImpalaConfig, FLAGS))
    _, _, limit = env_spaces(cfg.env, **cfg.env_kwargs)
    check_time_limit(cfg.env, limit, cfg.max_episode_steps)  # MinAtar: before the cluster
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    client = make_client(args.workers, dashboard_address=":0", silence_logs=logging.ERROR)
    startup = time.perf_counter() - t0
    try:
        print(f"impala bench: {cfg.env} on a {args.workers}-worker LocalCluster (started in "
              f"{startup:.1f} s), load average {load:.2f} at start")
        passed = {name: getattr(cfg, name) for name in PASSED}
        r = solve(client, cfg.env, cfg.seed, args.time_limit, cfg.eval_interval,
                  args.learner_steps, cfg.lr_schedule, **passed)
        rows = (compare(client, cfg.env, args.lags, args.compare_steps, args.compare_seeds,
                        **passed) if args.lag_compare else [])
    finally:
        client.close()
    print()
    target = r["target"]
    if r["solved"]:
        print(f"  solved: greedy eval {r['eval_at_solve']:.1f} over 20 episodes (min "
              f"{r['eval_min_at_solve']:.0f}) after {r['seconds_to_solve']:.1f} s, "
              f"{r['env_steps_at_solve']:,} env steps (target: >= {target:.0f} in < 180 s)")
    elif target is not None:
        print(f"  no evaluation reached {target:.0f} in {r['learner_steps']:,} learner steps")
    if r["confirm_best_mean"] is not None:
        print(f"  best evaluated version {r['best_version']}, 20 new seeds: greedy "
              f"{r['confirm_best_mean']:.1f} (min {r['confirm_best_min']:.0f})")
    held = target is None or r["confirm_eval_mean"] >= target
    verdict = "" if target is None else \
        f": {'held' if held else 'NOT held'} >= {target:.0f}"
    print(f"  final parameters ({r['learner_steps']:,} learner steps, the learning rate decayed "
          f"to 0), {FINAL_EPISODES} new seeds: greedy {r['confirm_eval_mean']:.1f} (min "
          f"{r['confirm_eval_min']:.0f}){verdict}")
    print(f"  actors   {r['actor_frames_per_s']:>9,.0f} frames/s")
    print(f"  learner  {r['learner_updates_per_s']:>9,.1f} updates/s = "
          f"{r['learner_frames_per_s']:,.0f} frames/s, busy {r['learner_busy']:.0%} of wall time")
    print(f"  policy lag (versions): mean {r['lag_mean']:.2f}, median {r['lag_p50']:.0f}, "
          f"95% {r['lag_p95']:.0f}, max {r['lag_max']}")
    for line in _hist_text(r["lag_histogram"]):
        print(line)
    if rows:
        print()
        print(f"  lagging actors, {args.compare_steps} learner steps each, "
              f"{args.compare_seeds} seed(s): greedy eval (20 episodes) / training return, "
              f"mean over seeds [Student-t 95% interval]")
        from esnb.bench.impala.paper import impala_lag_table
        from esnb.runners.sweep import format_ci

        lag_table = impala_lag_table(rows, np.random.default_rng(0))
        for lag in args.lags:
            cells = []
            for corr in ("vtrace", "none"):
                t = lag_table[(lag_table.lag == lag) & (lag_table.correction == corr)].iloc[0]
                ev = format_ci(t.eval_mean, t.eval_mean_lo, t.eval_mean_hi)
                train = format_ci(t.train_last_quarter, t.train_last_quarter_lo,
                                  t.train_last_quarter_hi)
                cells.append(f"{corr:>6}: eval {ev:>20} train {train:>20}")
            print(f"    lag {lag:>4}   " + "   ".join(cells))
    print(f"  ({time.perf_counter() - t0:.0f} s; load average now {os.getloadavg()[0]:.2f})")
    if args.json:
        doc = {"solve": r, "lag_compare": rows, "load_at_start": load}
        if rows:
            doc["lag_table"] = lag_table.to_dict("records")
        write_json(args.json, doc)
    return 0 if held else 1

"""AES-RL's Table 2 in small: every mean x variance update rule, several seeds.

Lee et al. 2020, Table 2 compared (1+1)-ES with the success rule, the asynchronous rank-based
"move oldest" update, and the 4 fitness-based mean rules x 2 online variance rules, by the
final return after 1M steps (10 seeds). Here the same 10 combinations run AES-RL for a short
budget on a small task, ``--seeds`` seeds each (default 3), one run after another on one
LocalCluster; reported: mean over seeds of the final return (10 noise-free episodes of the
final mean) with its Student-t 95% interval and the seeds' std, the mean update ratio p and
the final mean variance (:func:`esnb.bench.aes.paper.aes_rules_table`). The reduced setting
and the time the benchmark took are printed with the table.

Default reduced setting: InvertedPendulum-v5 capped at 200 steps (returns <= 200), 32-32
networks, 8,000 env steps with RL from 1,000, m = 3 episodes per f(mu), critic chunks of 250.
The ranges follow the paper's rule of thumb (about 1/6 of the best return): r = 35,
absolute f_b = -35, relative f_b = 35.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from esnb.bench.aes.paper import COMBINATIONS  # the paper's Table 2 order
from esnb.bench.common.flags import add_json, add_settings
from esnb.bench.common.report import Session
from esnb.runners.aesrl.config import AESRLConfig
from esnb.settings import integer, number

#: the AESRLConfig settings offered as flags
FLAGS = ("env", "max_episode_steps", "rl_start_step")
#: the reduced setting's values of those flags (see the module's doc), not AESRLConfig's: a small
#: task with short episodes, and RL early in a short budget
BENCH = dict(env="InvertedPendulum-v5", max_episode_steps=200, rl_start_step=1_000)


def add_arguments(p) -> None:
    add_settings(p, AESRLConfig, FLAGS, **BENCH)
    p.add_argument("--steps", type=number(0, low_open=True), default=8_000,
                   help="env steps per run")
    p.add_argument("--seeds", type=integer(1), default=3, help="seeds per combination")
    p.add_argument("--range", type=number(0, low_open=True), default=35.0,
                   help="r, and |f_b| of both baselines (about 1/6 of the best return)")
    p.add_argument("--hidden", type=integer(1), nargs="+", default=[32, 32],
                   help="actor and critic hidden sizes")
    p.add_argument("--workers", type=integer(1), default=2, help="LocalCluster worker processes")
    p.add_argument("--combinations", nargs="+", default=None,
                   help="only these, as mean_rule:var_rule (default: all 10 of Table 2)")
    add_json(p)


def one_run(client, mean_rule: str, var_rule: str, seed: int, args) -> dict:
    from esnb.runners.aesrl import AESRL

    # the reduced setting (see the module's doc), not AESRLConfig's defaults: critic chunks of
    # 250 updates for short runs, m = 3 episodes per f(mu), and evaluations on the critic's
    # worker too (2 workers)
    cfg = AESRLConfig.build(env=args.env, seed=seed, mean_rule=mean_rule, var_rule=var_rule,
                            r=args.range, f_b_absolute=-args.range, f_b_relative=args.range,
                            actor_hidden=tuple(args.hidden), critic_hidden=tuple(args.hidden),
                            rl_start_step=args.rl_start_step, critic_chunk=250,
                            eval_episodes=3, max_episode_steps=args.max_episode_steps,
                            critic_exclusive=False)
    r = AESRL(config=cfg, client=client, name=f"rules-{mean_rule}-{var_rule}-{seed}")
    t0 = time.perf_counter()
    try:
        r.start(env_steps=args.steps).wait()
        final = r.evaluate(10)
        h = r.history
        return {"mean_rule": mean_rule, "var_rule": var_rule, "seed": seed,
                "final_return": float(final.mean()), "p_mean": float(h.p.mean()),
                "var_final": float(h.var_mean.iloc[-1]), "updates": len(h),
                "rl_share": float(r.pop.rl_share), "seconds": time.perf_counter() - t0}
    finally:
        r.close()


def run(args) -> int:
    from esnb.cluster import make_client

    combos = COMBINATIONS
    if args.combinations:
        combos = [tuple(c.split(":")) for c in args.combinations]
        for c in combos:
            if len(c) != 2:
                raise ValueError(f"--combinations takes mean_rule:var_rule, got {c}")
    session = Session()
    client = make_client(args.workers, dashboard_address=":0", silence_logs=logging.ERROR)
    runs = []
    try:
        for mean_rule, var_rule in combos:
            for seed in range(args.seeds):
                runs.append(one_run(client, mean_rule, var_rule, seed, args))
                r = runs[-1]
                print(f"  {mean_rule:<18} {var_rule:<16} seed {seed}: final "
                      f"{r['final_return']:8.1f} ({r['seconds']:.0f} s)", flush=True)
    finally:
        client.close()
    from esnb.bench.aes.paper import aes_rules_table, format_rules_table

    table = aes_rules_table(runs, np.random.default_rng(0))
    print()
    print(f"aes-rules: final return of the mean (10 noise-free episodes), {args.seeds} seeds: "
          f"mean over seeds [Student-t 95% interval]")
    print(f"reduced setting: {args.env} capped at {args.max_episode_steps} steps, "
          f"{args.steps:,.0f} env steps per run, RL from {args.rl_start_step:,}, networks "
          f"{'-'.join(map(str, args.hidden))}, r = |f_b| = {args.range:g}, m = 3, "
          f"{args.workers} workers")
    print(format_rules_table(table))
    return session.done(args, {"runs": runs, "table": table.to_dict("records"),
                               "seconds": session.seconds, "load": session.load})

"""AES-RL's Table 1 on this machine: wall time of CEM-RL serial, P-CEM-RL and AES-RL.

Lee et al. 2020, Table 1: for the same env-step budget, P-CEM-RL (5 workers) needed ~60% less
wall time than serial CEM-RL and AES-RL 74-82% less (82-88% with 9 workers). Here, per
environment (HalfCheetah-v5: fixed 1,000-step episodes; Hopper-v5: variable length):

1. CEM-RL serial runs as one task on one worker (one process, one torch thread);
2. P-CEM-RL runs on the whole cluster (critic on its actor, generation in parallel);
3. AES-RL runs on the same cluster (critic actor on a worker of its own, evaluations on the
   others) with its critic capped at CEM-RL's number of critic updates
   (``critic_ratio = U / steps``); if its critic is behind when the env-step budget is spent,
   :meth:`esnb.AESRL.finish_critic` trains it up to ``U`` and that time is included.

Reported side by side: wall time, reduction vs CEM-RL serial, env steps, critic updates per
env step, actor (RL) steps per env step and evaluation steps (apart from the budget). The
reduced setting (64-64 networks, a short budget) and the time the benchmark took are printed.

On 2 cores the floor for equal work is 0.5x; with the default 3 workers the cluster is
oversubscribed (3 processes on 2 cores) so that AES-RL's critic has a worker of its own while
two workers evaluate, as the paper's critic worker did.
"""

from __future__ import annotations

import logging
import os
import time

from esnb.bench.common.flags import add_json, add_settings, chosen, given_settings
from esnb.bench.common.report import Session
from esnb.runners.aesrl.config import AESRLConfig, CEMRLConfig
from esnb.settings import integer, number, show

log = logging.getLogger("esnb.bench")
#: the AES-RL settings offered as flags (CEM-RL declares the same, with the same defaults)
FLAGS = ("rl_start_step", "seed")


def add_arguments(p) -> None:
    p.add_argument("--envs", nargs="+", default=["HalfCheetah-v5", "Hopper-v5"],
                   help="environments, one table row each")
    p.add_argument("--steps", type=number(0, low_open=True), default=30_000,
                   help="env-step budget per run")
    p.add_argument("--workers", type=integer(1), default=3,
                   help="LocalCluster workers (3 on 2 cores: oversubscribed, see the "
                        "description)")
    hidden = AESRLConfig.declarations()["actor_hidden"][1]
    p.add_argument("--hidden", type=integer(1), nargs="+", default=None,
                   help=f"actor and critic sizes (default: the configs' actor_hidden and "
                        f"critic_hidden, {show(hidden)}; paper 400 300)")
    add_settings(p, AESRLConfig, FLAGS)
    add_json(p)


def _common(env: str, hidden, rl_start: int | None, seed: int | None) -> dict:
    """The settings of all three runs; None: the configs' (the same for AES-RL and CEM-RL)."""
    sizes = {} if hidden is None else dict(actor_hidden=tuple(hidden),
                                           critic_hidden=tuple(hidden))
    return dict(env=env, **chosen(seed=seed, rl_start_step=rl_start), **sizes)


def _figures(name: str, wall: float, c: dict) -> dict:
    steps = max(int(c["env_steps"]), 1)
    return {"algorithm": name, "wall_time": wall, "env_steps": int(c["env_steps"]),
            "critic_updates": int(c["critic_updates"]),
            "critic_per_step": c["critic_updates"] / steps,
            "actor_steps": int(c.get("actor_steps", 0)),
            "actor_per_step": c.get("actor_steps", 0) / steps,
            "eval_steps": int(c["eval_steps"])}


def _warm_up(env: str) -> None:
    """Import torch and the workers' code and build ``env`` once on a worker, so that the
    first timed run (CEM-RL serial) does not pay for it."""
    import torch  # noqa: F401

    import esnb.runners.aesrl.tasks  # noqa: F401
    from esnb.envs.make import make_env

    make_env(env).close()


def measure_env(client, env: str, steps: float, rl_start: int | None = None, hidden=None,
                seed: int | None = None, progress=print, **kwargs) -> list[dict]:
    """The three rows of Table 1 for ``env``; ``rl_start``, ``hidden`` (actor and critic) and
    ``seed`` None: the configs'; ``kwargs`` (e.g. ``max_episode_steps``, ``eval_episodes``) go
    to all three runners."""
    from esnb.runners.aesrl import AESRL, CEMRL, train_cemrl
    from esnb.runners.executor import make_executor

    base = {**_common(env, hidden, rl_start, seed), **kwargs}
    executor = make_executor(client)
    workers = sorted(executor.workers())
    executor.run_on_workers(lambda: _warm_up(env))
    # 1. CEM-RL serial: the whole run inside one task on one worker
    progress(f"{env}: CEM-RL serial on 1 worker ...")
    out = executor.submit(train_cemrl, {**base, "budget": {"env_steps": steps}},
                          workers=[workers[0]], strict=True).result()
    serial = _figures("CEM-RL serial", out["wall_time"], out["final"])
    u = serial["critic_updates"]
    rows = [serial]
    # 2. P-CEM-RL on the cluster
    progress(f"{env}: P-CEM-RL on {len(workers)} workers ...")
    t0 = time.perf_counter()
    pcem = CEMRL(config=CEMRLConfig.build(**base, parallel=True), client=client,
                 name=f"bench-pcem-{env}")
    try:
        pcem.start(env_steps=steps).wait()
        wall = time.perf_counter() - t0
        rows.append(_figures("P-CEM-RL", wall, pcem.summary()))
    finally:
        pcem.close()
    # 3. AES-RL on the cluster, critic capped at CEM-RL's updates
    progress(f"{env}: AES-RL on {len(workers)} workers ...")
    t0 = time.perf_counter()
    aes = AESRL(config=AESRLConfig.build(**base, critic_ratio=max(u, 1) / steps),
                client=client, name=f"bench-aes-{env}")
    try:
        aes.start(env_steps=steps).wait()
        catch_up = aes.finish_critic(u)
        wall = time.perf_counter() - t0
        c = dict(aes.counters)
        h = aes.history
        c["actor_steps"] = int(h.actor_steps.sum())
        row = _figures("AES-RL", wall, c)
        row["critic_catch_up"] = catch_up
        row["staleness_mean"] = float(h.staleness.mean())
        rows.append(row)
    finally:
        aes.close()
    for r in rows:
        r["env"] = env
        r["vs_serial"] = r["wall_time"] / serial["wall_time"]
    return rows


def run(args) -> int:
    from esnb.cluster import make_client

    session = Session()
    sizes = {} if args.hidden is None else dict(actor_hidden=args.hidden,
                                                critic_hidden=args.hidden)
    cfg = AESRLConfig.build(**given_settings(args, AESRLConfig, FLAGS), **sizes)
    client = make_client(args.workers, dashboard_address=":0", silence_logs=logging.ERROR)
    rows = []
    try:
        for env in args.envs:
            rows += measure_env(client, env, args.steps, cfg.rl_start_step, cfg.actor_hidden,
                                cfg.seed)
    finally:
        client.close()
    print()
    print(f"aes-time: wall time for the same env-step budget ({args.steps:,.0f} steps, "
          f"RL from {cfg.rl_start_step:,} steps) and CEM-RL's critic-update budget")
    print(f"reduced setting: actor and critic {'-'.join(map(str, cfg.actor_hidden))} "
          f"(paper 400-300), {args.workers} local workers on {os.cpu_count()} cores, "
          f"seed {cfg.seed}")
    head = (f"  {'env':<15}{'algorithm':<15}{'wall s':>9}{'vs serial':>10}{'env steps':>11}"
            f"{'critic/step':>12}{'actor/step':>11}{'eval steps':>11}")
    print(head)
    for r in rows:
        print(f"  {r['env']:<15}{r['algorithm']:<15}{r['wall_time']:>9.1f}"
              f"{r['vs_serial']:>9.2f}x{r['env_steps']:>11,}{r['critic_per_step']:>12.2f}"
              f"{r['actor_per_step']:>11.2f}{r['eval_steps']:>11,}")
    for r in rows:
        if r["algorithm"] == "AES-RL":
            print(f"  {r['env']}: AES-RL reduction vs CEM-RL serial "
                  f"{1 - r['vs_serial']:.0%} (target >= 30%; paper 74-82% with 5 workers), "
                  f"critic catch-up {r['critic_catch_up']:.1f} s, mean staleness "
                  f"{r['staleness_mean']:.1f} updates")
    return session.done(args, {"rows": rows, "seconds": session.seconds, "load": session.load,
                               "args": {**{k: v for k, v in vars(args).items()
                                           if isinstance(v, (int, float, str, list))},
                                        "rl_start_step": cfg.rl_start_step,
                                        "hidden": list(cfg.actor_hidden), "seed": cfg.seed}},
                        rerun=f"esnb bench aes-time --steps {args.steps:.0f}")


__all__ = ["measure_env", "run"]

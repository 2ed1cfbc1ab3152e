"""IW-ES's cost per iteration against plain ES (IW-ES Figure 3, on this machine).

For each hidden size (two layers of 64, 256, 512 on Ant-v5's 105-dim observation: 11,464 /
94,984 / 321,032 parameters) runners with K = 0..5 share one LocalCluster and take generations
in turn, so every K sees the same machine load. Episodes have a fixed length (Ant without
early termination) so the policies' different behaviour cannot change the rollout work.
Reported: the median wall time of a full iteration (IW updates + rollouts + ordinary update)
divided by plain ES's. Targets: <= 1.10x at K=4 for the 64-unit net, <= 1.25x for 512.
"""

from __future__ import annotations

import numpy as np

from esnb.bench.common.flags import add_json, add_settings
from esnb.bench.common.report import Session
from esnb.runners.es.config import ESConfig
from esnb.settings import integer

TARGETS = {64: 1.10, 512: 1.25}
#: the ESConfig settings offered as flags
FLAGS = ("env", "population")
#: the benchmark's env, not ESConfig's: IW-ES's Figure 3 is on Ant (105-dim observations),
#: whose episodes can be given a fixed length
ENV = "Ant-v5"
#: the benchmark's population, smaller than ESConfig's: 3 sizes x 6 K x several iterations of
#: 1,000-step Ant episodes stay within minutes (BENCHMARKS.md's figures were taken with it)
POPULATION = 20


def add_arguments(p) -> None:
    add_settings(p, ESConfig, FLAGS, env=ENV, population=POPULATION)
    p.add_argument("--hidden", type=integer(1), nargs="+", default=[64, 256, 512],
                   help="widths of the two hidden layers, one measurement each")
    p.add_argument("--ks", type=integer(0), nargs="+", default=[0, 1, 2, 3, 4, 5],
                   help="IW updates per batch to compare (0: plain ES)")
    p.add_argument("--generations", type=integer(1), default=3, help="measured generations per K")
    p.add_argument("--episode-steps", type=integer(1), default=1000,
                   help="fixed length of every episode")
    p.add_argument("--workers", type=integer(1), default=2, help="LocalCluster worker processes")
    add_json(p)


def measure(env=ENV, hidden=(64, 256, 512), ks=(0, 1, 2, 3, 4, 5), population=POPULATION,
            generations=3, episode_steps=1000, workers=2,
            progress=print) -> list[dict]:
    from esnb.cluster import make_client
    from esnb.runners.es import ES

    env_kwargs = {"terminate_when_unhealthy": False} if env.startswith("Ant") else {}
    client = make_client(workers, dashboard_address=":0")
    rows = []
    try:
        for h in hidden:
            # no evaluations: an iteration is IW updates, rollouts and the ordinary update
            runners = {k: ES(config=ESConfig.build(
                env=env, population=population, hidden=(h, h), eval_interval=0, iw_k=k,
                max_episode_steps=episode_steps, env_kwargs=env_kwargs),
                client=client, name=f"iw-overhead-{h}-k{k}") for k in ks}
            for r in runners.values():  # warm-up: the second generation has a batch to reuse
                r.step(2)
            times = {k: [] for k in ks}
            for _ in range(generations):
                for k, r in runners.items():
                    before = r.wall_time
                    r.step(1)
                    times[k].append(r.wall_time - before)
            base = float(np.median(times[ks[0]]))
            d = runners[ks[0]].spec.num_params
            for k in ks:
                t = float(np.median(times[k]))
                rows.append({"hidden": h, "params": d, "k": k, "seconds": t,
                             "ratio": t / base,
                             "iw_updates": int(runners[k].history.iw_updates.iloc[-1])})
            progress(f"hidden {h} ({d:,} params): " + ", ".join(
                f"K={r['k']} {r['ratio']:.3f}x" for r in rows if r["hidden"] == h))
    finally:
        client.close()
    return rows


def run(args) -> int:
    session = Session()
    rows = measure(args.env, args.hidden, args.ks, args.population, args.generations,
                   args.episode_steps, args.workers)
    print()
    print(f"iw-overhead on {args.env} (fixed {args.episode_steps}-step episodes), population "
          f"{args.population}, {args.workers} workers, median of {args.generations} iterations,"
          " (every worker replays the IW updates on its replica)")
    print("time per iteration / plain ES:")
    print(f"  {'hidden':>6} {'params':>9} " + " ".join(f"{'K=' + str(k):>7}" for k in args.ks)
          + "   plain ES s/iter")
    for h in args.hidden:
        sub = [r for r in rows if r["hidden"] == h]
        print(f"  {h:>6} {sub[0]['params']:>9,} " + " ".join(f"{r['ratio']:>7.3f}" for r in sub)
              + f"   {sub[0]['seconds']:.2f}")
    for h, target in TARGETS.items():
        hit = [r for r in rows if r["hidden"] == h and r["k"] == 4]
        if hit:
            ok = "met" if hit[0]["ratio"] <= target else "NOT met"
            print(f"  target K=4, hidden {h}: <= {target:.2f}x -> {hit[0]['ratio']:.3f}x ({ok})")
    return session.done(args, rows, rerun="esnb bench iw-overhead")

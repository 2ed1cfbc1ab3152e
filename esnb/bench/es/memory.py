"""Memory of an ES run's processes and the cold start, with 2, 4 and 8 workers.

Each measurement is a fresh interpreter (a cold start is cold, and no cluster's memory lingers
into the next): it starts ``make_client(n)``, builds ``ES(env)`` and runs generations, then
reads every process's PSS and USS (``psutil``'s ``memory_full_info``): the driver, each worker,
each nanny and the rest (multiprocessing's resource tracker and forkserver). PSS splits shared
pages (the noise table in ``/dev/shm``, shared libraries) between the processes that map them,
so the PSS column adds up to what the run costs the machine; USS is what a process alone holds.
The cold start is ``make_client(n_workers=2)`` + ``ES(env)`` to the first generation done
(median of ``--cold-starts`` runs). The start-up is the same from the launch of a fresh
``python`` (imports included), minus a generation's own time (the second generation's), and
each round also measures the import floor: a fresh interpreter that imports numpy, gymnasium,
mujoco and distributed and makes the env; the start-up is printed as a multiple of the floor
measured in the same round (target <= 2x). The start-up is measured twice: with the noise
table read from the disk cache (:mod:`esnb.noise_cache`; every run after a machine's first)
and built (the cache off: a machine's first run). ``--compare DIR`` runs the same measurements,
interleaved one by one, on the esnb in DIR (e.g. ``git worktree add /tmp/before <commit>``) and
prints the two side by side, with whether both ended on the same theta. Targets (2 workers,
HalfCheetah-v5): all processes <= 700 MB PSS, each worker <= 120 MB USS, cold start <= 3 s.
"""

from __future__ import annotations

import os
import statistics

from esnb.bench.common.flags import add_json, add_settings, given_settings
from esnb.bench.common.interpreter import child
from esnb.bench.common.report import Session
from esnb.runners.es.config import ESConfig
from esnb.settings import integer

#: the ESConfig settings offered as flags
FLAGS = ("env", "population")
#: the benchmark's env, not ESConfig's: the targets are HalfCheetah-v5's (a MuJoCo worker)
ENV = "HalfCheetah-v5"

#: the measured program, as source: it uses only what every esnb version has (make_client, ES,
#: step), so ``--compare`` can run it on an older tree; the env and population are passed in
#: (resolved here from ESConfig) and the rest written out, so that both trees run the same
CHILD = r'''
import json, logging, os, sys, time, zlib
mode, env = sys.argv[1], sys.argv[5]
n, gens, pop = (int(a) for a in sys.argv[2:5])
t0 = time.perf_counter()
import esnb
from esnb.cluster import make_client
from esnb.runners.es import ES
t1 = time.perf_counter()
client = make_client(n, dashboard_address=":0", silence_logs=logging.ERROR)
es = ES(env, client=client, population=pop, eval_interval=0, seed=0)
es.step(1)
t2 = time.perf_counter()
launched = time.time() - float(os.environ["ESNB_BENCH_LAUNCHED"])
out = {"imports": t1 - t0, "cold_start": t2 - t1, "esnb": os.path.dirname(esnb.__file__)}
if mode == "cold":
    # a generation's own time, measured on the second: the start-up is what the first took
    # beyond it, from the parent's launch of this interpreter
    es.step(1)
    out["generation"] = time.perf_counter() - t2
    out["start_up"] = launched - out["generation"]
if mode == "memory":
    import psutil
    if gens > 1:
        es.step(gens - 1)
    me = psutil.Process()
    workers = set(client.run(os.getpid).values())
    def mem(p):
        m = p.memory_full_info()
        return {"pss": m.pss, "uss": m.uss, "rss": m.rss}
    rows = [{"role": "driver", **mem(me)}]
    for child in me.children(recursive=True):
        try:
            if child.pid in workers:
                role = "worker"
            elif any(c.pid in workers for c in child.children()):
                role = "nanny"
            else:
                role = "other"
            rows.append({"role": role, **mem(child)})
        except psutil.Error:
            pass
    out["processes"] = rows
    out["workers_modules"] = sorted(set().union(*client.run(lambda: list(sys.modules)).values())
                                    & {"torch", "pandas", "bokeh", "esnb.runners.base"})
out["theta_crc"] = zlib.crc32(es.theta.tobytes())
out["generations"] = int(es.iteration)
es.close()
client.close()
print("ESNB-BENCH " + json.dumps(out), flush=True)
'''

#: the import floor: a fresh interpreter that imports what an ES run cannot do without (numpy,
#: gymnasium, mujoco, distributed) and makes the env, timed from the parent's launch like the
#: start-up (same arguments as :data:`CHILD`)
FLOOR = r'''
import json, os, sys, time
import numpy, gymnasium, mujoco, distributed
env = gymnasium.make(sys.argv[5])
env.reset(seed=0)
out = {"floor": time.time() - float(os.environ["ESNB_BENCH_LAUNCHED"])}
print("ESNB-BENCH " + json.dumps(out), flush=True)
'''

MB = 1e6


#: this tree's cold starts with the noise cache off (esnb.noise_cache): a machine's first run
UNCACHED = "this, table built (no cache)"


def add_arguments(p) -> None:
    add_settings(p, ESConfig, FLAGS, env=ENV)
    p.add_argument("--workers", type=integer(1), nargs="+", default=[2, 4, 8],
                   help="LocalCluster sizes to measure memory with")
    p.add_argument("--generations", type=integer(1), default=3,
                   help="generations run before memory is read")
    p.add_argument("--cold-starts", type=integer(1), default=3,
                   help="cold starts measured (2 workers; the median is reported)")
    p.add_argument("--compare", default=None, metavar="DIR",
                   help="also measure the esnb in DIR (a worktree of another commit), "
                        "interleaved with this one (default: none)")
    add_json(p)


def summarise(result: dict) -> dict:
    """Per-role sums and extremes in MB from a memory child's process list."""
    rows = result["processes"]
    by = {role: [r for r in rows if r["role"] == role]
          for role in ("driver", "worker", "nanny", "other")}
    return {
        "driver_pss": sum(r["pss"] for r in by["driver"]) / MB,
        "driver_uss": sum(r["uss"] for r in by["driver"]) / MB,
        "worker_pss_mean": statistics.mean(r["pss"] for r in by["worker"]) / MB,
        "worker_uss_max": max(r["uss"] for r in by["worker"]) / MB,
        "workers_pss": sum(r["pss"] for r in by["worker"]) / MB,
        # a LocalCluster's nannies live in the driver; separate ones (dask-worker) count here
        "other_pss": sum(r["pss"] for r in by["nanny"] + by["other"]) / MB,
        "total_pss": sum(r["pss"] for r in rows) / MB,
        "total_rss": sum(r["rss"] for r in rows) / MB,
        "n_workers": len(by["worker"]),
        "heavy_modules_on_workers": result.get("workers_modules", []),
    }


def measure(env: str = ENV, workers=(2, 4, 8), generations: int = 3,
            population: int | None = None, cold_starts: int = 3, compare: str | None = None,
            progress=print) -> dict:
    """``population`` None: ESConfig's."""
    if population is None:
        population = ESConfig.build(env=env).population
    trees = {"this": None} if compare is None else {"this": None, "compare": compare}
    out: dict = {name: {"memory": {}, "cold_starts": []} for name in trees}
    crcs: dict = {name: set() for name in trees}
    for n in workers:
        for name, tree in trees.items():  # interleaved: both see the same machine load
            r = child("memory", n, generations, population, env, tree, source=CHILD)
            out[name]["memory"][n] = summarise(r)
            crcs[name].add((n, r["theta_crc"]))
            progress(f"{name} {n} workers: total {out[name]['memory'][n]['total_pss']:,.0f} "
                     f"MB PSS")
    floors = []
    # this tree again with its noise table built, not read from the cache (a machine's first
    # run; the memory runs above have cached it for the others)
    starts = {**trees, UNCACHED: None}
    out[UNCACHED] = {"cold_starts": []}
    for name in starts:
        out[name].update(start_ups=[], generations=[])
    for i in range(cold_starts):
        # each round: the floor, then every tree, so all of them see the same load
        floors.append(child("floor", 2, 1, population, env, source=FLOOR)["floor"])
        for name, tree in starts.items():
            r = child("cold", 2, 1, population, env, tree, source=CHILD,
                      extra_env={"DASK_ESNB__NOISE__CACHE": "False"} if name == UNCACHED
                      else None)
            out[name]["cold_starts"].append(r["cold_start"])
            out[name]["start_ups"].append(r["start_up"])
            out[name]["generations"].append(r["generation"])
            progress(f"{name} cold start {i + 1}/{cold_starts}: {r['cold_start']:.2f} s; start-up "
                     f"{r['start_up']:.2f} s = {r['start_up'] / floors[-1]:.2f}x the floor "
                     f"{floors[-1]:.2f} s (generation {r['generation']:.2f} s, load "
                     f"{os.getloadavg()[0]:.1f})")
    out["floors"] = floors
    out["floor_median"] = statistics.median(floors)
    for name in starts:
        o = out[name]
        o["cold_start_median"] = statistics.median(o["cold_starts"])
        o["start_up_median"] = statistics.median(o["start_ups"])
        # per round (the floor measured beside it), then the median of those ratios
        o["start_up_over_floor"] = [s / f for s, f in zip(o["start_ups"], floors)]
        o["start_up_over_floor_median"] = statistics.median(o["start_up_over_floor"])
    if compare is not None:
        out["theta_same_as_compare"] = crcs["this"] == crcs["compare"]
    out["settings"] = {"env": env, "workers": list(workers), "generations": generations,
                       "population": population, "cold_starts": cold_starts,
                       "compare": compare}
    return out


ROWS = (("driver PSS / USS", "{driver_pss:,.0f} / {driver_uss:,.0f}"),
        ("worker PSS (mean)", "{worker_pss_mean:,.0f}"),
        ("worker USS (max)", "{worker_uss_max:,.0f}"),
        ("other processes PSS", "{other_pss:,.0f}"),
        ("all processes PSS", "{total_pss:,.0f}"),
        ("all processes RSS", "{total_rss:,.0f}"))


def table(out: dict) -> list[str]:
    """The figures side by side: one column per cluster size (and per tree)."""
    names = [n for n in ("this", "compare") if n in out]
    sizes = out["settings"]["workers"]
    heads = [f"{n}w" + ("" if len(names) == 1 else f" {name}") for n in sizes for name in names]
    width = max(12, *(len(h) + 2 for h in heads))
    lines = ["  MB".ljust(22) + "".join(h.rjust(width) for h in heads)]
    for label, fmt in ROWS:
        cells = [fmt.format(**out[name]["memory"][n]) for n in sizes for name in names]
        lines.append(f"  {label}".ljust(22) + "".join(c.rjust(width) for c in cells))
    return lines


def run(args) -> int:
    session = Session()
    es = ESConfig.build(**given_settings(args, ESConfig, FLAGS))
    out = measure(es.env, args.workers, args.generations, es.population, args.cold_starts,
                  args.compare)
    s = out["settings"]
    print()
    print(f"memory of an ES run on {s['env']}, population {s['population']}, after "
          f"{s['generations']} generations; every process of the run (MB)")
    for line in table(out):
        print(line)
    for name in (n for n in ("this", UNCACHED, "compare") if n in out):
        m2 = out[name].get("memory", {}).get(2)
        heavy = sorted({h for m in out[name].get("memory", {}).values()
                        for h in m["heavy_modules_on_workers"]})
        print(f"  {name}: cold start (make_client(2) + ES() to generation 1 done) median "
              f"{out[name]['cold_start_median']:.2f} s of "
              f"{', '.join(f'{t:.2f}' for t in out[name]['cold_starts'])}"
              f"; heavy modules on workers: {', '.join(heavy) or 'none'}")
        print(f"    start-up (fresh python to generation 1 done, minus a generation's own "
              f"time) median {out[name]['start_up_median']:.2f} s = "
              f"{out[name]['start_up_over_floor_median']:.2f}x the import floor (per round: "
              f"{', '.join(f'{r:.2f}' for r in out[name]['start_up_over_floor'])}; "
              f"target <= 2x)")
        if m2 is not None:
            print(f"    2 workers: all processes {m2['total_pss']:,.0f} MB PSS (target <= 700), "
                  f"worker USS max {m2['worker_uss_max']:,.0f} MB (target <= 120); "
                  f"cold start target <= 3 s")
    print(f"  import floor (fresh python importing numpy, gymnasium, mujoco, distributed and "
          f"making the env) median {out['floor_median']:.2f} s of "
          f"{', '.join(f'{t:.2f}' for t in out['floors'])}")
    if "theta_same_as_compare" in out:
        print(f"  theta bitwise the same as the compared tree's: {out['theta_same_as_compare']}")
    return session.done(args, out, rerun="esnb bench memory")

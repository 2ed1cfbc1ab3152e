"""The CPU Dask's own periodic monitors take: dask's intervals against esnb's quiet ones.

Each measurement is a fresh interpreter (the driver's monitors are made with its cluster, so a
setting cannot change in a running one): it starts ``make_client(workers)`` (a LocalCluster,
workers forked as usual) with ``esnb.cluster.quiet`` true (esnb's intervals,
:mod:`esnb.cluster.quiet`) or false (dask's), then

- **idle**: lets the cluster settle, then counts CPU seconds per wall second over ``--idle``
  seconds: the driver process (scheduler, client and nannies run on its event loop:
  ``time.process_time``) and each worker process (``psutil``'s ``cpu_times`` of its pid; the
  mean over workers);
- **per generation**: ``ES(env, population, eval_interval=0, seed=0)``, two warm-up
  generations, then ``--generations`` timed ones: the driver's CPU seconds per generation and
  the workers' (all of them together), the wall time and env steps per second.

Rounds alternate which mode runs first (``--repeats``); medians are reported, with their ratio
quiet / dask. Each run also reads the scheduler's tick interval, so a mode that did not take
effect shows. The generations' figures include the rollouts themselves (the workers) and ES's
update (the driver): what the monitors take is the difference.
"""

from __future__ import annotations

import statistics

from esnb.bench.common.flags import add_json, add_settings, given_settings
from esnb.bench.common.interpreter import child
from esnb.bench.common.report import Session
from esnb.runners.es.config import ESConfig
from esnb.settings import integer, number

#: the ESConfig settings offered as flags
FLAGS = ("env", "population")
#: the benchmark's env (issue 37 measured HalfCheetah-v5 on 2 workers)
ENV = "HalfCheetah-v5"
#: the two modes: the value of ``esnb.cluster.quiet`` each runs with
MODES = {"dask": "False", "quiet": "True"}

#: the measured program (argv: mode workers generations population env; the idle seconds in
#: ESNB_BENCH_IDLE)
CHILD = r'''
import json, logging, os, sys, time
import psutil
mode, env = sys.argv[1], sys.argv[5]
n, gens, pop = (int(a) for a in sys.argv[2:5])
idle = float(os.environ["ESNB_BENCH_IDLE"])
from esnb.cluster import make_client
from esnb.runners.es import ES
client = make_client(n, dashboard_address=":0", silence_logs=logging.ERROR)
procs = [psutil.Process(pid) for pid in client.run(os.getpid).values()]

def workers():
    return sum(sum(p.cpu_times()[:2]) for p in procs)

tick = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler._tick_interval)
time.sleep(3)  # the workers' start-up and first heartbeats are not idle
d0, w0, t0 = time.process_time(), workers(), time.perf_counter()
time.sleep(idle)
wall = time.perf_counter() - t0
out = {"tick_s": tick, "idle_driver": (time.process_time() - d0) / wall,
       "idle_worker": (workers() - w0) / wall / len(procs)}
if gens:
    es = ES(env, client=client, population=pop, eval_interval=0, seed=0)
    es.step(2)
    before = int(es.history.env_steps.iloc[-1])
    d0, w0, t0 = time.process_time(), workers(), time.perf_counter()
    es.step(gens)
    wall = time.perf_counter() - t0
    out.update(gen_driver=(time.process_time() - d0) / gens, gen_workers=(workers() - w0) / gens,
               gen_wall=wall / gens,
               steps_per_s=(int(es.history.env_steps.iloc[-1]) - before) / wall)
    es.close()
client.close()
print("ESNB-BENCH " + json.dumps(out), flush=True)
'''

#: figure -> (label, format)
FIGURES = {"idle_driver": ("idle: driver CPU-s per s", "{:.4f}"),
           "idle_worker": ("idle: each worker CPU-s per s", "{:.4f}"),
           "gen_driver": ("per generation: driver CPU-s", "{:.3f}"),
           "gen_workers": ("per generation: workers' CPU-s (all)", "{:.3f}"),
           "gen_wall": ("per generation: wall s", "{:.2f}"),
           "steps_per_s": ("per generation: env steps/s", "{:,.0f}")}


def add_arguments(p) -> None:
    add_settings(p, ESConfig, FLAGS, env=ENV, population=40)
    p.add_argument("--workers", type=integer(1), default=2, help="LocalCluster workers")
    p.add_argument("--idle", type=number(1.0), default=10.0,
                   help="seconds the idle cluster is measured")
    p.add_argument("--generations", type=integer(0), default=4,
                   help="timed ES generations per run, after 2 warm-up ones (0: idle only)")
    p.add_argument("--repeats", type=integer(1), default=2,
                   help="rounds, each running both modes (alternating which goes first)")
    add_json(p)


def measure(env: str = ENV, population: int = 40, workers: int = 2, idle: float = 10.0,
            generations: int = 4, repeats: int = 2, progress=print) -> dict:
    rounds: dict = {mode: [] for mode in MODES}
    for r in range(repeats):
        order = list(MODES) if r % 2 == 0 else list(MODES)[::-1]
        for mode in order:
            out = child(mode, workers, generations, population, env, source=CHILD,
                        extra_env={"DASK_ESNB__CLUSTER__QUIET": MODES[mode],
                                   "ESNB_BENCH_IDLE": repr(float(idle))})
            rounds[mode].append(out)
            progress(f"round {r + 1}/{repeats}, {mode}: " + ", ".join(
                f"{k} {v:.4g}" for k, v in out.items()))
    med = {mode: {k: statistics.median(run[k] for run in runs) for k in runs[0]}
           for mode, runs in rounds.items()}
    ratio = {k: (med["quiet"][k] / med["dask"][k] if med["dask"][k] else None)
             for k in med["dask"] if k != "tick_s"}
    return {"env": env, "population": population, "workers": workers, "idle_s": idle,
            "generations": generations, "repeats": repeats, "median": med, "ratio": ratio,
            "rounds": rounds}


def run(args) -> int:
    session = Session()
    es = ESConfig.build(**given_settings(args, ESConfig, FLAGS))
    r = measure(es.env, es.population, args.workers, args.idle, args.generations, args.repeats)
    med = r["median"]
    print()
    print(f"Dask's monitors on a {r['workers']}-worker LocalCluster, median of {r['repeats']} "
          f"interleaved rounds; ES: {r['env']}, population {r['population']}")
    print(f"  {'':<40}{'dask':>10}{'quiet':>10}{'quiet/dask':>12}")
    print(f"  {'event-loop tick, s':<40}{med['dask']['tick_s']:>10.3f}"
          f"{med['quiet']['tick_s']:>10.3f}")
    for key, (label, fmt) in FIGURES.items():
        if key not in med["dask"]:
            continue
        ratio = r["ratio"][key]
        print(f"  {label:<40}{fmt.format(med['dask'][key]):>10}"
              f"{fmt.format(med['quiet'][key]):>10}"
              f"{(f'{ratio:.2f}' if ratio is not None else '-'):>12}")
    return session.done(args, r, rerun="esnb bench dask-idle")

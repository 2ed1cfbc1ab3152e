"""Soak: ES and Ape-X side by side for minutes; memory must stay flat and nothing be lost.

With ``--faults``: the fault soak instead (:mod:`esnb.bench.soak.faults`): Ape-X DQN, AES-RL and
IMPALA through a seeded schedule of killed and added workers, a killed replay and a stopped and
resumed driver, every lost transition counted.

Each runner gets a LocalCluster of its own (Ape-X's actor loops hold their workers' threads,
which would starve ES's rollouts on a shared cluster). Every ``--interval`` seconds the driver's
resident memory and every worker's (as the worker reports it to the scheduler) are sampled;
the report fits a straight line through the samples after ``--warmup`` and gives its slope in
MB per minute: the original RLlib ES leaked on the driver, which a 10-minute slope shows.

"Nothing lost" means: the runs end without an error; ES has one history row per generation and
every generation used all its pairs (``n_excluded == 0``, episodes = population x
generations); no worker was restarted or lost; Ape-X's replay was never recreated or lost
items and no actor loop had to be restarted.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from esnb.bench.common.flags import add_settings, chosen, given_settings
from esnb.bench.common.report import write_json
from esnb.runners.apex.config import ApeXDQNConfig
from esnb.runners.es.config import ESConfig
from esnb.settings import integer, number

MB = 1024 * 1024
#: the soak's ES env, not ESConfig's: a MuJoCo run, as BENCHMARKS.md's soak
ES_ENV = "HalfCheetah-v5"
#: the Ape-X run's env: Ape-X DQN's default
APEX_ENV = ApeXDQNConfig.build().env
#: the soak's Ape-X actors, fewer than ApeXDQNConfig's: a light Ape-X run beside ES (as
#: BENCHMARKS.md's soak)
APEX_ACTORS = 2


def add_arguments(p) -> None:
    p.add_argument("--minutes", type=number(0, low_open=True), default=10.0,
                   help="how long both runs last")
    p.add_argument("--interval", type=number(0, low_open=True), default=30.0,
                   help="seconds between samples")
    p.add_argument("--warmup", type=number(0), default=60.0,
                   help="seconds of samples left out of the slope (imports, first buffers)")
    p.add_argument("--workers", type=integer(1), default=None,
                   help="workers of each cluster (default: 2; with --faults: 4)")
    p.add_argument("--es-env", default=ES_ENV, help="environment of the ES run")
    add_settings(p, ESConfig, ["population"])
    p.add_argument("--apex-env", default=APEX_ENV,
                   help="environment of the Ape-X run (default: Ape-X DQN's, %(default)s)")
    p.add_argument("--apex-actors", type=integer(1), default=APEX_ACTORS, help="Ape-X actors")
    p.add_argument("--no-apex", action="store_true", help="soak ES alone")
    p.add_argument("--max-slope", type=number(None), default=2.0,
                   help="MB/min above which a process counts as growing (exit code 1)")
    p.add_argument("--json", default=None,
                   help="also write samples and figures to this file (default: not written)")
    faults = p.add_argument_group("fault soak (--faults)")
    faults.add_argument("--faults", action="store_true",
                        help="run the fault soak instead (esnb.bench.soak.faults)")
    faults.add_argument("--algorithms", nargs="+", default=["apex", "aesrl", "impala"],
                        choices=["apex", "aesrl", "impala"], help="runs to soak, one at a time")
    faults.add_argument("--seed", type=integer(0), default=0,
                        help="seed of the fault schedule (order, victims)")
    faults.add_argument("--between", type=integer(1), default=5,
                        help="iterations the run makes between two faults")
    faults.add_argument("--rounds", type=integer(1), default=1,
                        help="times each algorithm takes its whole set of faults")
    faults.add_argument("--out", default=None,
                        help="folder of the runs and their driver logs (default: a temporary "
                             "folder, kept)")


def slope_mb_per_min(t: np.ndarray, rss: np.ndarray) -> float:
    """Least-squares slope of ``rss`` (bytes) against ``t`` (seconds), in MB per minute."""
    if len(t) < 2 or np.ptp(t) == 0:
        return float("nan")
    return float(np.polyfit(np.asarray(t, float) / 60.0, np.asarray(rss, float) / MB, 1)[0])


def _workers_rss(client) -> dict[str, int]:
    info = client.scheduler_info(n_workers=-1)["workers"]
    return {addr: int(w.get("metrics", {}).get("memory", 0)) for addr, w in info.items()}


def _start_apex(client, env: str, actors: int, seed: int | None):
    from esnb.cluster import actor_resources
    from esnb.runners.apex import ApeX

    # no evaluations: the soak watches the actors, the replay and the learner
    cfg = ApeXDQNConfig.build(env=env, num_actors=actors, eval_interval=0,
                              replay_resources=actor_resources(client), **chosen(seed=seed))
    return ApeX(config=cfg, client=client, name="soak-apex").start()


def measure(minutes: float = 10.0, interval: float = 30.0, warmup: float = 60.0,
            workers: int = 2, es_env: str = ES_ENV, population: int | None = None,
            apex_env: str | None = APEX_ENV, apex_actors: int = APEX_ACTORS,
            seed: int | None = None, progress=print) -> dict:
    """Run the soak; returns samples, slopes and the loss checks. ``population`` and ``seed``
    None: the configs'; ``apex_env`` None: no Ape-X run."""
    import psutil

    from esnb.cluster import make_client
    from esnb.runners.es import ES

    # evaluations every 10 generations, fewer than ESConfig's default: some are soaked too
    es_config = ESConfig.build(env=es_env, eval_interval=10,
                               **chosen(population=population, seed=seed))
    me = psutil.Process()
    clients = {"es": make_client(workers, dashboard_address=":0", set_as_default=False,
                                 silence_logs=logging.ERROR)}
    runners = {}
    try:
        runners["es"] = ES(config=es_config, client=clients["es"], name="soak-es").start()
        if apex_env:
            clients["apex"] = make_client(workers, dashboard_address=":0", set_as_default=False,
                                          silence_logs=logging.ERROR)
            runners["apex"] = _start_apex(clients["apex"], apex_env, apex_actors, seed)
        samples = []
        t0 = time.monotonic()
        end = t0 + minutes * 60.0
        stop = threading.Event()
        while True:
            now = time.monotonic() - t0
            row = {"t": now, "driver": me.memory_info().rss}
            for name, c in clients.items():
                row[f"{name}_workers"] = _workers_rss(c)
            for name, r in runners.items():
                row[f"{name}_iterations"] = r.iteration
            samples.append(row)
            worker_mb = sum(sum(row[f"{n}_workers"].values()) for n in clients) / MB
            progress(f"{now:6.0f} s  driver {row['driver'] / MB:7.1f} MB  workers "
                     f"{worker_mb:7.1f} MB  " + "  ".join(
                         f"{n} {r.iteration} it" for n, r in runners.items()))
            for name, r in runners.items():
                if not r.running:
                    raise RuntimeError(f"the {name} run ended early: {r.state} {r.error}")
            if time.monotonic() >= end:
                break
            stop.wait(min(interval, max(0.0, end - time.monotonic())))
        for r in runners.values():
            r.stop()
        for r in runners.values():
            r.wait(300)
        return _report(samples, runners, warmup, workers)
    finally:
        for r in runners.values():
            r.stop()
            close = getattr(r, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # a report is still worth having
                    logging.getLogger("esnb.bench").exception("closing %r", r)
        for c in clients.values():
            c.close()


def _report(samples, runners, warmup, workers) -> dict:
    t = np.array([s["t"] for s in samples])
    keep = t >= min(warmup, t[-1] / 2)  # short soaks: at least the second half
    out = {"minutes": float(t[-1] / 60.0), "samples": len(samples),
           "driver_mb": [s["driver"] / MB for s in samples], "t": t.tolist()}
    out["driver_slope"] = slope_mb_per_min(t[keep], np.array([s["driver"] for s in samples])[keep])
    lost = {}
    for name in [k[:-len("_workers")] for k in samples[0] if k.endswith("_workers")]:
        addresses = [set(s[f"{name}_workers"]) for s in samples]
        lost[f"{name}_workers_restarted_or_lost"] = len(set().union(*addresses)) - workers
        slopes = {}
        for addr in addresses[0]:
            rss = np.array([s[f"{name}_workers"].get(addr, np.nan) for s in samples], float)
            ok = keep & np.isfinite(rss)
            slopes[addr] = slope_mb_per_min(t[ok], rss[ok])
        out[f"{name}_worker_slopes"] = slopes
        out[f"{name}_worker_mb_last"] = {a: rss / MB for a, rss in
                                         samples[-1][f"{name}_workers"].items()}
    es = runners["es"]
    h = es.history
    out["es_generations"] = int(es.iteration)
    out["es_error"] = repr(es.error) if es.error else None
    lost["es_error"] = int(es.error is not None)
    lost["es_rows_missing"] = int(es.iteration - len(h))
    lost["es_generation_gaps"] = int((np.diff(h.generation.to_numpy()) != 1).sum()) if len(h) else 0
    lost["es_pairs_excluded"] = int(h.n_excluded.sum()) if len(h) else 0
    lost["es_episodes_missing"] = int(h.population.sum() - es.episodes) if len(h) else 0
    if "apex" in runners:
        ax = runners["apex"]
        last = ax.records[-1] if ax.records else {}
        out["apex_iterations"] = int(ax.iteration)
        out["apex_env_steps"] = int(last.get("env_steps", 0))
        out["apex_learner_steps"] = int(last.get("learner_steps", 0))
        lost["apex_error"] = int(ax.error is not None)
        for col in ("replay_lost", "replay_recreations", "loop_restarts"):
            lost[f"apex_{col}"] = int(last.get(col, 0) or 0)
    out["lost"] = lost
    return out


def run(args) -> int:
    if args.faults:
        from esnb.bench.soak import faults as fault_soak

        return fault_soak.run(args)
    t_start = time.perf_counter()
    r = measure(args.minutes, args.interval, args.warmup, args.workers or 2, args.es_env,
                given_settings(args, ESConfig, ["population"]).get("population"),
                None if args.no_apex else args.apex_env, args.apex_actors)
    print()
    print(f"soak: {r['minutes']:.1f} min, {r['samples']} samples every {args.interval:g} s, "
          f"slopes after {args.warmup:g} s of warm-up (MB/min)")
    growing = []

    def line(what, slope, last_mb):
        flag = "GROWING" if slope > args.max_slope else "flat"
        if slope > args.max_slope:
            growing.append(what)
        print(f"  {what:<34} {last_mb:8.1f} MB  slope {slope:+7.2f} MB/min  {flag}")

    line("driver (ES + Ape-X runners)", r["driver_slope"], r["driver_mb"][-1])
    for name in ("es", "apex"):
        for addr, slope in r.get(f"{name}_worker_slopes", {}).items():
            line(f"{name} worker {addr}", slope, r[f"{name}_worker_mb_last"].get(addr, np.nan))
    print(f"  ES: {r['es_generations']} generations"
          + (f"; Ape-X: {r['apex_iterations']} iterations, {r['apex_env_steps']:,} env steps, "
             f"{r['apex_learner_steps']:,} learner steps" if "apex_iterations" in r else ""))
    bad = {k: v for k, v in r["lost"].items() if v}
    print("  nothing lost" if not bad else f"  LOST: {bad}")
    print(f"  ({time.perf_counter() - t_start:.0f} s)")
    if args.json:
        write_json(args.json, r)
    return 1 if (bad or growing) else 0

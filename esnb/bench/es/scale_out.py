"""ES's orchestration overhead per generation and the bytes the driver sends, from 2 to 32
workers, for a small and a 1M-parameter policy.

Episodes are cut to a few steps (CartPole-v1, ``--episode-steps``) and the population is
``--per-worker`` episodes per worker, so a generation's rollouts take milliseconds and its wall
time is mostly orchestration. Workers are LocalCluster processes (one thread each),
oversubscribing the machine past its core count on purpose: what is measured is the
scheduler's and the driver's work, not the rollouts.

Reported per worker count and policy size (medians over the measured generations):

- ``overhead``: the generation's wall time minus the least its tasks' compute could take on
  this machine -- the longest task's CPU time, or all tasks' CPU time over the cores when the
  workers outnumber them (each task's replica update included: with a 1M-parameter policy
  every worker computes the update, ~0.1 s, which 32 workers on 2 cores cannot do side by
  side; CPU, not wall time, because a worker preempted by the others waits without working);
- ``dask floor``: the same number of no-op tasks, one per worker, submitted and gathered on
  the same client between generations -- the least any orchestration on Dask can cost;
- ``sent``: the bytes of the arguments and values the driver sent per generation (pickled),
  and per episode;
- ``syncs``: how many times a worker had to be sent the whole state (once per worker, at its
  first generation, is the design);
- the workers that ran a generation's tasks (every one, when there are as many tasks).

Targets: overhead <= 50 ms with 8 workers and <= 150 ms with 32; bytes per
generation independent of the parameter count (<= 16 bytes per episode plus a constant); theta
bitwise equal to an inline run.

``--cluster slurm`` runs the same on worker jobs of a SLURM cluster (``esnb.cluster``'s
dask-jobqueue settings), two worker processes per job asking one CPU each, so that several
jobs fit a small node.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

from esnb.bench.common.flags import add_json, chosen
from esnb.bench.common.report import Session
from esnb.runners.es.config import ESConfig
from esnb.settings import integer

#: hidden layers of the two policies: ~5k and ~1M parameters on CartPole
SIZES = {"5k": (64, 64), "1M": (1024, 1024)}
#: the benchmark's env, whatever ESConfig's default: SIZES' parameter counts and the episodes
#: cut at a few steps are CartPole-v1's (so is :data:`PROBE`'s)
ENV = "CartPole-v1"
#: worker processes per SLURM job (``--cluster slurm``)
PER_JOB = 2


def _worker_counts(text: str) -> str:
    """``--workers``: comma-separated worker counts, each an integer >= 1."""
    count = integer(1)
    for part in str(text).split(","):
        count(part)  # raises argparse's one-line error
    return text


def _sizes(text: str) -> str:
    unknown = [s for s in str(text).split(",") if s not in SIZES]
    if unknown:
        raise argparse.ArgumentTypeError(f"must be among {', '.join(SIZES)}, got {text!r}")
    return text


def add_arguments(p) -> None:
    p.add_argument("--workers", type=_worker_counts, default="2,4,8,16,32",
                   help="comma-separated worker counts, one cluster each")
    p.add_argument("--sizes", type=_sizes, default="5k,1M",
                   help=f"policies among {', '.join(SIZES)}")
    p.add_argument("--generations", type=integer(1), default=8, help="measured generations each")
    p.add_argument("--per-worker", type=integer(1), default=4, help="episodes per worker")
    p.add_argument("--episode-steps", type=integer(1), default=20, help="cap of each episode")
    p.add_argument("--cluster", default="local", choices=("local", "slurm"),
                   help="local worker processes, or worker jobs on SLURM")
    p.add_argument("--replicas", action="store_true",
                   help="every worker keeps a replica, also on the driver's host, as on a "
                        "multi-host cluster [default: off: local workers map the driver's "
                        "theta]")
    p.add_argument("--compare", default=None, metavar="DIR",
                   help="also time the generations of the esnb checked out in DIR (e.g. a "
                        "worktree of an older commit), alternating with this one (default: "
                        "no comparison)")
    add_json(p)


def _noop() -> int:
    return 0


def dask_floor(client) -> float:
    """Seconds to submit one no-op task to each live worker and gather them."""
    addresses = sorted(client.nthreads())
    t0 = time.perf_counter()
    futures = [client.submit(_noop, workers=[a], pure=False) for a in addresses]
    client.gather(futures)
    return time.perf_counter() - t0


def _where() -> tuple[int, str | None]:
    """(pid, SLURM job id) of the worker running it."""
    return os.getpid(), os.environ.get("SLURM_JOB_ID")


def _client(n: int, cluster: str):
    import logging

    from esnb.cluster import make_client

    if cluster == "slurm":
        # worker jobs of PER_JOB processes on one CPU each: several jobs fit a small node
        client = make_client(n, cluster_type="slurm", dashboard_address=":0",
                             set_as_default=False, actor_worker=False,
                             silence_logs=logging.ERROR, walltime="00:30:00",
                             job_name="esnb-scale-out", interface="lo", cores=PER_JOB,
                             log_directory=tempfile.mkdtemp(prefix="esnb-scale-out-"),
                             processes=PER_JOB, job_cpu=1, memory=f"{2 * PER_JOB}GiB")
    else:
        client = make_client(n, dashboard_address=":0", set_as_default=False,
                             silence_logs=logging.ERROR)
    client.wait_for_workers(n, timeout=600)
    return client


def measure_one(client, size: str, n: int, generations: int, per_worker: int,
                episode_steps: int, seed: int | None = None) -> dict:
    """Warm up, then measure ``generations`` generations of one ES run on ``client``
    (``seed`` None: ESConfig's)."""
    from esnb.runners.es import ES

    # no evaluations (a generation is its tasks alone); a noise table just large enough for
    # the policy, built in a fraction of the default table's time
    cfg = ESConfig.build(env=ENV, hidden=SIZES[size],
                         population=2 * max(1, per_worker * n // 2),
                         max_episode_steps=episode_steps, eval_interval=0,
                         noise_size=2_000_000 if size == "1M" else 1_000_000, **chosen(seed=seed))
    es = ES(config=cfg, client=client, name=f"scale-{size}-{n}")
    try:
        es.step(2)  # warm-up: imports, environments, every worker's first sync
        es.executor.sent_bytes = 0
        syncs0 = es.generations.syncs
        floors = []
        for _ in range(generations):
            floors.append(dask_floor(client))
            es.step(1)
        h = es.history.iloc[-generations:]
        cores = os.cpu_count() or 1
        compute = np.maximum(h.task_cpu_max, h.task_cpu / min(cores, n))
        sent = h.sent_bytes.to_numpy()
        where = client.run(_where)
        row = {
            "size": size,
            "params": int(es.theta.size),
            "workers": n,
            "population": cfg.population,
            "tasks": int(h.tasks.median()),
            "gen_time": float(h.gen_time.median()),
            "task_max": float(h.task_max.median()),
            "compute": float(compute.median()),
            "overhead": float((h.gen_time - compute).median()),
            "dask_floor": float(statistics.median(floors)),
            "sent_bytes": float(np.median(sent)),
            "sent_per_episode": float(np.median(sent) / cfg.population),
            "syncs_warmup": int(syncs0),
            "syncs_after": int(es.generations.syncs - syncs0),
            "distinct_workers": len({pid for pid, _ in where.values()}),
            "slurm_jobs": len({job for _, job in where.values() if job}),
        }
        inline = ES(config=cfg, client=False)
        inline.step(es.iteration)
        row["theta_bitwise_equal"] = bool(np.array_equal(inline.theta, es.theta))
        return row
    finally:
        es.close()


def measure(workers=(2, 4, 8, 16, 32), sizes=("5k", "1M"), generations: int = 8,
            per_worker: int = 4, episode_steps: int = 20, cluster: str = "local",
            progress=print) -> list[dict]:
    rows = []
    for n in workers:
        client = _client(n, cluster)
        try:
            for size in sizes:
                row = measure_one(client, size, n, generations, per_worker, episode_steps)
                progress(_line(row), flush=True)
                rows.append(row)
        finally:
            client.close()
    return rows


#: seconds per generation of whichever esnb is first on sys.path (for --compare): only the
#: runner's public API and its gen_time column, which older trees have too
PROBE = """
import json, logging, sys
def main():
    n, gens = int(sys.argv[1]), int(sys.argv[3])
    hidden = tuple(int(h) for h in sys.argv[2].split(","))
    from esnb.cluster import make_client
    from esnb.runners.es import ES
    c = make_client(n, dashboard_address=":0", set_as_default=False, silence_logs=logging.ERROR)
    c.wait_for_workers(n, timeout=600)
    try:
        es = ES("CartPole-v1", hidden=hidden, population=4 * n, max_episode_steps=20, seed=0,
                eval_interval=0, noise_size=2_000_000, client=c)
        es.step(2 + gens)
        print(json.dumps(float(es.history.gen_time.iloc[-gens:].median())))
    finally:
        c.close()
if __name__ == "__main__":
    main()
"""


def probe(tree: str, n: int, size: str, generations: int) -> float:
    """Median seconds per generation of the esnb in ``tree`` (a fresh interpreter)."""
    import json
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run([sys.executable, "-c", PROBE, str(n), ",".join(map(str, SIZES[size])),
                          str(generations)], cwd=tree, env=env, capture_output=True, text=True,
                         timeout=1800)
    if out.returncode:
        raise RuntimeError(f"the probe in {tree} failed: {out.stderr.strip()[-500:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def compare(other: str, workers, sizes, generations: int, progress=print) -> list[dict]:
    """Seconds per generation here and in ``other``, alternating run by run."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rows = []
    for n in workers:
        for size in sizes:
            theirs = probe(other, n, size, generations)
            ours = probe(here, n, size, generations)
            rows.append({"workers": n, "size": size, "other": theirs, "this": ours})
            progress(f"  {n:>3} workers  {size:>3}: {other}: {theirs:.3f} s/generation, "
                     f"this tree: {ours:.3f} s ({theirs / ours:.2f}x)", flush=True)
    return rows


def _line(r: dict) -> str:
    return (f"  {r['workers']:>3} workers  {r['size']:>3} ({r['params']:>9,} params)  "
            f"overhead {1e3 * r['overhead']:>6.1f} ms  (dask floor {1e3 * r['dask_floor']:>5.1f}"
            f" ms; gen {1e3 * r['gen_time']:>6.1f} ms, compute {1e3 * r['compute']:>6.1f} ms, "
            f"{r['tasks']} tasks)  sent "
            f"{r['sent_bytes']:>7,.0f} B/gen = {r['sent_per_episode']:>5.1f} B/episode  "
            f"syncs {r['syncs_warmup']}+{r['syncs_after']}  bitwise "
            f"{'yes' if r['theta_bitwise_equal'] else 'NO'}"
            + (f"  ({r['slurm_jobs']} SLURM jobs)" if r["slurm_jobs"] else ""))


def run(args) -> int:
    session = Session()
    if args.replicas:  # read by the runners' HostTheta: nothing shared on this host
        os.environ["ESNB_SHM_DIR"] = ""
    workers = [int(w) for w in str(args.workers).split(",") if w]
    sizes = [s for s in str(args.sizes).split(",") if s]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        raise SystemExit(f"esnb bench es-scale-out: --sizes: unknown {unknown}; "
                         f"choose among {', '.join(SIZES)}")
    print(f"es-scale-out on {args.cluster} workers: {ENV} cut at {args.episode_steps} "
          f"steps, {args.per_worker} episodes per worker, {args.generations} generations each; "
          + ("every worker keeps a replica" if args.replicas else
             "workers on this host map the driver's theta, others keep replicas"))
    rows = measure(workers, sizes, args.generations, args.per_worker, args.episode_steps,
                   args.cluster)
    by = {(r["workers"], r["size"]): r for r in rows}
    print()
    for n in workers:
        if (n, "5k") in by and (n, "1M") in by:
            a, b = by[n, "5k"], by[n, "1M"]
            print(f"  {n:>3} workers: 1M / 5k overhead {b['overhead'] / a['overhead']:.2f}x, "
                  f"bytes {b['sent_bytes'] / a['sent_bytes']:.3f}x")
    results = {"rows": rows}
    if args.compare:
        print(f"\nseconds per generation, {args.compare} vs this tree (alternating):")
        results["compare"] = compare(args.compare, workers, sizes, args.generations)
    return session.done(args, results, rerun="esnb bench es-scale-out")

"""Prioritized replay throughput: in-process and through the Dask actor, side by side.

Capacity 2^20 (filled), batch 512, Ape-X-sized transitions (obs and next_obs of 8 float32,
action, n-step return, discount). Measured:

- in-process: sample (with importance weights) + priority update cycles/s, and inserts/s in
  batches of ``--insert-batch``;
- through a :class:`~esnb.replay.server.ReplayServer` actor on a LocalCluster worker, called
  from this process: cycles/s as two calls (sample, then update) one at a time, and as the
  Ape-X learner does it, one ``exchange`` call per cycle (the previous batch's priorities in,
  the next batch out) sent before the current batch is used; inserts/s from a task on
  another worker pushing batches the way an actor loop does.

Targets: in-process >= 2,000 cycles/s; through the actor >= 200 cycles/s and >= 50,000
inserted transitions/s. Exactness of priorities and weights is checked by the tests.
"""

from __future__ import annotations

import os
import time

import dask
import numpy as np

from esnb.bench.common.flags import add_json
from esnb.bench.common.report import Session
from esnb.settings import integer, number

SPEC = {"obs": ((8,), "float32"), "action": "int64", "reward": "float32",
        "next_obs": ((8,), "float32"), "discount": "float32"}


def add_arguments(p) -> None:
    p.add_argument("--capacity", type=integer(1), default=2 ** 20,
                   help="replay capacity in transitions (filled before measuring)")
    p.add_argument("--batch", type=integer(1), default=512, help="sample batch size")
    p.add_argument("--insert-batch", type=integer(1), default=500,
                   help="transitions per insert call")
    p.add_argument("--seconds", type=number(0, low_open=True), default=3.0,
                   help="length of each measurement")
    p.add_argument("--repeats", type=integer(1), default=3, help="measurements each (median)")
    p.add_argument("--no-cluster", action="store_true", help="in-process figures only")
    add_json(p)


def make_batch(n: int, rng: np.random.Generator) -> dict:
    return {"obs": rng.standard_normal((n, 8), dtype=np.float32),
            "action": rng.integers(0, 18, n),
            "reward": rng.standard_normal(n).astype(np.float32),
            "next_obs": rng.standard_normal((n, 8), dtype=np.float32),
            "discount": np.full(n, 0.97, dtype=np.float32)}


def _rate(fn, seconds: float, cpu: bool = False):
    """Calls of ``fn`` per second over about ``seconds`` of wall time; with ``cpu``, also per
    second of this process's CPU time (what a dedicated core would give on a shared machine)."""
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        n += 1
        dt = time.perf_counter() - t0
        if dt >= seconds:
            wall = n / dt
            if cpu:
                return wall, n / max(time.process_time() - c0, 1e-9)
            return wall


def fill(buf_add, capacity: int, rng: np.random.Generator, chunk: int = 65_536) -> None:
    done = 0
    while done < capacity:
        n = min(chunk, capacity - done)
        buf_add(make_batch(n, rng), rng.uniform(0.01, 2.0, n))
        done += n


def in_process(capacity: int, batch: int, insert_batch: int, seconds: float,
               repeats: int) -> dict:
    from esnb.replay import PrioritizedReplayBuffer

    rng = np.random.default_rng(0)
    buf = PrioritizedReplayBuffer(capacity, spec=SPEC)
    fill(buf.add, capacity, rng)

    def cycle():
        _, ids, _ = buf.sample(batch, rng)
        buf.update_priorities(ids, rng.uniform(0.01, 2.0, batch))

    pending = [make_batch(insert_batch, rng) for _ in range(8)]
    prios = rng.uniform(0.01, 2.0, insert_batch)
    k = [0]

    def insert():
        buf.add(pending[k[0] % 8], prios)
        k[0] += 1

    cycles = [_rate(cycle, seconds, cpu=True) for _ in range(repeats)]
    inserts = [_rate(insert, seconds, cpu=True) for _ in range(repeats)]
    return {"cycles_per_s": float(np.median([c[0] for c in cycles])),
            "cycles_per_cpu_s": float(np.median([c[1] for c in cycles])),
            "inserts_per_s": float(np.median([c[0] for c in inserts])) * insert_batch,
            "inserts_per_cpu_s": float(np.median([c[1] for c in inserts])) * insert_batch,
            "size": len(buf)}


def _pusher(info: dict, insert_batch: int, seconds: float, seed: int) -> dict:
    """An actor loop's pushing pattern, from a task: batches, one call at a time."""
    from esnb.runners.executor import attach

    replay = attach(info)
    rng = np.random.default_rng(seed)
    batches = [make_batch(insert_batch, rng) for _ in range(8)]
    prios = rng.uniform(0.01, 2.0, insert_batch)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        replay.add(batches[n % 8], prios, None).result(timeout=60)
        n += 1
    return {"items": n * insert_batch, "seconds": time.perf_counter() - t0}


def through_actor(capacity: int, batch: int, insert_batch: int, seconds: float,
                  repeats: int) -> dict:
    import logging

    from esnb.cluster import make_client
    from esnb.runners.executor.on_dask import DaskExecutor
    from esnb.runners.replay_service import ReplayService

    out = {}
    # actor calls from this process go straight to the worker (0.7 ms, not ~1-2 ms via the
    # scheduler)
    with dask.config.set({"distributed.client.direct-to-workers": True}):
        client = make_client(2, dashboard_address=":0", set_as_default=False,
                             silence_logs=logging.ERROR)
    try:
        workers = sorted(client.scheduler_info()["workers"])
        config = dict(capacity=capacity, prioritized=True, spec=SPEC)
        replay = ReplayService(DaskExecutor(client), config, seed=0, worker=workers[0])
        rng = np.random.default_rng(1)
        t0 = time.perf_counter()
        fill(lambda b, p: replay.call("add", b, p), capacity, rng)
        out["fill_seconds"] = time.perf_counter() - t0
        prios = rng.uniform(0.01, 2.0, batch)

        def sequential():
            data = replay.call("sample", batch, 1)
            replay.call("update_priorities", data["ids"], prios)

        # the learner's pattern: one exchange call per cycle (last batch's priorities in,
        # next batch out), the next one sent before this batch is used
        state = {"next": replay.submit("sample", batch, 1), "ids": None}

        def pipelined():
            data = replay.result(state["next"])
            state["next"] = replay.submit("exchange", state["ids"], prios, batch, 1)
            state["ids"] = data["ids"]

        seq = [_rate(sequential, seconds) for _ in range(repeats)]
        pipe = [_rate(pipelined, seconds) for _ in range(repeats)]
        replay.result(state["next"])
        pushes = []
        for r in range(repeats):
            fut = client.submit(_pusher, replay.info(), insert_batch, seconds, r,
                                workers=[workers[1]], pure=False)
            res = fut.result()
            pushes.append(res["items"] / res["seconds"])
        out.update(cycles_per_s=float(np.median(seq)), pipelined_cycles_per_s=float(
            np.median(pipe)), inserts_per_s=float(np.median(pushes)),
            size=int(replay.call("stats")["size"]))
        replay.close()
    finally:
        client.close()
    return out


def run(args) -> int:
    session = Session()
    print(f"replay bench: capacity {args.capacity:,}, batch {args.batch}, inserts of "
          f"{args.insert_batch}; load average {session.load:.2f} on {os.cpu_count()} cores")
    ip = in_process(args.capacity, args.batch, args.insert_batch, args.seconds, args.repeats)
    result = {"capacity": args.capacity, "batch": args.batch,
              "insert_batch": args.insert_batch, "load_average": session.load,
              "in_process": ip}
    print(f"  in-process   sample+update {ip['cycles_per_s']:>9,.0f} cycles/s (target >= 2,000)"
          f"   inserts {ip['inserts_per_s']:>11,.0f}/s")
    print(f"               per CPU second {ip['cycles_per_cpu_s']:>8,.0f} cycles"
          f"             inserts {ip['inserts_per_cpu_s']:>11,.0f}  (a dedicated core)")
    if not args.no_cluster:
        ra = through_actor(args.capacity, args.batch, args.insert_batch, args.seconds,
                           args.repeats)
        result["actor"] = ra
        print(f"  actor        sample+update {ra['cycles_per_s']:>9,.0f} cycles/s one call at a "
              f"time (target >= 200)")
        print(f"               exchange      {ra['pipelined_cycles_per_s']:>9,.0f} cycles/s "
              f"(one call per cycle, the next in flight)")
        print(f"               inserts from a task on another worker "
              f"{ra['inserts_per_s']:>9,.0f}/s (target >= 50,000)")
        print(f"               ratio actor/in-process cycles "
              f"{ra['pipelined_cycles_per_s'] / ip['cycles_per_s']:.2f}")
    return session.done(args, result, rerun="esnb bench replay")

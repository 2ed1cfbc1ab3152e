"""Fault soak: Ape-X DQN, AES-RL and IMPALA through a seeded schedule of faults on one
4-worker LocalCluster, with every lost transition counted (``esnb bench soak --faults``).

Each run is a real ``esnb train`` process (the driver) joined to the soak's cluster with
``--address``, so it can be signalled and resumed as a batch system would. Between faults the
soak waits for iterations, never for seconds. The faults, in an order drawn from ``--seed``:

- ``kill_worker``: SIGKILL of a worker process (its nanny starts a new one);
- ``kill_replay``: SIGKILL of the worker holding the replay (Ape-X, AES-RL);
- ``add_worker``: the cluster grows by one worker;
- ``sigterm``: SIGTERM to the driver's process group; once it has exited (143, checkpoint
  written) the run is resumed from its folder (``--resume``).

What the report checks, per run, against counts the soak keeps itself:

- a replay lost with its worker (SIGKILL, whatever was inserting): the soak reads the lost
  server's last ``inserted`` counter from the count file it kept (rewritten on every insert,
  :func:`esnb.replay.server.write_count`) and the recreated server's restored count through
  its own actor handle. Their difference is what the loss took, and the run's ``replay_lost``
  must have grown by exactly that (it did not while the driver counted only the inserts its
  replies had shown: those of the last fraction of a second before the kill were missed);
- a driver stopped and resumed: the soak polls the replay's counter until the stopped driver
  releases it; the resumed run's replay must start with exactly that many inserts (nothing
  inserted after the last checkpoint);
- IMPALA (no replay): frames trained must be ``learner steps x T x B`` and the frames received
  must all be accounted for: trained + queued + dropped + discarded (queued when it stopped).

It also reports each fault's recovery time (until the run has made progress again), the
returns before the first fault and at the end, and the peak memory of the driver and workers.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from esnb.bench.soak.driver import Driver, ReplayPoller, live_workers, replay_stats, replays

MB = 1024 * 1024

#: per algorithm: small settings (a cheap env named whatever the config's default; every setting
#: not given is the config's), a budget never reached (the soak stops the run) and the faults it
#: takes
RUNS = {
    "apex": (["--env", "CartPole-v1", "--min-size", "500", "--eval-interval", "0",
              "--learner-steps", "1e9"], ("kill_worker", "kill_replay", "add_worker", "sigterm")),
    "aesrl": (["--env", "Pendulum-v1", "--actor-hidden", "32", "32", "--critic-hidden", "32",
               "32", "--rl-start-step", "400", "--critic-chunk", "100", "--batch-size", "32",
               "--max-episode-steps", "100", "--updates", "1e9"],
              ("kill_worker", "kill_replay", "add_worker", "sigterm")),
    "impala": (["--env", "CartPole-v1", "--eval-interval", "0", "--learner-steps", "1e9"],
               ("kill_worker", "add_worker", "sigterm")),
}
#: ``quick=True`` (the tests): shorter iterations; AES-RL's individuals are all ES ones (the
#: replay and the critic still run, so the same faults hit them)
QUICK = {"apex": ["--min-size", "200"], "aesrl": ["--rl-start-step", "1000000000",
                                                   "--max-episode-steps", "50"],
         "impala": []}


@dataclass
class Fault:
    """One injected fault and what the soak measured around it."""

    kind: str
    at_iteration: int
    seconds_to_recover: float | None = None
    detail: dict = field(default_factory=dict)


class Soak:
    """The schedule of one run, its observations and its report."""

    def __init__(self, client, algorithm: str, folder: Path, rng: np.random.Generator,
                 between: int, progress, quick: bool = False):
        self.client, self.algorithm, self.rng, self.between = client, algorithm, rng, between
        self.say = progress
        args, self.kinds = RUNS[algorithm]
        if quick:  # later flags win (argparse)
            args = [*args, *QUICK[algorithm]]
        folder.mkdir(parents=True, exist_ok=True)
        self.driver = Driver(algorithm, args, folder / "run", client.scheduler.address,
                             folder / "driver.log")
        self.faults: list[Fault] = []
        self.worker_peak = 0
        self.expected_lost = 0  # the soak's own count of transitions lost with a replay

    # -- observing ---------------------------------------------------------------------------
    def iteration(self) -> int:
        rows = self.driver.history()
        return len(rows)

    def wait_iterations(self, n: int, timeout: float = 600) -> list[dict]:
        """Wait until the run's checkpoint holds ``n`` more iterations than now."""
        start = self.iteration()
        deadline = time.monotonic() + timeout
        while True:
            self._sample()
            self.driver.check_alive()
            rows = self.driver.history()
            if len(rows) >= start + n:
                return rows
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.algorithm}: no {n} iterations in {timeout} s "
                                   f"(at {len(rows)})")
            time.sleep(0.1)

    def _sample(self) -> None:
        import psutil

        self.driver.sample_memory()
        total = 0
        for pid in live_workers(self.client).values():
            try:
                total += psutil.Process(pid).memory_info().rss
            except psutil.NoSuchProcess:
                continue
        self.worker_peak = max(self.worker_peak, total)

    def _last(self, key: str, default=0):
        rows = self.driver.history()
        return rows[-1].get(key, default) if rows else default

    # -- faults ------------------------------------------------------------------------------
    def kill_worker(self, fault: Fault) -> None:
        holding = {a for _, a in self.client.run_on_scheduler(replays)}
        workers = live_workers(self.client)
        victims = sorted(a for a in workers if a not in holding) or sorted(workers)
        victim = victims[int(self.rng.integers(len(victims)))]
        fault.detail["worker"] = victim
        n = len(workers)
        os.kill(workers[victim], signal.SIGKILL)
        self._wait_workers(n, exclude=victim)
        self.wait_iterations(1)

    def kill_replay(self, fault: Fault) -> None:
        from esnb.replay.server import read_count

        (key, address), = self.client.run_on_scheduler(replays)
        workers = live_workers(self.client)
        before = {k: int(self._last(k)) for k in ("replay_lost", "replay_recreations")}
        stats = replay_stats(self.client, key, address)
        generation, count = int(stats["generation"]), stats["count_file"]
        os.kill(workers[address], signal.SIGKILL)
        deadline = time.monotonic() + 600
        while True:  # the run recreates the replay on a live worker
            self.driver.check_alive()
            now = [r for r in self.client.run_on_scheduler(replays) if r[0] != key]
            if now and int(self._last("replay_recreations")) > before["replay_recreations"]:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.algorithm}: the replay was not recreated")
            time.sleep(0.1)
        (new_key, new_address), = now
        restored = int(replay_stats(self.client, new_key, new_address)["restored_inserted"])
        # the lost server's own last count: its count file in its host's scratch (this
        # host: a LocalCluster), which the run reads and removes only when it closes the replay
        final = read_count(count)
        if final is None or final[0] != generation:
            raise RuntimeError(f"no count of replay generation {generation} in {count}")
        self._wait_workers(len(workers), exclude=address)
        self.wait_iterations(1)
        lost = final[1] - restored
        self.expected_lost += lost
        counted = int(self._last("replay_lost")) - before["replay_lost"]
        fault.detail.update(worker=address, inserted_at_kill=final[1], restored=restored,
                            lost=lost, counted=counted)

    def add_worker(self, fault: Fault) -> None:
        n = len(live_workers(self.client))
        self.client.cluster.scale(n + 1)
        self._wait_workers(n + 1)
        fault.detail["workers"] = n + 1
        self.wait_iterations(1)

    def sigterm(self, fault: Fault) -> None:
        poller = ReplayPoller(self.client) if "kill_replay" in self.kinds else None
        code = self.driver.stop()
        if poller is not None:
            poller.stop()
        if code != 128 + signal.SIGTERM:
            raise RuntimeError(f"{self.algorithm} driver exited with {code} after SIGTERM: "
                               f"{self.driver.log.read_text()[-2000:]}")
        stopped_at = self.iteration()
        self.driver.start(resume=True)
        rows = self.wait_iterations(1) if stopped_at else []
        fault.detail.update(exit_code=code, stopped_at=stopped_at, resumed_rows=len(rows))
        if poller is not None:
            key, address = self.client.run_on_scheduler(replays)[0]
            restored = replay_stats(self.client, key, address)
            fault.detail.update(inserted_at_stop=poller.last,
                                restored=int(restored["restored_inserted"]))

    def _wait_workers(self, n: int, exclude: str = "", timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while True:
            live = live_workers(self.client)
            if len(live) >= n and exclude not in live:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not get back to {n} workers: "
                                   f"{self._nannies()}")
            time.sleep(0.2)

    def _nannies(self) -> str:
        """What each of the cluster's nannies says of its worker: a restart that failed, or a
        worker that left the cluster, shows here (their own logs are silenced)."""
        said = []
        for name, nanny in getattr(self.client.cluster, "workers", {}).items():
            process = getattr(getattr(nanny, "process", None), "process", None)
            said.append(f"{name}: nanny {getattr(nanny, 'status', '?')}, worker "
                        f"{getattr(nanny, 'worker_address', None)}, process exit code "
                        f"{getattr(process, 'exitcode', None)}")
        return "; ".join(said) or "no nannies to ask"

    # -- the run -----------------------------------------------------------------------------
    def run(self, rounds: int) -> dict:
        self.driver.start()
        t0 = time.monotonic()
        self.wait_iterations(max(3, self.between))
        before = self._returns()
        kinds = [k for _ in range(rounds) for k in self.rng.permutation(self.kinds)]
        for kind in kinds:
            fault = Fault(kind, self.iteration())
            self.say(f"  {self.algorithm}: {kind} at iteration {fault.at_iteration}")
            start = time.monotonic()
            getattr(self, kind)(fault)
            fault.seconds_to_recover = time.monotonic() - start
            self.faults.append(fault)
            self.wait_iterations(self.between)
        after = self._returns()
        code = self.driver.stop()
        if code != 128 + signal.SIGTERM:
            raise RuntimeError(f"{self.algorithm} driver exited with {code} at the end")
        return self._report(before, after, time.monotonic() - t0)

    def _returns(self) -> float:
        """Mean return of the last 10 iterations that finished episodes (NaN: none yet)."""
        vals = [r["return_mean"] for r in self.driver.history()
                if isinstance(r.get("return_mean"), (int, float))
                and np.isfinite(r["return_mean"])]
        return float(np.mean(vals[-10:])) if vals else float("nan")

    def _report(self, before: float, after: float, seconds: float) -> dict:
        meta = self.driver.meta()
        last = meta["history"][-1]
        out: dict[str, Any] = {
            "algorithm": self.algorithm, "seconds": seconds,
            "iterations": len(meta["history"]),
            "faults": [vars(f) for f in self.faults],
            "return_before": before, "return_after": after,
            "peak_driver_mb": self.driver.peak_rss / MB,
            "peak_workers_mb": self.worker_peak / MB,
        }
        checks: dict[str, bool] = {}
        if self.algorithm == "impala":
            cfg = meta["config"]
            trained = int(last["frames_trained"])
            out.update(inserted=int(last["env_steps"]), sampled=trained,
                       lost=int(last["dropped_frames"]) + int(last["discarded_frames"]),
                       queued=int(last["queued_frames"]))
            checks["sampled = learner steps x T x B"] = trained == int(
                last["learner_steps"]) * int(cfg["unroll_length"]) * int(cfg["batch_size"])
            checks["received = trained + queued + dropped + discarded"] = \
                out["inserted"] == trained + out["queued"] + out["lost"]
        else:
            lost = int(last["replay_lost"])
            out.update(inserted=int(last["replay_inserted"]) + lost, lost=lost,
                       lost_expected=self.expected_lost,
                       sampled=int(meta.get("sampled", 0)) or None)
            if self.algorithm == "aesrl":
                out["sampled"] = int(last["critic_updates"]) * int(
                    meta["config"]["batch_size"])
                out["not_inserted"] = int(last["lost_transitions"])
            checks["lost = the soak's own count"] = lost == self.expected_lost
            for f in self.faults:
                if f.kind == "kill_replay":
                    checks[f"kill at {f.at_iteration}: counted = lost"] = \
                        f.detail["counted"] == f.detail["lost"]
                if f.kind == "sigterm":
                    checks[f"stop at {f.at_iteration}: nothing inserted after the "
                           f"checkpoint"] = f.detail["inserted_at_stop"] == f.detail["restored"]
        progress = [f.at_iteration for f in self.faults] + [len(meta["history"])]
        checks["learning went on after every fault"] = all(
            b > a for a, b in zip(progress, progress[1:]))
        out["checks"] = checks
        return out


def measure(algorithms=("apex", "aesrl", "impala"), workers: int = 4, seed: int = 0,
            between: int = 5, rounds: int = 1, folder: str | None = None,
            progress=print, quick: bool = False) -> dict:
    """Run the soak; returns one report per algorithm (see the module's doc)."""
    from esnb.cluster import make_client

    rng = np.random.default_rng(seed)
    root = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="esnb-fault-soak-"))
    reports = {}
    # the soak's own probes of a replay the driver has just released make dask log a KeyError
    # here and on the worker: quiet those loggers (the drivers log to their own files)
    quiet = {name: logging.getLogger(name).level
             for name in ("distributed", "tornado", "tornado.application")}
    for name in quiet:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        for algorithm in algorithms:
            client = make_client(workers, dashboard_address=":0", set_as_default=False,
                                 silence_logs=logging.CRITICAL)
            try:
                soak = Soak(client, algorithm, root / algorithm, rng, between, progress, quick)
                reports[algorithm] = soak.run(rounds)
            finally:
                client.close()
    finally:
        for name, level in quiet.items():
            logging.getLogger(name).setLevel(level)
    return {"seed": seed, "workers": workers, "folder": str(root), "runs": reports}


def run(args) -> int:
    t0 = time.perf_counter()
    r = measure(args.algorithms, args.workers or 4, args.seed, args.between, args.rounds,
                args.out)
    failed = []
    for name, rep in r["runs"].items():
        print(f"\n{name}: {rep['iterations']} iterations in {rep['seconds']:.0f} s; "
              f"return {rep['return_before']:.1f} before the faults, {rep['return_after']:.1f} "
              f"after; peak memory: driver {rep['peak_driver_mb']:.0f} MB, workers "
              f"{rep['peak_workers_mb']:.0f} MB")
        for f in rep["faults"]:
            detail = ", ".join(f"{k} {v}" for k, v in f["detail"].items())
            print(f"  {f['kind']:<12} at {f['at_iteration']:>4}: recovered in "
                  f"{f['seconds_to_recover']:.1f} s ({detail})")
        print(f"  transitions: {rep['inserted']:,} inserted, {rep['sampled'] or 0:,} sampled, "
              f"{rep['lost']:,} lost" + (f" (the soak counted {rep['lost_expected']:,})"
                                           if "lost_expected" in rep else ""))
        for check, ok in rep["checks"].items():
            print(f"  {'ok  ' if ok else 'FAIL'} {check}")
            if not ok:
                failed.append(f"{name}: {check}")
    print(f"\n({time.perf_counter() - t0:.0f} s; run folders in {r['folder']})")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2, default=float))
    return 1 if failed else 0

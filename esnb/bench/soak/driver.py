"""What the fault soak (:mod:`esnb.bench.soak.faults`) drives and probes: an ``esnb train``
process joined to the soak's cluster, and the replay actor seen through the soak's own client
(its key and worker from the scheduler, its counters through an actor handle of the soak's)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def live_workers(client) -> dict[str, int]:
    """Live workers: address -> pid."""
    return dict(client.run(os.getpid, on_error="ignore"))


def replays(dask_scheduler) -> list[tuple[str, str]]:
    """(key, worker address) of every replay actor the scheduler holds."""
    return [(str(key), next(iter(ts.who_has)).address) for key, ts in
            dask_scheduler.tasks.items()
            if ts.actor and str(key).startswith("esnb-replay") and ts.who_has]


def replay_stats(client, key: str, address: str, timeout: float = 10.0) -> dict | None:
    """The replay server's own counters, through the soak's own actor handle (None: gone)."""
    from distributed.actor import Actor

    from esnb.replay.server import ReplayServer

    try:
        with client.as_current():
            return Actor(ReplayServer, address, key).stats().result(timeout=timeout)
    except Exception:  # noqa: BLE001 - a released or lost actor answers nothing
        return None


class Driver:
    """One ``esnb train`` process and its run folder."""

    def __init__(self, algorithm: str, args: list[str], folder: Path, address: str,
                 log: Path):
        self.algorithm, self.args, self.folder, self.address = algorithm, args, folder, address
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.peak_rss = 0

    def start(self, resume: bool = False) -> None:
        what = ["--resume", str(self.folder)] if resume else ["--out", str(self.folder)]
        cmd = [sys.executable, "-m", "esnb.cli", "train", self.algorithm, *self.args, *what,
               "--address", self.address, "--checkpoint-every", "1", "--no-progress",
               "--final-eval", "0"]
        with open(self.log, "a") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True)

    def history(self) -> list[dict]:
        from esnb.record import CheckpointError, load_checkpoint

        try:
            return list(load_checkpoint(self.folder / "checkpoint.npz")[0]["history"])
        except (FileNotFoundError, CheckpointError):
            return []

    def meta(self) -> dict:
        from esnb.record import load_checkpoint

        return load_checkpoint(self.folder / "checkpoint.npz")[0]

    def sample_memory(self) -> None:
        import psutil

        try:
            self.peak_rss = max(self.peak_rss, psutil.Process(self.proc.pid).memory_info().rss)
        except (psutil.NoSuchProcess, AttributeError):
            pass

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the {self.algorithm} driver exited with {self.proc.returncode}"
                               f": {self.log.read_text()[-2000:]}")

    def stop(self, timeout: float = 300) -> int:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise RuntimeError(f"the {self.algorithm} driver did not stop after SIGTERM") \
                from None


class ReplayPoller:
    """The replay's ``inserted`` counter as its server reports it, polled every 10 ms until
    the server is released (``last``: its final value)."""

    def __init__(self, client):
        self.client = client
        self.last: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        target = self.client.run_on_scheduler(replays)
        if not target:
            return
        key, address = target[0]
        while not self._stop.is_set():
            stats = replay_stats(self.client, key, address, timeout=2)
            if stats is None:
                return
            self.last = int(stats["inserted"])
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)



"""The driver's side of IMPALA's actor slots: at most one task in flight per slot, pinned to a
worker, results received in slot order, failures counted.

A slot's state (environments, where their episodes are) lives on the worker that ran its last
task (:mod:`esnb.runners.impala.tasks`), so each slot is pinned to one worker; others are
allowed, so the slots of a dead or retired worker move on and start fresh episodes there.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import numpy as np

from esnb.runners.impala.tasks import ActorConfig, drop_actors, impala_unrolls

log = logging.getLogger("esnb.impala")

#: a slot's task that failed this many times in a row ends the run
MAX_TASK_FAILURES = 3
#: seconds the list of live workers is reused before it is fetched again
WORKERS_TTL = 5.0


class ActorSlots:
    """``n`` actor slots of one run on an executor.

    Parameters
    ----------
    executor : InlineExecutor or DaskExecutor
    config : ActorConfig
        What every task of the run shares.
    n : int
        Number of slots.

    Attributes
    ----------
    inflight : dict
        ``{slot: future}`` of the tasks not yet received.
    task_count : ndarray of int64
        Tasks submitted per slot (a task's number seeds a fresh slot state).
    """

    def __init__(self, executor, config: ActorConfig, n: int):
        self.executor = executor
        self.config = config
        self.n = int(n)
        self.inflight: dict[int, Any] = {}
        self.task_count = np.zeros(self.n, dtype=np.int64)
        self.failures = np.zeros(self.n, dtype=np.int64)
        self._workers: list[str] = []
        self._workers_at = -1e9

    def workers(self) -> list[str]:
        """Live worker addresses, sorted (fetched at most every few seconds)."""
        now = time.monotonic()
        if now - self._workers_at > WORKERS_TTL:
            self._workers = sorted(self.executor.workers())
            self._workers_at = now
        return self._workers

    def idle(self) -> list[int]:
        return [s for s in range(self.n) if s not in self.inflight]

    def submit(self, slot: int, payload: dict, segments: int, unroll_length: int) -> None:
        """Start ``segments`` unroll segments of ``slot`` with the parameters in ``payload``."""
        task = int(self.task_count[slot])
        self.task_count[slot] += 1
        workers = self.workers()
        self.inflight[slot] = self.executor.submit(
            impala_unrolls, self.config, payload, slot, task, segments, unroll_length,
            key=f"impala-{self.config.run}-a{slot}-t{task}",
            workers=[workers[slot % len(workers)]] if workers else None)

    def finished(self) -> list[int]:
        """Slots whose task has ended (successfully or not), in slot order."""
        return sorted(s for s, f in self.inflight.items() if f.done())

    def wait(self, timeout: float) -> None:
        """Return once a task in flight ends, or after ``timeout`` seconds."""
        self.executor.wait_first(list(self.inflight.values()), timeout)

    def receive(self, slots: list[int]) -> list[dict]:
        """The results of these finished slots' tasks, in slot order; a failed task is counted
        (its slot gets a new one) and ends the run after :data:`MAX_TASK_FAILURES` in a row."""
        ok = []
        for slot in slots:
            future = self.inflight[slot]
            if future.status == "finished":
                ok.append(slot)
                continue
            del self.inflight[slot]
            exc = future.exception() if future.status == "error" else None
            self.failures[slot] += 1
            if self.failures[slot] >= MAX_TASK_FAILURES:
                raise RuntimeError(f"actor {slot} failed {MAX_TASK_FAILURES} times in a row; "
                                   f"last error: {exc!r}") from exc
            log.warning("actor %d task %s (%s): resubmitting", slot, future.status, exc)
        if not ok:
            return []
        results = self.executor.gather([self.inflight.pop(s) for s in ok])
        self.failures[ok] = 0
        return results

    def close(self, extra=()) -> None:
        """Cancel the tasks in flight (and ``extra`` futures) and close this run's
        environments wherever they live."""
        self.executor.cancel([*self.inflight.values(), *extra])
        self.inflight.clear()
        try:
            self.executor.run_on_workers(functools.partial(drop_actors, self.config.run))
        except Exception:  # a closed cluster has nothing left to close
            log.debug("could not drop actors of %s", self.config.run, exc_info=True)

"""AES-RL's evaluations in flight: tasks tracked in completion order, placed on the evaluation
workers, and resubmitted when a worker dies; the same code runs on any executor (inline, each
task has finished when it is submitted).

:class:`EvaluationPool` knows nothing of the algorithm: the runner gives it :class:`Pending`
records and a ``build(pending) -> (fn, args, priority)`` function, and gets back finished
``(pending, result)`` pairs from :meth:`EvaluationPool.poll`. Arguments are built at each
submission, so a resubmitted evaluation gets the replay's and the critic's *current* handles.

What a lost worker does to a pending evaluation, and what the pool does about it:

- the task ran there: Dask reruns it elsewhere by itself;
- it failed because its worker, the replay's or a dependency was lost (``is_loss``), or its
  finished result was lost before it was fetched: submitted again, at most ``max_retries``
  times, then dropped (``on_drop`` is called, the drop counted);
- it is strictly restricted to workers that are all gone (an exclusive critic's run): the
  scheduler holds it as ``no-worker`` and it would never run, so it is submitted again (not
  counted as a failure).

Any other error is a bug in the task and is raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from esnb.replay.server import is_loss

#: seconds to fetch a finished evaluation's result before it counts as lost with its worker
#: (a live worker answers in milliseconds; a result lost meanwhile would be recomputed first)
RESULT_TIMEOUT = 10.0

log = logging.getLogger("esnb.aes")


@dataclass
class Pending:
    """An individual (or an evaluation of the mean) on its way."""

    id: int
    kind: str  # "RL", "ES" or "mean"
    z: np.ndarray
    seed: int
    sampled_update: int
    p_rl: float = 0.0
    rl_steps: int = 0
    critic_version: int = -1
    random_actions: bool = False
    seeds: np.ndarray | None = None
    counted: bool = False  # in the population control's counts (after the warm-up)
    attempts: int = 0  # failed runs (a lost worker, a lost replay)
    submissions: int = 0
    workers: tuple = ()


class EvaluationPool:
    """Evaluations in flight on an executor.

    Parameters
    ----------
    executor : InlineExecutor or DaskExecutor
    name : str
        Task keys are ``esnb-aes-<name>-<kind><id>-s<submission>``.
    build : callable
        ``build(pending) -> (fn, args, priority)``.
    max_retries : int
        Failed runs of an individual before it is dropped.
    on_drop : callable, optional
        Called with a dropped :class:`Pending`.
    counters : dict, optional
        Where ``resubmitted`` and ``dropped`` are counted (the runner's counters).
    """

    def __init__(self, executor, name: str, build: Callable[[Pending], tuple],
                 max_retries: int = 2, on_drop: Callable[[Pending], None] | None = None,
                 counters: dict | None = None):
        self.executor = executor
        self.name = name
        self.prefix = f"esnb-aes-{name}-"
        self.build = build
        self.max_retries = int(max_retries)
        self.on_drop = on_drop
        self.pending: dict[str, Pending] = {}
        self.futures: dict[str, Any] = {}
        self.counters = counters if counters is not None else {}
        for k in ("resubmitted", "dropped"):
            self.counters.setdefault(k, 0)
        self.completions = executor.as_completed()
        self.workers: list[str] = []
        self.eval_workers: list[str] | None = None  # None: no restriction
        self.n_eval_workers = 0
        self.threads = 1
        self._checked = 0.0
        self._rescue_checks = 0

    # -- placement ---------------------------------------------------------------------------
    def refresh(self, exclude: str | None = None, force: bool = False) -> bool:
        """Re-read the workers (at most every 0.5 s); True when they changed. Evaluations go
        to every worker but ``exclude`` (when there is another one)."""
        now = time.monotonic()
        if not force and now - self._checked < 0.5:
            return False
        self._checked = now
        info = self.executor.workers()
        workers = sorted(info)
        changed = workers != self.workers
        self.workers = workers
        ev = [w for w in workers if w != exclude] or workers
        self.threads = max(1, sum(int(info[w].get("nthreads", 1)) for w in ev))
        self.n_eval_workers = len(ev)
        # only an exclusive worker needs restrictions; without them Dask reroutes on its own
        self.eval_workers = ev if ev != workers else None
        if changed:
            self._rescue_checks = 4  # the scheduler may learn of a loss after we do
        if self._rescue_checks > 0 and self.eval_workers is not None:
            self._rescue_checks -= 1
            self._rescue(workers)
        return changed

    def _rescue(self, workers: list[str]) -> None:
        """Resubmit evaluations the scheduler cannot place (strictly restricted to workers
        that are all gone: state ``no-worker``)."""
        keys = [k for k in self.pending if self.pending[k].workers]
        for key in self.executor.stuck(keys):
            if key in self.pending:
                self.resubmit(key, f"no live worker among {list(self.pending[key].workers)} "
                                   f"(live: {workers})", failed=False)

    # -- submitting --------------------------------------------------------------------------
    def count(self, kind: str | None = None) -> int:
        """Pending evaluations (of one kind; ``"individuals"``: RL and ES)."""
        if kind is None:
            return len(self.pending)
        if kind == "individuals":
            return sum(p.kind != "mean" for p in self.pending.values())
        return sum(p.kind == kind for p in self.pending.values())

    def submit(self, pend: Pending) -> None:
        fn, args, priority = self.build(pend)
        pend.submissions += 1
        key = f"{self.prefix}{pend.kind}{pend.id}-s{pend.submissions}"
        fut = self.executor.submit(fn, *args, key=key, priority=priority,
                                   workers=self.eval_workers, strict=True)
        pend.workers = tuple(self.eval_workers or ())
        self.pending[fut.key] = pend
        self.futures[fut.key] = fut
        self.completions.add(fut)

    def _forget(self, key: str, cancel: bool) -> Pending:
        pend = self.pending.pop(key)
        fut = self.futures.pop(key, None)
        if fut is not None:
            if cancel:
                fut.cancel()
            fut.release()
        return pend

    def resubmit(self, key: str, why: str, failed: bool = True) -> None:
        """Submit an evaluation again (``failed``: it ran and failed, which counts toward
        ``max_retries``; otherwise it never ran)."""
        pend = self._forget(key, cancel=True)
        pend.attempts += int(failed)
        if pend.kind != "mean" and pend.attempts > self.max_retries:
            self.counters["dropped"] += 1
            log.warning("individual %d dropped after %d failed runs (%s)", pend.id,
                        pend.attempts, why)
            if self.on_drop is not None:
                self.on_drop(pend)
            return
        if pend.kind != "mean":
            self.counters["resubmitted"] += 1
            log.warning("individual %d resubmitted (%s)", pend.id, why)
        self.submit(pend)

    def resubmit_all(self, why: str, kinds=("RL", "ES")) -> None:
        for key, pend in list(self.pending.items()):
            if pend.kind in kinds:
                self.resubmit(key, why, failed=False)

    def cancel_all(self) -> list[Pending]:
        """Cancel everything pending; returns what was cancelled."""
        return [self._forget(key, cancel=True) for key in list(self.pending)]

    # -- collecting --------------------------------------------------------------------------
    def poll(self) -> list[tuple[Pending, dict]]:
        """Finished evaluations since the last call (without waiting)."""
        out = []
        for fut in self.completions.next_batch(block=False):
            key = fut.key
            if key not in self.pending:  # cancelled and resubmitted already
                fut.release()
                continue
            if fut.status == "lost":  # its result died with its worker before it was fetched
                self.resubmit(key, "its result was lost with its worker", failed=False)
                continue
            if fut.status != "finished":
                exc = fut.exception() if fut.status == "error" else RuntimeError(fut.status)
                if fut.status == "cancelled" or is_loss(exc):
                    self.resubmit(key, f"{type(exc).__name__}: {exc}")
                    continue
                raise exc
            try:
                # a finished result is fetched in milliseconds; one that died with its worker
                # meanwhile would be recomputed first (the driver waited 15-30 s for an
                # evaluation pushing into a lost replay): evaluate it again instead
                res = fut.result(timeout=RESULT_TIMEOUT)
            except TimeoutError:
                self.resubmit(key, "its result was lost with its worker", failed=False)
                continue
            except Exception as exc:  # finished on a worker that died before it was fetched
                if not is_loss(exc):
                    raise
                self.resubmit(key, f"its result was lost: {type(exc).__name__}")
                continue
            out.append((self._forget(key, cancel=False), res))
        return out

    # -- closing -----------------------------------------------------------------------------
    def drain(self, timeout: float = 60.0, settle: float = 0.5) -> None:
        """Wait (bounded) until cancelled evaluations have left the workers.

        A running task cannot be interrupted: a cancelled evaluation goes on and pushes its
        transitions to the replay, and an actor released under it makes the worker log a
        ``KeyError`` traceback for every such call. Checked twice, ``settle`` seconds apart:
        the scheduler's messages to a worker are batched, so a task sent just before it was
        cancelled can reach its worker (and start: a worker runs a task it was told to,
        cancelled or not) after a check that found nothing anywhere (seen in CI: pushes 20 ms
        after the replay was released). In this process nothing is left running.
        """
        if not self.executor.remote:
            return
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline:
            try:
                busy = self.executor.busy(self.prefix)
            except Exception:  # noqa: BLE001 - closing: a lost worker runs nothing
                return
            quiet = 0 if busy else quiet + 1
            if quiet == 2:
                return
            time.sleep(settle if quiet else 0.1)
        log.info("closing %s: individuals still running after %.0f s", self.name, timeout)

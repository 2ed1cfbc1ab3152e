"""The background thread every runner runs on: ``start``, ``pause``, ``resume``, ``step``,
``stop``, ``wait``; the loop that runs iterations until a stop or the budget.

:class:`RunThread` owns the thread and its state; :class:`~esnb.runners.base.Runner` (its
only subclass here) gives it what an iteration is (``_run_iteration``), the counters the
budget is measured in (``_progress``) and what happens when the loop has ended
(``_run_ended``: work on the cluster stopped, the last checkpoint written). An algorithm's
runner never touches the thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from esnb.runners.budget import make_target, reached

log = logging.getLogger("esnb.runner")

STATES = ("idle", "running", "paused", "stopped", "finished", "failed")


class RunThread:
    """The lifecycle of a run on a background thread (the base of
    :class:`~esnb.runners.base.Runner`).

    Attributes
    ----------
    state : str
        One of :data:`STATES`.
    running : bool
        Whether the thread goes on.
    error : BaseException or None
        Why the run failed.
    """

    #: the name people read (messages); the runner's
    title: str = "runner"
    name: str = "run"

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        # set by start(), cleared by the thread as it ends: Thread.is_alive() and join() are
        # not trusted, because CPython (< 3.13) marks a thread stopped when a KeyboardInterrupt
        # (a notebook's interrupt button) cuts a join() short, while it still runs
        self._alive = False
        self._state = "idle"
        self._paused = False
        self._stop_requested = False
        self._pending_steps = 0
        self._target: dict[str, float] = {}
        self.error: BaseException | None = None

    # -- what the run gives the thread -------------------------------------------------------
    def _run_iteration(self) -> dict[str, Any]:
        """One iteration, its row recorded."""
        raise NotImplementedError

    def _progress(self) -> dict[str, float]:
        """The counters budgets refer to."""
        raise NotImplementedError

    def _run_ended(self) -> None:
        """The loop has ended (stopped or finished, not failed)."""

    # -- the lifecycle -----------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    @property
    def running(self) -> bool:
        return self._alive

    def start(self, paused: bool = False, **budget: float) -> RunThread:
        """Run on a background thread and return at once.

        Parameters
        ----------
        paused : bool
            Start held: nothing runs until ``step()`` or ``resume()`` (a "step one" button).
        **budget
            Stop after this many more units of a counter, e.g. ``generations=50`` or
            ``env_steps=2_000_000`` (the first one reached ends the run). None: until stop().
        """
        target = self._make_target(budget)
        with self._cond:
            if self.running:
                raise RuntimeError(f"{self.title} runner is already running")
            self._target = target
            self._stop_requested = False
            self._paused = bool(paused)  # paused=True: the thread waits for step()/resume()
            self._pending_steps = 0
            self.error = None
            self._state = "running"
            self._thread = threading.Thread(target=self._thread_main, name=f"esnb-{self.name}",
                                            daemon=True)
            self._alive = True
            try:
                self._thread.start()
            except BaseException:
                self._alive = False
                raise
        return self

    def pause(self) -> None:
        """Hold after the current iteration (the iteration is never cut short)."""
        with self._cond:
            self._paused = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._pending_steps = 0
            if self.running:
                self._state = "running"
            self._cond.notify_all()

    def stop(self) -> None:
        """End the run after the current iteration."""
        with self._cond:
            self._stop_requested = True
            self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> RunThread:
        """Block until the background run ends; re-raise its error if it failed.

        A KeyboardInterrupt (Ctrl-C, a notebook's interrupt button) ends the wait, not the run.
        """
        if not self.wait_ended(timeout):
            raise TimeoutError(f"{self.title} runner still running after {timeout} s")
        if self.error is not None:
            raise self.error
        return self

    def wait_ended(self, timeout: float | None = None) -> bool:
        """Block until the background thread has ended (True), or ``timeout`` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._alive:
                left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def step(self, n: int = 1, block: bool = True) -> RunThread:
        """Run ``n`` iterations now.

        Without a background thread they run on the calling thread. On a paused runner the
        background thread runs them (``block=False`` returns at once, as a button should).
        """
        if int(n) < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        with self._cond:
            if self.running:
                if not self._paused:
                    raise RuntimeError("the runner is running: pause() it before step()")
                self._pending_steps += int(n)
                self._cond.notify_all()
                if not block:
                    return self
                while self._pending_steps > 0 and self.running and self.error is None:
                    self._cond.wait(0.1)
                if self.error is not None:
                    raise self.error
                return self
        for _ in range(int(n)):
            self._run_iteration()
        return self

    def _make_target(self, budget: dict[str, float]) -> dict[str, float]:
        return make_target(self._progress(), budget)

    def _budget_reached(self) -> bool:
        return bool(self._target) and reached(self._progress(), self._target)

    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    if self._stop_requested:
                        self._state = "stopped"
                        break
                    if self._budget_reached():
                        self._state = "finished"
                        break
                    if self._paused and self._pending_steps == 0:
                        self._state = "paused"
                        self._cond.wait(0.2)
                        continue
                    self._state = "running" if not self._paused else "paused"
                self._run_iteration()
                with self._cond:
                    if self._pending_steps > 0:
                        self._pending_steps -= 1
                    self._cond.notify_all()
            self._run_ended()
        except BaseException as exc:  # noqa: BLE001 - reported through state/error/wait()
            log.exception("%s run failed", self.title)
            with self._cond:
                self.error = exc
                self._state = "failed"
                self._cond.notify_all()
        finally:
            with self._cond:
                self._cond.notify_all()

    def _thread_main(self) -> None:
        """The background thread: the loop (and what subclasses do as it ends), then the
        runner is no longer running."""
        try:
            self._loop()
        finally:
            with self._cond:
                self._alive = False
                self._cond.notify_all()

"""A replay buffer as a service of a run: held by an executor, checkpointed, and recreated when
the worker holding it dies (AES-RL, CEM-RL and Ape-X share it).

Dask actors are cheap to call (~1 ms; 0.7 ms with ``direct_to_workers=True``) but all actors of
a worker share one thread, and an actor dies with its worker: nothing in Dask recreates it.
:class:`ReplayService` (driver side) therefore

- creates :class:`~esnb.replay.server.ReplayServer` through the executor (a Dask actor pinned to
  a chosen worker, or an object in this process), under a key of its own;
- asks it to write a checkpoint every ``checkpoint_interval`` seconds (an atomic ``.npz``
  through :func:`esnb.record.save_checkpoint`; the path must be reachable from the workers, as
  on a LocalCluster or a shared file system);
- notices the loss (the actor's future errs once the scheduler drops the worker, and calls then
  fail at once with "Worker holding Actor was lost"), creates a new server on a live worker
  from the last checkpoint (or empty), bumps ``generation`` and counts the items lost (stored
  at the last report minus restored).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from esnb.replay.server import ReplayLost, ReplayServer, is_loss

log = logging.getLogger("esnb.replay")


class ReplayService:
    """Driver-side owner of a :class:`ReplayServer`: creation, checkpoints, recovery.

    Parameters
    ----------
    executor : InlineExecutor or DaskExecutor
    config : dict
        Buffer configuration (``buffer_from_config``).
    seed : int
        Seed of the first server (later generations add their number).
    worker : str, optional
        Address of the worker to hold it (default: the first worker by address). After a loss,
        any live worker (preferring ``worker`` if it came back).
    resources : dict, optional
        Worker resources to ask for instead of an address (the long-lived actor worker).
    checkpoint_path : str, optional
        Where the server writes its checkpoints (None: never; a recreated server is empty).
    checkpoint_interval : float
        Seconds between checkpoints (see :meth:`maybe_checkpoint`).
    timeout : float
        Seconds to wait for a call or a creation before giving up.
    switch_interval : float, optional
        Passed to the server (None in this process: the driver's threads are not the server's).
    restore : bool
        Start the first server from ``checkpoint_path`` (if the file exists).
    """

    def __init__(self, executor, config: dict, *, seed: int = 0, worker: str | None = None,
                 resources: dict | None = None, checkpoint_path: str | None = None,
                 checkpoint_interval: float = 30.0, timeout: float = 60.0,
                 switch_interval: float | None = 0.0005, restore: bool = False):
        if worker is not None and resources is not None:
            raise ValueError("give the replay either worker= or resources=, not both")
        if checkpoint_interval <= 0:
            raise ValueError(f"checkpoint_interval must be > 0, got {checkpoint_interval!r}")
        self.executor = executor
        self.config = dict(config)
        self.seed = int(seed)
        self.checkpoint_path = None if checkpoint_path is None else str(checkpoint_path)
        self.checkpoint_interval = float(checkpoint_interval)
        self.timeout = float(timeout)
        self.switch_interval = switch_interval if executor.remote else None
        self.recreations = 0
        self.lost_items = 0
        self.last_size = 0
        self.last_checkpoint_size = 0
        self.checkpoints = 0
        self._last_checkpoint_time = time.monotonic()
        self._pending_checkpoint = None
        checkpoint = self.checkpoint_path if restore else None
        self.ref = executor.actor(ReplayServer, self.config, self.seed, checkpoint,
                                  self.switch_interval, key="esnb-replay", worker=worker,
                                  resources=resources, timeout=self.timeout)

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self.ref.generation

    @property
    def address(self) -> str | None:
        return self.ref.address

    @property
    def lost(self) -> bool:
        """Whether the server's worker is gone (the client learns it from the scheduler)."""
        return self.ref.lost

    def confirm_lost(self, timeout: float = 30.0) -> bool:
        """Wait until the scheduler confirms the loss of the server's worker, or ``timeout``."""
        return self.ref.confirm_lost(timeout)

    def recover(self) -> dict[str, Any]:
        """Recreate a lost server on a live worker from the last checkpoint.

        Returns ``{"generation", "restored", "lost"}``; ``lost`` = items stored at the last
        report minus items restored.
        """
        before = self.last_size
        restore = self.checkpoint_path if self.checkpoint_path is not None else None
        self.ref.create(self.config, self.seed + self.generation + 1, restore,
                        self.switch_interval, exclude=(self.ref.address,))
        self._pending_checkpoint = None
        restored = int(self.call("stats")["restored"])
        lost = max(0, before - restored)
        self.lost_items += lost
        self.recreations += 1
        self.last_size = restored
        log.warning("replay lost; recreated on %s (generation %d) with %d items from its "
                    "checkpoint, %d lost", self.address, self.generation, restored, lost)
        return {"generation": self.generation, "restored": restored, "lost": lost}

    def info(self) -> Any:
        """What a task needs to reach the current server (``executor.attach(info)``)."""
        return self.ref.handle()

    def close(self) -> None:
        self.ref.release()

    # -- calls -------------------------------------------------------------------------------
    def submit(self, method: str, *args, **kwargs):
        """Call ``method`` without waiting; returns a future (see :meth:`result`)."""
        if self.lost:
            raise ReplayLost(f"the replay (generation {self.generation}) is lost")
        try:
            return self.ref.submit(method, *args, **kwargs)
        except Exception as exc:
            if is_loss(exc):
                raise ReplayLost(str(exc)) from exc
            raise

    def result(self, future, timeout: float | None = None, track: bool = True):
        """The result of a :meth:`submit`; a loss of the worker raises :class:`ReplayLost`.

        ``track``: remember the size a reply reports (what a loss would take away).
        """
        try:
            out = future.result(timeout=self.timeout if timeout is None else timeout)
        except Exception as exc:
            if self.lost or is_loss(exc):
                raise ReplayLost(f"the replay (generation {self.generation}) is lost: "
                                 f"{exc}") from exc
            raise
        if track and isinstance(out, dict):
            stats = out.get("stats") if isinstance(out.get("stats"), dict) else out
            if "size" in stats:
                self.last_size = int(stats["size"])
        return out

    def call(self, method: str, *args, **kwargs):
        """Call ``method`` and wait (raises :class:`ReplayLost` if the worker is gone)."""
        return self.result(self.submit(method, *args, **kwargs))

    def maybe_checkpoint(self, force: bool = False) -> dict | None:
        """Start a checkpoint if one is due (without waiting for it); collect a finished one.

        Returns the finished checkpoint's report, if one completed since the last call.
        """
        if self.checkpoint_path is None:
            return None
        done = None
        pending = self._pending_checkpoint
        if pending is not None and (force or pending.done()):
            self._pending_checkpoint = None
            done = self._checkpointed(pending)
        due = time.monotonic() - self._last_checkpoint_time >= self.checkpoint_interval
        if (force or due) and self._pending_checkpoint is None:
            self._last_checkpoint_time = time.monotonic()
            self._pending_checkpoint = self.submit("checkpoint", self.checkpoint_path)
            if force:
                done = self._checkpointed(self._pending_checkpoint)
                self._pending_checkpoint = None
        return done

    def _checkpointed(self, future) -> dict:
        done = self.result(future, track=False)  # its size is an older one
        self.checkpoints += 1
        self.last_checkpoint_size = int(done["size"])
        return done

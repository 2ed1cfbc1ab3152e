"""A replay buffer as a service of a run: held by an executor, checkpointed, and recreated when
the worker holding it dies (AES-RL, CEM-RL and Ape-X share it).

Dask actors are cheap to call (~1 ms; 0.7 ms with ``direct_to_workers=True``) but all actors of
a worker share one thread, and an actor dies with its worker: nothing in Dask recreates it.
:class:`ReplayService` (driver side) therefore

- creates :class:`~esnb.replay.server.ReplayServer` through the executor (a Dask actor pinned to
  a chosen worker, or an object in this process), under a key of its own, empty or from a
  replay file (checked against the counts the run's checkpoint recorded for it);
- keeps recovery checkpoints and remembers the newest replay file written
  (:class:`~esnb.runners.replay_recovery.RecoveryCheckpoints`);
- notices the loss (the actor's future errs once the scheduler drops the worker, and calls then
  fail at once with "Worker holding Actor was lost"), creates a new server on a live worker,
  fills it from ``latest`` (:func:`esnb.replay.transfer.push`: the file travels from here, so
  the new server may be on any host) or leaves it empty, and counts the transitions lost
  *exactly*: the lost server's last ``inserted`` counter minus the ``inserted`` counter of the
  file the new one starts from (sizes would say nothing: FIFO eviction and overwriting keep a
  full replay's size constant). The last counter is the one the server wrote into its count
  file on its own host (:func:`~esnb.replay.server.write_count`, on every insert), read
  through a worker of that host (:class:`~esnb.runners.replay_counts.LostCounts`: at once if
  one is alive, else when one joins), or the largest its replies showed; a reply of a lost
  server that arrives later (a task that wrote to it just before it died) adds what it shows
  beyond that.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from esnb.replay.server import ReplayLost, ReplayServer, is_loss
from esnb.replay.transfer import push
from esnb.runners.replay_counts import LostCounts
from esnb.runners.replay_recovery import RecoveryCheckpoints, remove_owned

log = logging.getLogger("esnb.replay")


class ReplayService(RecoveryCheckpoints):
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
        Where this process writes the server's recovery checkpoints (None: nowhere, unless
        ``private``).
    checkpoint_interval : float
        Seconds between recovery checkpoints (see :meth:`maybe_checkpoint`).
    timeout : float
        Seconds to wait for a call or a creation before giving up.
    switch_interval : float, optional
        Passed to the server (None in this process: the driver's threads are not the server's).
    restore : dict, optional
        Fill the first server from the replay file ``restore["path"]`` (on this machine); its
        ``size`` and ``inserted`` (what the run's checkpoint recorded) are checked once it is
        up.
    private : bool
        Without ``checkpoint_path``: write recovery checkpoints into a directory of this
        service's own (mode 0700), removed by :meth:`close` (only where the server can be
        lost: ``executor.remote``).
    remove_on_close : bool
        Remove the recovery checkpoint file on :meth:`close` (a run folder's: the runner's
        checkpoints keep the replay).
    counts : dict, optional
        ``recreations``, ``lost`` and ``checkpoints`` of earlier services of the same run, to
        count on from (a resumed or restarted run).
    """

    def __init__(self, executor, config: dict, *, seed: int = 0, worker: str | None = None,
                 resources: dict | None = None, checkpoint_path: str | None = None,
                 checkpoint_interval: float = 30.0, timeout: float = 60.0,
                 switch_interval: float | None = 0.0005, restore: dict | None = None,
                 private: bool = False, remove_on_close: bool = False,
                 counts: dict | None = None):
        if worker is not None and resources is not None:
            raise ValueError("give the replay either worker= or resources=, not both")
        if checkpoint_interval <= 0:
            raise ValueError(f"checkpoint_interval must be > 0, got {checkpoint_interval!r}")
        self.executor = executor
        self.config = dict(config)
        self.seed = int(seed)
        self._private_dir = None
        if checkpoint_path is None and private and executor.remote:  # inline: never lost
            self._private_dir = tempfile.mkdtemp(prefix="esnb-replay-")  # mode 0700
            checkpoint_path = os.path.join(self._private_dir, "replay.npz")
        self.checkpoint_path = None if checkpoint_path is None else str(checkpoint_path)
        self.remove_on_close = bool(remove_on_close)
        # on close(), or when this process exits without one (a command line run)
        self._cleanup = weakref.finalize(
            self, remove_owned, self._private_dir,
            self.checkpoint_path if self.remove_on_close else None)
        self.checkpoint_interval = float(checkpoint_interval)
        self.timeout = float(timeout)
        self.switch_interval = switch_interval if executor.remote else None
        counts = dict(counts or {})
        self.recreations = int(counts.get("recreations", 0))
        self.lost_items = int(counts.get("lost", 0))
        self.checkpoints = int(counts.get("checkpoints", 0))
        self.recoveries: list[dict[str, Any]] = []
        self.last_size = 0
        self.last_checkpoint_size = 0
        #: the largest ``inserted`` counter seen in each generation's replies
        self.seen: dict[int, int] = {}
        #: the newest replay file written or restored: ``path``, ``token``, ``size``, ``inserted``
        self.latest: dict[str, Any] | None = None
        self._last_checkpoint_time = time.monotonic()
        self._pending_checkpoint = None
        # recovery checkpoints are fetched on a thread of their own (a cluster's replay only)
        self._pulls = ThreadPoolExecutor(1, thread_name_prefix="esnb-replay-pull") \
            if executor.remote else None
        # where it can be lost, each server keeps a count file on its own host
        self._count_name = f"esnb-replay-{uuid.uuid4().hex[:16]}" if executor.remote else None
        #: generation -> (host, count file) of each server made
        self._count_files: dict[int, tuple[str, str]] = {}
        self._lost_counts = LostCounts(executor, self.timeout) if executor.remote else None
        self.ref = executor.actor(ReplayServer, self.config, self.seed, self.switch_interval,
                                  0, self._count_name, key="esnb-replay", worker=worker,
                                  resources=resources, timeout=self.timeout)
        self._live = 0  # the generation whose replies count as the current server's
        # the current generation, for tasks holding a handle: a call to a replaced server
        # fails within a second instead of waiting out its timeout (replay.server.wait_result)
        self._current = executor.channel(f"esnb-replay-current-{uuid.uuid4().hex[:12]}") \
            if executor.remote else None
        try:
            self._fill(None if restore is None else restore["path"])
            if restore is not None:
                self._check_restored(restore)
        except BaseException:
            self.close()
            raise
        self._publish_generation()

    def _fill(self, path: str | None) -> dict:
        """Fill the new server from the replay file ``path`` of this machine (None: it stays
        empty); note where it keeps its count file. Returns its stats."""
        st = self.call("stats") if path is None else push(self.call, path)
        if st.get("count_file"):
            self._count_files[self.generation] = (st["host"], st["count_file"])
        return st

    def _publish_generation(self) -> None:
        if self._current is not None:
            self._current.set(int(self.generation))

    def _check_restored(self, restore: dict) -> None:
        from esnb.record import CheckpointError

        st = self.call("stats")
        got = (int(st["restored"]), int(st["restored_inserted"]), st["restored_token"])
        want = (int(restore["size"]), int(restore["inserted"]), restore.get("token"))
        if got != want:
            raise CheckpointError(
                f"the replay restored from {restore['path']} holds {got[0]} items, {got[1]} "
                f"inserted (token {got[2]}); the run's checkpoint recorded {want[0]} items, "
                f"{want[1]} inserted (token {want[2]})")
        self.latest = {k: restore[k] for k in ("path", "token", "size", "inserted")}
        log.info("replay restored from %s: %d items, %d inserted", restore["path"], got[0],
                 got[1])

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

    @property
    def inserted(self) -> int:
        """The largest ``inserted`` counter the current server's replies showed."""
        return self.seen.get(self._live, 0)

    def counts(self) -> dict[str, int]:
        """``recreations``, ``lost`` and ``checkpoints`` (what a later service counts on from)."""
        return {"recreations": self.recreations, "lost": self.lost_items,
                "checkpoints": self.checkpoints}

    def confirm_lost(self, timeout: float = 30.0) -> bool:
        """Wait until the scheduler confirms the loss of the server's worker, or ``timeout``."""
        return self.ref.confirm_lost(timeout)

    def recover(self) -> dict[str, Any]:
        """Recreate a lost server on a live worker from the newest replay file (or empty).

        Returns ``{"generation", "restored", "lost", "inserted_before",
        "inserted_restored"}``: ``lost`` = ``inserted_before`` (the largest inserted count the
        lost server's replies showed) - ``inserted_restored`` (the new server's, from its
        file).
        """
        old = self._live
        if self._current is not None:
            # first of all: tasks still waiting on the lost server give up within a second,
            # which frees the worker threads the new server's creation needs
            self._current.set(-1)
        self._settle_pending()  # a recovery checkpoint of the lost server: it failed or landed
        where = self._count_files.get(old)
        if where is not None and self._lost_counts is not None:
            counted = self._lost_counts.read(old, *where)
            if counted is not None and counted[0] == old:  # what the server last wrote
                self.seen[old] = max(self.seen.get(old, 0), counted[1])
        before = self.seen.get(old, 0)
        latest = self.latest if self.latest and os.path.exists(self.latest["path"]) else None
        restore = None if latest is None else str(latest["path"])
        new = self.generation + 1  # a failed attempt (no live worker yet) skips a number
        self.ref.create(self.config, self.seed + new, self.switch_interval, new,
                        self._count_name, exclude=(self.ref.address,))
        self._live = new
        st = self._fill(restore)
        self._publish_generation()
        restored, inserted = int(st["restored"]), int(st["restored_inserted"])
        lost = max(0, before - inserted)
        self.lost_items += lost
        self.recreations += 1
        self.last_size = restored
        report = {"generation": self.generation, "restored": restored, "lost": lost,
                  "inserted_before": before, "inserted_restored": inserted}
        self.recoveries.append({**report, "replaced": old})
        log.warning("replay lost; recreated on %s (generation %d) from %s with %d items: %d "
                    "transitions lost (%d inserted before, %d in the checkpoint)",
                    self.address, self.generation, restore or "nothing", restored, lost, before,
                    inserted)
        return report

    def info(self) -> Any:
        """What a task needs to reach the current server (``executor.attach(info)``), and on
        a cluster the channel naming the current generation (``replaced_check(info)``)."""
        handle = self.ref.handle()
        if isinstance(handle, dict) and self._current is not None:
            handle = {**handle, "current": self._current}
        return handle

    def close(self) -> None:
        """Release the server; remove a private checkpoint directory (or an owned file)."""
        self._settle_pending()  # let it land before its file is removed
        if self._pulls is not None:
            self._pulls.shutdown(wait=True)
        if self.ref.obj is not None and not self.lost:
            try:  # its count file, on its own host
                self.call("close")
            except Exception:  # noqa: BLE001 - closing: a lost server's file is read or left
                log.debug("the replay's count file was not removed", exc_info=True)
        self.ref.release()
        if self._current is not None:
            self._current.delete()
        if self._lost_counts is not None:
            self._lost_counts.close()
        self._cleanup()

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

        ``track``: remember the size and inserted count a reply reports (:meth:`observe`).
        """
        try:
            out = future.result(timeout=self.timeout if timeout is None else timeout)
        except Exception as exc:
            if self.lost or is_loss(exc):
                raise ReplayLost(f"the replay (generation {self.generation}) is lost: "
                                 f"{exc}") from exc
            raise
        if track:
            self.observe(out)
        return out

    def observe(self, reply: Any) -> None:
        """Note the ``size``/``inserted``/``generation`` a server's reply (or its ``stats``)
        shows: replies of tasks that call the server themselves count too. A lost
        generation's reply beyond what was counted at its loss adds to ``lost_items``."""
        if not isinstance(reply, dict):
            return
        stats = reply.get("stats") if isinstance(reply.get("stats"), dict) else reply
        if "inserted" not in stats:
            return
        generation = int(stats.get("generation", self._live))
        inserted = int(stats["inserted"])
        seen = self.seen.get(generation, 0)
        if inserted <= seen:
            return
        self.seen[generation] = inserted
        if generation != self._live:  # it died with more than its loss counted
            self.lost_items += inserted - seen
            for report in self.recoveries:
                if report["replaced"] == generation:
                    report["inserted_before"] = inserted
                    report["lost"] += inserted - seen
        elif "size" in stats:
            self.last_size = int(stats["size"])

    def call(self, method: str, *args, **kwargs):
        """Call ``method`` and wait (raises :class:`ReplayLost` if the worker is gone)."""
        return self.result(self.submit(method, *args, **kwargs))

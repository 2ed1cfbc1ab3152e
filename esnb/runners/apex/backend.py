"""Where Ape-X's actors and replay live, on any executor (inline or Dask: one code path).

:class:`ApeXBackend` owns

- the replay: a :class:`~esnb.runners.replay_service.ReplayService` (an actor of the executor,
  checkpointed, recreated on a live worker when its worker dies);
- the two channels the actor loops read (:mod:`esnb.runners.apex.tasks`): the control dict
  (``set``) and the learner's parameters (``publish``);
- the actor loops: one background loop per group of actors, pinned to a worker. A loop whose
  worker died, or that ended with a lost worker, is started again on a live worker without a
  loop (it continues its actors' sequence numbers from the replay's marks). A loop that fails
  with an ordinary exception ends the run with that error: restarting a bug forever helps no
  one. Inline there is one worker, so one loop, and the runner's ``executor.turn()`` advances
  it before each learner chunk.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import numpy as np

from esnb.cluster import ACTOR_RESOURCE
from esnb.replay.server import is_loss
from esnb.runners.apex.actor import ActorConfig
from esnb.runners.apex.tasks import LoopSettings, PublishedParams, actor_loop
from esnb.runners.replay_service import ReplayService

log = logging.getLogger("esnb.apex")


def actor_workers(workers: dict[str, dict]) -> list[str]:
    """Addresses of the long-lived actor workers among ``workers`` (jobqueue clusters)."""
    return sorted(a for a, w in workers.items() if ACTOR_RESOURCE in (w.get("resources") or {}))


class ApeXBackend:
    """Replay, channels and actor loops of one Ape-X run on an executor.

    Parameters
    ----------
    executor : InlineExecutor or DaskExecutor
    actor_cfg : ActorConfig
    replay_config : dict
        Buffer configuration.
    seed : int
    loops : int, optional
        Actor loops (default: one per worker, or per worker other than the replay's when
        ``actor_workers="others"`` and there are several).
    actor_workers : {"all", "others"}
        Whether loops may run on the replay's worker.
    replay_worker : str, optional
        Address of the worker to hold the replay.
    replay_resources : dict or "auto", optional
        Worker resources the replay asks for instead; ``"auto"``: the long-lived actor worker
        if the cluster has one.
    checkpoint_interval : float
        Seconds between the replay's recovery checkpoints (where they go: :meth:`start`).
    settings : LoopSettings
    """

    def __init__(self, executor, actor_cfg: ActorConfig, replay_config: dict, *, seed: int,
                 loops: int | None = None, actor_workers: str = "all",
                 replay_worker: str | None = None, replay_resources: Any = "auto",
                 checkpoint_interval: float = 30.0,
                 settings: LoopSettings | None = None, supervise_interval: float = 1.0):
        self.executor = executor
        self.actor_cfg = actor_cfg
        self.replay_config = replay_config
        self.seed = int(seed)
        self.n_loops = loops
        self.actor_workers = actor_workers
        self.replay_worker = replay_worker
        self.replay_resources = replay_resources
        self.checkpoint_interval = float(checkpoint_interval)
        self.settings = settings or LoopSettings()
        self.supervise_interval = float(supervise_interval)
        self.token = f"esnb-apex-{uuid.uuid4().hex[:10]}"
        self.replay: ReplayService | None = None
        self._control = executor.channel(f"{self.token}-control")
        self._params = executor.channel(f"{self.token}-params")
        self._state: dict[str, Any] = {}
        self._loops: dict[int, dict[str, Any]] = {}
        self._last_check = 0.0
        self._loops_on = False
        self.loop_restarts = 0
        self.finished: list[dict] = []

    @property
    def started(self) -> bool:
        return self.replay is not None

    @property
    def loops_started(self) -> bool:
        """Loops were started and not stopped on purpose (supervise() restarts lost ones)."""
        return self._loops_on

    @property
    def loops_running(self) -> int:
        return sum(1 for lp in self._loops.values()
                   if lp["future"] is not None and lp["future"].status == "pending")

    def _loop_workers(self) -> list[str]:
        """Workers that may run actor loops: all but a dedicated actor worker, unless it is
        the only one."""
        workers = self.executor.workers()
        dedicated = set(actor_workers(workers))
        return sorted(a for a in workers if a not in dedicated) or sorted(workers)

    # -- start -------------------------------------------------------------------------------
    def start(self, flat: np.ndarray, version: int, control: dict[str, Any],
              restore: dict | None = None, **replay: Any) -> None:
        """Create the replay (from the replay file ``restore``, see
        :class:`~esnb.runners.replay_service.ReplayService`, which takes the other keywords:
        where recovery checkpoints go, counts of earlier replays), publish the first
        parameters and the control (exploration, pass length), and start the loops."""
        resources = self.replay_resources
        if resources == "auto":
            resources = None
            if self.replay_worker is None and actor_workers(self.executor.workers()):
                resources = {ACTOR_RESOURCE: 1}
        self.replay = ReplayService(
            self.executor, self.replay_config, seed=self.seed, worker=self.replay_worker,
            resources=resources, checkpoint_interval=self.checkpoint_interval, restore=restore,
            **replay)
        self._state = {"stop": False, "paused": False, **control,
                       "replay": self.replay.info(),
                       "replay_generation": self.replay.generation, "params_version": -1}
        self.publish_params(flat, version)
        self.start_loops()

    def start_loops(self) -> None:
        """Start the actor loops (again, after :meth:`stop_loops`)."""
        if self._loops_on:
            return
        self._loops_on = True
        self._state.update(stop=False, paused=False)
        self._control.set(dict(self._state))
        workers = self._loop_workers()
        others = [w for w in workers if w != self.replay.address]
        pool = others if (self.actor_workers == "others" and others) else workers
        n = self.n_loops or len(pool)
        n = max(1, min(int(n), self.actor_cfg.num_actors))
        groups = np.array_split(np.arange(self.actor_cfg.num_actors), n)
        for loop_id, ids in enumerate(groups):
            self._loops.setdefault(loop_id, {"ids": [int(i) for i in ids], "incarnation": -1,
                                             "future": None, "worker": None})
            self._start_loop(loop_id, pool[loop_id % len(pool)])

    def _start_loop(self, loop_id: int, worker: str) -> None:
        lp = self._loops[loop_id]
        lp["incarnation"] += 1
        seed = int(np.random.SeedSequence([self.seed, loop_id, lp["incarnation"]])
                   .generate_state(1)[0])
        lp["future"] = self.executor.background(
            actor_loop, self.actor_cfg, self._control, self._params, loop_id, lp["ids"], seed,
            self.settings, lp["incarnation"], worker=worker,
            key=f"{self.token}-loop{loop_id}-{lp['incarnation']}")
        lp["worker"] = worker

    def stop_loops(self, timeout: float = 30.0) -> list[dict]:
        """Tell the loops to stop and collect their totals (the replay stays)."""
        self._loops_on = False
        if not self._loops:
            return []
        self.publish_control(stop=True)
        self.executor.finish_background()  # inline: run the loops to their end
        results = []
        deadline = time.monotonic() + timeout
        for lp in self._loops.values():
            fut = lp["future"]
            if fut is None:
                continue
            try:
                results.append(fut.result(timeout=max(0.1, deadline - time.monotonic())))
            except Exception as exc:  # a lost or stuck loop must not block closing
                log.info("actor loop did not stop cleanly: %s", exc)
                self.executor.cancel([fut])
            lp["future"] = None
        self.finished.extend(results)
        return results

    # -- publishing --------------------------------------------------------------------------
    def publish_params(self, flat: np.ndarray, version: int) -> None:
        """Send the parameters once and point the loops at them."""
        self._params.publish(PublishedParams(int(version), np.asarray(flat, np.float32)))
        self.publish_control(params_version=int(version))

    def publish_control(self, **changes) -> None:
        self._state.update(changes)
        self._control.set(dict(self._state))

    def pause(self, paused: bool) -> None:
        if self.started and self._state.get("paused") != bool(paused):
            self.publish_control(paused=bool(paused))

    # -- supervision -------------------------------------------------------------------------
    def supervise(self, force: bool = False) -> dict[str, Any]:
        """Recover a lost replay, restart loops whose worker died; returns what happened.

        ``force`` (after a replay call failed): wait for the scheduler to confirm a loss
        before deciding, and check the loops now.
        """
        events: dict[str, Any] = {}
        if self.replay.lost or (force and self.replay.confirm_lost()):
            events["replay"] = self.replay.recover()
            self.publish_control(replay=self.replay.info(),
                                 replay_generation=self.replay.generation)
        now = time.monotonic()
        if not force and now - self._last_check < self.supervise_interval:
            return events
        self._last_check = now
        workers = self._loop_workers()
        busy = {lp["worker"] for lp in self._loops.values() if lp["future"] is not None
                and lp["future"].status == "pending" and lp["worker"] in workers}
        for loop_id, lp in self._loops.items():
            fut = lp["future"]
            if fut is None:  # stopped on purpose
                continue
            status = fut.status
            dead = lp["worker"] not in workers
            if status == "pending" and not dead:
                continue
            if status == "error":
                exc = fut.exception()
                if not (is_loss(exc) or dead):
                    raise RuntimeError(f"Ape-X actor loop {loop_id} failed: "
                                       f"{type(exc).__name__}: {exc}") from exc
            if status == "finished":
                self.finished.append(fut.result())
            self.executor.cancel([fut])
            free = [w for w in workers if w not in busy]
            if not free:
                continue  # no idle worker yet (a restarted one may join soon)
            target = free[0]
            log.warning("actor loop %d lost (%s on %s); restarting it on %s", loop_id, status,
                        lp["worker"], target)
            self._start_loop(loop_id, target)
            busy.add(target)
            self.loop_restarts += 1
            events.setdefault("loops_restarted", []).append(loop_id)
        return events

    # -- stop --------------------------------------------------------------------------------
    def stop(self, timeout: float = 30.0) -> list[dict]:
        """Stop the loops, release the replay and the channels."""
        if not self.started:
            return []
        results = self.stop_loops(timeout)
        self.replay.close()
        for channel in (self._control, self._params):
            channel.delete()
        self.replay = None  # the loops' incarnations go on: new loops report under new keys
        return results

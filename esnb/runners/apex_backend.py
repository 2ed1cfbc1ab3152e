"""Where Ape-X's actors and replay live: on a Dask cluster (:class:`ClusterBackend`) or in
this process (:class:`InlineBackend`). The runner (:mod:`esnb.runners.apex`) drives either
through the same calls.

The cluster backend owns

- the replay: a :class:`~esnb.replay.remote.RemoteReplay` (a Dask actor, checkpointed,
  recreated on a live worker when its worker dies);
- the control and parameter ``Variable`` s the actor loops read (see
  :mod:`esnb.workers.apex`);
- the actor loops: one long-running task per loop, pinned to a worker. A loop whose worker
  died, or that ended with a lost worker, is submitted again on a live worker without a loop
  (it continues its actors' sequence numbers from the replay's marks). A loop that fails with
  an ordinary exception ends the run with that error: restarting a bug forever helps no one.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import numpy as np
from distributed import Variable

from esnb.replay.remote import RemoteReplay, ReplayServer, is_loss
from esnb.rl.apex_actor import ActorConfig, ActorGroup
from esnb.runners.executor import put
from esnb.workers.apex import LoopSettings, PublishedParams, apex_actor_loop

log = logging.getLogger("esnb.apex")


class _Done:
    """An already-computed result with the ActorFuture interface."""

    def __init__(self, value):
        self.value = value

    def done(self) -> bool:
        return True

    def result(self, timeout=None):
        return self.value


class InlineReplay:
    """A :class:`ReplayServer` in this process, with :class:`RemoteReplay`'s interface."""

    lost = False
    generation = 0
    recreations = 0
    lost_items = 0
    checkpoints = 0

    def __init__(self, config: dict, seed: int, checkpoint_path: str | None = None,
                 checkpoint_interval: float = 30.0):
        self.server = ReplayServer(config, seed, checkpoint_path, switch_interval=None)
        self.checkpoint_path = checkpoint_path
        self.checkpoint_interval = float(checkpoint_interval)
        self._last = time.monotonic()

    def submit(self, method: str, *args, **kwargs):
        return _Done(getattr(self.server, method)(*args, **kwargs))

    def result(self, future, timeout=None):
        return future.result()

    def call(self, method: str, *args, **kwargs):
        return getattr(self.server, method)(*args, **kwargs)

    def maybe_checkpoint(self, force: bool = False):
        if self.checkpoint_path is None:
            return None
        if force or time.monotonic() - self._last >= self.checkpoint_interval:
            self._last = time.monotonic()
            self.checkpoints += 1
            return self.server.checkpoint(self.checkpoint_path)
        return None

    def close(self) -> None:
        pass


class InlineBackend:
    """Actors and replay in this process: each learner chunk is preceded by
    ``actor_steps`` env steps of one :class:`ActorGroup` running all actors."""

    def __init__(self, actor_cfg: ActorConfig, replay_config: dict, *, seed: int,
                 checkpoint_path: str | None, checkpoint_interval: float,
                 flush_size: int = 200):
        self.actor_cfg = actor_cfg
        self.replay_config = replay_config
        self.seed = int(seed)
        self.checkpoint_path = checkpoint_path
        self.checkpoint_interval = checkpoint_interval
        self.flush_size = int(flush_size)
        self.replay: InlineReplay | None = None
        self.group: ActorGroup | None = None
        self.n_workers = 0
        self.loops_running = 1
        self.loop_restarts = 0

    @property
    def started(self) -> bool:
        return self.group is not None

    def start(self, flat: np.ndarray, version: int, exploration: float, alpha: float,
              restore: bool = False) -> None:
        self.replay = InlineReplay(self.replay_config, self.seed,
                                   self.checkpoint_path if restore else None,
                                   self.checkpoint_interval)
        self.replay.checkpoint_path = self.checkpoint_path
        self.group = ActorGroup(self.actor_cfg, range(self.actor_cfg.num_actors), self.seed,
                                exploration, alpha)
        self.group.set_sequence_start(self.replay.call("high_water", self.group.actor_ids))
        self.group.set_params(flat, version)

    def publish_params(self, flat: np.ndarray, version: int) -> None:
        self.group.set_params(flat, version)

    def publish_control(self, **changes) -> None:
        if "exploration" in changes:
            self.group.set_exploration(changes["exploration"], changes["exploration_alpha"])

    def act(self, steps: int) -> None:
        """Run the actors for about ``steps`` env steps and flush what they built."""
        g = self.group
        g.step(max(1, int(steps) // g.k))
        while g.pending:
            batch, prios, keys = g.take(self.flush_size)
            self.replay.call("add", batch, prios, keys, {
                "loop": "inline", "env_steps": g.env_steps, "episodes": g.drain_episodes(),
                "params_version": g.params_version, "dropped": 0, "nonfinite": g.nonfinite})

    def supervise(self, force: bool = False) -> dict[str, Any]:
        return {}

    def pause(self, paused: bool) -> None:
        pass

    loops_started = True

    def start_loops(self) -> None:
        pass

    def stop_loops(self, timeout: float = 10.0) -> list[dict]:
        return []

    def stop(self, timeout: float = 10.0) -> list[dict]:
        if self.group is not None:
            self.group.close()
        self.group = None
        return []


class ClusterBackend:
    """Replay actor, control variables and actor loops on a Dask cluster.

    Parameters
    ----------
    client : distributed.Client
    actor_cfg : ActorConfig
    replay_config : dict
        Buffer configuration.
    seed : int
    loops : int, optional
        Actor loop tasks (default: one per worker, or per worker other than the replay's
        when ``actor_workers="others"`` and there are several).
    actor_workers : {"all", "others"}
        Whether loops may run on the replay's worker.
    replay_worker, replay_resources
        Placement of the replay actor (see :class:`RemoteReplay`).
    checkpoint_path : str, optional
        The replay's checkpoint file.
    checkpoint_interval : float
        Seconds between replay checkpoints.
    settings : LoopSettings
    """

    def __init__(self, client, actor_cfg: ActorConfig, replay_config: dict, *, seed: int,
                 loops: int | None = None, actor_workers: str = "all",
                 replay_worker: str | None = None, replay_resources: dict | None = None,
                 checkpoint_path: str | None = None, checkpoint_interval: float = 30.0,
                 settings: LoopSettings | None = None, supervise_interval: float = 1.0):
        if actor_workers not in ("all", "others"):
            raise ValueError(f"actor_workers must be 'all' or 'others', got {actor_workers!r}")
        self.client = client
        self.actor_cfg = actor_cfg
        self.replay_config = replay_config
        self.seed = int(seed)
        self.n_loops = loops
        self.actor_workers = actor_workers
        self.replay_worker = replay_worker
        self.replay_resources = replay_resources
        self.checkpoint_path = checkpoint_path
        self.checkpoint_interval = float(checkpoint_interval)
        self.settings = settings or LoopSettings()
        self.supervise_interval = float(supervise_interval)
        self.token = f"esnb-apex-{uuid.uuid4().hex[:10]}"
        self.replay: RemoteReplay | None = None
        self._control = Variable(f"{self.token}-control", client=client)
        self._params = Variable(f"{self.token}-params", client=client)
        self._state: dict[str, Any] = {}
        self._params_future = None
        self._loops: dict[int, dict[str, Any]] = {}
        self._last_check = 0.0
        self._loops_on = False
        self.loop_restarts = 0
        self.finished: list[dict] = []

    @property
    def started(self) -> bool:
        return self.replay is not None

    @property
    def n_workers(self) -> int:
        return len(self._workers())

    @property
    def loops_running(self) -> int:
        return sum(1 for lp in self._loops.values()
                   if lp["future"] is not None and lp["future"].status == "pending")

    def _workers(self) -> list[str]:
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"])

    def _loop_workers(self) -> list[str]:
        """Workers that may run actor loops: all but a dedicated actor worker (the
        long-lived one of :func:`esnb.cluster.actor_resources`), unless it is the only one."""
        from esnb.cluster import ACTOR_RESOURCE

        info = self.client.scheduler_info(n_workers=-1)["workers"]
        plain = sorted(a for a, w in info.items()
                       if ACTOR_RESOURCE not in (w.get("resources") or {}))
        return plain or sorted(info)

    # -- start -------------------------------------------------------------------------------
    def start(self, flat: np.ndarray, version: int, exploration: float, alpha: float,
              restore: bool = False) -> None:
        """Create the replay (from its checkpoint if ``restore``), publish the first
        parameters and submit the loops."""
        self.replay = RemoteReplay(
            self.client, self.replay_config, seed=self.seed, worker=self.replay_worker,
            resources=self.replay_resources, checkpoint_path=self.checkpoint_path,
            checkpoint_interval=self.checkpoint_interval, restore=restore)
        self._state = {"stop": False, "paused": False, "exploration": float(exploration),
                       "exploration_alpha": float(alpha), "replay": self.replay.info(),
                       "params_version": -1}
        self.publish_params(flat, version)
        self.start_loops()

    def start_loops(self) -> None:
        """Submit the actor loops (again, after :meth:`stop_loops`)."""
        if self._loops_on:
            return
        self._loops_on = True
        self._state.update(stop=False, paused=False)
        self._set_control()
        workers = self._loop_workers()
        others = [w for w in workers if w != self.replay.address]
        pool = others if (self.actor_workers == "others" and others) else workers
        n = self.n_loops or len(pool)
        n = max(1, min(int(n), self.actor_cfg.num_actors))
        groups = np.array_split(np.arange(self.actor_cfg.num_actors), n)
        for loop_id, ids in enumerate(groups):
            self._loops.setdefault(loop_id, {"ids": [int(i) for i in ids], "incarnation": -1,
                                             "future": None, "worker": None})
            self._submit(loop_id, pool[loop_id % len(pool)])

    @property
    def loops_started(self) -> bool:
        """Loops were started and not stopped on purpose (supervise() restarts lost ones)."""
        return self._loops_on

    def stop_loops(self, timeout: float = 30.0) -> list[dict]:
        """Tell the loops to stop and collect their totals (the replay stays)."""
        self._loops_on = False
        if not self._loops:
            return []
        self.publish_control(stop=True)
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
                fut.cancel()
            lp["future"] = None
        self.finished.extend(results)
        return results

    def _submit(self, loop_id: int, worker: str) -> None:
        lp = self._loops[loop_id]
        lp["incarnation"] += 1
        seed = int(np.random.SeedSequence([self.seed, loop_id, lp["incarnation"]])
                   .generate_state(1)[0])
        lp["future"] = self.client.submit(
            apex_actor_loop, self.actor_cfg, self.token, loop_id, lp["ids"], seed,
            self.settings, lp["incarnation"], workers=[worker], allow_other_workers=False,
            pure=False,
            key=f"{self.token}-loop{loop_id}-{lp['incarnation']}")
        lp["worker"] = worker

    # -- publishing --------------------------------------------------------------------------
    def _set_control(self) -> None:
        self._control.set(dict(self._state))

    def publish_params(self, flat: np.ndarray, version: int) -> None:
        """Send the parameters once (:func:`~esnb.runners.executor.put`) and point the loops
        at them."""
        fut = put(self.client, PublishedParams(int(version), np.asarray(flat, np.float32)),
                  prefix=f"{self.token}-params")
        self._params.set(fut)
        old, self._params_future = self._params_future, fut
        self._state["params_version"] = int(version)
        self._set_control()
        if old is not None:
            old.release()

    def publish_control(self, **changes) -> None:
        self._state.update(changes)
        self._set_control()

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
            self.publish_control(replay=self.replay.info())
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
            fut.cancel()
            free = [w for w in workers if w not in busy]
            if not free:
                continue  # no idle worker yet (a restarted one may join soon)
            target = free[0]
            log.warning("actor loop %d lost (%s on %s); restarting it on %s", loop_id, status,
                        lp["worker"], target)
            self._submit(loop_id, target)
            busy.add(target)
            self.loop_restarts += 1
            events.setdefault("loops_restarted", []).append(loop_id)
        return events

    # -- stop --------------------------------------------------------------------------------
    def stop(self, timeout: float = 30.0) -> list[dict]:
        """Stop the loops, release the replay and the variables."""
        if not self.started:
            return []
        results = self.stop_loops(timeout)
        self.replay.close()
        if self._params_future is not None:
            self._params_future.release()
        for var in (self._control, self._params):
            try:
                var.delete()
            except Exception:  # the scheduler may be gone already
                pass
        self.replay = None
        self._loops = {}
        return results

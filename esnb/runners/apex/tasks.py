"""Ape-X's worker side: the actor loop, a generator run by ``executor.background``.

Horgan et al. 2018, "Distributed Prioritized Experience Replay", Algorithm 1. On a cluster a
loop is one long-running (seceded) task on a worker; inline, the runner advances it one pass
per ``executor.turn()``, before each learner chunk. It steps an
:class:`~esnb.runners.apex.actor.ActorGroup` and feeds the replay, and talks to the rest of the run
through two executor channels, which live on the scheduler and so survive the loss of any
worker:

- the *control* (``set``): a small dict (``stop``, ``paused``, the exploration settings, the
  pass length, the replay's handle and generation, the version of the latest parameters),
  read every ``param_period`` env steps of each actor and after a failed replay call;
- the *parameters* (``publish``): the learner's latest :class:`PublishedParams`, fetched only
  when the control names a newer version than the loop's.

Transitions are flushed to the replay in batches of ``flush_size`` with their initial
priorities and keys; a batch whose call fails stays in the loop's outbox and is sent again
once the control names a new replay (the replay's per-actor high-water marks drop it if the
first copy did land). A restarted loop continues its actors' sequence numbers from those marks.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from esnb.replay.server import is_loss, wait_result
from esnb.runners.apex.actor import ActorConfig, ActorGroup
from esnb.runners.executor import attach

log = logging.getLogger("esnb.apex")


@dataclass(frozen=True)
class PublishedParams:
    """The learner's parameters at one version (published once, fetched by every loop)."""

    version: int
    flat: np.ndarray


@dataclass(frozen=True)
class LoopSettings:
    """How an actor loop batches its work.

    Attributes
    ----------
    flush_size : int
        Transitions per replay call (Ape-X sends batches; an actor call costs ~1 ms).
    param_period : int
        Env steps of each actor of the group between reads of the control (and parameter
        pulls; the paper pulls every 400 frames of an actor).
    call_timeout : float
        Seconds before a replay call counts as failed.
    max_outbox : int
        Transitions kept while the replay is unreachable; older ones are dropped (counted).
    throttle_sleep : float
        Seconds to wait before asking again while the replay reports inserts ahead of its
        samples-per-insert ratio.
    sleeps : bool
        Whether the loop sleeps while it has nothing to do (paused, throttled, replay gone).
        A loop that runs by itself on a worker must; an inline loop gives the turn back to the
        learner instead (a sleep there would only delay the run).
    """

    flush_size: int = 200
    param_period: int = 400
    call_timeout: float = 20.0
    max_outbox: int = 20_000
    throttle_sleep: float = 0.02
    sleeps: bool = True

    def rest(self, seconds: float) -> None:
        if self.sleeps:
            time.sleep(seconds)


def _recoverable(exc: BaseException) -> bool:
    return is_loss(exc) or isinstance(exc, TimeoutError)


class _Link:
    """A loop's view of the run: its control, the replay it writes to, its parameters."""

    def __init__(self, control, params, state: dict, group: ActorGroup, loop_id: int,
                 timeout: float):
        self.control, self.params, self.state, self.group = control, params, state, group
        self.loop_id, self.timeout = loop_id, timeout
        self.replay, self.generation = None, -1
        self.failed_generation, self.failed_at = -1, 0.0
        self.exploration = (self.state["exploration"], self.state["exploration_alpha"])

    def read(self) -> dict:
        self.state = self.control.get(self.timeout)
        return self.state

    def replaced(self) -> bool:
        generation = self.control.get(self.timeout)["replay_generation"]
        return generation >= 0 and generation != self.generation

    def drop_replay(self) -> None:
        """The replay failed: rebind to whatever the control names next (same or new)."""
        if self.generation >= 0:
            self.failed_generation, self.failed_at = self.generation, time.monotonic()
        self.replay, self.generation = None, -1

    def refresh(self) -> None:
        """Bind to the replay the control names, apply exploration and newer parameters."""
        state, group = self.state, self.group
        generation = state["replay_generation"]
        # a replay that just failed is retried only after a pause: the runner is most
        # likely recreating it, and a call to a dead worker can hang until the timeout
        retry = generation >= 0 and (generation != self.failed_generation
                                     or time.monotonic() - self.failed_at > 10.0)
        if retry and generation != self.generation:
            try:
                handle = attach(state["replay"])
                marks = wait_result(handle.high_water(list(group.actor_ids)), self.timeout)
            except Exception:
                self.failed_generation, self.failed_at = generation, time.monotonic()
                raise
            group.set_sequence_start(marks)
            self.replay, self.generation = handle, generation
        exploration = (state["exploration"], state["exploration_alpha"])
        if exploration != self.exploration:
            self.exploration = exploration
            group.set_exploration(*exploration)
        if state["params_version"] > group.params_version:
            try:
                published = self.params.get(self.timeout)
            except Exception as exc:  # noqa: BLE001 - e.g. held by a worker that just died
                # keep acting with the current copy; the learner publishes again soon
                log.info("loop %d: parameters unavailable (%s: %s)", self.loop_id,
                         type(exc).__name__, exc)
            else:
                group.set_params(published.flat, published.version)


def actor_loop(cfg: ActorConfig, control, params, loop_id: int, actor_ids, seed: int,
               settings: LoopSettings, incarnation: int = 0):
    """Act until the control says stop, one pass per ``yield``; returns the loop's totals.

    Parameters
    ----------
    cfg : ActorConfig
    control, params : executor channels
        The run's control dict and published parameters (see the module's notes).
    loop_id : int
        This loop's number (reported with its counts).
    actor_ids : list of int
        The actors this loop runs.
    seed : int
        Seeds environments and exploration (a restarted loop gets a new seed).
    settings : LoopSettings
    incarnation : int
        How many times this loop was restarted (its counts are reported under
        ``"<loop_id>.<incarnation>"``, so a restarted loop's env steps add to the old ones).
    """
    timeout = settings.call_timeout
    state = control.get(timeout)
    group = ActorGroup(cfg, actor_ids, seed, state["exploration"], state["exploration_alpha"])
    link = _Link(control, params, state, group, loop_id, timeout)
    outbox: list[tuple] = []
    episodes: list = []
    dropped = failures = pushes = waits = 0
    since_control = 0
    try:
        link.refresh()
    except Exception as exc:  # the replay may be recovering: the loop retries below
        log.info("loop %d: first refresh failed (%s); retrying", loop_id, exc)
        link.replay = None
    while not link.state["stop"]:
        if link.state["paused"]:
            settings.rest(0.2)
            yield
            link.read()
            continue
        rounds = max(1, int(link.state["pass_steps"]) // group.k)
        group.step(rounds)
        since_control += rounds  # each actor of the group stepped `rounds` times
        while group.pending >= settings.flush_size:
            outbox.append(group.take(settings.flush_size))
        episodes.extend(group.drain_episodes())
        excess = sum(len(b[1]) for b in outbox) - settings.max_outbox
        while excess > 0 and len(outbox) > 1:
            dropped += len(outbox[0][1])
            excess -= len(outbox[0][1])
            outbox.pop(0)
        broken = link.replay is None
        while outbox and not broken:
            batch, priorities, keys = outbox[0]
            info = {"loop": f"{loop_id}.{incarnation}", "env_steps": group.env_steps,
                    "episodes": episodes, "params_version": group.params_version,
                    "dropped": dropped, "nonfinite": group.nonfinite}
            try:
                reply = wait_result(link.replay.add(batch, priorities, keys, info), timeout,
                                    link.replaced)
                # back-pressure: the learner is behind the samples-per-insert ratio
                while reply.get("throttle") and not link.state["stop"]:
                    yield  # inline: the learner trains meanwhile
                    settings.rest(settings.throttle_sleep)
                    waits += 1
                    ready = wait_result(link.replay.insert_ready(settings.flush_size),
                                        timeout, link.replaced)
                    reply = {"throttle": not ready}
                    if waits % 50 == 0:  # ~1 s on a worker: stay responsive to stop
                        link.read()
            except Exception as exc:
                if not _recoverable(exc):
                    raise
                failures += 1
                broken = True
                break
            outbox.pop(0)
            episodes = []
            pushes += 1
        if broken or since_control >= settings.param_period:
            since_control = 0
            link.read()
            try:
                if broken:
                    link.drop_replay()
                link.refresh()
            except Exception as exc:
                if not _recoverable(exc):
                    raise
                failures += 1
                link.replay = None
                settings.rest(0.2)
        yield
    group.close()
    return {"loop": loop_id, "env_steps": group.env_steps, "pushes": pushes,
            "throttled_seconds": round(waits * settings.throttle_sleep * settings.sleeps, 3),
            "failures": failures,
            "dropped": dropped, "outbox": sum(len(b[1]) for b in outbox)}

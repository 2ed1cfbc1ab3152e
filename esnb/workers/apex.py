"""Ape-X actor loops: long-running tasks on workers, each stepping an
:class:`~esnb.rl.apex_actor.ActorGroup` and feeding the replay actor.

Horgan et al. 2018, "Distributed Prioritized Experience Replay", Algorithm 1. A loop talks to
the rest of the run through two Dask ``Variable`` s, which live on the scheduler and so survive
the loss of any worker:

- ``<token>-control``: a small dict (``stop``, ``paused``, the exploration settings, the
  replay's address/key/generation and the version of the latest parameters), read every
  ``param_period`` env steps of the group and after a failed replay call;
- ``<token>-params``: a future of the learner's latest :class:`PublishedParams`, fetched only
  when its version is newer than the loop's.

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
from distributed import Variable, get_client, secede

from esnb.replay.remote import ReplayLost, attach, is_loss
from esnb.rl.apex_actor import ActorConfig, ActorGroup

log = logging.getLogger("esnb.apex")


@dataclass(frozen=True)
class PublishedParams:
    """The learner's parameters at one version (scattered once, fetched by every loop)."""

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
        Env steps of the group between reads of the control (and parameter pulls; the paper
        pulls every 400 frames).
    call_timeout : float
        Seconds before a replay call counts as failed.
    max_outbox : int
        Transitions kept while the replay is unreachable; older ones are dropped (counted).
    throttle_sleep : float
        Seconds to wait before asking again while the replay reports inserts ahead of its
        samples-per-insert ratio.
    """

    flush_size: int = 200
    param_period: int = 400
    call_timeout: float = 20.0
    max_outbox: int = 20_000
    throttle_sleep: float = 0.02


def _read(var: Variable, timeout: float) -> dict:
    return var.get(timeout=timeout)


def _wait(call, timeout: float, replaced=None):
    """The result of an actor call, failing fast once the replay has been replaced.

    A call in flight when the replay's worker dies never completes (Dask awaits the dead
    actor's future inside it), and a worker is not told that another worker's actor died,
    so waiting for ``timeout`` stalled a loop ~20 s after every loss (measured). Instead,
    every second of waiting asks ``replaced()`` (does the control name a newer replay?).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call.result(timeout=1.0)
        except TimeoutError:
            if replaced is not None and replaced():
                raise ReplayLost("the replay was replaced while a call was in flight") from None
            if time.monotonic() >= deadline:
                raise


def apex_actor_loop(cfg: ActorConfig, token: str, loop_id: int, actor_ids, seed: int,
                    settings: LoopSettings, incarnation: int = 0) -> dict:
    """Act until the control says stop; returns the loop's totals.

    Parameters
    ----------
    cfg : ActorConfig
    token : str
        Names the run's control and parameter variables.
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
    # Leave the worker's thread pool: the loop runs for the whole run, and a worker whose
    # only thread it held could not run anything else, e.g. the constructor of a replay
    # actor recreated there after the replay's own worker died (measured: a deadlock).
    secede()
    client = get_client()
    control = Variable(f"{token}-control", client=client)
    params_var = Variable(f"{token}-params", client=client)
    timeout = settings.call_timeout
    state = _read(control, timeout)
    group = ActorGroup(cfg, actor_ids, seed, state["exploration"], state["exploration_alpha"])
    rounds = max(1, settings.flush_size // group.k)
    replay, generation = None, -1
    outbox: list[tuple] = []
    episodes: list = []
    dropped = failures = pushes = 0
    since_control = 0
    throttled = last_control_read = 0.0

    exploration = (state["exploration"], state["exploration_alpha"])
    failed_generation, failed_at = -1, 0.0

    def refresh(state: dict) -> None:
        nonlocal replay, generation, exploration, failed_generation, failed_at
        info = state["replay"]
        # a replay that just failed is retried only after a pause: the runner is most
        # likely recreating it, and a call to a dead worker can hang until the timeout
        retry = info is not None and (info["generation"] != failed_generation
                                      or time.monotonic() - failed_at > 10.0)
        if retry and info["generation"] != generation:
            try:
                handle = attach(info)
                marks = _wait(handle.high_water(list(group.actor_ids)), timeout)
            except Exception:
                failed_generation, failed_at = info["generation"], time.monotonic()
                raise
            group.set_sequence_start(marks)
            replay, generation = handle, info["generation"]
        if (state["exploration"], state["exploration_alpha"]) != exploration:
            exploration = (state["exploration"], state["exploration_alpha"])
            group.set_exploration(*exploration)
        if state["params_version"] > group.params_version:
            try:
                published = params_var.get(timeout=timeout).result(timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - e.g. held by a worker that just died
                # keep acting with the current copy; the learner publishes again soon
                log.info("loop %d: parameters unavailable (%s: %s)", loop_id,
                         type(exc).__name__, exc)
            else:
                group.set_params(published.flat, published.version)

    def replaced() -> bool:
        info = _read(control, timeout)["replay"]
        return info is not None and info["generation"] != generation

    try:
        refresh(state)
    except Exception as exc:  # the replay may be recovering: the loop retries below
        log.info("loop %d: first refresh failed (%s); retrying", loop_id, exc)
        replay = None
    while not state["stop"]:
        if state["paused"]:
            time.sleep(0.2)
            state = _read(control, timeout)
            continue
        group.step(rounds)
        since_control += rounds * group.k
        while group.pending >= settings.flush_size:
            outbox.append(group.take(settings.flush_size))
        episodes.extend(group.drain_episodes())
        excess = sum(len(b[1]) for b in outbox) - settings.max_outbox
        while excess > 0 and len(outbox) > 1:
            dropped += len(outbox[0][1])
            excess -= len(outbox[0][1])
            outbox.pop(0)
        broken = replay is None
        while outbox and not broken:
            batch, priorities, keys = outbox[0]
            info = {"loop": f"{loop_id}.{incarnation}", "env_steps": group.env_steps,
                    "episodes": episodes,
                    "params_version": group.params_version, "dropped": dropped,
                    "nonfinite": group.nonfinite}
            try:
                reply = _wait(replay.add(batch, priorities, keys, info), timeout, replaced)
                # back-pressure: the learner is behind the samples-per-insert ratio
                while reply.get("throttle") and not state["stop"]:
                    time.sleep(settings.throttle_sleep)
                    throttled += settings.throttle_sleep
                    reply = {"throttle": not _wait(replay.insert_ready(settings.flush_size),
                                                   timeout, replaced)}
                    if throttled - last_control_read > 1.0:  # stay responsive to stop
                        last_control_read = throttled
                        state = _read(control, timeout)
            except Exception as exc:
                if not is_loss(exc) and not isinstance(exc, TimeoutError):
                    raise
                failures += 1
                broken = True
                break
            outbox.pop(0)
            episodes = []
            pushes += 1
        if broken or since_control >= settings.param_period:
            since_control = 0
            state = _read(control, timeout)
            try:
                if broken:  # rebind to whatever the control names now (same or new)
                    if generation >= 0:
                        failed_generation, failed_at = generation, time.monotonic()
                    replay, generation = None, -1
                refresh(state)
            except Exception as exc:
                if not is_loss(exc) and not isinstance(exc, TimeoutError):
                    raise
                failures += 1
                replay = None
                time.sleep(0.2)
    group.close()
    return {"loop": loop_id, "env_steps": group.env_steps, "pushes": pushes,
            "throttled_seconds": round(throttled, 3),
            "failures": failures, "dropped": dropped, "outbox": sum(len(b[1]) for b in outbox)}

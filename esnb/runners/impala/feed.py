"""What keeps IMPALA's learner fed: :class:`UnrollFeed`, a mixin of
:class:`~esnb.runners.impala.runner.Impala`.

Finished actor tasks are received (their unrolls queued, their frames, episodes and seconds
counted), idle slots are given a task with the newest parameters (or, with lag injected, an
older version) unless ``queue_batches`` batches are already queued, and the learner waits for
a task only while fewer than B unrolls are queued, warning every :data:`WAIT_WARNING` seconds
it waits. A task runs enough unroll segments to last ``min_task_runtime`` (by the measured
seconds per frame; on the inline executor the clock decides nothing).
"""

from __future__ import annotations

import logging
import math
import time

from esnb.controls import ControlSnapshot

log = logging.getLogger("esnb.impala")

#: the learner warns when it has waited this long for an actor task (and as often again)
WAIT_WARNING = 60.0


def fresh_recent() -> dict:
    """What actors reported since the last history row."""
    return {"returns": [], "lengths": [], "frames": 0, "tasks": 0}


class UnrollFeed:
    """Actor slots kept busy and their unrolls queued for the learner.

    A mixin: it works on the runner's ``slots`` (:class:`~esnb.runners.impala.slots.ActorSlots`),
    ``queue`` (:class:`~esnb.rl.impala.unrolls.UnrollQueue`), ``learner``, ``executor``,
    ``config``, ``evals`` (:class:`~esnb.runners.impala.evaluation.Evaluations`), its counters
    (``env_steps``, ``episodes``, ``tasks_done``, ``actor_seconds``), ``_recent``
    (:func:`fresh_recent`), ``_payloads`` and ``_sec_per_frame``.
    """

    def _collect(self, snap: ControlSnapshot, block: bool) -> None:
        """Receive finished actor tasks (waiting for one if ``block``); refill idle slots."""
        done = self.slots.finished()
        started, warn_at = time.monotonic(), WAIT_WARNING
        while block and not done:
            if not self.slots.inflight:
                self._top_up(snap)
                if not self.slots.inflight:
                    raise RuntimeError("no actor task in flight and too few unrolls queued")
            else:
                self.slots.wait(timeout=10)
            waited = time.monotonic() - started
            if waited > warn_at:
                log.warning("the learner has waited %.0f s for %d actor tasks%s", waited,
                            len(self.slots.inflight), self._wait_reason())
                warn_at += WAIT_WARNING
            done = self.slots.finished()
        for result in self.slots.receive(done):
            self._receive(result)
        self._top_up(snap)

    def _wait_reason(self) -> str:
        """Why the actors may be slow: an evaluation holding worker threads (it goes first),
        else nothing known."""
        if self.evals.pending:
            return (f" while a greedy evaluation ({len(self.evals.pending)} tasks, ahead of "
                    f"theirs) runs on the workers")
        return ": is the cluster alive?"

    def _top_up(self, snap: ControlSnapshot) -> None:
        """Give every idle slot a task, unless enough unrolls are already queued."""
        for slot in self.slots.idle():
            if self.queue.ready(snap.unroll_length) >= snap.queue_batches * snap.batch_size:
                return
            self.slots.submit(slot, self._payload_for_actor(snap.actor_lag),
                              self._segments(snap.unroll_length, snap.batch_size),
                              snap.unroll_length)

    def _receive(self, result: dict) -> None:
        self.queue.add(result)
        self.env_steps += int(result["frames"])
        self.tasks_done += 1
        self.actor_seconds += float(result["seconds"])
        self.episodes += len(result["episode_returns"])
        rate = result["seconds"] / max(result["frames"], 1)
        self._sec_per_frame = rate if self._sec_per_frame is None else (
            0.8 * self._sec_per_frame + 0.2 * rate)
        rec = self._recent
        rec["returns"].extend(result["episode_returns"].tolist())
        rec["lengths"].extend(result["episode_lengths"].tolist())
        rec["frames"] += int(result["frames"])
        rec["tasks"] += 1

    def _segments(self, T: int, B: int) -> int:
        """Unroll segments per actor task: enough to run >= ``min_task_runtime``."""
        cfg = self.config
        if cfg.segments_per_task is not None:
            return cfg.segments_per_task
        if self.executor.reproducible:  # the clock must not decide anything
            return int(min(cfg.max_segments, math.ceil(B / cfg.envs_per_actor)))
        if self._sec_per_frame is None:
            return 1
        frames = max(1, T * cfg.envs_per_actor)
        want = math.ceil(cfg.min_task_runtime / max(self._sec_per_frame * frames, 1e-9))
        return int(min(cfg.max_segments, max(1, want)))

    def _publish(self) -> None:
        self._payloads[self.learner.version] = self.learner.actor_payload()

    def _payload_for_actor(self, lag: int) -> dict:
        """The newest payload, or the one ``lag`` versions older (lag injection)."""
        newest = self.learner.version
        for v in [v for v in self._payloads if v < newest - lag]:
            del self._payloads[v]  # nobody will be handed these again
        return self._payloads[max(newest - lag, min(self._payloads))]

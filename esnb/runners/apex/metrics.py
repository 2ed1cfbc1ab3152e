"""Ape-X's history row: returns, evaluation, learner diagnostics and the throughput of every
part (Horgan et al. 2018: "throughput is reported for every part")."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from esnb.runners.plotspec import return_columns


class Throughput:
    """Rates of running counters over a sliding window of at least ``window`` seconds.

    Rows come every ~0.25 s; a rate over one row would be noise, so each rate is taken over
    the oldest mark still inside the window.
    """

    def __init__(self, window: float = 2.0):
        self.window = float(window)
        self._marks: deque = deque()

    def add(self, **counters: float) -> dict[str, float]:
        """Record the counters now; returns ``{name: per second}``."""
        now = time.monotonic()
        self._marks.append((now, counters))
        while len(self._marks) > 2 and now - self._marks[1][0] >= self.window:
            self._marks.popleft()
        t0, first = self._marks[0]
        dt = now - t0
        return {k: (v - first.get(k, 0.0)) / dt if dt > 0 else np.nan
                for k, v in counters.items()}


def history_row(runner, snap, info: dict, episodes: list, eval_return: float,
                eval_std: float) -> dict[str, Any]:
    """One Ape-X history row: returns of the episodes the actors finished, evaluation,
    learner diagnostics, the throughput of every part and the replay's counters."""
    returns = np.array([e[1] for e in episodes]) if episodes else np.zeros(0)
    st = runner.replay_stats
    rates = runner.rates.add(env_steps=runner.env_steps, inserted=int(st.get("inserted", 0)),
                             updates=runner.learner_steps, sampled=runner.sampled)
    diag = info["diag"]

    def mean(k):
        return float(np.mean([d[k] for d in diag])) if diag and k in diag[0] else np.nan

    replay = runner.backend.replay
    row = {
        "learner_steps": runner.learner_steps,
        "env_steps": runner.env_steps,
        "episodes": runner.episodes,
        **return_columns(returns),
        "eval_return": eval_return,
        "eval_return_std": eval_std,
        "loss": mean("loss"),
        "q_mean": mean("q_mean"),
        "grad_norm": mean("grad_norm"),
        "actor_loss": mean("actor_loss"),
        "waiting": bool(info["waiting"]),
        "actor_steps_per_s": rates["env_steps"],
        "steps_per_s": rates["env_steps"],
        "inserts_per_s": rates["inserted"],
        "updates_per_s": rates["updates"],
        "sampled_per_s": rates["sampled"],
        "learn_time": info["learn_time"],
        "learn_cpu": info["learn_cpu"],
        "learner_cpu_s": runner.learner_cpu,
        "wait_time": info["wait_time"],
        "replay_size": int(st.get("size", 0)),
        "replay_inserted": int(st.get("inserted", 0)),
        "replay_evicted": int(st.get("evicted", 0)),
        "replay_overwritten": int(st.get("overwritten", 0)),
        "replay_duplicates": int(st.get("duplicates", 0)),
        "replay_bytes": int(st.get("bytes", 0)),  # what the replay's storage holds in memory
        "replay_bytes_per_transition": float(st.get("bytes_per_transition", 0.0)),
        "replay_generation": int(replay.generation) if replay is not None else -1,
        "replay_recreations": int(replay.recreations) if replay is not None else 0,
        "replay_lost": int(replay.lost_items) if replay is not None else 0,
        "replay_checkpoints": int(replay.checkpoints) if replay is not None else 0,
        "loops_running": int(runner.backend.loops_running),
        "loop_restarts": int(runner.backend.loop_restarts),
        "params_version": runner.params_version,
        "batch_size": snap.batch_size,
        "beta": snap.beta,
        "exploration": snap.exploration,
    }
    row.update({name: getattr(snap, name) for name in runner.rate_controls})
    return row

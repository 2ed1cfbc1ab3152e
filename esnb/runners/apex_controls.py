"""Ape-X's controls (live hyperparameters), variant defaults, and the throughput columns of
its history (Horgan et al. 2018, "Distributed Prioritized Experience Replay": "throughput is
reported for every part").
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from esnb.controls import Control, Controls

#: variant-specific defaults (the paper's where it gives them)
DEFAULTS = {
    "dqn": dict(hidden=(64, 64), lr=1e-3, target_period=100, exploration=0.4,
                exploration_alpha=7.0, eviction="fifo", samples_per_insert=None),
    # samples_per_insert=16 departs from the paper (actors flat out): a DPG learner sharing
    # 2 cores with actors ran 7 updates/s flat out and 25 with the limiter, and only the
    # latter reached 900 on InvertedPendulum-v5 in 5 minutes (measured, under load)
    "dpg": dict(actor_hidden=(300, 200), critic_hidden=(400, 300), actor_lr=1e-4,
                critic_lr=1e-4, target_period=100, exploration=0.3, exploration_alpha=0.0,
                eviction="priority", samples_per_insert=16.0),
}


def apex_controls(variant: str, values: dict) -> Controls:
    """The controls of an Ape-X runner (live unless marked fixed)."""
    lr = dict(low=0.0, low_open=True, high=1.0, log=True)
    schema = []
    if variant == "dqn":
        schema.append(Control("lr", "float", 1e-3, **lr, help="Adam step size"))
    else:
        schema += [Control("actor_lr", "float", 1e-4, **lr, help="Adam step size of the actor"),
                   Control("critic_lr", "float", 1e-4, **lr,
                           help="Adam step size of the critic")]
    explore_help = ("base epsilon: actor i uses base^(1 + alpha i/(N-1))" if variant == "dqn"
                    else "Gaussian noise std, a fraction of the action half-range")
    schema += [
        Control("batch_size", "int", 256, low=1, high=65_536, help="transitions per update"),
        Control("learner_chunk", "int", 16, low=1, high=1024,
                help="batches sampled per replay call and trained in a row"),
        Control("target_period", "int", 100, low=1, high=10_000_000,
                help="updates between target network copies"),
        Control("beta", "float", 0.4, low=0.0, high=1.0,
                help="importance-sampling exponent of the replay"),
        Control("exploration", "float", 0.4, low=0.0, high=10.0, help=explore_help),
        Control("exploration_alpha", "float", 7.0, low=0.0, high=100.0,
                help="spread of exploration across actors (0: the same for all)"),
        Control("param_period", "int", 50, low=1, high=1_000_000,
                help="updates between parameter publications to the actors"),
        Control("evict_interval", "int", 100, low=1, high=1_000_000,
                help="updates between evictions of the excess over the soft capacity"),
        Control("eval_interval", "int", 1000, low=0, high=100_000_000,
                help="greedy evaluation every n updates (0: never)"),
        Control("eval_episodes", "int", 10, low=1, high=1000,
                help="episodes per evaluation"),
        Control("inline_actor_steps", "int", 256, low=1, high=1_000_000,
                help="inline runs only: env steps before each learner chunk"),
        Control("env", "str", "CartPole-v1", live=False, help="gymnasium environment id"),
        Control("seed", "int", 0, low=0, live=False, help="seed of every random draw"),
        Control("num_actors", "int", 8, low=1, high=100_000, live=False,
                help="actors (each with its own environment)"),
    ]
    return Controls(schema, values)


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
    st = runner._replay_stats
    rates = runner._rates.add(env_steps=runner.env_steps, inserted=int(st.get("inserted", 0)),
                              updates=runner.learner_steps, sampled=runner.sampled)
    diag = info["diag"]

    def mean(k):
        return float(np.mean([d[k] for d in diag])) if diag and k in diag[0] else np.nan

    replay = runner.backend.replay
    row = {
        "learner_steps": runner.learner_steps,
        "env_steps": runner.env_steps,
        "episodes": runner.episodes,
        "return_mean": float(returns.mean()) if returns.size else np.nan,
        "return_max": float(returns.max()) if returns.size else np.nan,
        "return_min": float(returns.min()) if returns.size else np.nan,
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
    if runner.variant == "dqn":
        row["lr"] = snap.lr
    else:
        row.update(actor_lr=snap.actor_lr, critic_lr=snap.critic_lr)
    return row

"""IMPALA's greedy evaluations: periodic ones that land in a later history row (a cluster
does not wait for them), blocking ones on request, and the best parameters seen so far."""

from __future__ import annotations

from typing import Any

import numpy as np

from esnb.record import restore_rng
from esnb.runners.impala.tasks import ActorConfig, impala_evaluate

#: the history columns of one evaluation (NaN in rows without one)
COLUMNS = ("eval_return", "eval_return_std", "eval_return_min", "eval_version",
           "eval_env_steps")


class Evaluations:
    """Greedy episodes of published parameters on the executor's workers.

    Parameters
    ----------
    executor : InlineExecutor or DaskExecutor
    config : ActorConfig
    rng : numpy.random.Generator
        Draws the episodes' environment seeds (its own stream: evaluating never changes
        training).

    Attributes
    ----------
    best : dict or None
        The best periodic evaluation so far: ``eval_return``, ``version``, ``env_steps`` and
        the evaluated ``payload`` itself (by then the learner has moved on).
    steps : int
        Environment steps spent evaluating.
    """

    def __init__(self, executor, config: ActorConfig, rng: np.random.Generator):
        self.executor = executor
        self.config = config
        self.rng = rng
        self.best: dict | None = None
        self.steps = 0
        self._pending: tuple[dict, int, list] | None = None

    @property
    def pending(self) -> list:
        """The futures of the periodic evaluation in flight."""
        return list(self._pending[2]) if self._pending else []

    def submit(self, payload: dict, episodes: int) -> list:
        """Futures of ``episodes`` greedy episodes of ``payload``, split over the workers."""
        seeds = self.rng.integers(0, 2**31 - 1, size=int(episodes))
        parts = np.array_split(seeds, min(len(seeds), self.executor.n_workers))
        return [self.executor.submit(impala_evaluate, self.config, payload, p, priority=10)
                for p in parts if len(p)]

    def returns(self, payload: dict, episodes: int) -> np.ndarray:
        """Greedy returns of ``payload`` now (blocking)."""
        results = self.executor.gather(self.submit(payload, episodes))
        return np.concatenate([r["returns"] for r in results])

    def start(self, payload: dict, env_steps: int, episodes: int) -> bool:
        """Start a periodic evaluation unless one is in flight; whether one was started."""
        if self._pending is not None:
            return False
        self._pending = (payload, int(env_steps), self.submit(payload, episodes))
        return True

    def poll(self) -> dict[str, Any] | None:
        """The history columns of the periodic evaluation once all its tasks have ended."""
        if self._pending is None:
            return None
        payload, steps, futures = self._pending
        if not all(f.done() for f in futures):
            return None
        self._pending = None
        parts = self.executor.gather(futures)
        returns = np.concatenate([p["returns"] for p in parts])
        finite = np.concatenate([p["finite"] for p in parts])
        self.steps += int(sum(p["steps"] for p in parts))
        ok = returns[finite]
        mean = float(ok.mean()) if ok.size else np.nan
        if ok.size and (self.best is None or mean > self.best["eval_return"]):
            self.best = {"eval_return": mean, "version": int(payload["version"]),
                         "env_steps": steps, "payload": payload}
        return {"eval_return": mean,
                "eval_return_std": float(ok.std()) if ok.size else np.nan,
                "eval_return_min": float(ok.min()) if ok.size else np.nan,
                "eval_version": payload["version"], "eval_env_steps": steps}

    def forget_pending(self) -> None:
        self._pending = None

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict, dict]:
        meta: dict[str, Any] = {"eval_rng": self.rng.bit_generator.state,
                                "eval_steps": self.steps}
        arrays = {}
        if self.best is not None:
            pl = self.best["payload"]
            arrays["best_params"] = pl["params"]
            if pl["obs_mean"] is not None:
                arrays.update(best_obs_mean=pl["obs_mean"], best_obs_std=pl["obs_std"])
            meta["best"] = {k: self.best[k] for k in ("eval_return", "version", "env_steps")}
        return meta, arrays

    def load_state_dict(self, meta: dict, arrays: dict) -> None:
        restore_rng(self.rng, meta["eval_rng"], "eval_rng")
        self.steps = int(meta["eval_steps"])
        if meta.get("best") is not None:
            payload = {"version": int(meta["best"]["version"]), "params": arrays["best_params"],
                       "obs_mean": arrays.get("best_obs_mean"),
                       "obs_std": arrays.get("best_obs_std")}
            self.best = {**meta["best"], "payload": payload}

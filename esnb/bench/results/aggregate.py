"""Scores across a set of tasks, as Agarwal et al. (2021, "Deep RL at the edge of the
statistical precipice", the ``rliable`` library) recommend for few runs a task.

A :class:`TaskSet` names, per algorithm, the results entry of each task, and how a task's
score is normalised (0 and 1 of each task: the scale a reader can compare across tasks).
For each algorithm, over its ``runs x tasks`` normalised final scores:

- the **interquartile mean** (IQM: the mean of the middle 50% of all runs of all tasks),
  the mean, the median and the optimality gap, as ``rliable.metrics`` defines them (the
  point estimates call it);
- their **95% stratified percentile bootstrap** intervals: runs resampled with replacement
  within each task (rliable's ``StratifiedBootstrap``), from an explicit seeded generator;
- the **performance profile**: the fraction of runs whose normalised score exceeds tau, with
  the same bootstrap's band.

The bootstrap is esnb's, not ``rliable.library``'s: that module needs ``arch`` < 8, whose 7.x
does not import under pandas 3 (arch 8 removed the ``random_state`` rliable passes), and its
resampling draws from numpy's global generator. Replicates here are computed vectorised with
the same definitions (tested against ``rliable.metrics`` sample by sample).

Aggregates are saved beside the entries (``docs/results/<set key>.json``) with the finals
they were computed from, so another numpy cannot move a checked-in number; changed finals
are recomputed (as an entry's interval is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

#: the bootstrap's method name, replicates and generator seed (saved with the numbers)
METHOD = "stratified percentile bootstrap (rliable's), 95%"
REPS, SEED = 20_000, 0
#: the aggregates, in the order the page prints them
METRICS = ("iqm", "mean", "median", "optimality_gap")
#: runs of every task a stratified bootstrap needs
MIN_RUNS = 2


@dataclass(frozen=True)
class TaskSet:
    """Tasks whose normalised scores are aggregated per algorithm.

    Attributes
    ----------
    key : str
        File names of its saved aggregates and figure (``docs/results/<key>.json/.svg``).
    title : str
    entries : dict
        ``{algorithm: {task: results entry key}}``; every algorithm has every task.
    scale : dict
        ``{task: (score at 0, score at 1)}`` of the normalisation; a 1 of None is the best
        algorithm's mean final score on that task (for tasks with no published reference: the
        aggregates then compare the algorithms with the best of them, task by task).
    scale_note : str
        What 0 and 1 are, for the page.
    """

    key: str
    title: str
    entries: dict[str, dict[str, str]]
    scale: dict[str, tuple[float, float | None]]
    scale_note: str

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(self.scale)

    def normalise(self, task: str, scores, best: float | None = None) -> np.ndarray:
        """``scores`` on ``task``'s 0-1 scale; ``best``: the 1 of a task whose scale has
        none (the best algorithm's mean final)."""
        lo, hi = self.scale[task]
        hi = best if hi is None else hi
        if hi is None or hi <= lo:
            raise ValueError(f"{self.key}: {task}'s 1 ({hi}) must be above its 0 ({lo})")
        return (np.asarray(scores, dtype=np.float64) - lo) / (hi - lo)

    def best_means(self, finals: dict[str, list[float]]) -> dict[str, float]:
        """Per task, the highest mean final score of the set's algorithms."""
        return {t: max(float(np.mean(finals[by_task[t]])) for by_task in self.entries.values())
                for t in self.tasks}


def score_matrix(task_set: TaskSet, finals: dict[str, list[float]]) -> dict[str, np.ndarray]:
    """``{algorithm: normalised scores [runs, tasks]}`` from ``{entry key: finals}``.

    Tasks with more seeds than another of the same algorithm keep their first ones (the
    stratified bootstrap needs as many runs per task)."""
    out, best = {}, task_set.best_means(finals)
    for algorithm, by_task in task_set.entries.items():
        columns = [finals[by_task[t]] for t in task_set.tasks]
        n = min(len(c) for c in columns)
        if n < MIN_RUNS:
            raise ValueError(f"{task_set.key}: {algorithm} needs {MIN_RUNS} or more seeds on "
                             f"each task, has {n}")
        out[algorithm] = np.stack([task_set.normalise(t, c[:n], best[t])
                                   for t, c in zip(task_set.tasks, columns)], axis=1)
    return out


def point(scores: np.ndarray) -> dict[str, float]:
    """The aggregates of ``scores`` [runs, tasks], as ``rliable.metrics`` defines them."""
    try:
        from rliable import metrics
    except ImportError:
        raise ImportError("aggregates across tasks need rliable: pip install 'esnb[bench]'") \
            from None

    return {"iqm": float(metrics.aggregate_iqm(scores)),
            "mean": float(metrics.aggregate_mean(scores)),
            "median": float(metrics.aggregate_median(scores)),
            "optimality_gap": float(metrics.aggregate_optimality_gap(scores, gamma=1.0))}


def replicates(scores: np.ndarray, rng: np.random.Generator,
               reps: int = REPS) -> np.ndarray:
    """``[reps, runs, tasks]``: runs resampled with replacement within each task."""
    n, m = scores.shape
    rows = rng.integers(0, n, size=(reps, n, m))
    return scores[rows, np.arange(m)]


def replicate_metrics(samples: np.ndarray) -> dict[str, np.ndarray]:
    """Each aggregate of each replicate ``[reps, runs, tasks]`` (vectorised :func:`point`)."""
    from scipy import stats as sps  # the bench extra's, as rliable's

    reps = samples.shape[0]
    task_means = samples.mean(axis=1)
    return {"iqm": sps.trim_mean(samples.reshape(reps, -1), 0.25, axis=1),
            "mean": task_means.mean(axis=1),
            "median": np.median(task_means, axis=1),
            "optimality_gap": 1.0 - np.minimum(samples, 1.0).mean(axis=(1, 2))}


def profile(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """Fraction of runs (over runs and tasks; ``[..., runs, tasks]``) scoring above each tau."""
    flat = scores.reshape(*scores.shape[:-2], -1)
    return (flat[..., None] > taus).mean(axis=-2)


def taus(matrices: dict[str, np.ndarray], points: int = 51) -> np.ndarray:
    """The profile's thresholds: 0 to past the best normalised score (at least 1)."""
    top = max(1.0, *(float(s.max()) for s in matrices.values()))
    return np.linspace(0.0, top * 1.05, points)


def aggregate(task_set: TaskSet, finals: dict[str, list[float]]) -> dict[str, Any]:
    """The saved form: inputs, method, and per algorithm each aggregate with its interval
    and the performance profile with its band."""
    matrices = score_matrix(task_set, finals)
    grid = taus(matrices)
    rng = np.random.default_rng(SEED)
    algorithms = {}
    for algorithm, scores in matrices.items():
        samples = replicates(scores, rng)
        reps = replicate_metrics(samples)
        est = point(scores)
        profiles = profile(samples, grid)
        algorithms[algorithm] = {
            "runs": int(scores.shape[0]),
            **{k: [est[k], *np.percentile(reps[k], [2.5, 97.5]).tolist()] for k in METRICS},
            "profile": profile(scores, grid).tolist(),
            "profile_lo": np.percentile(profiles, 2.5, axis=0).tolist(),
            "profile_hi": np.percentile(profiles, 97.5, axis=0).tolist()}
    return {"key": task_set.key, "method": METHOD, "reps": REPS, "seed": SEED,
            "finals": {k: list(v) for k, v in finals.items()}, "taus": grid.tolist(),
            "algorithms": algorithms}


def inputs(task_set: TaskSet) -> list[str]:
    """The results entries a set reads."""
    return sorted({key for by_task in task_set.entries.values() for key in by_task.values()})


def current(task_set: TaskSet, saved: dict | None,
            finals: dict[str, list[float]]) -> dict[str, Any]:
    """``saved`` when it was computed from these ``finals`` by this method, else recomputed."""
    if (saved and saved.get("method") == METHOD and saved.get("reps") == REPS
            and saved.get("finals") == {k: list(v) for k, v in finals.items()}):
        return saved
    return aggregate(task_set, finals)

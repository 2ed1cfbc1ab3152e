"""esnb's IMPALA against RLlib's on ALE/Pong-v5: the wall-clock time each takes to a score.

``esnb bench impala-vs-rllib --to-score SCORE`` trains each side alone, one after the other, on
the same workload as the rate comparison (:mod:`esnb.bench.peers.impala_vs_rllib`: each side's
own Atari recipe, IMPALA's shallow torso, 2 actor processes of 64 environments in all, batches
of 32 unrolls of 20, the learner on the CPU), until its training return passes ``SCORE`` or it
has sampled ``--max-steps`` agent steps:

- **esnb**: the laptop preset (the results page's Pong entry: its init, Adam 5e-4), seed 0;
  or, with ``--esnb-run DIR``, the curve of a run folder already trained that way (a results
  seed, ``docs/results/seeds/impala-pong/seed2``), read from its history, not run again;
- **RLlib**: its IMPALA's own defaults (Adam 5e-4, entropy 0.01, gradient clip 40), seed 0.

**The score** is the same on both sides: the mean return of the last :data:`WINDOW` whole games
the actors finished, pooled by :func:`pooled` from each report's finished games and their mean
(esnb: its history rows; RLlib: a callback's lifetime sums of game returns and games, since its
``episode_return_mean`` held only the ~12 games finished since the env runners last reported,
whatever ``metrics_num_episodes_for_smoothing`` said). The time is wall clock from the
run's start (cluster or Ray node, environments and network built) to the first report at or
above the score; a side that never gets there reports how far it got.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
from pathlib import Path

from esnb.bench.common.interpreter import streamed

#: games pooled into the score (RLlib's own smoothing window is 100 episodes too)
WINDOW = 100
#: the most points kept of each side's curve
CURVE_POINTS = 400

#: esnb's IMPALA to a score in a fresh interpreter: argv mode, workers, max steps, the frames'
#: side, env, score; SETTINGS (prepended) define UNROLL, BATCH, SLOTS, ENVS, WINDOW and
#: ``pooled``. One ``ESNB-PROGRESS`` line per iteration, the ``ESNB-BENCH`` line at the end.
ESNB_CHILD = r'''
import json, logging, sys, time
t0 = time.perf_counter()
workers, max_steps, screen = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
env, score = sys.argv[5], float(sys.argv[6])
from esnb.cluster import make_client
from esnb.runners.impala import Impala
client = make_client(workers, dashboard_address=":0", silence_logs=logging.ERROR)
pixels = {"env_kwargs": {"screen_size": screen}} if env.startswith("ALE/") else {}
r = Impala(env, client=client, eval_interval=0, seed=0, name="bench-to-score",
           unroll_length=UNROLL, batch_size=BATCH, actors_per_worker=SLOTS,
           envs_per_actor=ENVS, **pixels)
games = []
while True:
    r.step(1)
    row = r.history.iloc[-1]
    done = int(row.episodes) - sum(n for n, _ in games)
    if done > 0:
        games.append((done, float(row.return_mean)))
    steps = int(row.env_steps)
    mean = pooled(games, WINDOW)
    print("ESNB-PROGRESS " + json.dumps({"steps": steps, "seconds": time.perf_counter() - t0,
                                         "games": int(row.episodes), "mean": mean}), flush=True)
    if (mean is not None and mean >= score) or steps >= max_steps:
        break
r.close()
client.close()
torso = r.spec.torso
print("ESNB-BENCH " + json.dumps({"side": torso.in_shape[-1] if torso else None,
                                  "unroll": r.config.unroll_length,
                                  "batch": r.config.batch_size,
                                  "envs": r.n_actors * r.config.envs_per_actor}), flush=True)
'''

#: RLlib's IMPALA to a score, the same arguments, after the setup the rate comparison uses
#: (:data:`esnb.bench.peers.impala_vs_rllib.RLLIB_SETUP`, which builds ``algo``); the clock
#: starts before the setup, as esnb's starts before its cluster
RLLIB_CHILD = r'''
max_steps, score = int(sys.argv[3]), float(sys.argv[6])
games, seen, seen_sum = [], 0, 0.0
while True:
    res = algo.train()
    steps, _ = counts(res)
    runners = res.get("env_runners", {})
    done, total = int(runners.get("esnb_games", 0)), float(runners.get("esnb_game_return_sum", 0))
    if done > seen:  # the games finished since the last report, and their mean
        games.append((done - seen, (total - seen_sum) / (done - seen)))
        seen, seen_sum = done, total
    mean = pooled(games, WINDOW)
    print("ESNB-PROGRESS " + json.dumps({"steps": steps, "seconds": time.perf_counter() - t0,
                                         "games": seen, "mean": mean}), flush=True)
    if (mean is not None and mean >= score) or steps >= max_steps:
        break
out = {"ray": ray.__version__,
       "params": sum(p.numel() for p in algo.get_module().parameters())}
algo.stop()
ray.shutdown()
print("ESNB-BENCH " + json.dumps(out), flush=True)
'''

def pooled(games, window):
    """The mean of the last ``window`` games from ``(count, mean)`` pairs (a history row's
    games and their mean return), the oldest pair weighted by its part inside the window;
    None before ``window`` games. The children get this function's own source."""
    if sum(n for n, _ in games) < window:
        return None
    left, total = window, 0.0
    for n, mean in reversed(games):
        take = min(n, left)
        total += take * mean
        left -= take
        if not left:
            break
    return total / window


class Curve:
    """One side's curve to the score: its points, the first at or above it, a line each
    twentieth of the step budget (integer parts, said once)."""

    def __init__(self, name: str, score: float, max_steps: int, progress=print):
        self.name, self.score, self.max_steps, self.progress = name, score, max_steps, progress
        self.points: list[tuple[int, float, float | None]] = []
        self.reached: tuple[int, float] | None = None
        self.next_part = 1

    def add(self, p: dict) -> None:
        steps, seconds, mean = int(p["steps"]), float(p["seconds"]), p.get("mean")
        self.points.append((steps, seconds, mean))
        if self.reached is None and mean is not None and mean >= self.score:
            self.reached = (steps, seconds)
            self.progress(f"  {self.name}: {mean:+.1f} >= {self.score:+g} at {steps:,} agent "
                          f"steps, {seconds / 60:.1f} min")
        part = steps * 20 // self.max_steps
        if part >= self.next_part:
            self.next_part = part + 1
            shown = "no score yet" if mean is None else f"score {mean:+.1f}"
            self.progress(f"  {self.name}: {min(part, 20) * 5}% ({steps:,}/{self.max_steps:,} "
                          f"agent steps), {shown}, {seconds / 60:.1f} min")

    def result(self) -> dict:
        steps, seconds, _ = self.points[-1] if self.points else (0, 0.0, None)
        thin = max(1, math.ceil(len(self.points) / CURVE_POINTS))
        kept = self.points[::thin]
        if self.points and kept[-1] is not self.points[-1]:
            kept.append(self.points[-1])  # the curve ends where the run did
        return {"reached": self.reached is not None,
                "steps_to_score": self.reached[0] if self.reached else None,
                "seconds_to_score": self.reached[1] if self.reached else None,
                "steps": steps, "seconds": seconds,
                "best": max((m for _, _, m in self.points if m is not None), default=None),
                "agent_steps_per_s": steps / seconds if seconds else None,
                "milestones": self.milestones(), "curve": [list(p) for p in kept]}

    def milestones(self) -> dict[str, list]:
        """Agent steps and seconds at which the score first reached each whole number from
        -20 up to the target: the scores a side that stalls short of the target did reach
        are compared too. Keys are the scores as text (JSON's keys)."""
        out = {}
        for mark in range(-20, math.floor(self.score) + 1):
            first = next(((s, t) for s, t, m in self.points if m is not None and m >= mark),
                         None)
            if first is not None:
                out[str(mark)] = list(first)
        return out


def history(folder: str | os.PathLike) -> Path:
    """The history file of run folder ``folder``; ValueError (one line) if it has none."""
    path = Path(folder) / "history.csv"
    if not path.is_file():
        raise ValueError(f"--esnb-run {folder}: no history.csv there (a run folder, e.g. "
                         f"docs/results/seeds/impala-pong/seed2)")
    return path


def evaluation_seconds(h) -> list[float]:
    """Per history row, the seconds its greedy evaluation (and the row after, whose actors had
    stalled behind it) took beyond the row's usual time (the median of the 10 rows before):
    a results seed evaluates every ``eval_interval`` updates, a fresh bench run never."""
    import statistics

    took = h.wall_time.diff().fillna(h.wall_time.iloc[0]).tolist()
    evaluated = h.eval_return.notna().tolist() if "eval_return" in h else [False] * len(h)
    extra, usual = [], []
    for i, seconds in enumerate(took):
        if evaluated[i] or (i and evaluated[i - 1]):
            extra.append(max(0.0, seconds - statistics.median(usual[-10:])) if usual else 0.0)
        else:
            extra.append(0.0)
            usual.append(seconds)
    return extra


def from_run(folder: str | os.PathLike, score: float, max_steps: int, progress=print) -> dict:
    """esnb's side read from a run folder's history (a results seed): the same pooled score
    up to ``max_steps`` agent steps, on the run's wall clock less its evaluations
    (:func:`evaluation_seconds`; the seconds taken out are reported)."""
    import pandas as pd

    h = pd.read_csv(history(folder))
    extra = evaluation_seconds(h)
    curve = Curve("esnb", score, max_steps, progress=lambda _line: None)
    games: list[tuple[int, float]] = []
    seen, taken_out, at_score = 0, 0.0, None
    for row, seconds in zip(h.itertuples(), extra):
        if row.env_steps > max_steps:
            break
        taken_out += seconds
        if row.episodes > seen:
            games.append((int(row.episodes) - seen, float(row.return_mean)))
            seen = int(row.episodes)
        curve.add({"steps": row.env_steps, "seconds": row.wall_time - taken_out,
                   "mean": pooled(games, WINDOW)})
        if at_score is None and curve.reached is not None:
            at_score = taken_out
    out = curve.result()
    out["evaluation_seconds"] = at_score if at_score is not None else taken_out
    progress(f"  esnb (read from {folder}, less {out['evaluation_seconds'] / 60:.1f} min of "
             f"evaluations): " + (
                 f"{score:+g} at {out['steps_to_score']:,} agent steps, "
                 f"{out['seconds_to_score'] / 60:.1f} min" if out["reached"]
                 else f"not reached in {out['steps']:,} agent steps (best {out['best']})"))
    return {**out, "source": str(folder)}


def esnb_to_score(env: str, workers: int, score: float, max_steps: int, screen: int,
                  settings: str, progress=print) -> dict:
    """esnb's IMPALA (laptop preset) trained in a fresh interpreter to ``score``."""
    curve = Curve("esnb", score, max_steps, progress)
    source = settings + f"WINDOW = {WINDOW}\n" + inspect.getsource(pooled) + ESNB_CHILD
    return _until_stopped(curve, source, ["esnb", workers, max_steps, screen, env, score],
                          sys.executable, progress)


def rllib_to_score(env: str, workers: int, score: float, max_steps: int, screen: int,
                   python: str, settings: str, setup: str, progress=print) -> dict:
    """RLlib's IMPALA (its defaults) trained in a fresh ``python`` to ``score``."""
    curve = Curve("rllib", score, max_steps, progress)
    source = ("import time\nt0 = time.perf_counter()\n" + settings + setup
              + inspect.getsource(pooled) + RLLIB_CHILD)
    return _until_stopped(curve, source, ["rllib", workers, max_steps, screen, env, score],
                          python, progress)


def _until_stopped(curve: Curve, source: str, args: list, python: str, progress) -> dict:
    """The side's run to its score or budget; a Ctrl-C stops it where it is and keeps its
    curve so far, marked ``stopped`` (hours of a run are not thrown away for want of one
    more)."""
    try:
        out = streamed(source, args, python, curve.add)
    except KeyboardInterrupt:
        result = curve.result()
        progress(f"  {curve.name}: stopped (Ctrl-C) at {result['steps']:,} agent steps, "
                 f"{result['seconds'] / 60:.1f} min")
        return {**result, "stopped": True}
    return {**curve.result(), **out, "stopped": False}


def report(r: dict) -> None:
    """The two sides' times to the score, and their ratio where both got there."""
    print(f"impala-vs-rllib on {r['env']}, time to a score of {r['score']:+g} (mean of the "
          f"last {WINDOW} games, training), each side alone; at most {r['max_steps']:,} agent "
          f"steps; {r['workers']} actor processes, {r['screen']}x{r['screen']} frames")
    print(f"  {'':<8}{'agent steps':>14}{'minutes':>10}{'agent steps/s':>15}{'best':>8}")
    for name in ("esnb", "rllib"):
        s = r[name]
        if s is None:
            print(f"  {name:<8}not run (stopped before it)")
            continue
        steps = f"{s['steps_to_score']:,}" if s["reached"] else f"> {s['steps']:,}"
        minutes = (f"{s['seconds_to_score'] / 60:.1f}" if s["reached"]
                   else f"> {s['seconds'] / 60:.1f}")
        rate = s["agent_steps_per_s"] or 0.0
        best = "-" if s["best"] is None else f"{s['best']:+.1f}"
        stopped = "  stopped (Ctrl-C)" if s.get("stopped") else ""
        print(f"  {name:<8}{steps:>14}{minutes:>10}{rate:>17,.0f}{best:>8}{stopped}")
    if r["rllib"] is None:
        return
    ours, theirs = r["esnb"]["milestones"], r["rllib"]["milestones"]
    both = [mark for mark in ours if mark in theirs]
    if both:
        print("  minutes to each score both reached (agent steps in millions):")
        for mark in both:
            (s1, t1), (s2, t2) = ours[mark], theirs[mark]
            print(f"    {int(mark):+d}: esnb {t1 / 60:.1f} ({s1 / 1e6:.2f}M), RLlib {t2 / 60:.1f} "
                  f"({s2 / 1e6:.2f}M), RLlib / esnb {t2 / t1:.2f}")


def figure(r: dict) -> str:
    """Both sides' training scores as an SVG (the results page's plot style): against agent
    steps and against minutes, each over the range both curves cover, the score dashed."""
    import numpy as np

    from esnb.bench.results import svg

    sides = [(name, np.array([(s, t / 60, m) for s, t, m in r[name]["curve"] if m is not None]))
             for name in ("esnb", "rllib") if r.get(name)]
    sides = [(name, c) for name, c in sides if len(c) > 1]
    panels = []
    for col, label in ((0, "agent steps"), (1, "minutes")):
        lo = max(c[0, col] for _, c in sides) if sides else 0.0
        hi = min(c[-1, col] for _, c in sides) if sides else 0.0
        x = np.linspace(lo, hi, svg.GRID) if hi > lo else np.zeros(0)
        series = []
        for name, c in sides:
            y = np.interp(x, c[:, col], c[:, 2])
            series.append(("RLlib" if name == "rllib" else name, y, y, y))
        panels.append(svg.lines(x, series, f"{r['env']}: training score", label,
                                f"mean of the last {r.get('window', WINDOW)} games",
                                offset=col * svg.WIDTH, reference=r["score"]))
    return svg.figure(panels, f"esnb and RLlib IMPALA, each alone on this machine; dashed: "
                              f"{r['score']:+g}")

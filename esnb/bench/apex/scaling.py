"""Ape-X with more and more actors: throughput and learning speed against the number of actors
(Horgan et al. 2018, "Distributed Prioritized Experience Replay", Figures 4 and 13).

Every run is Ape-X DQN on CartPole-v1 with the same learner, replay and wall-clock budget; only
``num_actors`` changes (and with it the spread of the actors' epsilons,
``0.4^(1 + 7 i/(N-1))``). Reported per run: actor env steps/s, replay inserts/s, learner
updates/s and sampled transitions/s (medians over the rows where the learner learned), the
learner's updates per second of its own CPU time, the greedy evaluations, and the wall time,
updates and env steps at the first evaluation that reached ``target``.

In esnb the N actors of a run are environments stepped in lock-step by one actor loop per
worker (one batched forward pass for all of a loop's actors), not N machines: on a laptop the
cores, not N, bound the throughput. The paper's actors are one CPU core each (~139 frames/s
each, linear in N: its Figure 13). :data:`PAPER` holds the figures the paper's text gives.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import pandas as pd

from esnb.bench.common.flags import add_json, add_settings, chosen, given_settings
from esnb.bench.common.report import write_json
from esnb.runners.apex.config import ApeXDQNConfig
from esnb.settings import integer, number

#: what the paper's text reports (Atari unless said otherwise)
PAPER = {
    # "approximately 139 frames per second (FPS) each, for a total of 50K FPS" (360 actors)
    "frames_per_s_per_actor": 139.0,
    "action_repeat": 4,
    # (actors, total env frames/s): 360 actors in the main runs, 256 in the replay-capacity runs
    "frames_per_s": ((256, 37_000.0), (360, 50_000.0)),
    # the learner: 19 batches of 512 per second = 9.7K transitions/s, whatever the actors
    "learner_batches_per_s": 19.0,
    "learner_transitions_per_s": 9_700.0,
    # Figure 4: 8..256 actors, 35 h each on 6 games; "performance consistently improved"
    "scaling_actors": (8, 16, 32, 64, 128, 256),
}

#: the sweep's own values (the runs take ApeXDQNConfig's defaults otherwise): the env is named
#: whatever the config's default, as the target is its; evaluations every 250 updates, more
#: often than the config's default, give each run's curve and time to the target
DEFAULTS = dict(env="CartPole-v1", actors=(1, 4, 16, 64), seconds=120.0, target=475.0,
                eval_interval=250, workers=2)
#: the ApeXDQNConfig settings offered as flags
FLAGS = ("seed",)


def add_arguments(p) -> None:
    p.add_argument("--actors", type=integer(1), nargs="+", default=list(DEFAULTS["actors"]),
                   help="numbers of actors, one run each")
    p.add_argument("--seconds", type=number(0, low_open=True), default=DEFAULTS["seconds"],
                   help="wall-clock budget per run")
    p.add_argument("--target", type=number(None), default=DEFAULTS["target"],
                   help="greedy evaluation return that counts as solved")
    p.add_argument("--workers", type=integer(1), default=DEFAULTS["workers"],
                   help="LocalCluster worker processes")
    add_settings(p, ApeXDQNConfig, FLAGS)
    add_json(p, "summary")


def measure(num_actors: int, client=None, budget: dict | None = None, *,
            env: str = DEFAULTS["env"], seed: int | None = None,
            target: float = DEFAULTS["target"], eval_interval: int = DEFAULTS["eval_interval"],
            eval_episodes: int | None = None, **kwargs) -> tuple[dict, pd.DataFrame]:
    """One Ape-X DQN run with ``num_actors`` actors; returns (summary, history).

    ``budget`` is passed to ``start`` (default ``{"seconds": 120}``); ``client=False`` runs
    inline (actors and learner alternate in this process: throughput figures then mean
    nothing). ``seed`` and ``eval_episodes`` None: ApeXDQNConfig's; ``kwargs``: other
    settings of :class:`esnb.ApeX`.
    """
    from esnb.runners.apex import ApeX

    budget = {"seconds": DEFAULTS["seconds"]} if budget is None else dict(budget)
    # no replay checkpoint files (nothing is resumed)
    cfg = ApeXDQNConfig.build(env=env, num_actors=int(num_actors), eval_interval=eval_interval,
                              replay_checkpoint="",
                              **chosen(seed=seed, eval_episodes=eval_episodes), **kwargs)
    runner = ApeX(config=cfg, client=client, name=f"apex-scaling-{num_actors}")
    try:
        runner.start(**budget)
        runner.wait()
        h = runner.history.copy()
    finally:
        runner.close()
    h["num_actors"] = int(num_actors)
    learning = h[~h.waiting.astype(bool)]
    evals = h[np.isfinite(h.eval_return)]
    hit = evals[evals.eval_return >= target]

    def med(col):
        return float(np.nanmedian(learning[col])) if len(learning) else float("nan")

    wall = float(h.wall_time.iloc[-1]) if len(h) else float("nan")
    summary = {
        "num_actors": int(num_actors),
        "wall_time": wall,
        "env_steps": int(runner.env_steps),
        "learner_steps": int(runner.learner_steps),
        "actor_steps_per_s": med("actor_steps_per_s"),
        "actor_steps_per_s_overall": runner.env_steps / wall if wall > 0 else float("nan"),
        "inserts_per_s": med("inserts_per_s"),
        "updates_per_s": med("updates_per_s"),
        "sampled_per_s": med("sampled_per_s"),
        "updates_per_learner_cpu_s": runner.learner_steps / max(runner.learner_cpu, 1e-9),
        "best_eval": float(evals.eval_return.max()) if len(evals) else float("nan"),
        "final_eval": float(evals.eval_return.iloc[-1]) if len(evals) else float("nan"),
        "target": float(target),
        "reached": bool(len(hit)),
        "time_to_target": float(hit.wall_time.iloc[0]) if len(hit) else float("nan"),
        "updates_to_target": int(hit.learner_steps.iloc[0]) if len(hit) else None,
        "env_steps_to_target": int(hit.env_steps.iloc[0]) if len(hit) else None,
        "replay_evicted": int(h.replay_evicted.iloc[-1]) if len(h) else 0,
        "load_average": os.getloadavg()[0],
    }
    return summary, h


def sweep(actors=DEFAULTS["actors"], client=None, budget: dict | None = None,
          progress=print, **kwargs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`measure` for every actor count, one after another on the same client.

    Returns ``(summary, curves)``: one row per run, and every run's history rows with a
    ``num_actors`` column.
    """
    rows, curves = [], []
    for n in actors:
        t0 = time.perf_counter()
        s, h = measure(n, client, budget, **kwargs)
        rows.append(s)
        curves.append(h)
        if progress is not None:
            reached = (f"reached {s['target']:.0f} after {s['time_to_target']:.0f} s"
                       if s["reached"] else f"best eval {s['best_eval']:.0f}")
            progress(f"{n:>4} actors: {s['actor_steps_per_s']:8,.0f} env steps/s, "
                     f"{s['updates_per_s']:5.1f} updates/s, {reached} "
                     f"({time.perf_counter() - t0:.0f} s, load {s['load_average']:.1f})")
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def paper_throughput(actors) -> np.ndarray:
    """The paper's data rate for ``actors`` actors (transitions/s, i.e. env steps/s: its
    frames are 4 per step), from its ~139 frames/s per actor and Figure 13's linear scaling."""
    return np.asarray(actors, dtype=float) * PAPER["frames_per_s_per_actor"] / \
        PAPER["action_repeat"]


def figure(summary: pd.DataFrame, curves: pd.DataFrame):
    """Three bokeh panels: throughput vs actors (ours and the paper's, each relative to its
    smallest run), learner updates/s vs actors, and greedy evaluation vs wall time."""
    from bokeh.layouts import gridplot
    from bokeh.palettes import Category10
    from bokeh.plotting import figure as bfig

    s = summary.sort_values("num_actors")
    n = s.num_actors.to_numpy(dtype=float)
    base = s.actor_steps_per_s.to_numpy()[0]
    scale = bfig(title="actor throughput relative to the smallest run", x_axis_type="log",
                 y_axis_type="log", width=420, height=320, x_axis_label="actors",
                 y_axis_label="env steps/s ÷ smallest run's")
    scale.line(n, n / n[0], color="gray", line_dash="dashed",
               legend_label="paper (Fig. 13): linear")
    pn = np.array([a for a, _ in PAPER["frames_per_s"]], dtype=float)
    pf = np.array([f for _, f in PAPER["frames_per_s"]])
    scale.scatter(pn / pn[0] * n[0], pf / pf[0], color="gray", size=8, marker="square",
                  legend_label="paper: 256 → 360 actors")
    scale.line(n, s.actor_steps_per_s / base, color=Category10[3][0], line_width=2,
               legend_label="esnb (2 cores)")
    scale.scatter(n, s.actor_steps_per_s / base, color=Category10[3][0], size=7)
    scale.legend.location = "top_left"

    rates = bfig(title="absolute rates", x_axis_type="log", y_axis_type="log", width=420,
                 height=320, x_axis_label="actors", y_axis_label="per second")
    for col, label, color in (("actor_steps_per_s", "esnb actor env steps/s", 0),
                              ("sampled_per_s", "esnb sampled transitions/s", 1),
                              ("updates_per_s", "esnb learner updates/s", 2)):
        rates.line(n, s[col], legend_label=label, color=Category10[3][color], line_width=2)
        rates.scatter(n, s[col], color=Category10[3][color], size=6)
    rates.line(n, paper_throughput(n), color="gray", line_dash="dashed",
               legend_label="paper: 34.75 transitions/s per actor")
    rates.line(n, np.full(len(n), PAPER["learner_transitions_per_s"]), color="gray",
               line_dash="dotted", legend_label="paper learner: 9.7K sampled/s")
    rates.legend.location = "top_left"
    rates.legend.label_text_font_size = "8pt"

    learn = bfig(title="greedy evaluation vs wall time", width=420, height=320,
                 x_axis_label="wall time (s)", y_axis_label="mean greedy return")
    palette = Category10[10]
    for k, (na, g) in enumerate(curves.groupby("num_actors")):
        ev = g[np.isfinite(g.eval_return)]
        learn.line(ev.wall_time, ev.eval_return, color=palette[k % 10], line_width=2,
                   legend_label=f"{na} actors")
    learn.legend.location = "top_left"
    return gridplot([[scale, rates, learn]])


def run(args) -> int:
    import dask

    from esnb.cluster import make_client

    t0 = time.perf_counter()
    load = os.getloadavg()[0]
    with dask.config.set({"distributed.client.direct-to-workers": True}):
        client = make_client(args.workers, dashboard_address=":0", set_as_default=False,
                             silence_logs=logging.ERROR)
    try:
        summary, _ = sweep(args.actors, client, {"seconds": args.seconds}, target=args.target,
                           **given_settings(args, ApeXDQNConfig, FLAGS))
    finally:
        client.close()
    cols = ["num_actors", "actor_steps_per_s", "inserts_per_s", "updates_per_s",
            "sampled_per_s", "updates_per_learner_cpu_s", "best_eval", "time_to_target",
            "updates_to_target"]
    print()
    print(summary[cols].round(1).to_string(index=False))
    print(f"  ({time.perf_counter() - t0:.0f} s; load average {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f})")
    if args.json:
        write_json(args.json, summary.to_dict("records"))
    return 0

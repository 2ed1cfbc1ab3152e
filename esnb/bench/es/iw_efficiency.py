"""ES vs IW-ES sample efficiency at a low and a high learning rate (IW-ES Figure 1).

The paper's Figure 1 in small.
Variants K = 0 (plain OpenAI-ES), 2, 4 and "auto" (adaptive K, ESS/n >= threshold), at two
learning rates, several seeds each, on one MuJoCo env with fixed-length episodes. Every run is
one Dask task (inline in its worker), so runs go side by side on all cores. Reported, as means
over seeds with Student-t 95% intervals: final noise-free return (and the seeds' std) and the
mean training return over the last 20% of the budget; and a bokeh HTML of return vs env steps
and vs wall time.

The paper used lr = 1e-4, where IW helped, and 1e-2, where it hurt. At laptop budgets 1e-4
barely moves theta, so the default low rate here is 1e-3 (say so when quoting).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from esnb.bench.common.flags import add_settings, chosen, given_settings
from esnb.bench.common.report import write_json
from esnb.runners.es.config import ESConfig
from esnb.settings import integer, number

#: the ESConfig settings offered as flags
FLAGS = ("env", "population", "sigma")
#: the benchmark's env, not ESConfig's: the paper's Figure 1 is on MuJoCo, whose fixed-length
#: episodes make env steps a fair budget
ENV = "HalfCheetah-v5"
#: noise-free episodes per evaluation of a curve, fewer than ESConfig's: the curves are means over
#: seeds, and the final evaluation has 10 episodes of its own
EVAL_EPISODES = 3


def add_arguments(p) -> None:
    add_settings(p, ESConfig, FLAGS, env=ENV)
    p.add_argument("--steps", type=number(0, low_open=True), default=1_000_000,
                   help="env steps per run")
    p.add_argument("--lrs", type=number(0, low_open=True), nargs="+", default=[1e-3, 1e-2],
                   help="learning rates, a low and a high one")
    p.add_argument("--ks", nargs="+", default=["0", "2", "4", "auto"],
                   help="IW updates per batch to compare (0: plain ES; auto: adaptive)")
    p.add_argument("--seeds", type=integer(1), default=3, help="seeds per (lr, K)")
    p.add_argument("--workers", type=integer(1), default=2, help="LocalCluster worker processes")
    p.add_argument("--out", default="runs/iw-efficiency", help="folder for the plot and data")


def configs(env, steps, lrs, ks, seeds, population=None, sigma=None) -> list[dict]:
    """One :func:`esnb.runners.es.train_es` config per (lr, K, seed): ES settings (``population``
    and ``sigma`` None: ESConfig's) with the budget and the final evaluation."""
    out = []
    for lr in lrs:
        for k in ks:
            for seed in range(seeds):
                out.append(dict(env=env, **chosen(population=population, sigma=sigma), lr=lr,
                                seed=seed, iw_k=k if k == "auto" else int(k),
                                eval_episodes=EVAL_EPISODES, budget={"env_steps": steps},
                                final_eval=10, name=f"iw-eff-{k}-{lr:g}-{seed}"))
    return out


def summarise(runs: list[dict], cfgs: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    curves, finals = [], []
    for cfg, res in zip(cfgs, runs):
        h = pd.DataFrame(res["history"])
        h["variant"], h["lr"], h["seed"] = f"K={cfg['iw_k']}", cfg["lr"], cfg["seed"]
        curves.append(h)
        tail = h[h.env_steps >= 0.8 * h.env_steps.max()]
        finals.append({"variant": f"K={cfg['iw_k']}", "lr": cfg["lr"], "seed": cfg["seed"],
                       "final_eval": float(np.mean(res["final_eval"])),
                       "train_return_last20": float(tail.return_mean.mean()),
                       "iw_updates_per_batch": float(h.iw_updates.iloc[1:].mean()),
                       "wall_time": float(h.wall_time.iloc[-1])})
    return pd.concat(curves, ignore_index=True), pd.DataFrame(finals)


#: finals' columns -> the table's (the names summary.json has always had)
_TABLE_COLUMNS = {"final_eval": "final_eval", "train_return_last20": "train_last20",
                  "iw_updates_per_batch": "iw_updates", "wall_time": "wall_time"}


def final_table(finals: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """One row per (lr, variant): ``seeds``, and for ``final_eval``, ``train_last20``,
    ``iw_updates`` and ``wall_time`` the mean over seeds with its Student-t 95% interval
    (``<column>_lo``, ``<column>_hi``; NaN with one seed: :func:`esnb.runners.sweep.mean_ci`),
    plus ``final_eval_std`` (the seeds' std). ``rng`` draws the resamples: seed it."""
    from esnb.runners.sweep import seed_table

    frame = finals.rename(columns=_TABLE_COLUMNS)
    table = seed_table(frame, ["lr", "variant"], list(_TABLE_COLUMNS.values()), rng)
    std = frame.groupby(["lr", "variant"], sort=True).final_eval.std().to_numpy()
    table.insert(table.columns.get_loc("final_eval_hi") + 1, "final_eval_std", std)
    return table


def format_final_table(table: pd.DataFrame) -> str:
    """:func:`final_table` as printed text: ``mean [low, high]`` per cell."""
    from esnb.runners.sweep import ci_column

    text = table[["lr", "variant", "seeds"]].copy()
    for column in _TABLE_COLUMNS.values():
        text[column] = ci_column(table, column, 2 if column == "iw_updates" else 1)
        if column == "final_eval":
            text["final_eval_std"] = table.final_eval_std.round(1)
    return text.to_string(index=False)


def plot(curves: pd.DataFrame, path: Path, title: str) -> None:
    """Write the figure (return vs env steps and vs wall time, a row per learning rate)."""
    from bokeh.io import save

    from esnb.bench.es.iw_paper import iw_curves_figure

    save(iw_curves_figure(curves), filename=str(path), title=title, resources="inline")


def run(args) -> int:
    from esnb.runners.es import train_es
    from esnb.runners.executor import session
    from esnb.runners.sweep import map_runs

    t0 = time.perf_counter()
    es = ESConfig.build(**given_settings(args, ESConfig, FLAGS))
    cfgs = configs(es.env, args.steps, args.lrs, args.ks, args.seeds, es.population, es.sigma)
    with session(args.workers) as executor:
        runs = map_runs(train_es, cfgs, executor, desc="iw-efficiency runs")
    curves, finals = summarise(runs, cfgs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    curves.to_csv(out / "curves.csv", index=False)
    finals.to_csv(out / "finals.csv", index=False)
    plot(curves, out / "iw_efficiency.html", f"IW-ES efficiency on {es.env}")
    table = final_table(finals, np.random.default_rng(0))
    elapsed = time.perf_counter() - t0
    print()
    print(f"iw-efficiency on {es.env}: {args.steps:,.0f} env steps per run, population "
          f"{es.population}, sigma {es.sigma}, {args.seeds} seeds, {len(cfgs)} runs on "
          f"{args.workers} workers in {elapsed / 60:.1f} min")
    print("means over seeds [Student-t 95% interval]")
    print(format_final_table(table))
    print(f"plot: {out / 'iw_efficiency.html'}")
    write_json(str(out / "summary.json"),
               {"elapsed_s": elapsed, "table": table.to_dict("records")})
    return 0

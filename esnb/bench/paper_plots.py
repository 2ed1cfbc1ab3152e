"""Tables and bokeh figures for the paper-reproduction notebooks (``notebooks/``): esnb's
results next to what each paper reports.

Only presentation (and the paper's figures where no benchmark module holds them) lives here;
the runs come from the benchmark modules (:mod:`esnb.bench.impala`,
:mod:`esnb.bench.eorl_table`, :mod:`esnb.bench.iw_efficiency`, :mod:`esnb.bench.iw_overhead`,
:mod:`esnb.bench.apex_scaling`). AES-RL's tables are in :mod:`esnb.bench.aes_tables`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# -- IMPALA: V-trace against no correction under injected policy lag ----------------------------


def impala_lag_table(rows: list[dict], rng: np.random.Generator | None = None) -> pd.DataFrame:
    """Rows of :func:`esnb.bench.impala.compare` over seeds: one row per (lag, correction)
    with the greedy evaluation (``eval_mean``, the mean over seeds, with its bootstrap 95%
    interval ``eval_mean_lo``/``eval_mean_hi`` and the seeds' ``eval_seed_min``/``_max``),
    the training return of the last quarter (``train_last_quarter`` and its interval), the
    mean ``|log pi/mu|`` the learner saw, the share of clipped rho and the seconds (means over
    seeds). Intervals are NaN with one seed (:func:`esnb.runners.sweep.mean_ci`); ``rng``
    draws the resamples (default: ``np.random.default_rng(0)``)."""
    from esnb.runners.sweep import seed_table

    rng = np.random.default_rng(0) if rng is None else rng
    df = pd.DataFrame(rows).rename(columns={"train_return_last_quarter": "train_last_quarter"})
    by = ["lag", "correction"]
    t = seed_table(df, by, ["eval_mean", "train_last_quarter"], rng)
    g = df.groupby(by, sort=True)
    t.insert(t.columns.get_loc("eval_mean_hi") + 1, "eval_seed_min", g.eval_mean.min().to_numpy())
    t.insert(t.columns.get_loc("eval_seed_min") + 1, "eval_seed_max", g.eval_mean.max().to_numpy())
    t["abs_log_ratio"] = g.log_ratio_abs.mean().to_numpy()
    t["rho_clipped"] = g.rho_clipped.mean().to_numpy()
    t["seconds"] = g.seconds.mean().to_numpy()
    return t


def impala_lag_figure(rows: list[dict]):
    """Greedy evaluation and ``|log pi/mu|`` against the injected lag, V-trace and no
    correction side by side (one dot per seed, a line through the means)."""
    from bokeh.layouts import gridplot
    from bokeh.plotting import figure

    df = pd.DataFrame(rows)
    colors = {"vtrace": "#1f77b4", "none": "#d62728"}
    labels = {"vtrace": "V-trace", "none": "no correction (rho = c = 1)"}
    ev = figure(title="greedy return after the same learner steps", width=440, height=320,
                x_axis_label="injected lag (learner versions)", y_axis_label="greedy return")
    ratio = figure(title="how far pi drifts from mu", width=440, height=320,
                   x_axis_label="injected lag (learner versions)",
                   y_axis_label="mean |log pi/mu| of trained actions", y_axis_type="log")
    for corr, g in df.groupby("correction"):
        mean = g.groupby("lag").mean(numeric_only=True)
        c = colors.get(corr, "gray")
        ev.scatter(g.lag, g.eval_mean, color=c, alpha=0.5, size=7)
        ev.line(mean.index, mean.eval_mean, color=c, line_width=2,
                legend_label=labels.get(corr, corr))
        ratio.line(mean.index, mean.log_ratio_abs, color=c, line_width=2,
                   legend_label=labels.get(corr, corr))
        ratio.scatter(g.lag, g.log_ratio_abs, color=c, alpha=0.5, size=7)
    ev.legend.location = "bottom_left"
    ratio.legend.location = "top_left"
    return gridplot([[ev, ratio]])


# -- EORL: Tables 1 and 3 -------------------------------------------------------------------------


def eorl_cells(table: pd.DataFrame, env: str) -> pd.DataFrame:
    """esnb's table (:func:`esnb.runners.eorl.table.run_table`) against the paper's values,
    one row per (environment version, algorithm): ``version``, ``algorithm``, ``ours``
    (mean over seeds of the mean return of the last 100 episodes), ``ours_lo``/``ours_hi``
    (its bootstrap 95% interval, NaN with one seed), ``paper``."""
    from esnb.bench.eorl_table import compare

    rows, _ = compare(table, env)
    out = []
    for key, cells in rows:
        if env == "bitflip":
            version = f"m={key[0]} sub={int(key[1])}"
        else:
            version = f"{key[0]}x{key[0]} v{key[1]} p={float(key[2]):g}"
        for algorithm, (ours, paper, lo, hi) in cells.items():
            out.append({"version": version, "algorithm": algorithm, "ours": ours,
                        "ours_lo": lo, "ours_hi": hi,
                        "paper": np.nan if paper is None else paper})
    return pd.DataFrame(out)


def eorl_averages(cells: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm: the average over environment versions of ours and the paper's, and
    how many versions each is within 1.0 of the other."""
    g = cells.assign(close=(cells.ours - cells.paper).abs() <= 1.0).groupby(
        "algorithm", sort=False)
    return pd.DataFrame({"ours": g.ours.mean(), "paper": g.paper.mean(),
                         "within_1": g.close.sum().astype(int), "versions": g.size()})


def eorl_figure(cells: pd.DataFrame, title: str = ""):
    """Left: every cell, ours against the paper's (the diagonal is agreement). Right: the
    average over versions per algorithm, ours and the paper's side by side."""
    from bokeh.layouts import gridplot
    from bokeh.models import ColumnDataSource, FactorRange, HoverTool
    from bokeh.palettes import Category10
    from bokeh.plotting import figure

    algorithms = list(dict.fromkeys(cells.algorithm))
    palette = {a: Category10[10][k % 10] for k, a in enumerate(algorithms)}
    sc = figure(title=f"{title}: every cell, ours vs paper", width=460, height=400,
                x_axis_label="paper (mean of last 100 episodes)", y_axis_label="esnb")
    sc.line([-1.2, 10], [-1.2, 10], color="gray", line_dash="dashed")
    src = ColumnDataSource(cells.assign(color=[palette[a] for a in cells.algorithm]))
    sc.scatter("paper", "ours", color="color", size=7, alpha=0.7, source=src)
    sc.add_tools(HoverTool(tooltips=[("version", "@version"), ("algorithm", "@algorithm"),
                                     ("ours", "@ours{0.00}"), ("paper", "@paper{0.00}")]))
    avg = eorl_averages(cells)
    factors = [(a, who) for a in algorithms for who in ("paper", "esnb")]
    values = [avg.loc[a, "paper" if who == "paper" else "ours"] for a, who in factors]
    bars = figure(title=f"{title}: average over versions", x_range=FactorRange(*factors),
                  width=620, height=400, y_axis_label="average reward")
    bars.vbar(x=factors, top=values, width=0.85,
              color=["#bbbbbb" if who == "paper" else palette[a] for a, who in factors])
    bars.xaxis.major_label_orientation = 1.2
    bars.xaxis.group_label_orientation = 1.2
    return gridplot([[sc, bars]])


# -- IW-ES: Figures 1 and 3 -----------------------------------------------------------------------


def iw_curves_figure(curves: pd.DataFrame):
    """Figure 1 / 4 of IW-ES: mean training return against env steps and wall time, one row
    per learning rate, one line per K (mean over seeds)."""
    from bokeh.layouts import gridplot
    from bokeh.palettes import Category10
    from bokeh.plotting import figure

    figs = []
    for lr in sorted(curves.lr.unique()):
        row = []
        for x, label in (("env_steps", "env steps"), ("wall_time", "wall time (s)")):
            fig = figure(title=f"lr = {lr:g}: return vs {label}", width=440, height=300,
                         x_axis_label=label, y_axis_label="mean training return")
            sub = curves[curves.lr == lr]
            for color, (variant, g) in zip(Category10[10], sub.groupby("variant")):
                mean = g.groupby("generation")[[x, "return_mean"]].mean()
                fig.line(mean[x], mean.return_mean, legend_label=variant, color=color,
                         line_width=2)
            fig.legend.location = "top_left"
            row.append(fig)
        figs.append(row)
    return gridplot(figs)


def iw_overhead_figure(rows: list[dict]):
    """Figure 3 of IW-ES: time per iteration / plain ES's against K, one line per model
    size (the paper's Figure 3 has the same axes; its values are only in the image)."""
    from bokeh.palettes import Category10
    from bokeh.plotting import figure

    df = pd.DataFrame(rows)
    fig = figure(title="time per iteration relative to ES (K = 0)", width=520, height=340,
                 x_axis_label="K (importance-weighted updates per batch)",
                 y_axis_label="time per iteration / ES's")
    for color, (hidden, g) in zip(Category10[10], df.groupby("hidden")):
        fig.line(g.k, g.ratio, color=color, line_width=2,
                 legend_label=f"2x{hidden} ({int(g.params.iloc[0]):,} params)")
        fig.scatter(g.k, g.ratio, color=color, size=7)
    fig.line([df.k.min(), df.k.max()], [1, 1], color="gray", line_dash="dashed")
    fig.legend.location = "top_left"
    return fig


# -- plain-language verdicts for the other notebooks ----------------------------------------------


def _yes(ok: bool, agree: bool = True) -> str:
    return ("Agrees." if ok else "Disagrees.") if agree else ("yes" if ok else "no")


def impala_verdicts(table: pd.DataFrame) -> list[str]:
    """IMPALA's claim (V-trace matters more the more off-policy the data) against
    :func:`impala_lag_table`'s rows."""
    from esnb.runners.sweep import format_ci

    t = table.set_index(["lag", "correction"])
    lags = sorted(table.lag.unique())
    out = []
    for lag in lags:
        v, n = t.loc[(lag, "vtrace")], t.loc[(lag, "none")]
        out.append(f"lag {lag}: greedy eval V-trace "
                   f"{format_ci(v.eval_mean, v.eval_mean_lo, v.eval_mean_hi)} vs no correction "
                   f"{format_ci(n.eval_mean, n.eval_mean_lo, n.eval_mean_hi)} (mean [bootstrap "
                   f"95% interval] over seeds); |log pi/mu| {v.abs_log_ratio:.3f} vs "
                   f"{n.abs_log_ratio:.3f}")
    gap = [t.loc[(lag, "vtrace")].eval_mean - t.loc[(lag, "none")].eval_mean for lag in lags]
    out.append(f"V-trace's advantage (eval) from lag {lags[0]} to {lags[-1]}: {gap[0]:+.1f} -> "
               f"{gap[-1]:+.1f}. The paper: the advantage grows with off-policyness. "
               + _yes(gap[-1] > gap[0] and gap[-1] > 0))
    drift = (t.loc[(lags[-1], "none")].abs_log_ratio, t.loc[(lags[-1], "vtrace")].abs_log_ratio)
    out.append(f"At lag {lags[-1]} the learner drifts further from the behaviour policy without "
               f"correction ({drift[0]:.3f} vs {drift[1]:.3f}): "
               + ("yes." if drift[0] > drift[1] else "no."))
    return out


def eorl_verdicts(cells: pd.DataFrame) -> list[str]:
    """EORL's claims (every EORL variant above the baselines on average; EORL-FIX above VAN)
    against :func:`eorl_cells`, and how many cells are within 1.0 of the paper's."""
    avg = eorl_averages(cells)
    evo = [a for a in avg.index if a.startswith("EORL") and a != "EORL-FIX"]
    base = [a for a in avg.index if a in ("VAN", "CER", "HER", "PER", "CBE")]
    out = []
    for who in ("paper", "ours"):
        if evo and base:
            lo, hi = avg.loc[evo, who].min(), avg.loc[base, who].max()
            out.append(f"{who}: every EORL variant (operators on) above every single-DQN "
                       f"baseline ({', '.join(base)}) on average (lowest EORL {lo:.2f}, best "
                       f"baseline {hi:.2f}): {_yes(lo > hi, False)}")
        if {"EORL-FIX", "VAN"} <= set(avg.index):
            out.append(f"{who}: EORL-FIX above VAN ({avg.loc['EORL-FIX', who]:.2f} vs "
                       f"{avg.loc['VAN', who]:.2f}): "
                       f"{_yes(avg.loc['EORL-FIX', who] > avg.loc['VAN', who], False)}")
    close = int(((cells.ours - cells.paper).abs() <= 1.0).sum())
    out.append(f"cells within 1.0 of the paper's value: {close} of {len(cells)}; best column "
               f"on average: ours {avg.ours.idxmax()}, paper {avg.paper.idxmax()}")
    return out


def iw_verdicts(finals: pd.DataFrame, overhead: list[dict]) -> list[str]:
    """IW-ES's claims (Figures 1, 4 and 3) against :func:`esnb.bench.iw_efficiency.summarise`
    and :func:`esnb.bench.iw_overhead.measure`."""
    out = []
    m = finals.groupby(["lr", "variant"]).final_eval.mean()
    lrs = sorted(finals.lr.unique())
    gains = {}
    for lr in lrs:
        base = m.get((lr, "K=0"), np.nan)
        others = {v: x - base for (r, v), x in m.items() if r == lr and v != "K=0"}
        if others:
            gains[lr] = max(others.values())
            out.append(f"lr {lr:g}: best IW variant minus ES (final eval): "
                       + ", ".join(f"{v} {d:+.1f}" for v, d in others.items()))
    if len(gains) >= 1:
        out.append(f"Figure 1 (IW helps at the low rate, lr {lrs[0]:g} here, 1e-4 in the paper):"
                   f" {_yes(gains[lrs[0]] > 0)}")
    if len(gains) >= 2:
        out.append(f"Figure 4 (IW helps less at the high rate, lr {lrs[-1]:g}): "
                   f"{_yes(gains[lrs[-1]] < gains[lrs[0]])}")
    df = pd.DataFrame(overhead)
    kmax = df.k.max()
    grows_k = all(np.all(np.diff(g.sort_values("k").ratio) > -0.02)
                  for _, g in df.groupby("hidden"))
    out.append(f"Figure 3 (cost grows with K, within 2% noise): {_yes(grows_k)}")
    at_max = df[df.k == kmax].sort_values("params")
    if len(at_max) > 1:
        grows_d = bool(np.all(np.diff(at_max.ratio) > 0))
        out.append(f"Figure 3 (cost at K={kmax} grows with model size: "
                   + ", ".join(f"{p:,} params {r:.2f}x" for p, r in zip(at_max.params,
                                                                       at_max.ratio))
                   + f"): {_yes(grows_d)}")
    return out


def apex_verdicts(summary: pd.DataFrame) -> list[str]:
    """Ape-X's claims (data rate linear in the actors; learning better with more actors)
    against :func:`esnb.bench.apex_scaling.sweep`'s summary."""
    s = summary.sort_values("num_actors")
    n0, n1 = s.num_actors.iloc[0], s.num_actors.iloc[-1]
    r = s.actor_steps_per_s.iloc[-1] / s.actor_steps_per_s.iloc[0]
    out = [f"throughput from {n0} to {n1} actors: x{r:.2f} (linear, the paper's Figure 13: "
           f"x{n1 / n0:.0f}). " + ("Agrees." if r >= 0.8 * n1 / n0 else
                                   "Disagrees (the paper's actors have a core each; here "
                                   "they share the machine's).")]
    best = s.best_eval.to_numpy()
    up = bool(np.all(np.diff(best) >= 0) and best[-1] > best[0])
    out.append("best greedy evaluation by actors: " + ", ".join(
        f"{a}: {b:.0f}" for a, b in zip(s.num_actors, best))
        + f". Figure 4 (more actors, better learning): {_yes(up)}")
    return out

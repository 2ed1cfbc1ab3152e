"""IMPALA's claim next to esnb's runs (``notebooks/impala_vtrace_lag.ipynb``): V-trace against
no correction under injected policy lag, as a table over seeds, a figure and plain-language
verdicts. The runs come from :func:`esnb.bench.impala.learning.compare`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from esnb.bench.common.report import verdict


def impala_lag_table(rows: list[dict], rng: np.random.Generator | None = None) -> pd.DataFrame:
    """Rows of :func:`esnb.bench.impala.learning.compare` over seeds: one row per (lag, correction)
    with the greedy evaluation (``eval_mean``, the mean over seeds, with its Student-t 95%
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
                   f"{format_ci(n.eval_mean, n.eval_mean_lo, n.eval_mean_hi)} (mean [Student-t "
                   f"95% interval] over seeds); |log pi/mu| {v.abs_log_ratio:.3f} vs "
                   f"{n.abs_log_ratio:.3f}")
    gap = [t.loc[(lag, "vtrace")].eval_mean - t.loc[(lag, "none")].eval_mean for lag in lags]
    out.append(f"V-trace's advantage (eval) from lag {lags[0]} to {lags[-1]}: {gap[0]:+.1f} -> "
               f"{gap[-1]:+.1f}. The paper: the advantage grows with off-policyness. "
               + verdict(gap[-1] > gap[0] and gap[-1] > 0))
    drift = (t.loc[(lags[-1], "none")].abs_log_ratio, t.loc[(lags[-1], "vtrace")].abs_log_ratio)
    out.append(f"At lag {lags[-1]} the learner drifts further from the behaviour policy without "
               f"correction ({drift[0]:.3f} vs {drift[1]:.3f}): "
               + ("yes." if drift[0] > drift[1] else "no."))
    return out

"""IW-ES's Figures 1, 3 and 4 (Campos et al. 2018) next to esnb's runs
(``notebooks/iwes_figures.ipynb``): learning curves per learning rate, the cost per iteration
against K, and plain-language verdicts. The runs come from :mod:`esnb.bench.es.iw_efficiency`
and :mod:`esnb.bench.es.iw_overhead`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from esnb.bench.common.report import verdict


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


def iw_verdicts(finals: pd.DataFrame, overhead: list[dict]) -> list[str]:
    """IW-ES's claims (Figures 1, 4 and 3) against :func:`esnb.bench.es.iw_efficiency.summarise`
    and :func:`esnb.bench.es.iw_overhead.measure`."""
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
                   f" {verdict(gains[lrs[0]] > 0)}")
    if len(gains) >= 2:
        out.append(f"Figure 4 (IW helps less at the high rate, lr {lrs[-1]:g}): "
                   f"{verdict(gains[lrs[-1]] < gains[lrs[0]])}")
    df = pd.DataFrame(overhead)
    kmax = df.k.max()
    grows_k = all(np.all(np.diff(g.sort_values("k").ratio) > -0.02)
                  for _, g in df.groupby("hidden"))
    out.append(f"Figure 3 (cost grows with K, within 2% noise): {verdict(grows_k)}")
    at_max = df[df.k == kmax].sort_values("params")
    if len(at_max) > 1:
        grows_d = bool(np.all(np.diff(at_max.ratio) > 0))
        out.append(f"Figure 3 (cost at K={kmax} grows with model size: "
                   + ", ".join(f"{p:,} params {r:.2f}x" for p, r in zip(at_max.params,
                                                                       at_max.ratio))
                   + f"): {verdict(grows_d)}")
    return out

"""EORL's Tables 1 and 3 (Khadilkar 2023) next to esnb's runs (``notebooks/eorl_tables.ipynb``):
every cell against the paper's, the averages per algorithm, a figure and plain-language
verdicts. The runs and the paper's numbers are :mod:`esnb.bench.eorl.tables`'s."""

from __future__ import annotations

import numpy as np
import pandas as pd

from esnb.bench.common.report import verdict


def eorl_cells(table: pd.DataFrame, env: str) -> pd.DataFrame:
    """esnb's table (:func:`esnb.runners.eorl.table.run_table`) against the paper's values,
    one row per (environment version, algorithm): ``version``, ``algorithm``, ``ours``
    (mean over seeds of the mean return of the last 100 episodes), ``ours_lo``/``ours_hi``
    (its Student-t 95% interval, NaN with one seed), ``paper``."""
    from esnb.bench.eorl.tables import compare

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
                       f"baseline {hi:.2f}): {verdict(lo > hi, False)}")
        if {"EORL-FIX", "VAN"} <= set(avg.index):
            out.append(f"{who}: EORL-FIX above VAN ({avg.loc['EORL-FIX', who]:.2f} vs "
                       f"{avg.loc['VAN', who]:.2f}): "
                       f"{verdict(avg.loc['EORL-FIX', who] > avg.loc['VAN', who], False)}")
    close = int(((cells.ours - cells.paper).abs() <= 1.0).sum())
    out.append(f"cells within 1.0 of the paper's value: {close} of {len(cells)}; best column "
               f"on average: ours {avg.ours.idxmax()}, paper {avg.paper.idxmax()}")
    return out

"""AES-RL's Tables 1 and 2 (Lee et al. 2020) next to esnb's runs: the paper's numbers, the
tables, figures and plain-language verdicts of ``notebooks/aesrl_tables.ipynb``. The runs come
from :mod:`esnb.bench.aes.wall_time` and :mod:`esnb.bench.aes.rules`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Lee et al. 2020, Table 1 and Appendix F's Table 10: minutes for the same 1M env steps
#: (24 CPU cores, 6 GPUs). CEM-RL serial = 1 worker, P-CEM-RL = 5 workers, AES-RL by workers.
AES_PAPER_MINUTES = {
    "HalfCheetah": {"CEM-RL serial": 467.17, "P-CEM-RL": 187.42, "AES-RL": dict(zip(
        range(2, 10), (225.63, 136.32, 103.15, 83.43, 72.38, 65.52, 58.88, 54.47)))},
    "Walker2d": {"CEM-RL serial": 487.25, "P-CEM-RL": 205.17, "AES-RL": dict(zip(
        range(2, 10), (275.90, 163.10, 131.18, 105.42, 97.12, 84.23, 81.02, 77.33)))},
    "Hopper": {"CEM-RL serial": 504.63, "P-CEM-RL": 188.48, "AES-RL": dict(zip(
        range(2, 10), (305.23, 199.55, 144.77, 133.23, 122.58, 97.35, 92.52, 90.75)))},
}
AES_PAPER_PCEM_WORKERS = 5

#: AES-RL's Table 2 rows: (mean rule, variance rule), in the paper's order
COMBINATIONS = [
    ("one_plus_one", "success_rule"),
    ("rank_async", "rank_window"),
    ("fixed_linear", "online_adaptive"),
    ("fixed_sigmoid", "online_adaptive"),
    ("absolute_baseline", "online_adaptive"),
    ("relative_baseline", "online_adaptive"),
    ("fixed_linear", "online_fixed"),
    ("fixed_sigmoid", "online_fixed"),
    ("absolute_baseline", "online_fixed"),
    ("relative_baseline", "online_fixed"),
]

#: Table 2 (HalfCheetah, Walker2d) and Appendix D's Table 8: final return after 1M steps, mean
#: and std over 10 seeds, in the order of :data:`COMBINATIONS`.
AES_PAPER_RULES = {
    "HalfCheetah": ((11882, 10010, 10279, 12053, 12224, 12550, 10870, 12031, 11767, 12128),
                    (385, 746, 1044, 398, 422, 187, 409, 604, 458, 821)),
    "Walker2d": ((2347, 4230, 5020, 5360, 5137, 5474, 3419, 5121, 5039, 5070),
                 (320, 254, 799, 683, 223, 223, 1676, 965, 471, 557)),
    "Hopper": ((2588, 3729, 3506, 3764, 3789, 3751, 2996, 3769, 3788, 3423),
               (748, 53, 179, 40, 26, 58, 1068, 20, 30, 626)),
    "Ant": ((5098, 3917, 3015, 5140, 3883, 5120, 3406, 5007, 4947, 4613),
            (715, 514, 1233, 546, 1047, 170, 944, 891, 543, 712)),
    "Swimmer": ((347, 59, 99, 128, 97, 161, 191, 81, 107, 120),
                (19, 8, 43, 65, 32, 100, 123, 12, 34, 63)),
    "Humanoid": ((600, 3476, 5697, 5958, 5770, 6136, 5662, 5695, 5774, 5837),
                 (35, 1980, 177, 301, 229, 444, 107, 209, 267, 239)),
}


def _paper_env(env: str) -> str:
    return env.split("-")[0].split("/")[-1]


def aes_time_table(rows: list[dict], workers: int) -> pd.DataFrame:
    """Rows of :func:`esnb.bench.aes.wall_time.measure_env` with the paper's figures beside them:
    ``paper_vs_serial`` is the paper's time / CEM-RL's for the same algorithm at the closest
    worker count it reports (``paper_workers``; P-CEM-RL only at 5)."""
    out = []
    for r in rows:
        p = AES_PAPER_MINUTES.get(_paper_env(r["env"]))
        n = 1 if r["algorithm"] == "CEM-RL serial" else workers
        row = {"env": r["env"], "algorithm": r["algorithm"], "workers": n,
               "wall_s": r["wall_time"], "vs_serial": r["vs_serial"],
               "reduction": 1 - r["vs_serial"], "env_steps": r["env_steps"],
               "critic_per_step": r["critic_per_step"], "actor_per_step": r["actor_per_step"],
               "paper_workers": np.nan, "paper_minutes": np.nan, "paper_vs_serial": np.nan}
        if p is not None:
            if r["algorithm"] == "AES-RL":
                pw = min(p["AES-RL"], key=lambda w: abs(w - workers))
                minutes = p["AES-RL"][pw]
            elif r["algorithm"] == "P-CEM-RL":
                pw, minutes = AES_PAPER_PCEM_WORKERS, p["P-CEM-RL"]
            else:
                pw, minutes = 1, p["CEM-RL serial"]
            row.update(paper_workers=pw, paper_minutes=minutes,
                       paper_vs_serial=minutes / p["CEM-RL serial"])
        out.append(row)
    df = pd.DataFrame(out)
    df["paper_reduction"] = 1 - df.paper_vs_serial
    return df


def aes_time_figure(table: pd.DataFrame, cores: int):
    """Time relative to CEM-RL serial against workers: the paper's AES-RL (Table 10) and
    P-CEM-RL lines and points, esnb's runs, and 1/cores, the floor for equal work here."""
    from bokeh.palettes import Category10
    from bokeh.plotting import figure

    fig = figure(title="wall time / CEM-RL serial's (same env-step budget)", width=820,
                 height=400, x_axis_label="workers", y_axis_label="time / CEM-RL serial")
    colors = {e: Category10[10][k] for k, e in enumerate(AES_PAPER_MINUTES)}
    for env, p in AES_PAPER_MINUTES.items():
        w = np.array(sorted(p["AES-RL"]))
        fig.line(w, [p["AES-RL"][x] / p["CEM-RL serial"] for x in w], color=colors[env],
                 alpha=0.5, line_dash="dashed", legend_label=f"paper AES-RL {env}")
        fig.scatter([AES_PAPER_PCEM_WORKERS], [p["P-CEM-RL"] / p["CEM-RL serial"]],
                    color=colors[env], alpha=0.5, marker="square", size=9,
                    legend_label=f"paper P-CEM-RL {env}")
    for env, g in table[table.algorithm != "CEM-RL serial"].groupby("env"):
        c = colors.get(_paper_env(env), "black")
        for alg, marker in (("AES-RL", "circle"), ("P-CEM-RL", "square")):
            s = g[g.algorithm == alg]
            fig.scatter(s.workers, s.vs_serial, color=c, marker=marker, size=13,
                        line_color="black", legend_label=f"esnb {alg} {env}")
    fig.line([1, 9], [1 / cores, 1 / cores], color="gray", line_dash="dotted",
             legend_label=f"1/{cores}: equal work on {cores} cores")
    fig.line([1, 9], [1, 1], color="gray")
    fig.legend.label_text_font_size = "8pt"
    fig.add_layout(fig.legend[0], "right")
    return fig


def aes_time_verdicts(table: pd.DataFrame, cores: int) -> list[str]:
    """Plain sentences: each of Table 1's claims against this run."""
    out = []
    for env, g in table.groupby("env", sort=False):
        t = g.set_index("algorithm")
        aes, pcem = t.loc["AES-RL"], t.loc["P-CEM-RL"]
        paper = (f"paper with {aes.paper_workers:.0f} workers {aes.paper_reduction:.0%}"
                 if np.isfinite(aes.paper_reduction) else "no paper figure for this env")
        out.append(f"{env}: AES-RL took {aes.vs_serial:.2f}x CEM-RL serial's time "
                   f"({aes.reduction:.0%} less; {paper}; the paper's 5-worker 74-82%). "
                   + ("Agrees in direction." if aes.reduction > 0 else
                      "Disagrees: no reduction here."))
        pp = (f"paper, 5 workers: {pcem.paper_vs_serial:.2f}x" if np.isfinite(
            pcem.paper_vs_serial) else "paper, 5 workers: 0.37-0.42x")
        out.append(f"{env}: P-CEM-RL took {pcem.vs_serial:.2f}x ({pp}). "
                   + ("Parallel beats serial here too." if pcem.vs_serial < 1 else
                      "Disagrees: parallel is not faster here."))
        faster = aes.wall_s < pcem.wall_s
        out.append(f"{env}: asynchrony {'helps' if faster else 'does not help'}: AES-RL "
                   f"{aes.wall_s:.1f} s against P-CEM-RL {pcem.wall_s:.1f} s (paper, 5 "
                   f"workers: AES-RL 11-22 points of serial's time faster). "
                   + ("Agrees." if faster else "Disagrees."))
        if aes.vs_serial < 1 / cores:
            out.append(f"{env}: AES-RL took less than 1/{cores} of serial's time, below what "
                       f"equal work allows on {cores} cores: the runs did not do the same work "
                       f"(actor steps per env step {aes.actor_per_step:.2f} vs serial's "
                       f"{t.loc['CEM-RL serial'].actor_per_step:.2f}) or serial paid overheads "
                       f"(per generation) that AES-RL does not.")
    return out


def _of_best(x: pd.Series) -> pd.Series:
    """``x / max`` when every value is positive, else ``(x - min) / (max - min)``."""
    if (x > 0).all():
        return x / x.max()
    span = x.max() - x.min()
    return (x - x.min()) / span if span > 0 else x * 0 + 1.0


def aes_rules_table(runs: list[dict], rng: np.random.Generator | None = None) -> pd.DataFrame:
    """Runs of :func:`esnb.bench.aes.rules.one_run` per combination (in the order run) with
    the paper's HalfCheetah and Walker2d means; the ``*_of_best`` columns put each on the
    scale of its table's best combination (:func:`_of_best`).

    Means over seeds come with Student-t 95% intervals (``<column>_lo``, ``<column>_hi``;
    NaN with one seed, see :func:`esnb.runners.sweep.mean_ci`): ``final_mean`` (the final
    return), ``p_mean``, ``var_final``, ``updates``, ``seconds``; ``final_std`` is the seeds'
    std. ``rng`` draws the resamples (default: ``np.random.default_rng(0)``, reproducible).
    """
    from esnb.runners.sweep import seed_table

    rng = np.random.default_rng(0) if rng is None else rng
    by = ["mean_rule", "var_rule"]
    df = pd.DataFrame(runs).rename(columns={"final_return": "final_mean"})
    t = seed_table(df, by, ["final_mean", "p_mean", "var_final", "updates", "seconds"], rng,
                   sort=False)
    t.insert(t.columns.get_loc("final_mean_hi") + 1, "final_std",
             df.groupby(by, sort=False).final_mean.std().to_numpy())
    t["esnb_of_best"] = _of_best(t.final_mean)
    for env in ("HalfCheetah", "Walker2d"):
        means = dict(zip(COMBINATIONS, AES_PAPER_RULES[env][0]))
        t[f"paper_{env}"] = [means.get((m, v), np.nan) for m, v in zip(t.mean_rule, t.var_rule)]
        t[f"paper_{env}_of_best"] = t[f"paper_{env}"] / max(means.values())
    return t


def format_rules_table(table: pd.DataFrame) -> str:
    """:func:`aes_rules_table` as printed text: the final return as ``mean [low, high]``
    (Student-t 95% interval over seeds), the seeds' std, mean p, final variance, updates."""
    from esnb.runners.sweep import format_ci

    lines = [f"  {'mean rule':<19}{'variance rule':<17}{'seeds':>6}"
             f"{'final mean [95% CI]':>26}{'std':>8}{'mean p':>8}{'final var':>11}"
             f"{'updates':>9}"]
    for _, t in table.iterrows():
        std = "-" if np.isnan(t.final_std) else f"{t.final_std:.1f}"
        lines.append(f"  {t.mean_rule:<19}{t.var_rule:<17}{t.seeds:>6}"
                     f"{format_ci(t.final_mean, t.final_mean_lo, t.final_mean_hi):>26}"
                     f"{std:>8}{t.p_mean:>8.3f}{t.var_final:>11.2e}{t.updates:>9.0f}")
    return "\n".join(lines)


_SHORT = {"one_plus_one": "(1+1)", "rank_async": "rank", "fixed_linear": "linear",
          "fixed_sigmoid": "sigmoid", "absolute_baseline": "absolute",
          "relative_baseline": "relative", "success_rule": "success", "rank_window": "window",
          "online_adaptive": "adaptive", "online_fixed": "fixed"}


def aes_rules_figure(table: pd.DataFrame):
    """Each combination's mean final return on the scale of the best combination's: the
    paper's HalfCheetah and Walker2d (Table 2) and esnb's, with whiskers at the Student-t 95%
    interval of esnb's mean over seeds (none with one seed)."""
    from bokeh.models import ColumnDataSource, FactorRange, Whisker
    from bokeh.plotting import figure

    names = [f"{_SHORT.get(m, m)} / {_SHORT.get(v, v)}"
             for m, v in zip(table.mean_rule, table.var_rule)]
    series = {"paper HalfCheetah": ("paper_HalfCheetah_of_best", "#bbbbbb"),
              "paper Walker2d": ("paper_Walker2d_of_best", "#777777"),
              "esnb": ("esnb_of_best", "#1f77b4")}
    fig = figure(title="final return on the scale of the best combination (Table 2)",
                 x_range=FactorRange(*[(n, s) for n in names for s in series]),
                 width=900, height=380, y_axis_label="fraction of the best combination")
    for s, (col, color) in series.items():
        fig.vbar(x=[(n, s) for n in names], top=table[col].to_numpy(), width=0.85,
                 color=color, legend_label=s)
    positive = (table.final_mean > 0).all()  # the scale of _of_best
    low = 0.0 if positive else table.final_mean.min()
    span = table.final_mean.max() - low
    span = span if span > 0 else 1.0
    lo = ((table.final_mean_lo - low) / span).fillna(table.esnb_of_best)  # one seed: none
    hi = ((table.final_mean_hi - low) / span).fillna(table.esnb_of_best)
    fig.add_layout(Whisker(source=ColumnDataSource(dict(
        x=[(n, "esnb") for n in names], lo=lo, hi=hi)), base="x", lower="lo", upper="hi"))
    fig.xaxis.major_label_text_font_size = "0pt"
    fig.xaxis.group_label_orientation = 0.5
    fig.y_range.start = 0
    fig.add_layout(fig.legend[0], "right")
    return fig


def aes_rules_claims(table: pd.DataFrame) -> pd.DataFrame:
    """Section 4.2's claims, checked on the paper's HalfCheetah and Walker2d columns and on
    esnb's: ``yes (k/n)`` when it holds in all n comparisons, else ``no (k/n)``; ``n/a`` when
    a combination it needs was not run."""

    ours = {(m, v): x for m, v, x in zip(table.mean_rule, table.var_rule, table.final_mean)}
    tables = {f"paper {e}": dict(zip(COMBINATIONS, AES_PAPER_RULES[e][0]))
              for e in ("HalfCheetah", "Walker2d")}
    tables["esnb"] = ours
    ad, fx = "online_adaptive", "online_fixed"
    claims = {
        "relative baseline + adaptive variance is the best": lambda t: [
            max(t, key=t.get) == ("relative_baseline", ad)] if len(t) > 1 and (
                "relative_baseline", ad) in t else [],
        "sigmoid beats linear (each variance rule)": lambda t: [
            t[("fixed_sigmoid", v)] > t[("fixed_linear", v)] for v in (ad, fx)],
        "the baselines beat the fixed ranges (each variance rule)": lambda t: [
            t[("absolute_baseline", v)] + t[("relative_baseline", v)]
            > t[("fixed_linear", v)] + t[("fixed_sigmoid", v)] for v in (ad, fx)],
        "adaptive variance beats fixed (each mean rule)": lambda t: [
            t[(m, ad)] > t[(m, fx)] for m in ("fixed_linear", "fixed_sigmoid",
                                              "absolute_baseline", "relative_baseline")],
        "rank-based (ACEM-RL) is below every baseline rule": lambda t: [
            t[(m, v)] > t[("rank_async", "rank_window")]
            for m in ("absolute_baseline", "relative_baseline") for v in (ad, fx)],
    }
    rows = []
    for claim, check in claims.items():
        row = {"claim": claim}
        for name, t in tables.items():
            try:
                res = check(t)
            except KeyError:
                res = []
            row[name] = (f"{'yes' if all(res) else 'no'} ({sum(res)}/{len(res)})" if res
                         else "n/a")
        paper = {row["paper HalfCheetah"][:3], row["paper Walker2d"][:3]}
        row["agrees"] = ("n/a" if row["esnb"] == "n/a" else "paper mixed" if len(paper) > 1
                         else "yes" if row["esnb"][:3] == paper.pop() else "no")
        rows.append(row)
    return pd.DataFrame(rows)

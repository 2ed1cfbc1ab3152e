"""EORL's tables (Khadilkar 2023, Tables 1 and 3): ours next to the paper's, many runs on Dask.

``--env bitflip`` is Table 1's setting: sizes 6-10, subgoal 0 and 1, 400 episodes, epsilon
decay 0.99. ``--env gridnav`` is a subset of Table 3: sizes 8-20; subgoal versions 0, 1, 2+ at
stochasticity 0 and 0.1 and 2- at 0 (the paper has no 2- row at 0.1); 1000 episodes (decay
0.995) for versions 0 and 1, 2500 (0.998) for 2+ and 2-. Every cell is the mean reward over the
last 100 training episodes, averaged over seeds, printed as ``ours (paper)`` with the Student-t
95% interval of ours under it (:func:`esnb.runners.sweep.mean_ci`; none with one seed).

The full tables are thousands of runs, so the default is a **reduced** setting that runs in
under an hour on the 2-core machine: all algorithms, 3 seeds, and on GridNav sizes 8 and 12.
``--full`` is the paper's setting (10 seeds; GridNav sizes 8, 12, 16, 20). ``--seeds``,
``--sizes`` and ``--algorithms`` narrow or widen either. Our CER column is esnb's reading of
its paper's abstract (see :mod:`esnb.runners.eorl.cer`).
"""

from __future__ import annotations

import os
import time

import numpy as np

from esnb.bench.common.flags import add_json
from esnb.bench.common.report import write_json
from esnb.settings import integer

#: the paper's columns
PAPER_COLUMNS = ("VAN", "CER", "HER", "PER", "CBE", "EORL-FIX", "CEM-RL", "EORL-05-00",
                 "EORL-05-05", "EORL-10-05", "EORL-ACTV")

#: Table 1: (size, subgoal) -> values in PAPER_COLUMNS order
PAPER_BITFLIP = {
    (6, 0): (7.69, 7.07, 2.19, 7.59, 4.21, 8.80, 8.68, 9.19, 9.29, 9.12, 9.14),
    (7, 0): (8.11, 6.90, -0.77, 5.62, 0.11, 7.06, 8.20, 8.90, 8.22, 8.52, 8.86),
    (8, 0): (4.78, 2.78, -0.84, 5.14, -0.95, 4.02, 3.90, 6.05, 4.78, 5.04, 4.49),
    (9, 0): (0.79, -0.86, -1.00, -0.71, -1.00, -0.93, -0.27, 0.01, 1.03, -0.92, 1.81),
    (10, 0): (-1.00, -1.00, -1.00, -0.97, -1.00, -1.00, -1.00, -1.00, -1.00, -1.00, -0.94),
    (6, 1): (6.94, 9.03, 0.33, 7.14, 0.01, 8.89, 9.12, 8.27, 6.34, 7.02, 8.81),
    (7, 1): (0.27, 1.66, -1.00, 0.96, -1.00, 1.73, 1.77, 1.88, 2.80, 1.38, 1.86),
    (8, 1): (-0.58, -0.27, -1.00, -0.30, -1.00, -0.67, -0.52, -0.41, -0.73, 0.43, -0.67),
    (9, 1): (-0.99, -0.89, -1.00, -1.00, -1.00, -0.86, -1.00, -0.86, -0.86, -1.00, -0.78),
    (10, 1): (-1.00,) * 11,
}

#: Table 3 (the rows of sizes 8-20 this benchmark covers): (size, subgoals, stochasticity)
PAPER_GRIDNAV = {
    (8, "0", 0.0): (7.64, 6.90, 9.63, 7.70, 7.93, 8.58, 9.65, 9.58, 9.75, 9.71, 9.71),
    (12, "0", 0.0): (6.42, 7.57, 7.63, 7.34, 7.18, 7.69, 9.51, 9.81, 9.70, 9.75, 9.80),
    (16, "0", 0.0): (8.71, 8.81, 9.38, 8.75, 6.46, 9.88, 9.59, 9.78, 9.86, 9.71, 9.74),
    (20, "0", 0.0): (9.80, 9.83, 8.63, 8.76, 1.14, 8.79, 9.37, 9.60, 8.65, 9.74, 9.77),
    (8, "0", 0.1): (7.03, 7.39, 7.73, 8.79, 9.30, 8.73, 9.76, 9.71, 9.81, 9.87, 9.88),
    (12, "0", 0.1): (8.60, 8.29, 9.74, 7.54, 8.13, 8.78, 9.68, 9.86, 9.82, 9.81, 9.86),
    (16, "0", 0.1): (7.70, 6.65, 9.76, 8.63, 7.17, 9.84, 9.57, 9.78, 9.86, 9.79, 9.85),
    (20, "0", 0.1): (8.40, 8.69, 7.27, 9.76, 3.57, 9.89, 9.73, 9.87, 9.81, 9.84, 9.86),
    (8, "1", 0.0): (6.59, 7.81, 9.58, 6.15, 6.44, 8.61, 9.47, 9.81, 9.70, 9.80, 9.73),
    (12, "1", 0.0): (5.80, 6.89, 6.58, 7.76, 4.85, 8.69, 8.71, 9.66, 8.74, 7.83, 9.69),
    (16, "1", 0.0): (5.81, 3.57, 6.41, 4.87, -0.75, 5.36, 6.94, 9.79, 9.60, 9.59, 7.97),
    (20, "1", 0.0): (2.29, 3.34, 3.13, 2.21, -0.99, 8.67, 9.44, 7.79, 9.59, 7.91, 6.15),
    (8, "1", 0.1): (7.68, 6.56, 8.73, 7.55, 4.96, 7.65, 9.78, 9.83, 9.76, 9.69, 9.77),
    (12, "1", 0.1): (5.08, 7.93, 8.48, 6.97, 1.36, 7.14, 9.43, 8.85, 9.25, 9.55, 8.91),
    (16, "1", 0.1): (3.85, 2.40, 6.79, 6.07, 0.91, 7.90, 8.29, 9.85, 7.91, 8.62, 7.81),
    (20, "1", 0.1): (4.50, 3.91, 2.94, 2.33, -0.87, 5.33, 8.42, 8.90, 8.75, 7.66, 5.92),
    (8, "2+", 0.0): (4.13, 6.06, 6.54, 3.10, 2.36, 8.13, 8.60, 9.50, 8.94, 8.81, 9.77),
    (12, "2+", 0.0): (3.07, 3.21, 1.04, 2.33, -0.13, 2.21, 2.45, 2.72, 3.28, 2.70, 4.26),
    (16, "2+", 0.0): (1.52, 2.22, 1.27, 1.13, -1.00, 1.42, 1.56, 1.70, 1.70, 1.67, 1.62),
    (20, "2+", 0.0): (1.24, 1.64, 1.14, 1.40, -0.82, 1.71, 1.66, 1.78, 1.72, 1.60, 1.92),
    (8, "2+", 0.1): (3.61, 6.51, 7.90, 3.67, 2.20, 6.49, 8.68, 9.83, 8.18, 8.67, 8.84),
    (12, "2+", 0.1): (0.82, 2.02, 1.32, 1.16, 0.60, 2.65, 2.56, 1.79, 1.77, 3.32, 1.84),
    (16, "2+", 0.1): (1.98, 2.15, 1.31, 1.58, -0.70, 1.79, 1.54, 1.67, 1.80, 1.64, 1.80),
    (20, "2+", 0.1): (1.53, 1.54, 0.73, 1.22, -0.62, 1.65, 1.54, 1.82, 1.63, 1.70, 1.52),
    (8, "2-", 0.0): (3.69, 5.62, 3.96, 2.19, 3.02, 5.75, 7.68, 7.97, 9.78, 9.65, 8.86),
    (12, "2-", 0.0): (0.75, 0.89, 0.38, 0.89, -0.85, 0.75, 0.87, 2.72, 0.92, 2.62, 1.79),
    (16, "2-", 0.0): (1.81, 0.51, 0.28, 0.51, -0.77, 0.93, 0.87, 0.95, 0.94, 0.95, 0.93),
    (20, "2-", 0.0): (0.74, 0.75, 0.55, 0.72, -1.00, 0.94, 0.69, 0.95, 0.94, 0.89, 0.91),
}

GRIDNAV_VERSIONS = (("0", 0.0), ("0", 0.1), ("1", 0.0), ("1", 0.1), ("2+", 0.0), ("2+", 0.1),
                    ("2-", 0.0))
GRIDNAV_EPISODES = {"0": 1000, "1": 1000, "2+": 2500, "2-": 2500}  # the paper's Table 3
REDUCED = {"seeds": 3, "bitflip_sizes": (6, 7, 8, 9, 10), "gridnav_sizes": (8, 12)}
FULL = {"seeds": 10, "bitflip_sizes": (6, 7, 8, 9, 10), "gridnav_sizes": (8, 12, 16, 20)}


def add_arguments(p) -> None:
    p.add_argument("--env", choices=("bitflip", "gridnav"), default="bitflip",
                   help="Table 1 (bitflip) or Table 3 (gridnav)")
    p.add_argument("--full", action="store_true",
                   help="the paper's setting: 10 seeds (GridNav: sizes 8-20)")
    p.add_argument("--seeds", type=integer(1), default=None,
                   help="seeds per cell, 0..N-1 (default: 3, 10 with --full)")
    p.add_argument("--sizes", type=integer(1), nargs="+", default=None,
                   help="sizes to run (default: bitflip 6-10; gridnav 8 12, with --full 8-20)")
    p.add_argument("--versions", nargs="+", default=None,
                   help="gridnav versions as SUBGOALS@STOCH, e.g. 1@0.1 2-@0 (default: every "
                        "version of the table)")
    p.add_argument("--algorithms", nargs="+", default=None,
                   help="table columns to run (default: all)")
    p.add_argument("--episodes", type=integer(1), default=None,
                   help="override the paper's episodes, for quick checks (default: the "
                        "paper's)")
    p.add_argument("--workers", type=integer(0), default=2, help="LocalCluster workers (0: inline)")
    p.add_argument("--address", default=None,
                   help="join this Dask scheduler instead (default: a LocalCluster)")
    p.add_argument("--out", default=None,
                   help="write every run (CSV) to this file (default: not written)")
    add_json(p, "summary")
    p.add_argument("--no-progress", action="store_true", help="no progress bar over runs")


def _versions(args) -> list[tuple[str, float]]:
    if not args.versions:
        return list(GRIDNAV_VERSIONS)
    out = []
    for v in args.versions:
        sub, _, stoch = v.partition("@")
        out.append((sub, float(stoch or 0.0)))
    return out


def build_specs(args) -> list:
    from esnb.runners.eorl import COLUMNS, RunSpec
    from esnb.runners.eorl.config import EpisodeConfig

    # Table 1's episodes: EORL's paper preset (its BitFlip value)
    bitflip_episodes = EpisodeConfig.preset_values("paper")["episodes"]

    setting = FULL if args.full else REDUCED
    seeds = range(args.seeds if args.seeds is not None else setting["seeds"])
    algorithms = args.algorithms or list(COLUMNS)
    for a in algorithms:
        if a not in COLUMNS:
            raise ValueError(f"unknown algorithm {a!r}; valid: {', '.join(COLUMNS)}")
    specs = []
    if args.env == "bitflip":
        for subgoal in (0, 1):
            for size in args.sizes or setting["bitflip_sizes"]:
                for a in algorithms:
                    for s in seeds:
                        specs.append(RunSpec(a, "bitflip", (("n_bits", size),
                                                            ("subgoal", bool(subgoal))),
                                             episodes=args.episodes or bitflip_episodes,
                                             seed=s))
    else:
        for sub, stoch in _versions(args):
            for size in args.sizes or setting["gridnav_sizes"]:
                for a in algorithms:
                    for s in seeds:
                        kw = (("size", size), ("subgoals", sub), ("stochasticity", stoch))
                        specs.append(RunSpec(a, "gridnav", kw, seed=s,
                                             episodes=args.episodes or GRIDNAV_EPISODES[sub]))
    return specs


def paper_value(env: str, key: tuple, algorithm: str) -> float | None:
    table = PAPER_BITFLIP if env == "bitflip" else PAPER_GRIDNAV
    row = table.get(key)
    return None if row is None else row[PAPER_COLUMNS.index(algorithm)]


def compare(table, env: str, rng: np.random.Generator | None = None):
    """Rows of (key, {algorithm: (ours, paper, ours_lo, ours_hi)}) in table order, plus the
    algorithms: ``ours`` is the mean over seeds, ``ours_lo``/``ours_hi`` its Student-t 95%
    interval (NaN with one seed: :func:`esnb.runners.sweep.mean_ci`), ``paper`` the paper's
    value or None. ``rng`` draws the resamples (default: ``np.random.default_rng(0)``)."""
    from esnb.runners.eorl import COLUMNS
    from esnb.runners.sweep import seed_table

    if env == "bitflip":
        keys = ["n_bits", "subgoal"]
    else:
        keys = ["size", "subgoals", "stochasticity"]
    rng = np.random.default_rng(0) if rng is None else rng
    stats = seed_table(table, keys + ["algorithm"], ["last100"], rng, sort=False)
    stats = {tuple(r[:-3]): tuple(r[-3:]) for r in stats[keys + ["algorithm", "last100",
                                                                  "last100_lo", "last100_hi"]]
             .itertuples(index=False)}
    algorithms = [a for a in COLUMNS if a in set(table.algorithm)]
    rows = []
    for key in dict.fromkeys(tuple(k) for k in table[keys].itertuples(index=False)):
        cells = {}
        for a in algorithms:
            ours, lo, hi = stats.get((*key, a), (np.nan,) * 3)
            pkey = (int(key[0]), int(key[1])) if env == "bitflip" else (
                int(key[0]), key[1], float(key[2]))
            cells[a] = (float(ours), paper_value(env, pkey, a), float(lo), float(hi))
        rows.append((key, cells))
    return rows, algorithms


def _best_counts(rows, algorithms, which: int) -> dict[str, float]:
    counts = dict.fromkeys(algorithms, 0.0)
    for _, cells in rows:
        vals = {a: cells[a][which] for a in algorithms if cells[a][which] is not None
                and np.isfinite(cells[a][which])}
        if not vals:
            continue
        top = max(vals.values())
        winners = [a for a, v in vals.items() if np.isclose(v, top, atol=5e-3)]
        for a in winners:
            counts[a] += 1.0 / len(winners)
    return counts


def format_table(rows, algorithms, env: str) -> str:
    """``ours (paper)`` per cell, the mean over seeds; under each row, the Student-t 95%
    intervals of ours (left out when every cell has one seed, said in the last line)."""
    head = "size sub" if env == "bitflip" else "size sub  p  "
    lines = [head + "".join(f"{a:>17}" for a in algorithms)]
    spread = False
    for key, cells in rows:
        label = (f"{key[0]:>4} {int(key[1]):>3}" if env == "bitflip"
                 else f"{key[0]:>4} {key[1]:>3} {float(key[2]):.1f}")
        parts, intervals = [], []
        for a in algorithms:
            ours, paper, lo, hi = cells[a]
            parts.append(f"{ours:6.2f} ({paper:5.2f})" if paper is not None else f"{ours:6.2f}")
            ok = np.isfinite(lo) and np.isfinite(hi)
            intervals.append(f"[{lo:.2f}, {hi:.2f}]" if ok else "[1 seed]")
            spread |= bool(ok)
        lines.append(label + "".join(f"{p:>17}" for p in parts))
        lines.append(" " * len(label) + "".join(f"{p:>17}" for p in intervals))
    if not spread:
        lines = [line for k, line in enumerate(lines) if k == 0 or k % 2]
    avg_ours = {a: np.nanmean([c[a][0] for _, c in rows]) for a in algorithms}
    avg_paper = {a: np.mean([c[a][1] for _, c in rows if c[a][1] is not None])
                 if any(c[a][1] is not None for _, c in rows) else np.nan for a in algorithms}
    pad = " " * (len(lines[0]) - len("".join(f"{a:>17}" for a in algorithms)))
    lines.append("average" + pad[7:] + "".join(f"{f'{avg_ours[a]:6.2f} ({avg_paper[a]:5.2f})':>17}"
                                              for a in algorithms))
    best_ours, best_paper = _best_counts(rows, algorithms, 0), _best_counts(rows, algorithms, 1)
    lines.append("best" + pad[4:] + "".join(
        f"{f'{best_ours[a]:4.1f} ({best_paper[a]:4.1f})':>17}" for a in algorithms))
    lines.append("under each row: Student-t 95% interval of ours over seeds" if spread else
                 "one seed per cell: no intervals")
    return "\n".join(lines)


def run(args) -> int:
    import torch

    from esnb.runners.eorl.table import run_table
    from esnb.runners.executor import session

    specs = build_specs(args)
    setting = "full" if args.full else "reduced"
    print(f"eorl-table --env {args.env} ({setting}): {len(specs)} runs "
          f"({len(set(s.algorithm for s in specs))} algorithms x "
          f"{len(set((s.env_kwargs, s.episodes) for s in specs))} env versions x "
          f"{len(set(s.seed for s in specs))} seeds)")
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    torch.set_num_threads(1)  # runs inline here take one core each, as on workers
    save = None
    if args.out:
        # each run is appended as it finishes: a long table is not lost to an interruption
        import csv

        handle = open(args.out, "w", newline="")  # closed in the finally below
        writer = None

        def save(k, row):
            nonlocal writer
            row = {key: v for key, v in row.items() if key != "returns"}
            if writer is None:
                writer = csv.DictWriter(handle, fieldnames=list(row))
                writer.writeheader()
            writer.writerow(row)
            handle.flush()
    try:
        with session(args.workers, args.address) as executor:
            table = run_table(specs, client=executor, progress=not args.no_progress,
                              desc=f"eorl-table {args.env}", on_result=save)
    finally:
        if args.out:
            handle.close()
    elapsed = time.perf_counter() - t0
    load1 = os.getloadavg()
    rows, algorithms = compare(table, args.env, np.random.default_rng(0))
    print()
    print("mean reward over the last 100 training episodes, mean over seeds: ours (paper)")
    print(format_table(rows, algorithms, args.env))
    cpu = table.seconds.sum()
    print(f"\n{len(specs)} runs in {elapsed:,.0f} s wall ({cpu:,.0f} s of run time, "
          f"{cpu / len(specs):.1f} s per run); load average {load0[0]:.1f} at the start, "
          f"{load1[0]:.1f} at the end")
    per_algo = table.groupby("algorithm")["seconds"].mean()
    print("mean seconds per run: " + ", ".join(f"{a} {per_algo[a]:.1f}" for a in algorithms))
    if args.out:
        print(f"runs written to {args.out} (in the order they finished)")
    if args.json:
        doc = {"env": args.env, "setting": setting, "runs": len(specs), "seconds": elapsed,
               "rows": [{"key": [str(k) for k in key],
                         "cells": {a: {"ours": v[0], "paper": v[1], "ours_lo": v[2],
                                       "ours_hi": v[3]} for a, v in cells.items()}}
                        for key, cells in rows]}
        write_json(args.json, doc)
    return 0

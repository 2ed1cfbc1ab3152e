"""The run path against another tree of esnb: the same ``esnb train`` commands, this tree's and
DIR's side by side, each figure's two medians and their ratio (this tree / DIR), and a verdict.

DIR is another checkout of esnb, e.g. ``git worktree add /tmp/esnb-before 841b4ad`` (the tree
before the run path moved into ``esnb/session``). Each run is a fresh ``python -m esnb.cli
train ...`` whose interpreter, Dask workers and subprocesses import the asked tree
(``PYTHONPATH``; checked in each, refused in one line otherwise: ``run_path/trees.py``), with
its run folder in a temporary directory. Rounds alternate which tree goes first (A B, B A, ...),
and within a round both trees run each case back to back, so both meet the same machine. The
cases, and how each figure is read from a run's own history: ``run_path/cases.py``. The
verdict: not slower when every figure's median is within ``--tolerance`` of DIR's or better (a
rate's ratio at least 1 - tolerance, a time's at most 1 + tolerance).
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import textwrap
from pathlib import Path

from esnb.bench.common.flags import add_json
from esnb.bench.common.report import Session
from esnb.bench.run_path.cases import CASES, FULL, HOW, QUICK, Budgets, TooFewRows
from esnb.bench.run_path.trees import check_tree, commit, run_once, this_tree
from esnb.settings import integer, number

#: the two trees' names in the report and the JSON
THIS, OTHER = "this", "DIR"


def add_arguments(p) -> None:
    p.add_argument("--against", required=True, metavar="DIR",
                   help="another checkout of esnb to compare this tree with, e.g. one made "
                        "with git worktree add /tmp/esnb-before 841b4ad [default: none, it "
                        "must be given]")
    p.add_argument("--rounds", type=integer(1), default=4,
                   help="rounds; each runs every case on both trees, the first tree "
                        "alternating (A B, B A, ...): an even number balances the order "
                        "[default: 4]")
    p.add_argument("--quick", action="store_true",
                   help="tiny runs (for the test): population 8 and 100-step episodes for "
                        f"ES, {QUICK.generations} generations, {QUICK.apex_learner_steps} and "
                        f"{QUICK.impala_learner_steps} learner steps")
    p.add_argument("--cases", nargs="+", choices=list(CASES),
                   default=[c for c, case in CASES.items() if case.default],
                   help="the cases to run [default: all but impala-pong]")
    p.add_argument("--workers", type=integer(1), default=2,
                   help="LocalCluster workers of each run [default: 2]")
    p.add_argument("--generations", type=integer(2), default=None,
                   help=f"ES end to end: generations per run [default: {FULL.generations}; "
                        f"--quick: {QUICK.generations}]")
    p.add_argument("--apex-learner-steps", type=integer(1), default=None,
                   help=f"Ape-X: learner steps per run [default: {FULL.apex_learner_steps}; "
                        f"--quick: {QUICK.apex_learner_steps}]")
    p.add_argument("--impala-learner-steps", type=integer(1), default=None,
                   help=f"IMPALA: learner steps per run [default: "
                        f"{FULL.impala_learner_steps}; --quick: {QUICK.impala_learner_steps}]")
    p.add_argument("--impala-pong-learner-steps", type=integer(1), default=None,
                   help=f"IMPALA on Pong: learner steps per run [default: "
                        f"{FULL.impala_pong_learner_steps}; --quick: "
                        f"{QUICK.impala_pong_learner_steps}]")
    p.add_argument("--tolerance", type=number(0.0, 1.0), default=0.1,
                   help="the verdict's margin: a figure within it of DIR's counts as not "
                        "slower [default: 0.1]")
    add_json(p)


def budgets(args) -> Budgets:
    """The flags' budgets, each defaulting to :data:`FULL`'s (:data:`QUICK`'s with --quick)."""
    base = QUICK if args.quick else FULL
    return Budgets(**{name: getattr(args, name) if getattr(args, name) is not None
                      else getattr(base, name)
                      for name in ("generations", "apex_learner_steps",
                                   "impala_learner_steps", "impala_pong_learner_steps")})


def measure(trees: dict[str, Path], cases: list[str], rounds: int, budget: Budgets,
            quick: bool = False, workers: int = 2, progress=print) -> dict:
    """Every case on both trees, ``rounds`` times, alternating which tree goes first.

    Parameters
    ----------
    trees
        ``{THIS: root, OTHER: root}``: the trees' roots (checked: :func:`.trees.check_tree`).
    cases
        Keys of :data:`.cases.CASES`, run in this order within a round.
    rounds, budget, quick, workers
        The rounds, each case's budget, whether the commands are --quick's tiny ones, and the
        LocalCluster workers of each run.
    progress
        Called with a line per case per round.

    Returns
    -------
    dict
        ``values``: ``{"case/figure": {tree: [value per round]}}``; ``commands``: each case's
        command (without ``--out``).
    """
    values = {f"{c}/{f.key}": {name: [] for name in trees}
              for c in cases for f in CASES[c].figures}
    commands = {c: ["esnb", *CASES[c].args(budget, quick, workers)] for c in cases}
    with tempfile.TemporaryDirectory(prefix="esnb-run-path-") as tmp:
        for r in range(rounds):
            order = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for c in cases:
                case = CASES[c]
                for name in order:
                    run = run_once(trees[name], case.args(budget, quick, workers),
                                   Path(tmp) / f"{r}-{c}-{name}", workers)
                    for f in case.figures:
                        try:
                            values[f"{c}/{f.key}"][name].append(f.read(run))
                        except TooFewRows as exc:
                            raise TooFewRows(f"{case.title} on {trees[name]}: {exc}: give it "
                                             f"a larger budget ({case.budget_flag})") from None
                said = []
                for f in case.figures:
                    now = values[f"{c}/{f.key}"]
                    said.append(f"{f.label} " + ", ".join(
                        f"{name} {show(now[name][-1], f.unit)}" for name in trees))
                progress(f"round {r + 1}/{rounds}, {case.title} ({' then '.join(order)}): "
                         + "; ".join(said))
    return {"values": values, "commands": commands}


def summarise(values: dict, tolerance: float) -> dict:
    """The report's figures from :func:`measure`'s ``values``.

    Returns
    -------
    dict
        ``figures``: per figure its medians, their ratio (this / DIR), the ratios by round and
        whether this tree is within ``tolerance`` of DIR's or better (``not_slower``);
        ``not_slower``: whether every figure is; ``slower``: the figures that are not.
    """
    figures = {}
    for key, by_tree in values.items():
        c, f = key.split("/")
        figure = next(x for x in CASES[c].figures if x.key == f)
        med = {name: statistics.median(v) for name, v in by_tree.items()}
        ratio = med[THIS] / med[OTHER]
        ok = ratio >= 1 - tolerance if figure.higher_is_better else ratio <= 1 + tolerance
        figures[key] = {"case": CASES[c].title, "figure": figure.label, "unit": figure.unit,
                        "higher_is_better": figure.higher_is_better, "median": med,
                        "ratio": ratio, "by_round": by_tree,
                        "ratio_by_round": [a / b for a, b in zip(by_tree[THIS],
                                                                  by_tree[OTHER])],
                        "not_slower": ok}
    slower = [k for k, v in figures.items() if not v["not_slower"]]
    return {"figures": figures, "not_slower": not slower, "slower": slower}


def show(value: float, unit: str) -> str:
    """A rate with thousands separators, seconds with two decimals."""
    return f"{value:,.2f} s" if unit == "s" else f"{value:,.0f}"


def report(out: dict) -> list[str]:
    """The report's lines: trees, commands, one line per figure, the verdict."""
    s = out["settings"]
    lines = [f"run-path: this tree ({s['trees'][THIS]}, {s['commits'][THIS]}) against DIR "
             f"({s['trees'][OTHER]}, {s['commits'][OTHER]}); medians of {s['rounds']} "
             f"round(s), the first tree alternating; {s['workers']} workers"
             + ("; --quick" if s["quick"] else ""),
             "  commands (python -m esnb.cli, PYTHONPATH at the tree, --out a temporary "
             "folder):"]
    lines += [f"    {' '.join(command)}" for command in out["commands"].values()]
    lines += textwrap.wrap(HOW, 96, initial_indent="  ", subsequent_indent="    ")
    width = max(len(f"{v['case']}: {v['figure']}") for v in out["figures"].values())
    lines.append(f"  {'case: figure':<{width}}  {'this':>12}  {'DIR':>12}  this/DIR  by round")
    for v in out["figures"].values():
        rounds = ", ".join(f"{x:.2f}" for x in v["ratio_by_round"])
        lines.append(f"  {v['case'] + ': ' + v['figure']:<{width}}  "
                     f"{show(v['median'][THIS], v['unit']):>12}  "
                     f"{show(v['median'][OTHER], v['unit']):>12}  {v['ratio']:>8.2f}  "
                     f"{rounds}")
    tol = s["tolerance"]
    margin = (f"rates' this/DIR >= {1 - tol:.2f}, times' <= {1 + tol:.2f}")
    if out["not_slower"]:
        lines.append(f"verdict: not slower than DIR (every figure within {tol:.0%} of DIR's "
                     f"or better: {margin})")
    else:
        which = ", ".join(f"{out['figures'][k]['case']} {out['figures'][k]['figure']} "
                          f"({out['figures'][k]['ratio']:.2f})" for k in out["slower"])
        lines.append(f"verdict: SLOWER than DIR beyond {tol:.0%} ({margin}) on: {which}")
    return lines


def run(args) -> int:
    other = check_tree(args.against)  # one line and exit 2 before anything is measured
    session = Session()
    trees = {THIS: this_tree(), OTHER: other}
    budget = budgets(args)
    cases = [c for c in CASES if c in args.cases]
    measured = measure(trees, cases, args.rounds, budget, args.quick, args.workers)
    out = {**summarise(measured["values"], args.tolerance), "commands": measured["commands"],
           "settings": {"trees": {k: str(v) for k, v in trees.items()},
                        "commits": {k: commit(v) for k, v in trees.items()},
                        "rounds": args.rounds, "quick": args.quick, "workers": args.workers,
                        "cases": cases, "budgets": dataclasses.asdict(budget),
                        "tolerance": args.tolerance}}
    print()
    for line in report(out):
        print(line)
    return session.done(args, out, rerun=f"esnb bench run-path --against {args.against}")

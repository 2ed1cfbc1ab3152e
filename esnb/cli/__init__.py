"""The ``esnb`` command: ``esnb demo``, ``esnb train <algorithm>``, ``esnb run-plan PLAN``,
``esnb runs``, ``esnb play RUN``, ``esnb export RUN``, ``esnb bench <name>``, ``esnb docs
settings``.

Algorithms plug in through :mod:`esnb.runners.registry` (each declared in its own package; the
flags derive from its config dataclass, see :mod:`esnb.cli.train`); benchmarks through
:data:`esnb.bench.BENCHMARKS`: a module providing ``add_arguments(parser)`` and
``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from esnb.bench import BENCHMARKS
from esnb.cli.helptext import Formatter, first_sentence
from esnb.runners.registry import algorithms
from esnb.settings import cli as settings_cli

#: ``esnb --help``
DESCRIPTION = """Evolution strategies and reinforcement learning on Dask: a demo, training runs of
every algorithm (each writes a run folder: history.csv, summary.json, plot.html, a checkpoint),
the benchmarks behind BENCHMARKS.md, and documentation derived from the code.

Each command has its own --help, e.g. esnb train es --help."""


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the full usage of a command with 40 settings would bury
    the line that says what is wrong) and esnb's help :class:`~esnb.cli.helptext.Formatter`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(benches: bool = True) -> argparse.ArgumentParser:
    """esnb's command line; ``benches=False`` leaves out the benchmarks' own flags (``esnb
    bench`` then takes none): importing every benchmark's module costs a command ~0.65 s
    (0.88 s against 0.23 s to build the parser on a quiet 2-core VM), and only ``esnb bench``
    (or the help) needs them."""
    from esnb.cli import common
    from esnb.cli import train as trainer

    parser = Parser(prog="esnb", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help=first_sentence(common.DEMO_DESCRIPTION),
                          description=common.DEMO_DESCRIPTION)
    common.add_demo_arguments(demo)

    train_text = ("Train one algorithm on one environment. Every setting of the algorithm is a "
                  "flag (esnb train <algorithm> --help lists them with their defaults); the "
                  "run writes runs/<name>/ and can be resumed from it.")
    train = sub.add_parser("train", help=first_sentence(train_text), description=train_text)
    algos = train.add_subparsers(dest="algorithm", required=True, metavar="ALGORITHM")
    for name, algo in algorithms().items():
        p = algos.add_parser(name, help=first_sentence(algo.description),
                             description=algo.description, epilog=settings_cli.LEGEND)
        common.add_run_arguments(p)
        trainer.add_arguments(algo, p)
        p.set_defaults(trainer=name)

    plan = sub.add_parser("run-plan", help=first_sentence(common.PLAN_DESCRIPTION),
                          description=common.PLAN_DESCRIPTION)
    common.add_plan_arguments(plan)

    runs_text = ("List the runs that can be attached (started with esnb train ... --serve or "
                 "esnb.launch, still running): esnb.attach(name) in a notebook reaches them.")
    runs = sub.add_parser("runs", help=first_sentence(runs_text), description=runs_text)
    runs.add_argument("--folder", default="runs",
                      help="where the run folders are (default: runs)")

    from esnb.cli import play as playing

    play = sub.add_parser("play", help=first_sentence(playing.PLAY_DESCRIPTION),
                          description=playing.PLAY_DESCRIPTION)
    playing.add_play_arguments(play)
    export = sub.add_parser("export", help=first_sentence(playing.EXPORT_DESCRIPTION),
                            description=playing.EXPORT_DESCRIPTION)
    playing.add_export_arguments(export)

    docs_text = "Print documentation derived from the code."
    docs = sub.add_parser("docs", help=docs_text, description=docs_text)
    docs.add_argument("what", choices=["settings"],
                      help="settings: every algorithm's settings as markdown (docs/settings.md)")

    bench_text = ("Benchmarks, each measuring what it compares side by side in one run "
                  "(BENCHMARKS.md gives every figure with its command).")
    bench = sub.add_parser("bench", help=first_sentence(bench_text), description=bench_text)
    if not benches:
        return parser
    listed = bench.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for name, module in BENCHMARKS.items():
        p, mod = _plugin_parser(listed, name, module)
        if mod is not None:
            mod.add_arguments(p)
        p.set_defaults(bench=module)
    return parser


def _plugin_parser(subparsers, name: str, module: str):
    """A subcommand for ``module``; one that fails to import is listed as unavailable (and
    says why when called) instead of breaking every other command."""
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - reported when the command is used
        why = f"unavailable: {type(exc).__name__}: {exc}"
        p = subparsers.add_parser(name, help=f"({why})", description=why)
        p.set_defaults(unavailable=f"esnb {name} is {why}")
        return p, None
    return subparsers.add_parser(name, help=first_sentence(mod.__doc__),
                                 description=mod.__doc__), mod


def list_runs(folder: str) -> int:
    """``esnb runs``: one line per attachable run, or one line saying there is none."""
    import warnings

    from esnb.remote.folders import runs

    with warnings.catch_warnings(record=True) as damaged:
        warnings.simplefilter("always")
        table = runs(folder)
    for line in damaged:  # a damaged folder: one line, the others listed
        print(f"esnb: {line.message}", file=sys.stderr)
    if table.empty:
        print(f"no run to attach in {folder}/ (esnb train <algorithm> --serve starts one)")
        return 0
    for row in table.itertuples():
        since = row.started.strftime("%Y-%m-%d %H:%M:%S")
        print(f"{row.name}  {row.algorithm}  pid {row.pid}  since {since}  {row.folder}"
              + (f"  {row.progress}" if row.progress else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    # the benchmarks' modules are imported only for a command that needs their flags
    words = [w for w in given if not w.startswith("-")]
    parser = build_parser(benches=not words or words[0] == "bench")
    args = parser.parse_args(given)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        # dask logs cluster start/stop at INFO through handlers it installs when imported:
        # import it first, or the import would undo the quieter level
        import distributed  # noqa: F401

        logging.getLogger("distributed").setLevel(logging.WARNING)
    from esnb import config
    from esnb.cli import common

    if getattr(args, "unavailable", None):
        print(f"esnb: error: {args.unavailable}", file=sys.stderr)
        return 2
    try:
        config.check()  # every esnb.* dask setting, before anything starts
        if args.command == "demo":
            return common.run_demo(args)
        if args.command == "docs":
            from esnb.cli import docs

            return docs.run(args)
        if args.command == "train":
            return common.run_training(algorithms()[args.trainer], args)
        if args.command == "run-plan":
            return common.run_plan(args)
        if args.command == "runs":
            return list_runs(args.folder)
        if args.command in ("play", "export"):
            from esnb.cli import play

            return play.run_play(args) if args.command == "play" else play.run_export(args)
        return int(importlib.import_module(args.bench).run(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        print(f"esnb: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("esnb: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

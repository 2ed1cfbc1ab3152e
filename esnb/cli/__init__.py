"""The ``esnb`` command: ``esnb demo``, ``esnb train <algorithm>``, ``esnb bench <name>``,
``esnb docs settings``.

Algorithms and benchmarks plug in through the registries below: a trainer is a
:class:`~esnb.cli.train.Trainer` (its flags derive from the algorithm's config dataclass); a
benchmark module provides ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from esnb.cli.helptext import Formatter, first_sentence
from esnb.cli.train import Trainer
from esnb.runners.eorl.columns import CLI_FLAGS as EORL_FLAGS

#: Ape-X's budgets (DQN and DPG)
APEX_BUDGETS = {"seconds": ("seconds", "learning time to run"),
                "learner-steps": ("learner_steps", "learner updates to run"),
                "steps": ("env_steps", "actor env steps to run")}

#: ``esnb train <name>`` -> its trainer
TRAINERS: dict[str, Trainer] = {
    "es": Trainer(
        runner="esnb.runners.es:ES", config="esnb.runners.es.config:ESConfig",
        budgets={"generations": ("generations", "generations to run"),
                 "steps": ("env_steps", "env steps to run (whole generations: the last one "
                                        "may pass it)")},
        default_budget={"generations": 100},
        description="OpenAI-ES with a shared noise table (Salimans et al. 2017); IW-ES "
                    "(Campos et al. 2018) with --iw-k."),
    "apex": Trainer(
        runner="esnb.runners.apex:ApeX", config="esnb.runners.apex.config:ApeXDQNConfig",
        budgets=APEX_BUDGETS, default_budget={"seconds": 180.0}, skip=("variant",),
        description="Ape-X DQN (Horgan et al. 2018): many epsilon-greedy actors, one "
                    "prioritized replay actor, one learner."),
    "apex-dpg": Trainer(
        runner="esnb.runners.apex:ApeXDPG", config="esnb.runners.apex.config:ApeXDPGConfig",
        budgets=APEX_BUDGETS, default_budget={"seconds": 180.0}, skip=("variant",),
        description="Ape-X DPG (Horgan et al. 2018): Gaussian-noise actors, one prioritized "
                    "replay actor, one DPG learner."),
    "impala": Trainer(
        runner="esnb.runners.impala:Impala",
        config="esnb.runners.impala.config:ImpalaConfig",
        budgets={"learner-steps": ("learner_steps", "learner steps to run"),
                 "steps": ("env_steps", "env steps (actor frames) to run")},
        default_budget={"learner_steps": 1000},
        description="IMPALA with V-trace (Espeholt et al. 2018): actor slots on the workers, "
                    "one learner correcting their unrolls."),
    "eorl": Trainer(
        runner="esnb.runners.eorl:EORL", config="esnb.runners.eorl.config:EORLConfig",
        budgets={"episodes": ("episodes", "episodes to run, also the planned length E "
                                          "(default: 400 on bitflip, 1000 on gridnav)")},
        default_budget={"episodes": 400},
        description="EORL (Khadilkar 2023): a population of Monte-Carlo DQNs sharing one "
                    "buffer, with crossover and mutation; its baselines with --algorithm.",
        adapt="esnb.runners.eorl.command:adapt", skip=("env_kwargs", "episodes"),
        extra=EORL_FLAGS),
    "aesrl": Trainer(
        runner="esnb.runners.aesrl:AESRL", config="esnb.runners.aesrl.config:AESRLConfig",
        budgets={"steps": ("env_steps", "env steps to run"),
                 "updates": ("updates", "updates of (mu, var), one per evaluated individual")},
        default_budget={"env_steps": 100_000},
        description="AES-RL (Lee et al. 2020): asynchronous ES + TD3 with a shared critic, one "
                    "update of the distribution per evaluated individual. Laptop networks are "
                    "64-64 (--preset paper: 400-300)."),
    "cemrl": Trainer(
        runner="esnb.runners.aesrl:CEMRL", config="esnb.runners.aesrl.config:CEMRLConfig",
        budgets={"steps": ("env_steps", "env steps to run (whole generations: the last one "
                                        "may pass it)"),
                 "generations": ("generations", "generations to run")},
        default_budget={"env_steps": 100_000},
        description="CEM-RL (Pourchot and Sigaud 2019): sep-CEM + TD3, serial or, with "
                    "--parallel, parallel-synchronous (P-CEM-RL). Laptop networks are 64-64 "
                    "(--preset paper: 400-300)."),
}

#: ``esnb bench <name>`` -> module implementing the benchmark protocol
BENCHMARKS: dict[str, str] = {
    "es-scaling": "esnb.bench.es_scaling",
    "es-scale-out": "esnb.bench.es_scale_out",
    "interrupts": "esnb.bench.interrupts",
    "memory": "esnb.bench.memory",
    "noise": "esnb.bench.noise",
    "replay": "esnb.bench.replay",
    "apex": "esnb.bench.apex",
    "apex-scaling": "esnb.bench.apex_scaling",
    "impala": "esnb.bench.impala",
    "eorl-table": "esnb.bench.eorl_table",
    "iw-overhead": "esnb.bench.iw_overhead",
    "iw-efficiency": "esnb.bench.iw_efficiency",
    "soak": "esnb.bench.soak",
    "aes-time": "esnb.bench.aes_time",
    "aes-rules": "esnb.bench.aes_rules",
}


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


def build_parser() -> argparse.ArgumentParser:
    from esnb.cli import common

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
    for name, trainer in TRAINERS.items():
        p = algos.add_parser(name, help=first_sentence(trainer.description),
                             description=trainer.description)
        common.add_run_arguments(p)
        trainer.add_arguments(p)
        p.set_defaults(trainer=name)

    docs_text = "Print documentation derived from the code."
    docs = sub.add_parser("docs", help=docs_text, description=docs_text)
    docs.add_argument("what", choices=["settings"],
                      help="settings: every algorithm's settings as markdown (docs/settings.md)")

    bench_text = ("Benchmarks, each measuring what it compares side by side in one run "
                  "(BENCHMARKS.md gives every figure with its command).")
    bench = sub.add_parser("bench", help=first_sentence(bench_text), description=bench_text)
    benches = bench.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    for name, module in BENCHMARKS.items():
        p, mod = _plugin_parser(benches, name, module)
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
            return common.run_training(TRAINERS[args.trainer], args)
        return int(importlib.import_module(args.bench).run(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        print(f"esnb: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("esnb: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

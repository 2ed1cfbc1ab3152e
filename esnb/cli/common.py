"""What ``esnb train`` and ``esnb demo`` do: their flags (the run's options, generated from
:class:`~esnb.session.options.RunOptions`) mapped to a plan, then the run session
(:mod:`esnb.session`)."""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from esnb.session import options as run_options

DEMO_DESCRIPTION = """OpenAI-ES learns HalfCheetah-v5 on 2 local workers.

2M env steps (2.5-3 minutes on 2 cores at 12,000-15,000 env steps/s; the progress bar shows
your rate), then a final evaluation of the mean policy (2,000 or more expected) and the run folder
runs/demo-<time>/: history.csv, summary.json, plot.html and checkpoint.npz."""

PLAN_DESCRIPTION = """Run a planned run: the plan.json that esnb.launch writes into a run folder.

The plan holds the run's options and its checked settings (esnb.launch planned it with esnb
train's own checks and made its folder); the run goes as esnb train's does."""


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Flags every ``esnb train`` run shares: the run's options (the algorithm's settings come
    from its config), and ``--settings``."""
    run_options.add_arguments(p)
    p.add_argument("--settings", default=None, metavar="JSON",
                   help="settings as one JSON object; a setting's own flag wins (default: "
                        "none)")


def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    from esnb.settings import integer, number

    p.add_argument("--steps", type=number(0, low_open=True), default=2_000_000, metavar="N",
                   help="env-step budget (whole generations: the last one may pass it)")
    p.add_argument("--seed", type=integer(0), default=0,
                   help="seed of every random draw of the run")
    run_options.add_arguments(p, only=run_options.DEMO)


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN",
                   help="a plan file (plan.json), or the run folder that holds it")


def run_training(algo, args) -> int:
    """``esnb train <algo>``: its flags as a plan (:func:`esnb.session.plan.plan`), then the
    run (:func:`esnb.session.run.run`)."""
    from esnb.cli import train
    from esnb.session.plan import plan
    from esnb.session.run import run

    settings, flags = train.settings_and_flags(algo, args)
    return run(plan(algo, settings, run_options.options_given(args),
                    train.budget_given(algo, args), flags)).code


def run_demo(args) -> int:
    """OpenAI-ES on HalfCheetah-v5, 2M env steps on a 2-worker LocalCluster."""
    from esnb.runners.es import ESConfig
    from esnb.session.plan import plan
    from esnb.session.run import run

    options = run_options.options_given(args, preset="demo", final_eval=10,
                                        name=f"demo-{time.strftime('%Y%m%d-%H%M%S')}")
    banner = (f"esnb demo: OpenAI-ES on {ESConfig.presets['demo']['env']}, "
              f"{args.steps:,.0f} env steps, {options.workers} workers")
    budget = {"env_steps": args.steps}
    checked = replace(plan("es", {"seed": args.seed}, options, budget), default_budget=budget)
    return run(checked, banner=banner).code


def run_plan(args) -> int:
    """``esnb run-plan PLAN``: what :func:`esnb.launch` started."""
    from esnb.session.run import run_file

    return run_file(args.plan)

"""What every ``esnb train`` run shares: the cluster, a progress bar, the run folder."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tqdm import tqdm

from esnb.settings import PRESETS


def add_run_arguments(p: argparse.ArgumentParser, settings: bool = False) -> None:
    """Flags of every run; ``settings``: env and seed come from the config's flags."""
    if not settings:
        p.add_argument("--env", required=True, help="gymnasium environment id")
        p.add_argument("--seed", type=int, default=0)
    else:
        p.add_argument("--preset", choices=PRESETS, default="laptop",
                       help="defaults tuned for a 2-core laptop, or the papers' published "
                            "settings (default: laptop)")
    p.add_argument("--workers", type=int, default=2,
                   help="LocalCluster workers (0: run inline in this process)")
    p.add_argument("--address", default=None, help="join this Dask scheduler instead")
    p.add_argument("--out", default=None, help="run folder (default runs/<name>)")
    p.add_argument("--name", default=None, help="run name")
    if settings:
        p.add_argument("--final-eval", type=int, default=10, metavar="EPISODES",
                       help="noise-free episodes of the final policy (default: 10; 0: none)")
    else:
        p.add_argument("--eval-episodes", dest="final_eval", type=int, default=10,
                       help="noise-free episodes of the final policy")
    p.add_argument("--resume", default=None, metavar="CHECKPOINT",
                   help="continue the run saved in this checkpoint")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=float, default=2_000_000, help="env-step budget")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="run folder (default runs/demo-<time>)")
    p.add_argument("--no-progress", action="store_true")


class Progress:
    """A tqdm bar over the budget's counter, with the latest returns and speed."""

    def __init__(self, runner, unit: str, total: float | None, disable: bool = False):
        self.unit = unit
        self.bar = tqdm(total=total, unit=" " + unit.replace("_", " "), unit_scale=True,
                        dynamic_ncols=True, disable=disable, smoothing=0.1)
        self.last = 0.0
        runner.add_observer(self)

    def __call__(self, row: dict) -> None:
        now = float(row.get(self.unit, row.get(self.unit.rstrip("s"), 0)))
        self.bar.update(now - self.last)
        self.last = now
        post = {}
        for key, label in (("return_mean", "ret"), ("eval_return", "eval"),
                           ("steps_per_s", "steps/s")):
            v = row.get(key)
            if v is not None and v == v:
                post[label] = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
        self.bar.set_postfix(post, refresh=False)

    def close(self) -> None:
        self.bar.close()


def finish(runner, args, started: float, out: str | None) -> dict:
    """Evaluate the final policy, write the run folder, print a summary."""
    from esnb.record import write_run_folder

    summary = {"wall_time_total": None}
    if hasattr(runner, "evaluate") and args.final_eval > 0:
        returns = runner.evaluate(args.final_eval)
        summary.update(final_eval_mean=float(returns.mean()), final_eval_std=float(returns.std()),
                       final_eval_episodes=int(len(returns)))
    summary["wall_time_total"] = time.perf_counter() - started
    folder = write_run_folder(runner, Path(out or Path("runs") / runner.name), summary)
    print(json.dumps({k: summary[k] for k in summary}, indent=2))
    print(f"run folder: {folder}")
    return summary


def run_training(trainer, args) -> int:
    from esnb.cli.train import Trainer
    from esnb.runners.executor import session

    started = time.perf_counter()
    with session(args.workers, args.address) as executor:
        if isinstance(trainer, Trainer):
            cls, values = trainer.settings(args)
            if args.resume:
                runner = cls.load(args.resume, client=executor)
            else:
                runner = cls(client=executor, preset=args.preset, name=args.name, **values)
        elif args.resume:
            runner = trainer.load_runner(args.resume, executor.client)
        else:
            runner = trainer.make_runner(args, executor.client)
        budget = trainer.budget(args)
        unit, total = next(iter(budget.items())) if budget else ("generations", None)
        progress = Progress(runner, unit, total, disable=args.no_progress)
        runner.start(**budget)
        try:
            runner.wait()
        finally:
            progress.close()
        finish(runner, args, started, args.out)
    return 0


DEMO = dict(env="HalfCheetah-v5", population=40, sigma=0.02, lr=0.02, weight_decay=0.005,
            eval_interval=10, eval_episodes=5)


def run_demo(args) -> int:
    """OpenAI-ES on HalfCheetah-v5, 2M env steps on a 2-worker LocalCluster."""
    from esnb.runners.es import ES
    from esnb.runners.executor import session

    started = time.perf_counter()
    with session(args.workers) as executor:
        runner = ES(**DEMO, seed=args.seed, client=executor,
                    name=f"demo-{time.strftime('%Y%m%d-%H%M%S')}")
        link = executor.dashboard_link
        print(f"esnb demo: OpenAI-ES on {DEMO['env']}, {args.steps:,.0f} env steps, "
              f"{args.workers} workers" + (f", dashboard {link}" if link else ""))
        progress = Progress(runner, "env_steps", args.steps, disable=args.no_progress)
        runner.start(env_steps=args.steps)
        try:
            runner.wait()
        finally:
            progress.close()
        args.final_eval = 10
        finish(runner, args, started, args.out)
    return 0

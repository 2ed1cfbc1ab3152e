"""What every ``esnb train`` run shares: the cluster, a progress bar, the run folder."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tqdm import tqdm

from esnb.settings import PRESETS, integer, number

DEMO_DESCRIPTION = """OpenAI-ES learns HalfCheetah-v5 on 2 local workers.

2M env steps (2.5-3 minutes on 2 cores at 12,000-15,000 env steps/s; the progress bar shows
your rate), then a final evaluation of the mean policy (2,000 or more expected) and the run folder
runs/demo-<time>/: history.csv, summary.json, plot.html and checkpoint.npz."""


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Flags every ``esnb train`` run shares (the algorithm's settings come from its config)."""
    p.add_argument("--preset", choices=PRESETS, default="laptop",
                   help="defaults tuned for a 2-core laptop, or the papers' published "
                        "settings (default: laptop)")
    add_cluster_arguments(p)
    p.add_argument("--name", default=None,
                   help="run name: the folder runs/<name> (default: <algorithm>-<time>)")
    p.add_argument("--final-eval", type=integer(0), default=10, metavar="EPISODES",
                   help="noise-free episodes of the final policy (0: none)")
    p.add_argument("--video-every", type=integer(0), default=0, metavar="N",
                   help="write videos/<iteration>.mp4 in the run folder every N iterations: an "
                        "episode of the policy, rendered beside the run (0: none; needs "
                        "esnb[video] and headless OpenGL, MUJOCO_GL=egl)")
    p.add_argument("--resume", default=None, metavar="RUN",
                   help="continue the run in this run folder (or checkpoint file); live "
                        "settings given beside it apply as control changes (default: a new "
                        "run)")
    p.add_argument("--fork", default=None, metavar="RUN",
                   help="start a new run from RUN's kept checkpoint nearest before --at, "
                        "settings given beside it applied as control changes; the new run "
                        "records RUN as its parent (default: none)")
    p.add_argument("--at", type=integer(1), default=None, metavar="N",
                   help="with --fork: the iteration to branch from (default: none)")
    p.add_argument("--keep-every", type=integer(0), default=0, metavar="N",
                   help="keep a checkpoint every N iterations in checkpoints/, to --fork "
                        "from later (0: none)")
    p.add_argument("--serve", action="store_true",
                   help="let notebooks attach to the run (esnb.attach(name)): its own cluster "
                        "(a LocalCluster on 127.0.0.1, or the batch cluster dask config "
                        "esnb.cluster.type chooses) speaks TLS with certificates made for this "
                        "run, readable by you only; never with --address (default: off)")
    p.add_argument("--settings", default=None, metavar="JSON",
                   help="settings as one JSON object, as esnb.launch passes them; a setting's "
                        "own flag wins (default: none)")
    p.add_argument("--controls", default=None, metavar="CHANGES",
                   help="apply a recorded record of control changes (a run's changes.csv, or "
                        "its folder) at the same iterations: a steered ES run replays to the "
                        "same theta (default: none)")


def add_cluster_arguments(p: argparse.ArgumentParser, workers: int = 2) -> None:
    p.add_argument("--workers", type=integer(0), default=workers,
                   help="LocalCluster worker processes (0: run in this process)")
    p.add_argument("--address", default=None,
                   help="join this Dask scheduler instead of starting a LocalCluster "
                        "(default: a LocalCluster, or dask config esnb.cluster.type)")
    p.add_argument("--out", default=None,
                   help="run folder (default: runs/<name>, or the resumed run's folder)")
    p.add_argument("--checkpoint-every", type=number(0), default=60.0, metavar="SECONDS",
                   help="write the run's checkpoint this often, and when it ends (default: 60)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (default: a bar on stderr)")
    p.add_argument("--tensorboard", nargs="?", const="", default=None, metavar="DIR",
                   help="also log every history column and each control change for "
                        "TensorBoard, into DIR (without DIR: <run folder>/tensorboard; needs "
                        "esnb[tensorboard]) [default: off]")
    p.add_argument("--mlflow", nargs="?", const="", default=None, metavar="URI",
                   help="also log to MLflow: settings, every history column, control "
                        "changes, the final evaluation and the checkpoint, into URI (a folder "
                        "or a tracking server; without URI: ./mlruns; experiment: "
                        "MLFLOW_EXPERIMENT_NAME or esnb; needs esnb[mlflow]) [default: off]")


def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=number(0, low_open=True), default=2_000_000, metavar="N",
                   help="env-step budget (whole generations: the last one may pass it)")
    p.add_argument("--seed", type=integer(0), default=0,
                   help="seed of every random draw of the run")
    add_cluster_arguments(p)


#: the bar: counters as whole numbers with separators (``1,200/2,000 learner steps``), no tqdm
#: rate (the one steps/s figure is in the postfix, named), the percentage kept
BAR_FORMAT = ("{percentage:3.0f}%|{bar}| {n:,.0f}/{total:,.0f}{unit} "
              "[{elapsed}<{remaining}{postfix}]")


def budget_note(runner, unit: str, total: float) -> str | None:
    """The line said before the bar when the budget is not counted in whole iterations: the
    run stops at the first whole one that reaches it, so it may pass it."""
    iteration = runner.iteration_column.replace("_", " ")
    if unit.rstrip("s") == runner.iteration_column:
        return None
    return (f"esnb: {runner.title} runs whole {iteration}s: it stops at the first one that "
            f"reaches {total:,.0f} {unit.replace('_', ' ')} (it may pass it)")


def count(v: float) -> str:
    """A counter for the postfix: ``980``, ``12.3k``, ``1.20M``."""
    return f"{v:,.0f}" if abs(v) < 10_000 else tqdm.format_sizeof(v)


class Progress:
    """A tqdm bar over the budget's counter, read from the runner's ``_progress()`` (the same
    counters the budget ends on), with the latest returns, the learner's updates and the
    replay's fill where the run has them, and one throughput figure: env steps per second of
    wall time since the first iteration (startup left out), named.

    A run that passes its budget (the last generation of an env-step budget) ends at 100%: the
    total grows to where it ended rather than the bar losing its percentage.
    """

    def __init__(self, runner, unit: str, total: float | None, disable: bool = False,
                 file=None):
        self.runner, self.unit = runner, unit
        self.bar = tqdm(total=total, unit=" " + unit.replace("_", " "), dynamic_ncols=True,
                        disable=disable, smoothing=0.1, file=file,
                        bar_format=BAR_FORMAT if total else None)
        self.last = 0.0
        self.first: tuple[float, float] | None = None  # (time, env steps) of the first row
        self.capacity = getattr(runner.config, "capacity", None)  # a replay's rows, if any
        runner.add_observer(self)

    def rate(self, row: dict) -> float | None:
        steps = row.get("env_steps")
        if steps is None or steps != steps:
            return None
        now = time.perf_counter()
        if self.first is None:
            self.first = (now, float(steps))
            return None
        seconds = now - self.first[0]
        return (float(steps) - self.first[1]) / seconds if seconds > 0 else None

    def postfix(self, row: dict) -> str:
        post = []
        for key, label in (("return_mean", "ret"), ("eval_return", "eval")):
            v = row.get(key)
            if v is not None and v == v:
                post.append(f"{label} {v:,.0f}" if abs(v) >= 100 else f"{label} {v:.3g}")
        updates = row.get("learner_steps")
        if updates is not None and self.unit != "learner_steps":
            post.append(f"{count(updates)} updates")
        fill = row.get("replay_size")
        if fill is not None:
            post.append(f"replay {count(fill)}" + (f"/{count(self.capacity)}"
                                                   if self.capacity else ""))
        rate = self.rate(row)
        if rate is not None:
            post.append(f"{tqdm.format_sizeof(rate)} env steps/s")
        return ", ".join(post)

    def __call__(self, row: dict) -> None:
        now = float(self.runner._progress().get(self.unit, 0))
        if self.bar.total is not None and now >= self.bar.total:
            # the last row: 100% (the total grows to a passed budget rather than the bar losing
            # its percentage), drawn once, by close()
            self.bar.total = max(self.bar.total, now)
            self.bar.n = now
        else:
            self.bar.update(now - self.last)
        self.last = now
        self.bar.set_postfix_str(self.postfix(row), refresh=False)

    def close(self) -> None:
        self.bar.close()


def finish(runner, args, started: float, folder: Path, evaluate: bool = True) -> dict:
    """Evaluate the final policy (unless interrupted), write the run folder, print a summary."""
    from esnb.record import strict, write_run_folder

    summary = {"wall_time_total": None}
    final = getattr(args, "final_eval", 10)
    evaluating = evaluate and hasattr(runner, "evaluate") and final > 0
    if evaluating:
        # the run folder's checkpoint is the state before the evaluation: `esnb play` loads it
        # and its evaluation generator draws the same episode seeds
        runner.save(folder / "checkpoint.npz")
        returns = runner.evaluate_final(final)  # kept on the runner: plot.html marks it
        summary.update(final_eval_mean=float(returns.mean()), final_eval_std=float(returns.std()),
                       final_eval_episodes=int(len(returns)))
    summary["wall_time_total"] = time.perf_counter() - started
    write_run_folder(runner, folder, summary, checkpoint=not evaluating)
    if evaluate:
        print(json.dumps(strict(summary), indent=2, allow_nan=False))
        print(f"run folder: {folder}")
    return summary


def tensorboard_dir(args, folder: Path) -> Path | None:
    """Where ``--tensorboard`` writes (None: not asked), once the extra is known installed."""
    where = getattr(args, "tensorboard", None)
    if where is None:
        return None
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise ValueError("--tensorboard needs the tensorboard package: "
                         "pip install 'esnb[tensorboard]'") from None
    return Path(where) if where else folder / "tensorboard"


def check_mlflow(args) -> None:
    """``--mlflow``'s extra is installed (before any cluster starts)."""
    if getattr(args, "mlflow", None) is None:
        return
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise ValueError("--mlflow needs the mlflow-skinny (or mlflow) package: "
                         "pip install 'esnb[mlflow]'") from None


def start_trackers(runner, args, board_dir: Path | None) -> list:
    """The trackers asked for (``--tensorboard``, ``--mlflow``), attached to ``runner``."""
    trackers = []
    if board_dir is not None:
        from esnb.runners.tensorboard import TensorBoard

        # a resumed folder's event files hold the rows up to the resume already
        trackers.append(TensorBoard(runner, board_dir,
                                    history=not any(board_dir.glob("events.out.tfevents.*"))))
    if getattr(args, "mlflow", None) is not None:
        from esnb.runners.mlflow_tracker import MLflow

        trackers.append(MLflow(runner, args.mlflow or None))  # a resume: a new MLflow run
    return trackers


def start_videos(runner, args, folder: Path):
    """``--video-every``: a :class:`~esnb.video.VideoRecorder` (None: not asked), once the
    runner is known to have a policy to render and this machine to render its env."""
    every = getattr(args, "video_every", 0)
    if not every:
        return None
    from esnb.video import VideoRecorder, probe

    runner.acting_policy()  # or one line: what the algorithm holds instead
    probe(runner.config.env, getattr(runner.config, "env_kwargs", None))
    return VideoRecorder(runner, folder / "videos", every)


def run(cls, values: dict, args, command: str, budget: dict, default_budget: dict,
        preset: str = "laptop", banner: str | None = None) -> int:
    """Plan, start a cluster, run to the budget (with checkpoints), finish; see
    :mod:`esnb.cli.run`."""
    from esnb import config
    from esnb.cli import run as runs
    from esnb.remote.serve import served_cluster, serving
    from esnb.runners.executor import session

    started = time.perf_counter()
    plan = runs.plan_run(cls, values, args)
    board_dir = tensorboard_dir(args, plan.folder)  # before any cluster: the extra is there
    check_mlflow(args)
    # --serve: the run's own cluster (a LocalCluster on loopback, or a batch cluster) with TLS
    # of this run's own certificate, its files kept until the cluster has closed
    # (esnb.remote.serve)
    with runs.Interrupts() as interrupts, \
            served_cluster(plan.folder, getattr(args, "serve", False),
                           str(config.get("cluster.type", "local")).lower()) as (security, own), \
            session(args.workers, args.address, **own) as executor:
        runner = runs.build_runner(plan, executor)
        interrupts.watch(runner)
        runner.keep_checkpoints(plan.folder / "checkpoint.npz", every=args.checkpoint_every,
                                keep=getattr(args, "keep_every", 0))
        trackers, finished = start_trackers(runner, args, board_dir), False
        try:
            # attachable until the run folder is written (then attach says the run ended)
            with serving(runner, executor, plan.folder, security) as served:
                if served is not None:
                    print(f"esnb: serving: esnb.attach({str(plan.folder)!r}) attaches a "
                          f"notebook (esnb runs lists the runs)", file=sys.stderr)
                code = _run_and_finish(runner, args, plan, interrupts, executor, started,
                                       command, budget, default_budget, banner, trackers)
            finished = True
            return code
        finally:
            for tracker in trackers:
                tracker.close(failed=not finished)


def _run_and_finish(runner, args, plan, interrupts, executor, started, command, budget,
                    default_budget, banner, trackers) -> int:
    """The run to its budget (or a signal), its run folder, the trackers' last records."""
    from esnb.cli import run as runs

    videos = start_videos(runner, args, plan.folder)
    todo = runs.remaining(runner, budget, default_budget, plan.saved_target)
    link = executor.dashboard_link
    if banner:
        print(banner + (f", dashboard {link}" if link else ""))
    elif link:
        env = getattr(runner.config, "env", None)
        print(f"esnb: {runner.title}" + (f" on {env}" if env else "")
              + f", dashboard {link}", file=sys.stderr)
    unit, total = next(iter(todo.items()))
    total += runner._progress().get(unit, 0)
    note = budget_note(runner, unit, total)
    if note:
        print(note, file=sys.stderr)
    progress = Progress(runner, unit, total, disable=args.no_progress)
    try:
        if interrupts.signum is None:  # a signal while the cluster started: no run
            runner.start(controls_schedule=getattr(args, "controls", None), **todo)
            runner.wait()
    finally:
        progress.close()
        if videos is not None:
            videos.close()
            if videos.failed:
                print(f"esnb: {len(videos.failed)} video(s) not written, the first: "
                      f"{videos.failed[0]}", file=sys.stderr)
    stopped = interrupts.signum is not None
    summary = finish(runner, args, started, plan.folder, evaluate=not stopped)
    for tracker in trackers:
        tracker.log_final(summary, plan.folder / "checkpoint.npz")
    if stopped:
        print(runs.stopped_line(runner, interrupts.signum,
                                runs.resume_command("esnb", command, plan.folder)),
              file=sys.stderr)
    return interrupts.exit_code  # also a signal during the final evaluation: it was finished


def run_training(algo, args) -> int:
    """``esnb train <algo>``: its runner class and settings from the command line, then
    :func:`run`."""
    from esnb.cli import train

    cls, values = train.runner_and_settings(algo, args)
    return run(cls, values, args, f"train {args.algorithm}", train.budget_given(algo, args),
               dict(algo.default_budget), args.preset)


def run_demo(args) -> int:
    """OpenAI-ES on HalfCheetah-v5, 2M env steps on a 2-worker LocalCluster."""
    from esnb.runners.es import ES, ESConfig

    args.resume, args.preset, args.final_eval = None, "demo", 10
    args.name = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    banner = (f"esnb demo: OpenAI-ES on {ESConfig.presets['demo']['env']}, "
              f"{args.steps:,.0f} env steps, {args.workers} workers")
    return run(ES, {"seed": args.seed}, args, "train es", {"env_steps": args.steps},
               {"env_steps": args.steps}, "demo", banner=banner)

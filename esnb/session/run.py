"""One run from its plan to its run folder: the cluster, serving, the runner, checkpoints,
trackers, videos, the progress bar, signals, the final evaluation and the folder.

While the run goes, a checkpoint is written every ``checkpoint_every`` seconds into the run
folder (and one every ``keep_every`` iterations is kept, to fork from). SIGINT (Ctrl-C) or
SIGTERM (``scancel``, a batch time limit) stops the run after its current iteration; the
checkpoint and the run folder are written, the cluster released, and one line says where the
run stopped and the exact command that resumes it (exit 130 / 143). Budgets are the run's
totals (``generations=30`` ends at generation 30, resumed or not); a resume without one
continues to the budget it was given.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esnb.session.checks import remaining
from esnb.session.finish import (
    check_trackers,
    close_videos,
    finish,
    start_trackers,
    start_videos,
    tensorboard_dir,
    tracker_lines,
)
from esnb.session.folder import FolderLock
from esnb.session.plan import RunPlan
from esnb.session.progress import Progress, budget_note
from esnb.session.signals import Interrupts, resume_command, stopped_line


@dataclass
class Outcome:
    """How a run of the session ended.

    Attributes
    ----------
    code : int
        The command's exit status: 0, or 128 + the signal that stopped the run.
    folder : Path
        The run folder, written.
    summary : dict
        What ``summary.json`` adds to the run's settings: ``final_eval_mean``,
        ``final_eval_std``, ``final_eval_episodes`` (when evaluated), ``wall_time_total``.
    records : list of dict
        The history's rows.
    """

    code: int
    folder: Path
    summary: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stopped(self) -> bool:
        """A signal stopped the run (it has no final evaluation)."""
        return self.code != 0


def build_runner(plan: RunPlan, executor):
    """The plan's runner on ``executor``: a new one, or the checkpoint's with the live
    changes applied (recorded as control changes) and a fork's parent."""
    cls = plan.cls
    if plan.resume is not None:
        runner = cls.load(plan.resume, client=executor, name=plan.name)
        if plan.live_changes:
            runner.controls.set(**plan.live_changes)  # recorded as control changes
        if plan.parent is not None:
            runner.parent = plan.parent
        return runner
    return cls(client=executor, config=cls.Config.from_dict(plan.settings), name=plan.name)


@contextlib.contextmanager
def _cluster(plan: RunPlan, executor):
    """The run's executor (``executor`` when given) and its TLS when it serves."""
    from esnb import config
    from esnb.remote.serve import served_cluster
    from esnb.runners.executor import session

    options = plan.options
    if executor is not None:
        if options.serve:
            raise ValueError("a run given its executor cannot serve: --serve needs a cluster "
                             "of the run's own")
        yield None, executor
        return
    # serve: the run's own cluster (a LocalCluster on loopback, or a batch cluster) with TLS
    # of this run's own certificate, its files kept until the cluster has closed
    kind = str(config.get("cluster.type", "local")).lower()
    with served_cluster(plan.folder, options.serve, kind) as (security, own), \
            session(options.workers, options.address, **own) as made:
        yield security, made


def run(plan: RunPlan, executor=None, banner: str | None = None, say: bool = True,
        progress_lines: str | None = None) -> Outcome:
    """Run ``plan`` to its budget (or a signal) and write its folder.

    Parameters
    ----------
    plan : RunPlan
        Checked (:func:`esnb.session.plan.plan`).
    executor : optional
        Where the run goes (a client, an executor, False: inline); default: the cluster its
        options ask for, started here and closed at the end.
    banner : str, optional
        The line said first (``esnb demo``'s), with the dashboard's link.
    say : bool
        Print the dashboard's line, the budget's note, the summary and the folder (the
        results bench runs quietly).
    progress_lines : str, optional
        Progress as plain lines starting with this label, one each 5% of the budget, instead
        of a bar (:class:`esnb.session.progress.Progress`; also with ``progress`` off).
        Default: a bar on a terminal; lines labelled with the run folder's name when stderr
        is not one and ``say`` and ``progress`` are on.

    Returns
    -------
    Outcome
    """
    from esnb.remote.serve import serving

    started = time.perf_counter()
    options = plan.options
    check_trackers(options)  # before any cluster: the extras there, the destinations usable
    board_dir = tensorboard_dir(options, plan.folder)
    # the folder is this run's while it runs (a second run into it is refused)
    with FolderLock(plan.folder), Interrupts() as interrupts, \
            _cluster(plan, executor) as (security, where):
        runner = build_runner(plan, where)
        interrupts.watch(runner)
        runner.keep_checkpoints(plan.folder / "checkpoint.npz", every=options.checkpoint_every,
                                keep=options.keep_every)
        trackers, finished = start_trackers(runner, options, board_dir), False
        try:
            # attachable until the run folder is written (then attach says the run ended)
            with serving(runner, where, plan.folder, security) as served:
                if served is not None and say:
                    print(f"esnb: serving: esnb.attach({str(plan.folder)!r}) attaches a "
                          f"notebook (esnb runs lists the runs)", file=sys.stderr)
                link = runner.dashboard_link or getattr(where, "dashboard_link", None)
                outcome = _run_and_finish(runner, plan, interrupts, started, banner, link,
                                          trackers, say, progress_lines)
            finished = True
            return outcome
        finally:
            for tracker in trackers:
                tracker.close(failed=not finished)
            if executor is not None:
                runner.close()  # the cluster stays: what the runner holds on it goes


def _run_and_finish(runner, plan: RunPlan, interrupts: Interrupts, started: float,
                    banner: str | None, link: str | None, trackers: list,
                    say: bool, progress_lines: str | None = None) -> Outcome:
    """The run to its budget (or a signal), its run folder, the trackers' last records."""
    options = plan.options
    videos = start_videos(runner, options, plan.folder)
    todo = remaining(runner._progress(), plan.budget, plan.default_budget, plan.saved_target)
    if banner:
        print(banner + (f", dashboard {link}" if link else ""))
    elif link and say:
        env = getattr(runner.config, "env", None)
        print(f"esnb: {runner.title}" + (f" on {env}" if env else "")
              + f", dashboard {link}", file=sys.stderr)
    unit, total = next(iter(todo.items()))
    total += runner._progress().get(unit, 0)
    note = budget_note(runner, unit, total)
    if note and say:
        print(note, file=sys.stderr)
    if progress_lines is None and say and options.progress and not sys.stderr.isatty():
        # output read later (a batch job's slurm-N.out, nohup, a pipe): lines, not a bar's
        # carriage returns
        progress_lines = plan.folder.name
    progress = Progress(runner, unit, total, disable=not options.progress,
                        lines=progress_lines)
    try:
        if interrupts.signum is None:  # a signal while the cluster started: no run
            runner.start(controls_schedule=options.controls, **todo)
            runner.wait()
    finally:
        progress.close()
        close_videos(videos)
    stopped = interrupts.signum is not None
    summary = finish(runner, options.final_eval, started, plan.folder, evaluate=not stopped,
                     say=say)
    for tracker in trackers:
        tracker.log_final(summary, plan.folder / "checkpoint.npz")
    if say:
        for line in tracker_lines(trackers):
            print(line, file=sys.stderr)
    if stopped:
        print(stopped_line(runner, interrupts.signum,
                           resume_command("esnb", plan.command, plan.folder)), file=sys.stderr)
    # also a signal during the final evaluation: it was finished
    return Outcome(interrupts.exit_code, Path(plan.folder), summary, runner.records)


def run_file(path) -> int:
    """``esnb run-plan PLAN``: the plan in ``path`` (what :func:`esnb.launch` wrote), its
    cluster checked where it runs, then :func:`run`; the exit status."""
    from esnb.session.checks import check_cluster

    plan = RunPlan.read(path)
    check_cluster(plan.options.workers, plan.options.address, plan.options.serve)
    # a launched run's output is its log file (run.log): lines there, also with its progress
    # off (esnb.launch's runs serve and show no bar)
    return run(plan, progress_lines=None if sys.stderr.isatty() else plan.folder.name).code

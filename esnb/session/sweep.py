"""Runs of the session side by side: each planned run (:class:`~esnb.session.plan.RunPlan`)
runs whole inside one task of the executor, inline there, into its own run folder, as
``esnb train`` would run it (:func:`esnb.runners.sweep.map_runs` places the tasks; inline, one
after another).

The plans are made first, here (:func:`esnb.session.plan.plan`: every check, every folder
made), so a bad seed or setting is one line before any task starts. A run folder is written by
the worker that runs it: on a cluster of several hosts, give them a folder the hosts share.
"""

from __future__ import annotations

from collections.abc import Sequence

from esnb.session.plan import RunPlan
from esnb.session.run import Outcome, run


def run_inline(plan: RunPlan) -> Outcome:
    """One plan run whole in this process (a task's body): quiet, no progress bar."""
    return run(plan, executor=False, say=False)


def run_plans(plans: Sequence[RunPlan], client=None, desc: str = "runs",
              progress: bool = True) -> list[Outcome]:
    """Every plan as one task of ``client``'s executor; their outcomes in the order given.

    Parameters
    ----------
    plans : sequence of RunPlan
        Checked; each with its own run folder.
    client : distributed.Client, executor or False, optional
        Where the runs go (None: the default client, else this process).
    desc : str
        The progress bar's label.
    progress : bool
        A bar over runs.

    Returns
    -------
    list of Outcome
        With each run's history rows and final evaluation; its folder written.

    Raises
    ------
    RuntimeError
        A run failed (named); the runs not yet finished are cancelled.
    """
    from esnb.runners.sweep import map_runs

    folders = [str(p.folder) for p in plans]
    if len(set(folders)) != len(folders):
        raise ValueError("each run of a sweep needs its own run folder")
    return map_runs(run_inline, list(plans), client, desc=desc, progress=progress,
                    describe=lambda p: f"{p.name} ({p.folder})")

"""The run session: one home for how a run is run, below ``esnb train``, :func:`esnb.launch`,
the results bench and the sweeps.

- :mod:`.options`: :class:`RunOptions`, the run's options (cluster, folder, checkpoints,
  resume/fork, trackers, videos, serving, final evaluation, progress), declared once as
  settings; the command line's flags are generated from them.
- :mod:`.plan`: :func:`plan` checks everything before anything starts and makes the run
  folder; :class:`RunPlan` is the result, kept as the folder's ``plan.json``
  (:mod:`.checks`: each check, one line).
- :mod:`.run`: :func:`run` runs a plan to its run folder: the cluster, serving
  (:mod:`esnb.remote.serve`), checkpoints, trackers and videos (:mod:`.finish`), the progress
  bar (:mod:`.progress`), signals (:mod:`.signals`), the final evaluation.
- :mod:`.launch`: :func:`esnb.launch`, a plan written into its folder and run in a process of
  its own (``esnb run-plan``), attached as soon as it serves.
- :mod:`.sweep`: runs side by side, each a session run inside one task.
"""

from __future__ import annotations

from esnb.lazy import lazy_names

_LAZY = {
    "RunOptions": "esnb.session.options",
    "RunPlan": "esnb.session.plan",
    "plan": "esnb.session.plan",
    "run": "esnb.session.run",
    "Outcome": "esnb.session.run",
    "launch": "esnb.session.launch",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)

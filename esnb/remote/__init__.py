"""Runs that outlive the notebook: launch a run in its own process, attach to it from any kernel.

- :mod:`esnb.remote.serve`: the run's side. ``esnb train <algo> --serve`` (what
  :func:`~esnb.remote.launch.launch` starts) runs on a cluster of its own, a LocalCluster bound
  to loopback or a batch cluster (dask-jobqueue: SLURM, PBS, SGE, LSF) whose scheduler is in
  the run's process, speaking TLS with certificates made for this run alone (written into the
  run folder, readable by its user only, and by its batch jobs' workers); it adds one handler,
  ``esnb_run``, to that cluster's scheduler and writes ``attach.json`` into the run folder,
  deleted when the run has written its folder. A scheduler the run does not own
  (``--address``) is refused.
- :mod:`esnb.remote.attach`: the kernel's side. :func:`~esnb.remote.attach.runs` lists the run
  folders with a live run; :func:`~esnb.remote.attach.attach` returns an
  :class:`~esnb.remote.attach.AttachedRun`: the run's history, changes and controls fetched over
  Dask's RPC, a change validated by the run's own controls and recorded with its origin.
- :mod:`esnb.remote.launch`: :func:`~esnb.remote.launch.launch` checks the settings exactly as
  ``esnb train`` does, starts the run in a session of its own (a kernel's restart or death does
  not reach it) and attaches as soon as it serves.
"""

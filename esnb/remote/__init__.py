"""Runs that outlive the notebook: the run's side serves, the kernel's side attaches.

- :mod:`esnb.remote.serve`: the run's side. A run with ``serve`` (``esnb train <algo>
  --serve``, or what :func:`esnb.launch` starts: :mod:`esnb.session.launch`) runs on a cluster
  of its own, a LocalCluster bound to loopback or a batch cluster (dask-jobqueue: SLURM, PBS,
  SGE, LSF) whose scheduler is in the run's process, speaking TLS with certificates made for
  this run alone (written into the run folder, readable by its user only, and by its batch
  jobs' workers); it adds one handler, ``esnb_run``, to that cluster's scheduler and writes
  ``attach.json`` into the run folder, deleted when the run has written its folder. A
  scheduler the run does not own (``--address``) is refused.
- :mod:`esnb.remote.folders`: what run folders say: :func:`~esnb.remote.folders.runs` lists
  those with a live run, :func:`~esnb.remote.folders.serving_info` reads one's
  ``attach.json``.
- :mod:`esnb.remote.attach`: the kernel's side. :func:`~esnb.remote.attach.attach` returns an
  :class:`~esnb.remote.attach.AttachedRun`: the run's history, changes and controls fetched
  over Dask's RPC, a change validated by the run's own controls and recorded with its origin;
  the handle is a :class:`~esnb.views.protocol.SteeredRun`, as a local runner is.
"""

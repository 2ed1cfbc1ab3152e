"""``esnb.launch``: a run in a process of its own, planned and checked here, attached as soon
as it serves.

The run is planned here by the same code as ``esnb train`` (:func:`esnb.session.plan.plan`:
the options, every setting, the env id, the run folder made), so a bad value is one line
before any process starts; the plan goes into the run folder (``plan.json``) and the run is
``python -m esnb.cli run-plan <run folder>/plan.json`` started in a new session
(``start_new_session``): a kernel's restart, interrupt or death does not reach it, nor its
workers, and no setting travels as text on its command line. Its output goes to ``run.log``
in its run folder. It runs with this kernel's ``esnb`` and ``jobqueue`` dask config (what
``dask.config.set`` changed here too); ``cluster=`` chooses its own cluster: a LocalCluster,
or a batch cluster (``"slurm"``: its workers are SLURM jobs, its scheduler in the run's
process, served as a LocalCluster's is).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from esnb.remote.attach import AttachedRun, attach
from esnb.remote.folders import alive, last_line, serving_info
from esnb.remote.serve import BATCH
from esnb.session.options import RunOptions

#: what ``cluster=`` takes: the clusters a run starts and owns
CLUSTERS = ("local", *BATCH)


def _split(algorithm: str, given: dict[str, Any]) -> tuple[Any, dict, dict, dict, dict]:
    """The registry's entry and ``given`` split into run options, budget (by counter or by
    its flag's name), the algorithm's own command flags and settings."""
    from esnb.runners.registry import algorithms, load

    algos = algorithms()
    if algorithm not in algos:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(algos)}")
    algo = algos[algorithm]
    counters = {key: key for _, (key, _) in algo.budgets.items()}
    counters.update({flag.replace("-", "_"): key for flag, (key, _) in algo.budgets.items()})
    command = set(load(algo.flags).names()) if algo.flags else set()
    options, budget, flags, settings = {}, {}, {}, {}
    for key, value in given.items():
        if key in RunOptions.names():
            options[key] = value
        elif key in counters:
            budget[counters[key]] = value
        elif key in command:
            flags[key] = value
        else:
            settings[key] = value
    try:
        json.dumps(settings)
    except TypeError as exc:
        raise ValueError(f"settings must be plain values (numbers, strings, lists, dicts): "
                         f"{exc}") from None
    return algo, options, budget, flags, settings


def _check_cluster(cluster: str | None) -> str | None:
    """``cluster=``: None (the dask config's) or one of :data:`CLUSTERS`, else one line."""
    if cluster is None:
        return None
    if not isinstance(cluster, str) or cluster.lower() not in CLUSTERS:
        raise ValueError(f"cluster must be 'local' or a batch system the run starts and owns "
                         f"({', '.join(BATCH)}), got {cluster!r}")
    return cluster.lower()


def _child_config(cluster: str | None) -> dict[str, str]:
    """The environment variables that give the run this kernel's ``esnb`` and ``jobqueue``
    dask config (dask reads ``DASK_INTERNAL_INHERIT_CONFIG`` as it does in a spawned worker;
    ``DASK_*`` variables still win), ``cluster`` as its ``esnb.cluster.type``."""
    import dask.config

    inherit = {key: dask.config.get(key) for key in ("esnb", "jobqueue")
               if dask.config.get(key, None) is not None}
    try:
        out = {"DASK_INTERNAL_INHERIT_CONFIG": dask.config.serialize(inherit)}
    except TypeError as exc:
        raise ValueError(f"the esnb/jobqueue dask config must be plain values (numbers, "
                         f"strings, lists, dicts) to reach the run: {exc}") from None
    if cluster is not None:
        out["DASK_ESNB__CLUSTER__TYPE"] = cluster
    return out


def launch(algorithm: str, env: str | None = None, timeout: float = 300.0,
           origin: str | None = None, cluster: str | None = None, **given: Any) -> AttachedRun:
    """Start a run in its own process and attach to it (see :mod:`esnb.remote`).

    Parameters
    ----------
    algorithm : str
        As ``esnb train`` names it: ``es``, ``aesrl``, ``apex``, ...
    env : str, optional
        The environment (else the preset's).
    timeout : float
        Seconds to wait for the run to serve (a safety net; it is usually seconds).
    origin : str, optional
        How this kernel's control changes are recorded (see :func:`~esnb.remote.attach`).
    cluster : str, optional
        The run's own cluster: ``"local"`` (a LocalCluster on 127.0.0.1) or a batch system of
        dask-jobqueue, ``"slurm"``, ``"pbs"``, ``"sge"``, ``"lsf"`` (its jobs' settings from
        ``esnb.cluster.kwargs`` and ``jobqueue.<type>``; the jobs' workers read the run's TLS
        files in its folder, so the run folder must be on a filesystem they share). Default:
        ``esnb.cluster.type`` of the dask config.
    **given
        The run's options, as ``esnb train`` takes them and with its defaults
        (:class:`~esnb.session.options.RunOptions`): ``workers`` (the run's LocalCluster, or
        the workers its batch cluster keeps: ``esnb.cluster.adapt``'s minimum), ``name``,
        ``out``, ``preset``, ``final_eval``, ``checkpoint_every``, ``keep_every``,
        ``video_every``, ``resume``, ``fork``/``at``, ``controls``, ``tensorboard``,
        ``mlflow``; ``address`` is refused (the run would serve a scheduler it does not own).
        The run always serves, without a progress bar. Budgets as ``runner.start()`` takes
        them (``generations=``, ``env_steps=``, ...) or as their flags name them
        (``steps=``); everything else is a setting, checked as ``esnb train`` checks it.

    Returns
    -------
    AttachedRun
        Its ``process`` is the run's :class:`subprocess.Popen`.

    Raises
    ------
    ValueError
        A bad setting, option, budget or cluster (nothing started), or the run's process ended
        before serving (the line is its log's last).
    """
    import dask.config

    from esnb.session.plan import plan as make_plan

    cluster = _check_cluster(cluster)
    if env is not None:
        given["env"] = env
    algo, options, budget, flags, settings = _split(algorithm, given)
    options = RunOptions.of(**{**options, "serve": True, "progress": False})
    chosen = dask.config.set({"esnb.cluster.type": cluster}) if cluster is not None \
        else contextlib.nullcontext()
    with chosen:  # the run's cluster type, as its process will read it
        child_config = _child_config(cluster)
        # every check of esnb train; the folder made
        plan = make_plan(algo, settings, options, budget, flags)
    plan_file = plan.write()
    log_path = plan.folder / "run.log"
    env_vars = {**os.environ, **child_config}
    # the child imports the esnb this kernel imported, wherever that is
    root = str(Path(__file__).resolve().parents[2])
    env_vars["PYTHONPATH"] = os.pathsep.join(
        [root, *filter(None, [env_vars.get("PYTHONPATH")])])
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "esnb.cli", "run-plan", str(plan_file)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env_vars,
            start_new_session=True)
    return _attach_when_served(algo.name, plan, process, log_path, timeout, origin)


def _attach_when_served(algorithm: str, plan, process, log_path: Path, timeout: float,
                        origin: str | None) -> AttachedRun:
    """The run attached once its ``attach.json`` names its process; one line if it ended
    first."""
    deadline = time.monotonic() + timeout
    while True:
        info = serving_info(plan.folder)
        if info is not None and int(info["pid"]) == process.pid:
            break
        code = process.poll()
        if code is not None or not alive(process.pid):
            raise ValueError(f"the {algorithm} run {plan.name!r} ended (exit {code}) before "
                             f"it could be attached: {last_line(log_path)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the {algorithm} run {plan.name!r} (pid {process.pid}) does "
                               f"not serve after {timeout} s: see {log_path}; attach later "
                               f"with esnb.attach({plan.name!r})")
        time.sleep(0.2)
    handle = attach(plan.folder, origin=origin)
    handle.process = process
    return handle

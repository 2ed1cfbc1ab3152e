"""LocalCluster workers forked from a server that has already imported what they need.

A spawned worker is a fresh interpreter: it imports distributed, numpy, gymnasium and MuJoCo
(~1 s of CPU each, two of them at once on a 2-core machine) before it can take a task, and that
was most of an ES run's start-up (issue 26). Here one ``multiprocessing`` forkserver imports
them once (:data:`PRELOAD`) and every worker is a ``fork`` of it: a worker is ready in a
fraction of that time, and pages of the preloaded modules are shared between the workers.

The server is launched when ``esnb.cluster`` is imported (:func:`start`), so it imports while
the driver is still importing esnb and the rest, on the core the driver leaves idle;
``make_client`` launches it if that did not happen and starts its LocalCluster's workers from it
(:func:`method`). ``esnb.cluster.forkserver: false`` turns it off (workers are spawned then).

What the workers keep:

- **Signals** (:mod:`esnb.cluster.signals`): the server is launched with SIGINT and SIGTERM
  ignored (:func:`~esnb.cluster.signals.spawned_processes_ignore`), so Python installs no
  ``KeyboardInterrupt`` handler in it and its children inherit both dispositions: a worker
  forked from it ignores a Ctrl-C meant for the driver from its first instruction, and so does
  the server itself. It exits when the driver does (its pipe from the driver closes).
- **The environment a nanny sets before it spawns** (``distributed.nanny.pre-spawn-environ``:
  one BLAS/OpenMP thread, glibc's trim threshold): a forked worker inherits the server's
  environment, not the driver's, and numpy reads those variables when it is imported, so the
  server is launched with them.
- **Lean workers**: :data:`PRELOAD` has no torch, pandas or bokeh (tests/test_lean_workers.py).

It is used only when esnb launched the server itself: a forkserver some other code started
first has its own modules and signal dispositions, and then workers are spawned as before.
Workers a nanny restarts later (after a fault) are spawned, as before.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.spawn
import os
import sys
import threading

import dask.config

from esnb import config
from esnb.cluster.signals import spawned_processes_ignore

#: modules the server imports once for every worker: dask's, the ES rollout stack, MuJoCo
PRELOAD = ("distributed", "numpy", "gymnasium", "mujoco", "esnb.runners.es.tasks",
           "esnb.envs.mujoco_fast")
#: set in the server's environment (so in every process forked from it): they launch none
MARK = "ESNB_FORKSERVER_CHILD"

_launched = False
_lock = threading.Lock()


def wanted() -> bool:
    """Whether this process should launch the server: a driver (not a worker, not the server
    or one of its children), in its main thread (signals can be ignored only there), with
    ``esnb.cluster.forkserver`` on and local worker processes configured."""
    return (bool(config.get("cluster.forkserver", True))
            and str(config.get("cluster.type", "local")).lower() == "local"
            and bool(config.get("cluster.processes", True))
            and MARK not in os.environ
            and multiprocessing.parent_process() is None
            # a spawned process unpickling its arguments (a worker a nanny restarts): its
            # parent_process() is set only after; multiprocessing refuses to start one here
            and not multiprocessing.spawn.is_forking(sys.argv)
            and not getattr(multiprocessing.current_process(), "_inheriting", False)
            and threading.current_thread() is threading.main_thread()
            and "forkserver" in multiprocessing.get_all_start_methods())


def _pre_spawn_environ() -> dict[str, str]:
    """What a nanny would set before spawning (dask's ``pre-spawn-environ``; variables already
    set keep their value, as in dask), and the hash seed it gives its workers."""
    env = {k: str(v) for k, v in
           (dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}).items()
           if v is not None and k not in os.environ}
    if os.environ.get("PYTHONHASHSEED", env.get("PYTHONHASHSEED")) in (None, "0"):
        env["PYTHONHASHSEED"] = "6640"
    return env


def start() -> bool:
    """Launch the server (once, without waiting for its imports) if :func:`wanted`; True when
    esnb's server is the one running."""
    global _launched
    from multiprocessing import forkserver

    with _lock:
        if _launched:
            return True
        # (multiprocessing has no public "is a server running"; its pid is set once launched)
        if not wanted() or forkserver._forkserver._forkserver_pid is not None:
            return False  # someone else's server: its modules and signals are not ours
        multiprocessing.get_context("forkserver").set_forkserver_preload(list(PRELOAD))
        env = {MARK: "1", **_pre_spawn_environ()}
        saved = {name: os.environ.get(name) for name in env}
        try:
            os.environ.update(env)
            with spawned_processes_ignore():
                forkserver.ensure_running()
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        _launched = True
        return True


def method():
    """A context in which a LocalCluster's nannies fork their workers from the server (when it
    is esnb's, see :func:`start`), else one that changes nothing."""
    if not start():
        return contextlib.nullcontext()
    import distributed.utils

    # dask's first forkserver context imports its own preload list (pandas, lz4) in this
    # process to hand it to a server that is already running ours: nothing would use them
    if hasattr(distributed.utils, "_forkserver_preload_set"):
        distributed.utils._forkserver_preload_set = True
    return dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})

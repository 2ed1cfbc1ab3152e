"""A run others can attach to: one handler on its own scheduler, ``attach.json`` in its folder.

The run's own cluster (a LocalCluster, or a batch cluster of dask-jobqueue: SLURM, PBS, SGE,
LSF) runs its scheduler in the run's own process, so a handler added to that scheduler
(``scheduler.handlers["esnb_run"]``) reaches the runner object itself: an attached kernel's
``await client.scheduler.esnb_run(action=...)`` reads its history or sets its controls through
the same ``controls`` a widget of the run's own kernel would. Handlers run on the scheduler's
event loop, so each op is quick: a slice of a list, a validated ``set``.

Access: the cluster speaks TLS with a certificate made for this run
(:meth:`distributed.security.Security.temporary`), written before the cluster starts into
``<run folder>/attach/`` (mode 0600, folders 0700) and removed once it has closed, so only the
user who started the run can read it, and a client without it is refused by the TLS handshake.
A LocalCluster listens on 127.0.0.1 only; a batch cluster's scheduler listens where its jobs'
workers reach it (dask-jobqueue's ``interface``), and those workers, started by the batch
system as the same user, read the same files (``--tls-ca-file``, ``--tls-cert``,
``--tls-key``). A scheduler the run does not own (``--address``) is never served
(:func:`check_servable`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from esnb.config import CLUSTER_TYPES
from esnb.record import history_to_json
from esnb.session.folder import FolderLock

#: the file a serving run writes into its folder (deleted once the run has written its folder)
ATTACH_FILE = "attach.json"
#: the folder of the run's TLS credentials, inside the run folder
CREDENTIALS = "attach"
#: the one handler added to the scheduler
HANDLER = "esnb_run"
#: longest origin an attached kernel may give (it is written into changes.csv)
MAX_ORIGIN = 120
#: the batch-system types of ``esnb.cluster.type`` (dask-jobqueue): clusters the run owns
BATCH = tuple(t for t in CLUSTER_TYPES if t not in ("local", "address"))
#: seconds a run that ends waits for its attached kernels to close their clients (they look
#: at attach.json whenever they are used; a handle's wait() every half second)
LEAVE_WAIT = 3.0
#: a runner's states once its run has ended, and the ops that would ask it for work
ENDED = ("stopped", "finished", "failed")
WORK = ("set", "step", "pause", "resume")
#: the HTTP routes of a served run's scheduler and workers without a dashboard
HEALTH_ONLY = ["distributed.http.health"]


def credentials():
    """A :class:`~distributed.security.Security` with a certificate made for one run, in
    memory."""
    from esnb.cluster import make_security

    try:
        return make_security("temporary")
    except ImportError:
        raise ValueError("--serve needs the cryptography package (TLS certificates made for "
                         "the run): pip install 'esnb[remote]'") from None


def _write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, created readable by this user only (never briefly wider)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)  # an older file of the same name kept its mode through O_TRUNC


def _write_credentials(folder: Path, security) -> None:
    """``security``'s PEM text into ``<folder>/attach/`` (that folder 0700, files 0600; the
    run folder keeps its mode: its history is the user's to share)."""
    creds = folder / CREDENTIALS
    creds.mkdir(mode=0o700, exist_ok=True)
    os.chmod(creds, 0o700)
    # Security.temporary(): one self-signed certificate is the CA and every party's
    # certificate, and the key signs for all of them
    _write_private(creds / "cert.pem", security.tls_ca_file)
    _write_private(creds / "key.pem", security.tls_client_key)


def _remove_credentials(folder: Path) -> None:
    for name in ("cert.pem", "key.pem"):
        (folder / CREDENTIALS / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (folder / CREDENTIALS).rmdir()


@contextlib.contextmanager
def run_credentials(folder):
    """The run's TLS credentials as files, for the life of its cluster.

    A certificate made for this run is written into ``<folder>/attach/`` before the cluster
    starts; the yielded :class:`~distributed.security.Security` reads those files, so that a
    batch cluster's workers (dask-jobqueue passes them ``--tls-ca-file``, ``--tls-cert``,
    ``--tls-key``: paths, never the key's text in a job script) and the run's own scheduler
    and client use one certificate. The files go when the block ends: after the cluster has
    closed (its last connections still read them).

    Yields
    ------
    distributed.security.Security
    """
    from distributed.security import Security

    folder = Path(folder).resolve()  # a job's worker may start in another directory
    _write_credentials(folder, credentials())
    cert, key = (str(folder / CREDENTIALS / name) for name in ("cert.pem", "key.pem"))
    try:
        yield Security(require_encryption=True, tls_ca_file=cert,
                       **{f"tls_{role}_{part}": path for role in ("client", "scheduler", "worker")
                          for part, path in (("cert", cert), ("key", key))})
    finally:
        _remove_credentials(folder)


def check_servable(address: str | None, kind: str, workers: int) -> None:
    """``--serve`` asks for a cluster the run owns: one line why not, before any starts.

    Parameters
    ----------
    address : str, optional
        ``--address``: a scheduler the run would join.
    kind : str
        ``esnb.cluster.type`` (``address`` joins ``esnb.cluster.address``).
    workers : int
        ``--workers`` (0: the run's own process, no scheduler).
    """
    if address or kind == "address":
        where = f"--address {address}" if address else "esnb.cluster.type 'address'"
        raise ValueError(f"--serve refuses a scheduler the run does not own ({where}): it "
                         f"would add its handler to that scheduler and hand attached kernels "
                         f"credentials for it, and cannot give it the run's TLS; serve the "
                         f"run's own cluster (a LocalCluster, or esnb.cluster.type "
                         f"{'/'.join(BATCH)})")
    if workers < 1:
        raise ValueError("--serve needs a cluster of the run's own (--workers 1 or more): "
                         "attached kernels reach the run through its scheduler")


@contextlib.contextmanager
def served_cluster(folder, serve: bool, kind: str):
    """The TLS and the :func:`~esnb.cluster.make_client` keywords of a run's own cluster.

    Parameters
    ----------
    folder : path
        The run folder (its credentials go into ``attach/`` while the block runs).
    serve : bool
        ``--serve``; without it: no TLS, no keywords.
    kind : str
        ``esnb.cluster.type``: ``local`` (bound to 127.0.0.1) or a batch type (its scheduler
        where the jobs' workers reach it, dask-jobqueue's ``interface``).

    Yields
    ------
    tuple
        The :class:`~distributed.security.Security` (None without ``serve``) and the keyword
        arguments of the cluster.
    """
    if not serve:
        yield None, {}
        return
    import dask

    # Dask's HTTP pages (the dashboard, its JSON and Prometheus routes) are plain HTTP behind
    # no credentials: off unless asked (esnb.serve.dashboard); a health check stays
    board, quiet = {}, contextlib.nullcontext()
    if not dashboard_on():
        board = {"dashboard_address": False}
        quiet = dask.config.set({"distributed.scheduler.http.routes": HEALTH_ONLY,
                                 "distributed.worker.http.routes": HEALTH_ONLY})
    with quiet, run_credentials(folder) as security:
        yield security, {"security": security, **board,
                         **({"host": "127.0.0.1"} if kind == "local" else {})}


def dashboard_on() -> bool:
    """Whether a served run shows its Dask dashboard (``esnb.serve.dashboard``)."""
    from esnb import config

    return bool(config.get("serve.dashboard", False))


def _controls_schema(controls) -> list[dict[str, Any]]:
    """The controls' declarations as plain data (their ``check`` functions stay here)."""
    return [{k: v for k, v in asdict(c).items() if k != "check"} for c in controls.schema]


class Serving:
    """The run ``runner`` reachable through ``client``'s scheduler (see the module's text).

    Parameters
    ----------
    runner : Runner
    client : distributed.Client
        The client of the run's own cluster, a LocalCluster or a dask-jobqueue one (its
        scheduler runs in this process).
    folder : path
        The run folder: ``attach.json`` goes there, and the credentials unless
        :func:`run_credentials` wrote them already.
    security : distributed.security.Security
        The cluster's: from :func:`run_credentials` (files in the run folder, removed by it),
        or :func:`credentials` (in memory: written here, removed by :meth:`close`).
    """

    def __init__(self, runner, client, folder, security):
        self.runner, self.folder = runner, Path(folder)
        # a live run holds its folder (the session's lock, shared; taken here when serving
        # without the session): the lock, not this file, says the run is live
        self.lock = FolderLock(self.folder).acquire()
        self.dashboard = getattr(client, "dashboard_link", None) if dashboard_on() else None
        self.scheduler = client.cluster.scheduler
        self.own_client = client.id
        self.address = self.scheduler.address
        self.own_files = "\n" in security.tls_ca_file  # PEM text, not a file's path
        if self.own_files:
            _write_credentials(self.folder, security)
        self.scheduler.handlers[HANDLER] = self.handle
        self.info = {"name": runner.name, "algorithm": runner.algorithm, "title": runner.title,
                     "iteration_column": runner.iteration_column, "address": self.address,
                     "pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                     "ca": f"{CREDENTIALS}/cert.pem", "cert": f"{CREDENTIALS}/cert.pem",
                     "key": f"{CREDENTIALS}/key.pem"}
        tmp = self.folder / f".{ATTACH_FILE}.{os.getpid()}"
        _write_private(tmp, json.dumps(self.info, indent=1))
        os.replace(tmp, self.folder / ATTACH_FILE)  # readers never see half a file

    def close(self) -> None:
        """No longer attachable: the file goes (and the credentials :meth:`__init__` wrote), the
        handler answers "ended"; then a moment (at most :data:`LEAVE_WAIT` s) for the attached
        kernels to notice and close their clients before the scheduler goes (a client left
        connected would log a failed reconnection in its notebook)."""
        (self.folder / ATTACH_FILE).unlink(missing_ok=True)
        if self.own_files:
            _remove_credentials(self.folder)
        # a kernel that read attach.json just before it went may still send an op: it gets
        # "ended" (and reads the run folder), not the None dask answers for an unknown handler
        self.scheduler.handlers[HANDLER] = _ended
        deadline = time.monotonic() + LEAVE_WAIT
        while time.monotonic() < deadline and self._attached():
            time.sleep(0.1)
        self.lock.release()

    def _attached(self) -> list[str]:
        """The clients of the scheduler other than the run's own."""
        return [c for c in list(self.scheduler.clients)
                if c != self.own_client and c != "fire-and-forget"]

    # -- the handler (on the scheduler's event loop: every op is quick) ------------------------
    def handle(self, action: str, **kwargs) -> dict[str, Any]:
        """One op (``action``: dask's messages keep ``op`` for the handler's name) of an
        attached kernel. An error it should see (a bad control value) is
        returned as ``{"error": text}``: the kernel raises it as the ValueError it was here.
        Once the run has ended (finished, stopped or failed) only reads are answered."""
        fn = getattr(self, f"op_{action}", None)
        if fn is None:
            return {"error": f"unknown op {action!r} of {HANDLER}"}
        if action in WORK and self.runner.state in ENDED:
            return {"error": f"run {self.runner.name!r} has ended ({self.runner.state}): "
                             f"{action} does nothing now", "kind": "RuntimeError"}
        try:
            return fn(**kwargs)
        except (ValueError, TypeError, RuntimeError) as exc:
            return {"error": str(exc), "kind": type(exc).__name__}

    def op_describe(self) -> dict[str, Any]:
        from esnb.runners.plotspec import panels_for

        runner = self.runner
        return {**self.info, **self.op_state(), "controls": runner.controls.as_dict(),
                "schema": _controls_schema(runner.controls),
                "plot_panels": [asdict(p) for p in panels_for(runner)],
                "dashboard": self.dashboard}

    def op_state(self) -> dict[str, Any]:
        runner = self.runner
        error = runner.error
        return {"state": runner.state, "iteration": runner.iteration,
                "wall_time": runner.wall_time, "running": runner.running,
                "version": runner.controls.version,
                "failure": None if error is None else f"{type(error).__name__}: {error}"}

    def op_history(self, since: int = 0) -> dict[str, Any]:
        return {"rows": history_to_json(self.runner._records[int(since):])}

    def op_changes(self, since: int = 0) -> dict[str, Any]:
        return {"rows": history_to_json(self.runner._change_log[int(since):])}

    def op_controls(self) -> dict[str, Any]:
        return {"values": self.runner.controls.as_dict(),
                "version": self.runner.controls.version}

    def op_set(self, values: dict[str, Any], origin: str) -> dict[str, Any]:
        """The run's own validation: a bad value is the error a local ``set`` raises."""
        if not isinstance(values, dict):
            raise TypeError(f"values must be a dict of control values, got {values!r}")
        version = self.runner.controls.apply(values, origin=str(origin)[:MAX_ORIGIN])
        return {"version": version}

    def op_stop(self) -> dict[str, Any]:
        self.runner.stop()
        return self.op_state()

    def op_pause(self) -> dict[str, Any]:
        self.runner.pause()
        return self.op_state()

    def op_resume(self) -> dict[str, Any]:
        self.runner.resume()
        return self.op_state()

    def op_step(self, n: int = 1) -> dict[str, Any]:
        """``n`` iterations of a paused run (never waits: the run's thread does them)."""
        self.runner.step(int(n), block=False)
        return self.op_state()


def _ended(**_: Any) -> dict[str, Any]:
    """The handler of a run that no longer serves."""
    return {"ended": True}


@contextlib.contextmanager
def serving(runner, executor, folder, security):
    """:class:`Serving` for the block (nothing when ``security`` is None: not asked to
    serve)."""
    if security is None:
        yield None
        return
    served = Serving(runner, executor.client, folder, security)
    try:
        yield served
    finally:
        served.close()

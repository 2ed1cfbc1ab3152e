"""A kernel attached to a run of another process: :func:`attach`, the handle.

An :class:`AttachedRun` is a Dask client of the run's own scheduler (TLS, with the credentials
the run wrote into its folder, see :mod:`esnb.remote.serve`): its ``history``, ``changes`` and
``controls`` are the run's, fetched when read (history and changes incrementally), and a control
change goes to the run's own ``controls``, validated there and recorded with this kernel's
origin. ``detach()`` closes the client only; the run goes on. Any number of kernels may attach.
The handle is a :class:`~esnb.views.protocol.SteeredRun`, as a local runner is: the dashboard,
the live plot and the figure show it. Which runs serve, and what an ended one left, is read
from their folders (:mod:`esnb.remote.folders`: :func:`runs`, :func:`serving_info`).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from esnb.remote.controls import AttachedControls
from esnb.remote.folders import (
    DamagedRun,
    RunEnded,
    _ended,
    _resolve,
    last_line,
    runs,
    serving_info,
)
from esnb.remote.serve import HANDLER
from esnb.session.folder import lock_holder

if TYPE_CHECKING:
    from esnb.runners.plotspec import PlotPanel

__all__ = ["AttachedControls", "AttachedRun", "RunEnded", "attach", "connect", "last_line",
           "runs", "serving_info"]

#: seconds to wait for the run's scheduler to answer a connection
CONNECT_TIMEOUT = 10.0
#: seconds a fetched state is reused
STATUS_AGE = 0.2


def connect(address: str, security, name: str, timeout: float = CONNECT_TIMEOUT):
    """A Dask client of a run's scheduler; a refused connection (no or foreign credentials) is
    one line."""
    from esnb.cluster.clients import start_client

    try:
        return start_client(address, security=security, set_as_default=False, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - dask raises OSError, TimeoutError, TypeError...
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"cannot attach to run {name!r} at {address}: {why} (only the user "
                         f"who started it can attach: it takes the run's TLS credentials)"
                         ) from None


def attach(name_or_folder, folder="runs", origin: str | None = None,
           timeout: float = CONNECT_TIMEOUT) -> AttachedRun:
    """Attach to a run that serves (``esnb train ... --serve``, :func:`esnb.launch`).

    Parameters
    ----------
    name_or_folder : str or path
        The run's name (a folder of ``folder``) or its run folder.
    folder : path
        Where run folders are (default ``runs``).
    origin : str, optional
        How this kernel's control changes are recorded (default ``host pid N``).
    timeout : float
        Seconds to wait for the run's scheduler to answer.

    Raises
    ------
    ValueError
        An unknown name (the line lists the runs there are), a run that has ended (the line
        names its checkpoint), or a refused connection.
    """
    from distributed.security import Security

    _check_arguments(name_or_folder, folder, origin, timeout)
    path = _resolve(name_or_folder, folder)
    info = serving_info(path)
    if info is None:
        raise _ended(path)
    security = Security(tls_ca_file=str(path / info["ca"]),
                        tls_client_cert=str(path / info["cert"]),
                        tls_client_key=str(path / info["key"]), require_encryption=True)
    client = connect(info["address"], security, info["name"], timeout)
    return AttachedRun(path, info, client, origin or f"{socket.gethostname()} pid {os.getpid()}")


def _check_arguments(name_or_folder, folder, origin, timeout) -> None:
    """:func:`attach`'s arguments, each named in its one line."""
    import math
    import numbers

    from esnb.controls import shown

    for arg, value, what in (("name_or_folder", name_or_folder, "a run's name or its folder"),
                             ("folder", folder, "the folder of run folders")):
        if not isinstance(value, str | os.PathLike):
            raise TypeError(f"esnb.attach: {arg} must be {what} (a str or path), got "
                            f"{shown(value)}")
        if not str(value).strip():
            raise ValueError(f"esnb.attach: {arg} must be {what}, got {shown(value)}")
    if origin is not None and not isinstance(origin, str):
        raise TypeError(f"esnb.attach: origin must be a str or None, got {shown(origin)}")
    try:
        seconds = float(timeout)
    except (TypeError, ValueError, OverflowError):
        seconds = math.nan
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) \
            or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"esnb.attach: timeout must be a finite number of seconds > 0, got "
                         f"{shown(timeout)}")


class AttachedRun:
    """A run of another process, attached (see :func:`attach`): the same ``history``,
    ``records``, ``changes``, ``controls``, ``state``, ``plot()``, ``wait()``, ``stop()`` as a
    local runner; ``detach()`` leaves it running."""

    def __init__(self, folder: Path, info: dict[str, Any], client, origin: str):
        self.folder, self.client, self.origin = Path(folder), client, str(origin)
        self.attached = True  # until detach()
        self.pid, self.address = int(info["pid"]), info["address"]
        self.process = None  # the Popen of esnb.launch, when this kernel started it
        self._over = False  # the run said it no longer serves: for good
        self._records: list[dict[str, Any]] = []
        self._changes: list[dict[str, Any]] = []
        self._state: tuple[float, dict[str, Any]] = (-1e9, {})
        about = self._call("describe")
        self.name, self.algorithm = about["name"], about["algorithm"]
        self.title, self.iteration_column = about["title"], about["iteration_column"]
        self.controls = AttachedControls(self, about["schema"], about["controls"])
        #: the run's plot panels, as its runner declared them (plain data)
        self.plot_panels, self.plot_default_panels = about["plot_panels"], False
        self.final_evaluation: dict[str, Any] | None = None
        #: the run's Dask dashboard
        self.dashboard_link: str | None = about.get("dashboard")

    # -- the transport -------------------------------------------------------------------------
    def serving(self) -> bool:
        """Whether the run still serves (its ``attach.json`` is there, its process alive).
        Once it does not, this handle closes its client at once: the run waits a moment for
        its attached kernels to leave before its scheduler goes, so that no client is left
        reconnecting to it (Dask would log an error in the notebook)."""
        try:
            info = serving_info(self.folder)
        except DamagedRun:  # its file damaged while it runs: the folder's lock says
            info = {"pid": lock_holder(self.folder)}
        alive = not self._over and info is not None and info["pid"] == self.pid
        if not alive:
            self._over = True
            self.detach()
        return alive

    def _call(self, action: str, **kwargs) -> dict[str, Any]:
        if not self.serving():
            raise _ended(self.folder)
        if not self.attached:
            raise ValueError(f"run {self.folder.name!r}: this handle is detached; "
                             f"esnb.attach({str(self.folder)!r}) again")
        try:
            reply = self.client.sync(getattr(self.client.scheduler, HANDLER), action=action,
                                     **kwargs)
        except OSError:  # dask's CommClosedError among them
            if not self.serving():  # its scheduler went with the run
                raise _ended(self.folder) from None
            raise
        if reply is None or reply.get("ended"):
            # the run stopped serving between the look at attach.json and this op (dask
            # answers None for a handler that has gone)
            self._over = True
            self.detach()
            raise _ended(self.folder)
        if reply.get("error"):
            kind = {"TypeError": TypeError, "RuntimeError": RuntimeError}.get(
                reply.get("kind"), ValueError)
            raise kind(reply["error"])
        if "running" in reply:  # a state: kept for the widgets' many reads of it
            self._state = (time.monotonic(), reply)
        return reply

    def _ask(self, action: str, **kwargs) -> dict[str, Any] | None:
        """:meth:`_call`, or None once the run no longer serves: a reader then turns to the
        run folder (the run may stop serving between any look and any op)."""
        try:
            return self._call(action, **kwargs)
        except RunEnded:
            return None

    def _status(self) -> dict[str, Any] | None:
        """The run's state, iteration, wall time, controls version (None once it no longer
        serves): asked again after :data:`STATUS_AGE` seconds (a panel reads them several
        times a refresh)."""
        if not self.serving():
            return None
        at, status = self._state
        if time.monotonic() - at > STATUS_AGE:
            status = self._ask("state")
        return status

    # -- what a runner shows ----------------------------------------------------------------
    @property
    def records(self) -> list[dict[str, Any]]:
        """History rows as dicts, fetched since the last read (the run folder's once it
        ended)."""
        reply = self._ask("history", since=len(self._records))
        if reply is None:
            self._records = self._from_folder("history.csv", self._records)
        else:
            self._records += reply["rows"]
        return list(self._records)

    @property
    def history(self) -> pd.DataFrame:
        return pd.DataFrame(self.records)

    @property
    def changes(self) -> pd.DataFrame:
        """Every control change the run applied, with its iteration and ``origin``."""
        reply = self._ask("changes", since=len(self._changes))
        if reply is None:
            self._changes = self._from_folder("changes.csv", self._changes)
        else:
            self._changes += reply["rows"]
        cols = [self.iteration_column, "wall_time", "env_steps", "name", "old", "new", "version",
                "origin"]
        return pd.DataFrame(self._changes, columns=cols)

    def _from_folder(self, file: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        path = self.folder / file
        try:
            return pd.read_csv(path).to_dict("records") if path.stat().st_size else rows
        except (OSError, pd.errors.EmptyDataError):
            return rows

    @property
    def state(self) -> str:
        """The run's state (``running``, ``paused``, ``stopped``, ``finished``, ``failed``),
        ``ended`` once its process has written its folder, ``detached`` after
        :meth:`detach`."""
        if not self.serving():
            return "ended"
        if not self.attached:
            return "detached"
        status = self._status()
        return "ended" if status is None else status["state"]

    @property
    def iteration(self) -> int:
        status = self._status()
        if status is not None:
            return int(status["iteration"])
        records = self.records
        return int(records[-1][self.iteration_column]) if records else 0

    @property
    def wall_time(self) -> float:
        status = self._status()
        return 0.0 if status is None else float(status["wall_time"])

    @property
    def running(self) -> bool:
        status = self._status()
        return status is not None and bool(status["running"])

    @property
    def error(self) -> RuntimeError | None:
        """Why the run failed (its text), while it is failed."""
        status = self._status()
        failure = None if status is None else status.get("failure")
        return RuntimeError(failure) if failure else None

    def panels(self) -> list[PlotPanel]:
        """The run's own plot panels, as its runner declared them."""
        from esnb.runners.plotspec import PlotPanel

        return [PlotPanel.coerce(p) for p in self.plot_panels]

    def plot(self):
        """The figure of the run's history so far (bokeh), the run's own panels."""
        from esnb.views.figures import plot

        return plot(self)

    # -- what a runner does -------------------------------------------------------------------
    def stop(self) -> None:
        """End the run after its current iteration; it writes its folder as usual."""
        self._call("stop")

    def pause(self) -> None:
        """Hold the run after its current iteration."""
        self._call("pause")

    def resume(self) -> None:
        self._call("resume")

    def step(self, n: int = 1, block: bool = False) -> AttachedRun:
        """``n`` iterations of the paused run (``block``: wait until they are done)."""
        target = self.iteration + int(n)
        self._call("step", n=int(n))
        while block and self.serving() and self.iteration < target:
            time.sleep(0.2)
        return self

    def start(self, **budget) -> AttachedRun:
        """An attached run was started by its own process; it cannot start again here."""
        raise RuntimeError(f"run {self.name!r} is started by its own process (esnb.launch, "
                           f"esnb train --serve); resume() a paused one")

    def acting_policy(self):
        """The policy lives in the run's process: said as a local runner says it has none."""
        raise ValueError(f"run {self.name!r} is attached: its policy is in its own process "
                         f"(esnb play {self.folder} once it has ended)")

    def video(self, *args, **kwargs):
        """No video of an attached run here: :meth:`acting_policy` says why."""
        return self.acting_policy()

    def wait(self, timeout: float | None = None, poll: float = 0.5) -> AttachedRun:
        """Block until the run has ended and written its folder (``summary.json``).

        Raises
        ------
        TimeoutError
            Still running after ``timeout`` seconds.
        RuntimeError
            The run's process ended without its summary (the line says why, from its log).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.serving():
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {self.name!r} still running after {timeout} s")
            time.sleep(poll)
        self.detach()  # its scheduler is gone: no client left retrying it
        if self.process is not None:
            self.process.wait()  # esnb.launch's child: reaped, no zombie left
        if not (self.folder / "summary.json").exists():
            raise RuntimeError(f"run {self.name!r} ended without writing its folder: "
                               f"{last_line(self.folder / 'run.log')}")
        self.records  # noqa: B018 - the run folder's complete history, kept
        return self

    def detach(self) -> None:
        """Close this kernel's connection; the run goes on."""
        if self.attached:
            self.attached = False
            self.client.close(timeout=5)

    def __enter__(self) -> AttachedRun:
        return self

    def __exit__(self, *exc) -> None:
        self.detach()

    def __repr__(self) -> str:
        return f"<AttachedRun {self.name!r} ({self.title}) state={self.state} pid={self.pid}>"

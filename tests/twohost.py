"""Two hosts on one machine: a Dask scheduler, a worker on this host and a worker on a simulated
second host that shares no /tmp, /dev/shm, home or cache with this one (issue 34).

The second host is the same ``dask worker`` command run in Linux namespaces of its own
(``unshare --uts --mount --propagation private``): inside them a shell script sets another
hostname, mounts a fresh tmpfs over ``/tmp`` and ``/dev/shm`` and points ``HOME`` and
``XDG_CACHE_HOME`` at an empty folder on that tmpfs before it starts the worker. The network
namespace is shared: both hosts talk over 127.0.0.1. The driver's run folders live under this
host's ``/tmp`` (:meth:`TwoHosts.run_folder`), which the second host's tmpfs hides.

Every process is started as the leader of a process group of its own: at the end the leader
gets SIGTERM (a nanny closes its worker, which releases its shared memory), then whatever is
left of the group SIGKILL, so nothing outlives the fixture. Where ``unshare`` is not
permitted the fixture skips and says why; with ``ESNB_REQUIRE_TWO_HOSTS=1`` (set by
``.ci/run``) it fails instead.

The second host's worker sorts first by address (its port is chosen so), so what esnb places
on "the first worker" (a replay server) goes there, away from the driver's files. Every
worker loads :mod:`twohost_bytes`, which counts the bytes of each Dask connection
(:meth:`TwoHosts.traffic`); ``tests/twohost_traffic.py`` measures with it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: the second host's hostname
HOST2 = "esnb-host2"
#: set to 1 to make the fixture fail, not skip, where unshare is not permitted
REQUIRE = "ESNB_REQUIRE_TWO_HOSTS"
#: the unshare command and flags a host's namespaces are made with
UNSHARE = ("unshare", "--uts", "--mount", "--propagation", "private")
HERE = Path(__file__).resolve().parent
#: what runs inside the namespaces: $1 hostname, $2 a setup command (may be empty), then the
#: command, exec'd (the nanny keeps unshare's pid: its process group's leader)
NAMESPACE_SCRIPT = r"""
set -e
hostname "$1"
mount -t tmpfs -o mode=1777 esnb-host-tmp /tmp
mount -t tmpfs -o mode=1777 esnb-host-shm /dev/shm
mkdir -p /tmp/home/.cache
export HOME=/tmp/home XDG_CACHE_HOME=/tmp/home/.cache
cd "$HOME"
eval "$2"
shift 2
exec "$@"
"""


#: worker ports: the first worker by address ("tcp://127.0.0.1:2...." < "tcp://127.0.0.1:4....")
#: takes what esnb places on the first worker (a replay server:
#: :class:`~esnb.runners.replay_service.ReplayService`); by default the second host's
PORTS_FIRST = (20000, 29999)
PORTS_SECOND = (40000, 49999)


def free_port(low: int, high: int) -> int:
    """A TCP port in ``[low, high]`` free on 127.0.0.1 now."""
    import random

    for port in random.sample(range(low, high + 1), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in [{low}, {high}]")


@functools.cache
def _unshare() -> tuple[tuple[str, ...] | None, str]:
    """The unshare command that makes a host here (plain as root; in a user namespace of its
    own, ``--map-root-user``, otherwise), or None and why neither does (checked once)."""
    if sys.platform != "linux":
        return None, f"Linux namespaces are needed to simulate a second host ({sys.platform})"
    if shutil.which("unshare") is None:
        return None, "no unshare command (util-linux)"
    said = []
    for command in (UNSHARE, (*UNSHARE, "--map-root-user")):
        try:
            p = subprocess.run([*command, "sh", "-c", "hostname esnb-probe && mount -t tmpfs "
                                "esnb-probe /dev/shm"], capture_output=True, text=True,
                               timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            said.append(str(exc))
            continue
        if p.returncode == 0:
            return command, ""
        said.append(p.stderr.strip()[:200])
    return None, (f"unshare --uts --mount is not permitted here ({'; '.join(said)}): run as "
                  f"root, or where user namespaces are allowed")


def unshare_unavailable() -> str | None:
    """Why a second host cannot be simulated here, or None."""
    command, why = _unshare()
    return why if command is None else None


def require_or_skip() -> None:
    """Skip (saying why) where unshare is not permitted; fail when ``ESNB_REQUIRE_TWO_HOSTS``
    is set."""
    import warnings

    import pytest

    reason = unshare_unavailable()
    if reason:
        if os.environ.get(REQUIRE):
            pytest.fail(f"{REQUIRE} is set but a second host cannot be simulated: {reason}")
        warnings.warn(f"two-host tests skipped: {reason}", stacklevel=1)  # shown by pytest -q
        pytest.skip(reason)


def _stop_group(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM to ``proc`` (a nanny closes its worker, which releases its shared memory; a
    scheduler closes), then SIGKILL to whatever is left of its process group after ``grace``
    seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _group_alive(proc.pid) and time.monotonic() < deadline:
        proc.poll()
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies excepted)."""
    import psutil

    for p in psutil.process_iter(["status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


class TwoHosts:
    """A scheduler and one worker per host, each a process group of its own.

    Attributes
    ----------
    address : str
        The scheduler's (``tcp://127.0.0.1:<port>``).
    host1 : str
        This host's hostname (the name of its worker).
    client : distributed.Client
        A client of the scheduler for the tests' own questions (never a default client).
    folder : Path
        This host's folder of the fixture (logs, run folders), under ``/tmp``.
    """

    def __init__(self, folder: Path):
        self.folder = folder
        self.host1 = socket.gethostname()
        self.address: str = ""
        self.client = None
        self._procs: dict[str, subprocess.Popen] = {}  # name -> group leader

    # -- starting ------------------------------------------------------------------------
    def _popen(self, name: str, command: list[str], env: dict | None = None) -> None:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 - the process holds it
        try:
            self._procs[name] = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env if env is not None else dict(os.environ), start_new_session=True)
        finally:
            log.close()

    def start_scheduler(self, timeout: float = 120) -> str:
        """The scheduler on 127.0.0.1, a free port; its address."""
        info = self.folder / "scheduler.json"
        self._popen("scheduler", [sys.executable, "-m", "distributed.cli.dask_scheduler",
                                  "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(info)])
        deadline = time.monotonic() + timeout
        while not info.exists():
            self._check_alive("scheduler", deadline)
            time.sleep(0.1)
        self.address = json.loads(info.read_text())["address"]
        return self.address

    def _worker_command(self, name: str, local_directory: str,
                        port: int | None = None) -> list[str]:
        return [sys.executable, "-m", "distributed.cli.dask_worker", self.address,
                "--name", name, "--nthreads", "1", "--nworkers", "1", "--host", "127.0.0.1",
                "--worker-port", str(port or 0), "--no-dashboard", "--death-timeout", "120",
                "--local-directory", local_directory,
                "--preload", str(HERE / "twohost_bytes.py")]

    def start_worker(self, port: int | None = None) -> None:
        """A worker with a nanny on this host, named by its hostname (``port``: its worker's,
        default any free one)."""
        self._popen(self.host1, self._worker_command(self.host1, str(self.folder / "scratch"),
                                                     port))

    def start_host(self, hostname: str, setup: str = "", env: dict | None = None,
                   port: int | None = None) -> None:
        """A worker with a nanny on a simulated host named ``hostname`` (its worker's name).

        Parameters
        ----------
        hostname : str
            The host's hostname, also its worker's name.
        setup : str
            Shell commands run on that host before its worker starts (in its ``HOME``, after
            its own ``/tmp`` and ``/dev/shm`` are mounted): what a host's provisioning did.
        env : dict, optional
            Variables set on that host, over this process's environment.
        port : int, optional
            Its worker's port (default: any free one); the nanny restarts the worker there.
        """
        host_env = {**os.environ, **(env or {})}
        # its own noise cache: $XDG_CACHE_HOME/esnb/noise, not the test session's folder
        host_env.pop("DASK_ESNB__NOISE__CACHE", None)
        command = self._worker_command(hostname, "/tmp/dask-scratch", port)
        self._popen(hostname, [*_unshare()[0], "sh", "-c", NAMESPACE_SCRIPT, "esnb-host",
                               hostname, setup, *command], env=host_env)

    def _check_alive(self, name: str, deadline: float) -> None:
        proc = self._procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} did not start in time:\n{self.log(name)}")

    def log(self, name: str, tail: int = 4000) -> str:
        """The last ``tail`` characters of a process's output."""
        try:
            return (self.folder / f"{name}.log").read_text(errors="replace")[-tail:]
        except FileNotFoundError:
            return ""

    def wait_for(self, *names: str, timeout: float = 180) -> dict[str, str]:
        """Wait until a worker of each name is registered; their addresses by name."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.workers()
            if all(n in found for n in names):
                return {n: found[n] for n in names}
            for n in names:
                self._check_alive(n, deadline)
            time.sleep(0.2)

    # -- questions -----------------------------------------------------------------------
    def workers(self) -> dict[str, str]:
        """The registered workers' addresses by name (a worker's name is its hostname)."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return {str(w["name"]): address for address, w in info.items()}

    def worker(self, hostname: str) -> str:
        """The address of the worker on ``hostname``."""
        return self.workers()[hostname]

    def worker_pid(self, hostname: str) -> int:
        """The pid of the worker process on ``hostname`` (the nanny's child; one PID
        namespace, so this pid is the same on both hosts)."""
        address = self.worker(hostname)
        return self.client.run(os.getpid, workers=[address])[address]

    @property
    def scheduler_pid(self) -> int:
        """The scheduler's pid."""
        return self._procs["scheduler"].pid

    def nanny_pid(self, hostname: str) -> int:
        """The pid of the nanny on ``hostname`` (its process group's leader)."""
        return self._procs[hostname].pid

    def kill_worker(self, hostname: str, timeout: float = 180) -> int:
        """SIGKILL the worker process on ``hostname`` (not its nanny, which starts another on
        the same port); the new worker's pid once it has registered."""
        pid = self.worker_pid(hostname)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(Exception):  # gone, not yet back, or not yet removed
                new = self.worker_pid(hostname)
                if new != pid:
                    return new
            self._check_alive(hostname, deadline)
            time.sleep(0.2)

    def traffic(self, hostname: str) -> dict:
        """The byte counters of the worker on ``hostname`` (:mod:`twohost_bytes`)."""
        import twohost_bytes

        address = self.worker(hostname)
        return self.client.run(twohost_bytes.snapshot, workers=[address])[address]

    def run_folder(self, name: str) -> Path:
        """A driver's run folder path under this host's ``/tmp`` (hidden from other hosts)."""
        return self.folder / "runs" / name

    # -- stopping ------------------------------------------------------------------------
    def stop(self, name: str) -> None:
        """Stop the process group started as ``name`` (a host's worker and nanny)."""
        proc = self._procs.pop(name, None)
        if proc is not None:
            _stop_group(proc)

    def close(self) -> None:
        """Stop every process group this started (workers first, then the scheduler)."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close(timeout=30)
            self.client = None
        for name in [n for n in self._procs if n != "scheduler"] + ["scheduler"]:
            self.stop(name)


@contextlib.contextmanager
def two_hosts(first: str = HOST2, timeout: float = 240):
    """A scheduler, a worker on this host and one on :data:`HOST2`, stopped at the end.

    Parameters
    ----------
    first : str
        The host whose worker sorts first by address (:data:`PORTS_FIRST`), where esnb puts
        what it places on the first worker (a replay): :data:`HOST2` or this host's name.
    timeout : float
        Seconds the workers have to register.

    Yields
    ------
    TwoHosts
        Its ``client`` connected; ``workers()`` names both.
    """
    from distributed import Client

    folder = Path(tempfile.mkdtemp(prefix="esnb-two-hosts-", dir="/tmp"))
    hosts = TwoHosts(folder)
    try:
        hosts.start_scheduler()
        ports = [free_port(*PORTS_FIRST), free_port(*PORTS_SECOND)]
        if first != HOST2:
            ports.reverse()
        hosts.start_worker(port=ports[1])
        hosts.start_host(HOST2, port=ports[0])
        hosts.client = Client(hosts.address, set_as_default=False, timeout=60)
        hosts.wait_for(hosts.host1, HOST2, timeout=timeout)
        yield hosts
    finally:
        hosts.close()
        shutil.rmtree(folder, ignore_errors=True)

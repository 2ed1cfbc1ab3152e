"""Worker deaths on the driver: one log line each, not tracebacks from inside dask.

When a worker process dies (SIGKILL, a node failure, a batch job's walltime), dask reports it
from several places at once: the scheduler ("Removing worker ... caused the cluster to lose
already computed task(s)", failed broadcasts), the nanny ("Restarting worker"), clients and
actor calls that were on their way to it (tracebacks of ``CommClosedError`` or
``FutureCancelledError`` from tornado's callbacks), and workers whose peer or scheduler went
away. esnb recovers from all of it (tasks are recomputed, actors recreated), so these echoes
only hide what matters. :func:`make_client` installs two things:

- :func:`report_deaths`: the client follows the scheduler's events, and every worker that
  leaves without being retired is one WARNING of ``esnb.cluster``, e.g. ``worker
  tcp://127.0.0.1:33247 died (connection lost); redone on other workers: 2 running tasks, 1
  result``. Workers retired by ``scale()``, ``adapt()`` or ``--lifetime`` are not deaths.
- :class:`DeathEchoes`, a logging filter on dask's loggers (in this process, and on every worker
  through :class:`QuietDeathsPlugin`) that drops the echoes of a lost connection: records whose
  exception is a closed comm, a reset connection or a cancelled future, and the messages in
  :data:`ECHOES`. Everything else stays visible: a task's exception, ``KilledWorker``, lost
  scattered data, memory warnings. ``logging.getLogger("esnb.cluster").setLevel("DEBUG")``
  lets every echo through again (in the process where it is set).
"""

from __future__ import annotations

import logging
import re

from distributed import WorkerPlugin

log = logging.getLogger("esnb.cluster")

#: dask's loggers that echo a lost worker (a filter applies to its own logger's records only)
LOGGERS = ("distributed.scheduler", "distributed.nanny", "distributed.worker",
           "distributed.worker.state_machine", "distributed.core", "distributed.client",
           "distributed.actor", "distributed.batched", "distributed.comm.tcp",
           "distributed.comm.core", "distributed.utils_comm", "distributed.utils",
           "distributed.diskutils", "tornado.application", "asyncio")

#: messages that only echo a worker's death (the one line of :func:`report_deaths` says it)
ECHOES = re.compile("|".join((
    r"Removing worker .* caused the cluster to lose already computed task",
    r"broadcast to \S+ failed: (CommClosedError|StreamClosedError|\w*Connection\w*Error|"
    r"OSError: Timed out trying to connect)",
    r"Restarting worker",
    r"Worker stream died during communication",
    r"Couldn't gather \d+ keys, rescheduling",
    r"Failed to communicate with scheduler during heartbeat",
    # a worker's task cut short when its cluster closes (after a death or not)
    r"Async instruction for .* ended with CancelledError",
    # a dead worker's scratch folder, purged by two processes at once
    r"Failed to remove .*No such file or directory",
    # dask's own leftover when a result() timed out (its gather task ends with AllExit)
    r"Task exception was never retrieved\nfuture: .*exception=AllExit\(\)",
    # the cluster closing while a worker is still in a long task (an RL individual, a critic
    # chunk): its nanny kills it, which is what closing it asks for
    r"Worker process still alive after [\d.]+ seconds, killing",
)))

#: the scheduler's "Couldn't gather keys: {key: state}" is an echo while every key is being
#: recomputed, or still in "memory" on a worker that has just died (the scheduler has not yet
#: handled its loss; fetching results as calls finish meets this); a key forgotten or erred is
#: a real loss and stays visible
GATHER = re.compile(r"Couldn't gather keys: \{")
STATE = re.compile(r": '([\w-]+)'(?=, |\}$)")
RECOMPUTING = frozenset({"processing", "waiting", "released", "queued", "no-worker", "memory"})

#: exception classes (by name, so that nothing is imported for them) of a lost connection
LOST = frozenset({"CommClosedError", "StreamClosedError", "FutureCancelledError",
                  "ConnectionResetError", "ConnectionRefusedError", "ConnectionAbortedError",
                  "BrokenPipeError"})


class DeathEchoes(logging.Filter):
    """Drop dask's echoes of a lost worker or connection (see the module's doc)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if log.isEnabledFor(logging.DEBUG):
            return True
        if record.exc_info and _lost(record.exc_info[1]):
            return False
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is not ours to judge
            return True
        if GATHER.match(message):
            states = STATE.findall(message)
            return not states or not RECOMPUTING.issuperset(states)
        return not ECHOES.search(message)


#: an actor call that reached a new worker at a dead one's address: the actor (esnb's keys
#: start ``esnb-``) was lost with the old process, which the run learns and recovers from
ACTOR_GONE = re.compile(r"^KeyError\('esnb-[\w-]+'\)$")


def _lost(exc: BaseException | None) -> bool:
    """A lost connection: one of :data:`LOST`, an ``OSError`` raised from one (dask's
    "Timed out trying to connect" after its retries were refused), a call still on its way
    when its client closed ("ConnectionPool is closed": an actor call in flight as a run
    stops), or an actor call that found a new worker at its dead worker's address."""
    while exc is not None:
        if type(exc).__name__ in LOST or (
                type(exc) is RuntimeError and str(exc) == "ConnectionPool is closed") or (
                type(exc) is Exception and ACTOR_GONE.match(str(exc))):
            return True
        if not isinstance(exc, OSError):
            return False
        exc = exc.__cause__
    return False


#: the one filter of this process (installing twice adds nothing)
ECHO_FILTER = DeathEchoes()


def quiet_death_echoes() -> None:
    """Install :data:`ECHO_FILTER` on dask's loggers of this process."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if ECHO_FILTER not in logger.filters:
            logger.addFilter(ECHO_FILTER)


class QuietDeathsPlugin(WorkerPlugin):
    """The same filter on every worker (its peers' deaths and the scheduler's shutdown echo
    there, and a LocalCluster's workers write to the driver's terminal)."""

    idempotent = True
    name = "esnb-quiet-deaths"

    def setup(self, worker):
        quiet_death_echoes()


def death_line(msg: dict) -> str | None:
    """The line for a scheduler's ``remove-worker`` event, or None when it is no death."""
    if msg.get("action") != "remove-worker" or msg.get("expected"):
        return None
    stimulus = str(msg.get("stimulus_id", ""))
    if stimulus.startswith("handle-worker-cleanup"):
        reason = "connection lost"
    elif stimulus.startswith("check-worker-ttl"):
        reason = "no heartbeat within distributed.scheduler.worker-ttl"
    else:
        reason = re.sub(r"-[\d.]+$", "", stimulus) or "removed"
    moved = [m for m in (_count(msg.get("processing-tasks"), "running task"),
                         _count(msg.get("lost-computed-tasks"), "result")) if m]
    line = f"worker {msg.get('worker')} died ({reason})"
    if moved:
        line += f"; redone on other workers: {', '.join(moved)}"
    lost = _count(msg.get("lost-scattered-tasks"), "scattered value")
    if lost:
        line += f"; {lost} lost"
    return line


def _count(items, noun: str) -> str:
    n = len(items or ())
    return f"{n} {noun}{'s' if n != 1 else ''}" if n else ""


def report_deaths(client) -> None:
    """Log one line on ``esnb.cluster`` for each worker of ``client``'s cluster that dies, and
    count, per address, the workers that left it (died or retired) in
    ``client.esnb_worker_removals``: an actor made before the count last grew is lost, which
    its next call would only say after a timeout (a replay only tasks call), even when a new
    worker took the same address again (a nanny restarting a worker on a fixed port)."""
    removals: dict[str, int] = {}
    client.esnb_worker_removals = removals

    def on_event(event) -> None:
        _, msg = event
        if not isinstance(msg, dict):
            return
        if msg.get("action") == "remove-worker" and msg.get("worker"):
            address = str(msg["worker"])
            removals[address] = removals.get(address, 0) + 1
        line = death_line(msg)
        if line:
            log.warning(line)

    client.subscribe_topic("all", on_event)

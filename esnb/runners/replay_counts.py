"""The count files of lost replay servers, read on their own hosts.

A :class:`~esnb.replay.server.ReplayServer` that can be lost keeps ``(generation, inserted)``
in a count file on its own host's scratch, rewritten on every insert, so what a loss takes is
known exactly, even the inserts no reply had shown the driver yet. Its host may not be the
driver's (a cloud or Kubernetes cluster: no shared file system), so the file is read by a task
on a live worker of that host (:func:`~esnb.replay.server.read_count_here`); the files read are
removed the same way when the run closes its replay. A SIGKILLed worker's nanny usually
restarts it on the same host within seconds; a host that is gone entirely is asked again
whenever a worker joins, and until then the loss is counted from the replies the driver saw (a
lower bound, said in the log).
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from esnb.replay.server import read_count_here

log = logging.getLogger("esnb.replay")


class LostCounts:
    """Reads lost servers' count files through workers of their hosts.

    Parameters
    ----------
    executor : DaskExecutor
        The run's executor (an inline replay is never lost and has no count file).
    timeout : float
        Seconds to wait for a read on a live worker of the host.
    """

    def __init__(self, executor, timeout: float):
        self.executor = executor
        self.timeout = float(timeout)
        #: generation -> (host, path) of the count files not read yet
        self.waiting: dict[int, tuple[str, str]] = {}
        self._reading: dict[int, Any] = {}
        self._workers: frozenset[str] = frozenset()
        #: (host, path) of the count files read, removed by :meth:`close`
        self.read_files: list[tuple[str, str]] = []

    def read(self, generation: int, host: str, path: str) -> tuple[int, int] | None:
        """The count of lost server ``generation`` now, if a worker of ``host`` is alive; else
        None, and it is read when one joins (:meth:`poll`)."""
        self.waiting[generation] = (host, path)
        self._ask({generation})
        future = self._reading.pop(generation, None)
        if future is None:
            log.warning("no live worker on %s, the lost replay's host: its count file is read "
                        "when one joins; until then the loss counts what replies showed", host)
            return None
        try:
            count = future.result(timeout=self.timeout)
        except Exception:  # noqa: BLE001 - that worker died too: ask again when one joins
            log.debug("reading %s on %s failed", path, host, exc_info=True)
            return None
        if count is not None:
            self.read_files.append(self.waiting.pop(generation))
        return count

    def poll(self) -> list[tuple[int, int]]:
        """``(generation, inserted)`` of the count files read since the last call; asks again
        for the ones still waiting when the workers changed."""
        out = []
        for generation, future in list(self._reading.items()):
            if not future.done():
                continue
            del self._reading[generation]
            try:
                count = future.result()
            except Exception:  # noqa: BLE001 - the worker left: asked again when one joins
                continue
            if count is not None:
                self.read_files.append(self.waiting.pop(generation))
                out.append((int(count[0]), int(count[1])))
        if self.waiting and set(self.waiting) - set(self._reading):
            workers = frozenset(self.executor.addresses(recent=True))
            if workers != self._workers:
                self._ask(set(self.waiting) - set(self._reading))
        return out

    def _ask(self, generations: set[int]) -> None:
        """Start a read of each of ``generations`` on a live worker of its host."""
        try:
            hosts = self.executor.run_on_workers(socket.gethostname)
        except Exception:  # noqa: BLE001 - a worker leaving mid-call: asked again later
            log.debug("could not ask the workers' hosts", exc_info=True)
            return
        self._workers = frozenset(hosts)
        for generation in generations:
            host, path = self.waiting[generation]
            on_host = sorted(a for a, h in hosts.items() if h == host)
            if on_host:
                self._reading[generation] = self.executor.submit(
                    read_count_here, host, path, False, workers=on_host[:1], strict=True)

    def close(self) -> None:
        """Remove the count files read, on their hosts; let go of reads still pending (their
        hosts never came back: their files stay in those hosts' scratch)."""
        if self._reading:
            self.executor.cancel(list(self._reading.values()))
        self._reading.clear()
        if not self.read_files:
            return
        try:
            hosts = self.executor.run_on_workers(socket.gethostname)
            removals = []
            for host, path in self.read_files:
                on_host = sorted(a for a, h in hosts.items() if h == host)
                if on_host:
                    removals.append(self.executor.submit(read_count_here, host, path, True,
                                                         workers=on_host[:1], strict=True))
            for future in removals:
                future.result(timeout=self.timeout)
        except Exception:  # noqa: BLE001 - closing: a file left in a host's scratch
            log.debug("lost replays' count files were not all removed", exc_info=True)
        self.read_files.clear()

"""Calls pinned one per worker, and the listing of the workers that take them (the Dask side
of ``executor.run(calls, workers=...)``, which ES's generations use: see
:mod:`esnb.runners.es.dispatch` for why its tasks are pinned).

A pinned call (``workers=[address]``, ``allow_other_workers=False``) runs where it was placed,
and Dask also *recomputes* it only there. So a call whose worker has gone -- before it ran, or
after, with its result not yet fetched -- must be placed again by hand; otherwise it waits
forever (seen: a SLURM worker retiring at its lifetime's end could not move its results, left,
and the driver's fetch of them never returned).

A generation whose workers changed can also stall with every call placed on a live worker
(seen once in CI: two of three workers scaled away, the third never finished its calls and
the scheduler logged nothing for two minutes; not reproduced in 40 trials since). So a gather
that has made no progress for :attr:`Pinned.stall_poll` seconds (and four times its slowest
call) after the workers changed logs what the scheduler knows of its pending calls and places
them again under new keys: their results are the same wherever they run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import CancelledError
from typing import Any

from distributed import Client, Future
from distributed import wait as dask_wait

log = logging.getLogger("esnb.cluster")


class Pinned:
    """Gathers pinned calls, placing lost ones again; lists the workers that take tasks.

    Parameters
    ----------
    client : distributed.Client
    submit : callable
        ``submit(fn, args, key, worker) -> Future``: the executor's pinned submission.
    """

    #: seconds between checks for pinned calls whose worker has left
    replace_poll = 0.5
    #: seconds a fetch of finished results may wait before the workers are checked again (a
    #: result lost with its worker is recomputed where the call was pinned: nowhere)
    gather_poll = 5.0
    #: times one pinned call may be placed again before its loss is an error
    max_replacements = 10
    #: seconds without a finished call, after the workers changed, before the pending calls
    #: are placed again (and at least 4x the slowest call of this gather so far)
    stall_poll = 30.0

    def __init__(self, client: Client, submit: Callable[[Callable, tuple, str, str], Future]):
        self.client = client
        self.submit = submit
        self._listing = None  # the listing being fetched in the background (``recent``)

    def gather(self, futures: list[Future], calls, placement: list[str],
               prefix: str) -> list[Any]:
        """Results of pinned calls, in order. A call whose worker has gone -- before it ran,
        or after, with its result not yet fetched -- is placed again on a live worker (in
        ``futures``, in turn); so is a call the scheduler cancelled (it forgets a lost result
        whose inputs it cannot rebuild). Results are fetched as calls finish, each fetch with a
        bounded wait; a call's own error is raised."""
        results: dict[int, Any] = {}
        replaced = [0] * len(futures)
        started = progress = time.monotonic()
        slowest = 0.0
        first_placed = set(placement)
        changed = False  # a worker the calls were first placed on has left
        while len(results) < len(futures):
            pending = [i for i in range(len(futures)) if i not in results]
            self._wait_some([futures[i] for i in pending])
            for i in pending:
                if futures[i].status == "error":
                    futures[i].result()  # raises the call's own exception
            ready = [i for i in pending if futures[i].status == "finished"]
            if ready:
                try:
                    values = self.client.sync(self.client._gather, [futures[i] for i in ready],
                                              callback_timeout=self.gather_poll)
                except (TimeoutError, CancelledError):  # a result went with its worker
                    pass
                else:
                    results.update(zip(ready, values))
                    progress = time.monotonic()
                    slowest = max(slowest, progress - started)
                    continue
            live = self.addresses()
            changed = changed or not first_placed <= set(live)  # a worker of theirs left
            lost = [i for i in pending if i not in results and (
                futures[i].cancelled() or (not futures[i].done() and placement[i] not in live))]
            stalled = False
            if not lost and changed and live and \
                    time.monotonic() - progress > max(self.stall_poll, 4 * slowest):
                lost, stalled = [i for i in pending if i not in results], True
                log.warning("%s: no call finished for %.0f s after the workers changed; "
                            "placing %d pending calls again (%s)", prefix,
                            time.monotonic() - progress, len(lost),
                            self._describe([futures[i] for i in lost]))
                progress = time.monotonic()
            if not lost or not live:
                continue
            for n, i in enumerate(lost):
                replaced[i] += 1
                if replaced[i] > self.max_replacements:
                    raise RuntimeError(f"call {i} of {prefix} was lost {replaced[i] - 1} times "
                                       f"(its worker left, or the scheduler cancelled it)")
                # a stalled call moves off its worker when another takes tasks
                where = [w for w in live if w != placement[i]] if stalled else live
                placement[i] = (where or live)[n % len(where or live)]
                futures[i].release()
                futures[i] = self.submit(*calls[i], f"{prefix}-again{sum(replaced)}",
                                         placement[i])
        return [results[i] for i in range(len(futures))]

    def _describe(self, futures: list[Future]) -> str:
        """What the scheduler knows of ``futures`` (state, worker, dependencies' states): the
        evidence a stalled gather leaves in the log."""
        keys = [f.key for f in futures]

        def states(keys, dask_scheduler=None):
            out = []
            for key in keys:
                ts = dask_scheduler.tasks.get(key)
                if ts is None:
                    out.append(f"{key}: unknown")
                    continue
                deps = ",".join(f"{d.state}@{'|'.join(w.address for w in d.who_has or ())}"
                                for d in ts.dependencies)
                where = ts.processing_on.address if ts.processing_on else "-"
                out.append(f"{key}: {ts.state} on {where}, deps [{deps}]")
            return "; ".join(out)

        try:
            return self.client.sync(self.client._run_on_scheduler, states, keys,
                                    callback_timeout=self.gather_poll)
        except Exception as exc:  # noqa: BLE001 - evidence only: never fail the gather for it
            return f"scheduler state unavailable: {exc!r}"

    def _wait_some(self, futures: list[Future]) -> None:
        """Wait at most :attr:`replace_poll` seconds for ``futures`` (cancelled ones are not
        waited for: ``wait`` raises at once on them)."""
        waiting = [f for f in futures if not f.cancelled()]
        if not waiting:
            time.sleep(self.replace_poll)
        try:
            with self.client.as_current():  # wait() looks for the default client otherwise
                dask_wait(waiting, timeout=self.replace_poll)
        except TimeoutError:
            pass
        except CancelledError:  # one was cancelled meanwhile: the caller looks again
            time.sleep(self.replace_poll)

    def addresses(self, recent: bool = False) -> list[str]:
        """Addresses of the workers that take tasks, sorted (a direct, light scheduler call: no
        cached listing). A worker being retired (scaled down, past its lifetime) is left out:
        a call pinned to it would wait until it has gone.

        ``recent``: the listing fetched in the background since the last such call, and the
        next one started -- for a loop that places a round of calls at a time and need not
        wait for the scheduler's answer (it cost a generation on 32 loaded workers ~11 ms). A
        worker that joined is seen one round late; one that left is caught while waiting
        (:meth:`gather`). The first call waits for its answer, and so does one when no worker
        takes tasks (all joining or being retired: batch jobs replaced at their lifetime's
        end), until one does.
        """
        if recent:
            fetched, self._listing = self._listing, asyncio.run_coroutine_threadsafe(
                self.client.scheduler.ncores_running(), self.client.loop.asyncio_loop)
            with contextlib.suppress(Exception):  # a failed background listing: ask again
                listing = sorted((fetched or self._listing).result())
                if listing:
                    return listing
        waited = 0.0
        while True:
            listing = sorted(self.client.sync(self.client.scheduler.ncores_running))
            if listing or not recent:
                return listing
            time.sleep(self.replace_poll)
            waited += self.replace_poll
            if waited % 30 < self.replace_poll:
                log.warning("no worker has taken tasks for %.0f s (all joining or being "
                            "retired): waiting", waited)

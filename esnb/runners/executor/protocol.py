"""The executor's contract: the calls a runner makes, identical inline and on a cluster.

Both :class:`~esnb.runners.executor.inline.InlineExecutor` and
:class:`~esnb.runners.executor.on_dask.DaskExecutor` subclass :class:`Executor`; a runner types
its executor as this protocol and never asks which one it has. What differs is said per call:
inline, a call has already run when it returns (futures are finished, loops advance one step
per :meth:`Executor.turn`); on a cluster it runs on a worker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Executor(Protocol):
    """Where a run's work happens.

    Attributes
    ----------
    remote : bool
        Tasks run in other processes (their data can be lost with a worker).
    reproducible : bool
        No decision may depend on timing: inline, every call has run when it returns.
    client : distributed.Client or None
        The Dask client, None inline.
    dashboard_link : str or None
        The Dask dashboard's address, if there is one.
    sent_bytes : int or None
        Bytes of arguments and values sent to workers, counted once set to 0 (None: not
        counted; inline nothing is sent).
    """

    remote: bool
    reproducible: bool
    client: Any
    dashboard_link: str | None
    sent_bytes: int | None

    # -- workers -----------------------------------------------------------------------------
    def workers(self) -> dict[str, dict]:
        """The live workers, ``{address: info}`` (``info["nthreads"]``,
        ``info["resources"]``), asked of the scheduler now (inline: one, ``"inline"``)."""

    @property
    def n_workers(self) -> int:
        """How many workers are live (at least 1)."""

    def threads(self, exclude: Iterable[str] = ()) -> int:
        """Worker threads of the live workers but ``exclude`` (at least 1)."""

    def addresses(self, recent: bool = False) -> list[str]:
        """Sorted addresses of the workers that take tasks (being retired: left out).

        Parameters
        ----------
        recent : bool
            The listing fetched in the background since the previous such call (a round of
            calls need not wait for the scheduler; a joined worker is seen a round late).
        """

    def on_every_worker(self, fn: Callable, *args, name: str,
                        teardown: Callable | None = None) -> None:
        """Run ``fn(*args)`` on every worker now and on every worker that joins later (a
        :class:`distributed.WorkerPlugin` named ``name``; registering the same name again is
        a no-op); ``teardown(*args)`` when a worker closes. Waits for the present workers and
        raises the first error one of them raised. Inline: ``fn(*args)`` here."""

    def warm(self, fn: Callable, *args) -> None:
        """Start ``fn(*args)`` in the background on every present worker and return at once
        (imports a run's first tasks will need; inline: nothing)."""

    def run_on_workers(self, fn: Callable) -> dict[str, Any]:
        """``fn()`` on every worker now: ``{address: result}``."""

    # -- tasks -------------------------------------------------------------------------------
    def submit(self, fn: Callable, *args, key: str | None = None, priority: int = 0,
               workers: Sequence[str] | None = None, strict: bool = False,
               resources: dict | None = None) -> Any:
        """One task: a future (``result(timeout)``, ``status``, ``key``, ``release()``).

        Parameters
        ----------
        key : str, optional
            Its key (unique by default: tasks are never merged).
        priority : int
            Higher runs first.
        workers : sequence of str, optional
            Preferred workers (required with ``strict``).
        resources : dict, optional
            Worker resources it needs.
        """

    def run(self, calls: Sequence[tuple[Callable, tuple]], label: str = "",
            workers: Sequence[str] | None = None) -> list[Any]:
        """Every ``(fn, args)`` of ``calls``; their results in submission order.

        ``workers`` (one address per call) pins each call to its worker; a pinned call whose
        worker leaves, or whose result is lost with it, is placed again on a live worker.
        """

    def gather(self, futures: Sequence) -> list[Any]:
        """The results of ``futures``, in order (an error is raised)."""

    def as_completed(self) -> Any:
        """A completion queue: ``add(future)``, ``next_batch(block=False)`` -> the futures
        finished since, ``count()``."""

    def wait_first(self, futures: Sequence, timeout: float | None = None) -> tuple[set, set]:
        """``(done, not_done)`` once one of ``futures`` has finished or ``timeout`` passed."""

    def cancel(self, futures: Iterable) -> None:
        """Cancel ``futures`` (a task already running on a worker runs on regardless)."""

    def stuck(self, keys: Iterable[str]) -> list[str]:
        """The ``keys`` the scheduler cannot place (restricted to workers that are all gone)."""

    def busy(self, prefix: str) -> int:
        """Tasks keyed ``prefix...`` still unsettled on the scheduler or a worker."""

    # -- values ------------------------------------------------------------------------------
    def put(self, obj: Any, prefix: str = "esnb-put", priority: int = 0) -> Any:
        """Send ``obj`` once for tasks to take as an argument: a task that returns it, never a
        scatter (scattered data dies with its worker; a result is recomputed). Inline: ``obj``."""

    def release(self, handle: Any) -> None:
        """Let go of a value from :meth:`put`."""

    def channel(self, name: str) -> Any:
        """A named box tasks read: ``set(small)``, ``publish(large)`` (sent once),
        ``get(timeout)``, ``delete()`` (see :mod:`esnb.runners.executor.channels`)."""

    # -- actors ------------------------------------------------------------------------------
    def actor(self, cls: type, *args, key: str = "esnb-actor", worker: str | None = None,
              resources: dict | None = None, avoid: Iterable[str] = (),
              timeout: float = 60.0, place: str = "first") -> Any:
        """``cls(*args)`` held by the executor: an
        :class:`~esnb.runners.executor.actors.ActorRef` (``submit(method, ...)`` -> future,
        ``lost``, ``create(..., exclude=)`` after a loss, ``handle()`` for tasks).

        Parameters
        ----------
        worker : str, optional
            Address to hold it (if alive; after a loss, any live worker).
        resources : dict, optional
            Worker resources to ask for instead (the long-lived actor worker).
        avoid : iterable of str
            Addresses to keep it off while another worker is alive.
        timeout : float
            Seconds to wait for a worker to take it.
        place : {"first", "last"}
            Which live worker (by address) takes it otherwise.
        """

    # -- background loops --------------------------------------------------------------------
    def background(self, genfn: Callable, *args, key: str = "",
                   worker: str | None = None) -> Any:
        """Run the generator function ``genfn(*args)`` to its end (on a cluster: a
        long-running task pinned to ``worker`` if given; inline: one step per :meth:`turn`);
        the future's result is its return value."""

    def turn(self) -> None:
        """Advance every inline background loop by one step (on a cluster: nothing, they run
        by themselves)."""

    def finish_background(self, limit: int = 100_000) -> None:
        """Turn inline loops until they have returned (they were told to stop)."""

    def close(self) -> None:
        """Release what the executor holds (inline loops; a client is its maker's)."""

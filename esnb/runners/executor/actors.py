"""Actors as a run holds them: :class:`ActorRef`, a reference that notices its actor's loss and
recreates it (Dask actors die with their worker and nothing in Dask recreates them), and
:class:`LocalProxy`, an inline actor as tasks see it (calls return finished futures, as a Dask
actor's return ``ActorFuture``). The executor provides the rest (:class:`ActorHost`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Protocol

from esnb.runners.executor.futures import Done


class ActorHost(Protocol):
    """What an executor does for an :class:`ActorRef` (each executor implements these)."""

    def _create_actor(self, ref: ActorRef, args: tuple, exclude: tuple) -> tuple:
        """A new instance of ``ref.cls(*args)`` off the workers in ``exclude``: ``(object or
        proxy, future or None, address)``."""

    def _actor_lost(self, ref: ActorRef) -> bool:
        """Whether the worker holding ``ref``'s actor is gone."""

    def _actor_call(self, ref: ActorRef, method: str, args: tuple, kwargs: dict) -> Any:
        """Call ``method``; a future."""

    def _actor_handle(self, ref: ActorRef) -> Any:
        """What a task needs to reach the actor."""

    def workers(self) -> dict[str, dict]:
        """The live workers."""


class LocalProxy:
    """An inline actor as tasks see it: every method call returns a finished future, as a
    Dask actor's call returns an ``ActorFuture``; so task code is the same inline and on a
    cluster."""

    def __init__(self, obj: Any):
        self._obj = obj

    def __getattr__(self, name: str):
        method = getattr(self._obj, name)
        if not callable(method):
            return method

        def call(*args, **kwargs):
            return Done.of(method, *args, **kwargs)

        return call


class ActorRef:
    """An actor held by an executor, recreated on demand.

    Parameters
    ----------
    executor : InlineExecutor or DaskExecutor
    cls : type
        The actor's class (plain Python; it runs in-process too).
    key : str
        Prefix of its task keys (each creation adds its generation).
    worker, resources, avoid, timeout
        Placement, see :meth:`DaskExecutor.actor`.

    Attributes
    ----------
    generation : int
        Creations so far minus one (0 for the first).
    address : str
        Where it lives now (``"inline"`` in this process).
    """

    def __init__(self, executor, cls: type, key: str, *, worker: str | None = None,
                 resources: dict | None = None, avoid: Iterable[str] = (),
                 timeout: float = 60.0, place: str = "first"):
        if worker is not None and resources is not None:
            raise ValueError("place an actor with worker= or resources=, not both")
        self.executor = executor
        self.cls = cls
        self.key = key
        self.worker = worker
        self.resources = resources
        self.avoid = tuple(avoid)
        self.timeout = float(timeout)
        self.place = place
        self.generation = -1
        self.address: str | None = None
        self.obj: Any = None  # the instance (inline) or Dask's Actor proxy
        self._future = None
        #: on a cluster: workers that had left its address when it was made (one more: lost)
        self.removals = 0

    def create(self, *args, exclude: Iterable[str] = ()) -> ActorRef:
        """Make a new instance with ``args`` (the old one, if any, is released)."""
        old = self._future
        self.generation += 1
        self.obj, self._future, self.address = self.executor._create_actor(self, args,
                                                                             tuple(exclude))
        if old is not None:
            old.release()
        return self

    @property
    def lost(self) -> bool:
        """Whether the worker holding it is gone (never for an inline actor)."""
        return self.executor._actor_lost(self)

    def confirm_lost(self, timeout: float = 30.0) -> bool:
        """Wait until the scheduler confirms the loss, or ``timeout``; a call can fail before
        the scheduler has dropped the worker, and recreating then would pick it again."""
        deadline = time.monotonic() + timeout
        while True:
            if self.lost or self.address not in self.executor.workers():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def submit(self, method: str, *args, **kwargs):
        """Call ``method`` without waiting: a future (inline: already finished)."""
        return self.executor._actor_call(self, method, args, kwargs)

    def handle(self) -> Any:
        """What a task needs to reach this actor (pass it to :func:`esnb.runners.executor.attach`
        inside the task): a :class:`LocalProxy` inline, else ``{"cls", "address", "key",
        "generation"}``."""
        return self.executor._actor_handle(self)

    def release(self) -> None:
        if self._future is not None:
            self._future.release()
        self._future = None
        self.obj = None

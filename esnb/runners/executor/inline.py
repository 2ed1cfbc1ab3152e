"""The executor that runs everything in this process (and what both executors share: the
inline future, the actor reference, the completion queue).

:class:`InlineExecutor`: ``submit`` computes at once and returns a finished future, actors are
plain objects, channels are local boxes, and background loops (generators) advance one step per
:meth:`~InlineExecutor.turn`. Nothing depends on timing, so an inline run is reproducible.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from esnb.noise import NoiseConfig, get_noise_table

INLINE = "inline"


class Done:
    """A finished inline task with the interface of a Dask future."""

    def __init__(self, value: Any = None, error: BaseException | None = None, key: str = ""):
        self._value = value
        self._error = error
        self.key = key or f"inline-{uuid.uuid4().hex}"
        self.status = "error" if error is not None else "finished"

    @classmethod
    def of(cls, fn: Callable, *args, key: str = "", **kwargs) -> Done:
        """Run ``fn`` now; an exception is kept (and raised by :meth:`result`), as Dask does."""
        try:
            return cls(fn(*args, **kwargs), key=key)
        except Exception as exc:  # noqa: BLE001 - delivered through result()/exception()
            return cls(error=exc, key=key)

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> Any:
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._error

    def cancel(self) -> None:
        pass

    def release(self) -> None:
        pass


class Completions:
    """Futures in completion order: ``add(future)``, ``next_batch(block=False)``, ``count``."""

    def __init__(self):
        self._done: list = []

    def add(self, future) -> None:
        self._done.append(future)

    def next_batch(self, block: bool = False) -> list:
        out, self._done = self._done, []
        return out

    def count(self) -> int:
        return len(self._done)


class Box:
    """An inline channel: the latest value set, read by inline tasks."""

    def __init__(self, name: str):
        self.name = name
        self._value: Any = None
        self._set = False

    def set(self, value: Any) -> None:
        self._value, self._set = value, True

    def publish(self, value: Any) -> None:
        """Set a (possibly large) value for tasks to read (Dask: sent once, as a task)."""
        self.set(value)

    def get(self, timeout: float | None = None) -> Any:
        if not self._set:
            raise TimeoutError(f"channel {self.name!r} holds no value yet")
        return self._value

    def delete(self) -> None:
        self._value, self._set = None, False


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


class Executor:
    """What both executors are (for ``isinstance``); the calls are listed in the module doc."""

    remote: bool
    reproducible: bool


class InlineExecutor(Executor):
    """Runs every call in this process, in order."""

    remote = False
    reproducible = True
    dashboard_link = None
    client = None
    sent_bytes = None  # nothing is sent
    def __init__(self):
        self._loops: list[list] = []  # [generator, Done future] of running background loops

    # -- workers -----------------------------------------------------------------------------
    def workers(self) -> dict[str, dict]:
        return {INLINE: {"nthreads": 1, "resources": {}}}

    @property
    def n_workers(self) -> int:
        return 1

    def threads(self, exclude: Iterable[str] = ()) -> int:
        return 1

    def prepare_noise(self, noise: NoiseConfig) -> None:
        get_noise_table(noise)

    def warm(self, fn: Callable, *args) -> None:
        """Nothing to do: this process prepares the run itself."""

    # -- tasks -------------------------------------------------------------------------------
    def submit(self, fn: Callable, *args, key: str | None = None, priority: int = 0,
               workers=None, strict: bool = False, resources=None) -> Done:
        return Done.of(fn, *args, key=key or "")

    def run(self, calls: Sequence[tuple[Callable, tuple]], label: str = "",
            workers: Sequence[str] | None = None) -> list[Any]:
        return [fn(*args) for fn, args in calls]

    def addresses(self, recent: bool = False) -> list[str]:
        return [INLINE]

    def gather(self, futures: Sequence) -> list[Any]:
        return [f.result() for f in futures]

    def as_completed(self) -> Completions:
        return Completions()

    def wait_first(self, futures: Sequence, timeout: float | None = None):
        return set(futures), set()

    def cancel(self, futures: Iterable) -> None:
        pass

    def put(self, obj: Any, prefix: str = "esnb-put", priority: int = 0) -> Any:
        return obj

    def release(self, handle: Any) -> None:
        pass

    def stuck(self, keys: Iterable[str]) -> list[str]:
        return []

    def busy(self, prefix: str) -> int:
        return 0

    def run_on_workers(self, fn: Callable) -> dict[str, Any]:
        return {INLINE: fn()}

    # -- actors and channels -----------------------------------------------------------------
    def actor(self, cls: type, *args, key: str = "esnb-actor", worker: str | None = None,
              resources: dict | None = None, avoid: Iterable[str] = (),
              timeout: float = 60.0, place: str = "first") -> ActorRef:
        return ActorRef(self, cls, key, worker=worker, resources=resources, avoid=avoid,
                        timeout=timeout, place=place).create(*args)

    def _create_actor(self, ref: ActorRef, args: tuple, exclude: tuple):
        return ref.cls(*args), None, INLINE

    def _actor_lost(self, ref: ActorRef) -> bool:
        return ref.obj is None

    def _actor_call(self, ref: ActorRef, method: str, args: tuple, kwargs: dict) -> Done:
        return Done.of(getattr(ref.obj, method), *args, **kwargs)

    def _actor_handle(self, ref: ActorRef) -> Any:
        return LocalProxy(ref.obj)

    def channel(self, name: str) -> Box:
        return Box(name)

    # -- background loops --------------------------------------------------------------------
    def background(self, genfn: Callable, *args, key: str = "", worker: str | None = None):
        """Start a loop written as a generator: inline, each :meth:`turn` advances it by one
        ``yield``; its return value is the future's result."""
        fut = Done(key=key)
        fut.status = "pending"
        self._loops.append([genfn(*args), fut])
        return fut

    def turn(self) -> None:
        """Advance every running background loop by one step (in start order)."""
        for entry in list(self._loops):
            gen, fut = entry
            try:
                next(gen)
            except StopIteration as stop:
                fut._value, fut.status = stop.value, "finished"
                self._loops.remove(entry)
            except Exception as exc:  # noqa: BLE001 - delivered through the future
                fut._error, fut.status = exc, "error"
                self._loops.remove(entry)

    def finish_background(self, limit: int = 100_000) -> None:
        """Turn until every background loop has returned (they were told to stop)."""
        for _ in range(limit):
            if not self._loops:
                return
            self.turn()
        raise RuntimeError(f"background loops still running after {limit} turns")

    def close(self) -> None:
        for gen, _ in self._loops:
            gen.close()
        self._loops = []

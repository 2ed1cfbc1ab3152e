"""The executor that runs everything in this process.

:class:`InlineExecutor`: ``submit`` computes at once and returns a finished future, actors are
plain objects, channels are local boxes, and background loops (generators) advance one step per
:meth:`~InlineExecutor.turn`. Nothing depends on timing, so an inline run is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from esnb.runners.executor.actors import ActorRef, LocalProxy
from esnb.runners.executor.channels import Box
from esnb.runners.executor.futures import Completions, Done
from esnb.runners.executor.protocol import Executor

INLINE = "inline"


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

    def on_every_worker(self, fn: Callable, *args, name: str,
                        teardown: Callable | None = None) -> None:
        fn(*args)  # this process is the only worker

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

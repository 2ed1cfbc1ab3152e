"""The executor of a Dask cluster (see :mod:`esnb.runners.executor` for the calls).

What it knows about Dask so that nothing else has to:

- **Values are published as task results** (:meth:`DaskExecutor.put`), never ``scatter``ed:
  scattered data dies with its worker and every task needing it is cancelled, and a scatter
  whose target dies mid-transfer closes the client's connection (seen when a SLURM job holding
  the Ape-X replay was killed). A task's result is recomputed elsewhere; ``submit`` only
  queues a message.
- **Live workers** are fetched from the scheduler each time (:meth:`DaskExecutor.workers`), not
  read from ``client.scheduler_info()``: that returns the client's cached identity, which its
  periodic callback (``n_workers=0``: no workers) can overwrite between the fetch and the
  return, so it sometimes came back empty under load.
- **Actors** die with their worker and nothing in Dask recreates them: an :class:`ActorRef`
  notices the loss and :meth:`ActorRef.create` makes a new one on a live worker.
- **Background loops** are long-running tasks that ``secede()`` from the worker's thread pool
  (a worker whose only thread a loop held could not run the constructor of an actor recreated
  there: a deadlock, measured).
- Calls that wait from a runner's thread need ``client.as_current()`` (Dask resolves the client
  from the current context, and a runner's thread has none).
"""

from __future__ import annotations

import importlib
import logging
import pickle
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from distributed import Actor, Client, Future, as_completed
from distributed import wait as dask_wait

from esnb import config
from esnb.cluster.versions import VersionsPlugin, check_workers, host_versions
from esnb.cluster.worker_calls import drive, hold, in_background, naming_the_worker
from esnb.runners.executor.actors import ActorRef
from esnb.runners.executor.channels import DaskChannel
from esnb.runners.executor.pinned import Pinned
from esnb.runners.executor.protocol import Executor

log = logging.getLogger("esnb.cluster")

#: task states in which a task can no longer run (on a worker or the scheduler)
SETTLED = frozenset({"memory", "error", "erred", "released", "forgotten"})


def attach(handle: dict) -> Actor:
    """Inside a task: a proxy of the actor described by :meth:`ActorRef.handle`."""
    module, name = handle["cls"].split(":")
    cls = getattr(importlib.import_module(module), name)
    return Actor(cls, handle["address"], handle["key"])


class DaskExecutor(Executor):
    """Submits calls as futures (``pure=False``, unique keys) and gathers them in order.

    Parameters
    ----------
    client : distributed.Client
    """

    remote = True
    reproducible = False

    def __init__(self, client: Client):
        self.client = client
        self.token = uuid.uuid4().hex[:8]
        #: bytes of the arguments and values this driver sent (counted once set to 0: measuring
        #: pickles everything a second time)
        self.sent_bytes: int | None = None
        self.pinned = Pinned(client, self._submit_call)  # calls placed one per worker
        # every host needs the driver's esnb, numpy, gymnasium, mujoco and torch: checked on
        # each worker now and as it joins (a worker of another host may have its own Python)
        driver = host_versions()
        check_workers(client, driver)
        client.register_plugin(VersionsPlugin(driver))

    @property
    def dashboard_link(self) -> str | None:
        return getattr(self.client, "dashboard_link", None)

    # -- workers -----------------------------------------------------------------------------
    def workers(self) -> dict[str, dict]:
        """``{address: info}`` of the live workers, fetched from the scheduler now."""
        return self.client.sync(self.client.scheduler.identity, n_workers=-1)["workers"]

    @property
    def n_workers(self) -> int:
        return max(1, len(self.workers()))

    def threads(self, exclude: Iterable[str] = ()) -> int:
        info = self.workers()
        skip = set(exclude)
        return max(1, sum(int(w.get("nthreads", 1)) for a, w in info.items() if a not in skip))

    def wait_for_workers(self, exclude: Iterable[str] = (), timeout: float = 60.0) -> list[str]:
        """Live worker addresses (sorted) other than ``exclude``, waiting up to ``timeout``
        for one to exist (a restarted worker may be joining)."""
        skip = set(exclude)
        deadline = time.monotonic() + timeout
        while True:
            workers = sorted(w for w in self.workers() if w not in skip)
            if workers or time.monotonic() >= deadline:
                return workers
            time.sleep(0.2)

    def on_every_worker(self, fn: Callable, *args, name: str,
                        teardown: Callable | None = None) -> None:
        """``fn(*args)`` on every worker, present and future: a task on each present worker
        now (the first error is raised, its worker's address in front), then a worker plugin
        named ``name`` for those that join (:class:`esnb.cluster.plugins.EveryWorker`: one
        whose call fails leaves the cluster, saying why). The plugin's registration is a
        no-op where a run already registered ``name``: the tasks check the present workers
        every time."""
        from esnb.cluster.plugins import EveryWorker

        workers = self.addresses()
        if workers:
            self.run([(naming_the_worker, (fn, *args))] * len(workers), label="every-worker",
                     workers=workers)
        self.client.register_plugin(EveryWorker(name, fn, args, teardown))

    def warm(self, fn: Callable, *args) -> None:
        """Start ``fn(*args)`` in the background on every present worker and return at once
        (imports and environments a run's first tasks will need, made while the driver
        prepares the run)."""
        self.client.run(in_background, fn, *args)  # returns once the threads started

    # -- tasks -------------------------------------------------------------------------------
    def submit(self, fn: Callable, *args, key: str | None = None, priority: int = 0,
               workers: Sequence[str] | None = None, strict: bool = False,
               resources: dict | None = None) -> Future:
        """One task. ``workers`` are preferred (required with ``strict``)."""
        kw: dict[str, Any] = dict(key=key or f"esnb-{self.token}-{uuid.uuid4().hex}",
                                  pure=False, priority=priority)
        if workers is not None:
            kw.update(workers=list(workers), allow_other_workers=not strict)
        if resources is not None:
            kw["resources"] = resources
        return self.client.submit(fn, *args, **kw)

    def run(self, calls: Sequence[tuple[Callable, tuple]], label: str = "",
            workers: Sequence[str] | None = None) -> list[Any]:
        """Submit every ``(fn, args)`` and gather the results in submission order.

        ``workers`` (one address per call) pins each call to its worker: short tasks then
        spread over every worker instead of piling up where a dependency lives, and none is
        stolen by another worker (a replica task must run where it was placed, see
        :mod:`esnb.runners.es.dispatch`). A pinned call whose worker leaves is placed again on
        a live worker (see :class:`~.pinned.Pinned`).
        """
        tag = uuid.uuid4().hex[:8]
        futures = [self._submit_call(fn, args, f"esnb-{label}-{tag}-{i}",
                                     None if workers is None else workers[i])
                   for i, (fn, args) in enumerate(calls)]
        try:
            if workers is None:
                return self.client.gather(futures)
            return self.pinned.gather(futures, calls, list(workers), f"esnb-{label}-{tag}")
        finally:
            for f in futures:
                f.release()

    def _submit_call(self, fn: Callable, args: tuple, key: str, worker: str | None) -> Future:
        kw: dict[str, Any] = dict(key=key, pure=False)
        if worker is not None:
            kw.update(workers=[worker], allow_other_workers=False)
        self._count(args)
        return self.client.submit(fn, *args, **kw)

    def addresses(self, recent: bool = False) -> list[str]:
        """Addresses of the workers that take tasks (see :meth:`Pinned.addresses`)."""
        return self.pinned.addresses(recent)

    def _count(self, payload: Any) -> None:
        if self.sent_bytes is not None:
            self.sent_bytes += len(pickle.dumps(payload, protocol=5))

    def gather(self, futures: Sequence[Future]) -> list[Any]:
        return self.client.gather(list(futures))

    def as_completed(self):
        """Futures as they finish: ``add(future)``, ``next_batch(block=False)``, ``count()``."""
        return as_completed(loop=self.client.loop)

    def wait_first(self, futures: Sequence[Future], timeout: float | None = None):
        """``(done, not_done)`` once one of ``futures`` finished or ``timeout`` passed."""
        try:
            with self.client.as_current():
                res = dask_wait(list(futures), timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return set(), set(futures)
        return res.done, res.not_done

    def cancel(self, futures: Iterable[Future]) -> None:
        futures = list(futures)
        if futures:
            self.client.cancel(futures)

    def put(self, obj: Any, prefix: str = "esnb-put", priority: int = 0) -> Future:
        """Send ``obj`` once, as a task that returns it (see the module's notes)."""
        self._count(obj)
        # dask warns past 10 MB that the value should be scattered or loaded by a task: here it
        # travels in the graph on purpose (a scatter dies with its worker; see above), once
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Sending large graph", UserWarning)
            return self.client.submit(hold, obj, key=f"{prefix}-{uuid.uuid4().hex}",
                                      pure=False, priority=priority)

    def release(self, handle: Future) -> None:
        handle.release()

    def stuck(self, keys: Iterable[str]) -> list[str]:
        """Keys the scheduler cannot place (restricted to workers that are all gone)."""
        keys = tuple(keys)
        if not keys:
            return []

        def no_worker(dask_scheduler, keys=keys):
            return [k for k in keys if k in dask_scheduler.tasks
                    and dask_scheduler.tasks[k].state == "no-worker"]

        return self.client.run_on_scheduler(no_worker)

    def busy(self, prefix: str) -> int:
        """Tasks whose key starts with ``prefix`` that the scheduler or a worker still holds
        unsettled (a cancelled task the scheduler already sent can still start on a worker)."""

        def on_workers(dask_worker, prefix=prefix):
            return sum(str(key).startswith(prefix) and ts.state not in SETTLED
                       for key, ts in list(dask_worker.state.tasks.items()))

        def on_scheduler(dask_scheduler, prefix=prefix):
            return sum(str(key).startswith(prefix) and ts.state not in SETTLED
                       for key, ts in list(dask_scheduler.tasks.items()))

        return int(self.client.run_on_scheduler(on_scheduler)
                   or sum(self.client.run(on_workers).values()))

    def run_on_workers(self, fn: Callable) -> dict[str, Any]:
        return self.client.run(fn)

    # -- actors and channels -----------------------------------------------------------------
    def actor(self, cls: type, *args, key: str = "esnb-actor", worker: str | None = None,
              resources: dict | None = None, avoid: Iterable[str] = (),
              timeout: float = 60.0, place: str = "first") -> ActorRef:
        """Create ``cls(*args)`` as a Dask actor on a live worker (the parameters:
        :meth:`Executor.actor <esnb.runners.executor.protocol.Executor.actor>`)."""
        return ActorRef(self, cls, key, worker=worker, resources=resources, avoid=avoid,
                        timeout=timeout, place=place).create(*args)

    def _create_actor(self, ref: ActorRef, args: tuple, exclude: tuple):
        kw: dict[str, Any] = dict(actor=True, pure=False, priority=100,
                                  key=f"{ref.key}-{self.token}-{ref.generation}")
        if ref.resources is not None:
            kw["resources"] = ref.resources
            # read (and checked) before anything is submitted
            limit = max(ref.timeout, float(config.get("cluster.actor-worker-wait")))
        else:
            workers = self.wait_for_workers(exclude, ref.timeout)
            if not workers:
                raise RuntimeError(f"no live worker to hold the {ref.cls.__name__} actor")
            if ref.worker in workers:
                target = ref.worker
            else:
                choices = [w for w in workers if w not in ref.avoid] or workers
                target = choices[-1] if ref.place == "last" else choices[0]
            kw.update(workers=[target], allow_other_workers=False)
        fut = self.client.submit(ref.cls, *args, **kw)
        with self.client.as_current():
            if ref.resources is None:
                proxy = fut.result(timeout=ref.timeout)
            else:
                proxy = self._await_resources(ref, fut, limit)
        # the workers that left its address so far: one more and the actor is lost
        ref.removals = self._removals().get(proxy._address, 0)
        return proxy, fut, proxy._address

    def _removals(self) -> dict[str, int]:
        """Workers that left each address (:func:`esnb.cluster.deaths.report_deaths`)."""
        return getattr(self.client, "esnb_worker_removals", {})

    def _await_resources(self, ref: ActorRef, fut, limit: float):
        """The actor's worker may be a batch job still queued (a replaced actor worker): wait
        up to ``limit`` seconds (``esnb.cluster.actor-worker-wait``), saying so every 30 s."""
        waited = 0.0
        while True:
            step = min(30.0, limit - waited)
            try:
                return fut.result(timeout=step)
            except TimeoutError:
                waited += step
                if waited >= limit:
                    fut.cancel()
                    raise TimeoutError(
                        f"no worker with resources {ref.resources} took the "
                        f"{ref.cls.__name__} actor in {waited:.0f} s (its batch job still "
                        "queued?); esnb.cluster.actor-worker-wait sets how long to wait"
                    ) from None
                log.warning("waiting for a worker with resources %s to hold the %s actor "
                            "(%.0f s of %.0f s; a replaced actor worker's job may be queued)",
                            ref.resources, ref.cls.__name__, waited, limit)

    def _actor_lost(self, ref: ActorRef) -> bool:
        # the scheduler's remove-worker event (esnb.cluster.deaths), at once: the actor's
        # future itself may stay "pending" (a pinned actor waits for its worker to come back)
        return (ref._future is None or ref._future.status not in ("finished", "pending")
                or self._removals().get(ref.address, 0) > ref.removals)

    def _actor_call(self, ref: ActorRef, method: str, args: tuple, kwargs: dict):
        return getattr(ref.obj, method)(*args, **kwargs)

    def _actor_handle(self, ref: ActorRef) -> dict:
        return {"cls": f"{ref.cls.__module__}:{ref.cls.__qualname__}", "address": ref.address,
                "key": ref.obj.key, "generation": ref.generation}

    def channel(self, name: str) -> DaskChannel:
        return DaskChannel(f"{name}-{self.token}", client=self.client, executor=self)

    # -- background loops --------------------------------------------------------------------
    def background(self, genfn: Callable, *args, key: str = "",
                   worker: str | None = None) -> Future:
        """Run the generator function ``genfn(*args)`` to its end as one long-running task
        (pinned to ``worker`` if given); the future's result is its return value."""
        kw: dict[str, Any] = dict(key=key or f"esnb-loop-{uuid.uuid4().hex}", pure=False)
        if worker is not None:
            kw.update(workers=[worker], allow_other_workers=False)
        return self.client.submit(drive, genfn, *args, **kw)

    def turn(self) -> None:
        """Background loops run by themselves on a cluster."""

    def finish_background(self, limit: int = 0) -> None:
        """Background loops end by themselves on a cluster."""

    def close(self) -> None:
        """Nothing to release: the client belongs to whoever made it."""

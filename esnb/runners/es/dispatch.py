"""The driver's side of ES's replicas (:mod:`.replica`): a generation's tasks spread over the
workers, each bringing its worker's replica up to date from one small update.

- The run's rollout settings and replica token are published once per run, the generation's
  :class:`~.replica.Update` once per generation (task results), so the driver sends each once
  whatever the number of workers; each task carries only its own pairs' offsets, seeds and
  flags, packed in one int32 array (:func:`~.tasks.pack_pairs`).
- Tasks are pinned one per worker in turn, the same workers every generation (a task whose
  worker leaves is placed again on a live one). Left to itself the scheduler puts every task
  where the update lives, and short tasks then run one after another on that one worker; and
  with loose placement, work stealing moved tasks to workers whose replicas had missed the
  previous generation, which then needed the whole state again (measured: 64 syncs of a
  1M-parameter state in 6 generations on 32 workers, 5.6 s per generation).
- Workers on the driver's host map its theta (:mod:`.host_theta`) and apply nothing: once a
  worker has done so, its tasks carry the update's head (generation, sigma, checksum, the
  file) themselves, and when every worker of a generation maps, no update is published at all:
  a generation is then one round of tasks, with nothing to fetch before a rollout starts (the
  published update cost 8 local workers ~9 ms and 32 ~40 ms per generation: a task to run
  first, then every worker fetching its result). A worker that cannot map after all answers
  "stale", is sent the whole state, and gets whole updates until it maps again.
- The workers are listed in the background during the previous generation
  (``executor.addresses(recent=True)``): a worker that joins is used one generation later.
- A task whose worker has no replica of this generation (a new or restarted worker, one that
  had no task last generation) answers "stale"; it runs again on that worker with the whole
  state (a :class:`~.replica.Sync`, built and sent once per generation, only when needed).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from esnb.runners.es.host_theta import HostTheta
from esnb.runners.es.replica import Sync, Update, checksum, drop_replicas
from esnb.runners.es.tasks import ReplicaContext


class Generations:
    """Runs a generation's replica tasks on an executor.

    Parameters
    ----------
    executor : InlineExecutor or DaskExecutor
    name : str
        The run's name (a random suffix makes the replicas' token unique to this runner).
    """

    def __init__(self, executor, name: str, cfg):
        self.executor = executor
        self.token = f"{name}-{uuid.uuid4().hex[:8]}"
        self.context = ReplicaContext(cfg, self.token)
        self._context = None  # its handle, published at the first generation
        self.host_theta = HostTheta(self.token)  # theta for the workers on this host
        self.syncs = 0
        self.published = 0  # generations whose whole update was published
        self.addresses: list[str] = []
        self.mapping: set[str] = set()  # workers that read the driver's theta last time

    def update(self, generation: int, step, iw: Sequence, obs, sigma: float,
               theta: np.ndarray, mean: np.ndarray | None, std: np.ndarray | None) -> Update:
        """The :class:`Update` to ``generation``: the previous ordinary ``step``, this
        generation's ``iw`` updates, the previous batch's ``obs`` sums and the state's checksum
        (its theta also published to this host's workers)."""
        shared = self.host_theta.publish(generation, theta, mean, std)
        return Update(generation, step, tuple(iw), obs, float(sigma), checksum(theta, mean, std),
                      shared, self.host_theta.host)

    def run(self, update: Update, calls: list[tuple[Callable, tuple]], label: str,
            sync: Callable[[], Sync], first: int | None = None) -> list[dict]:
        """Run ``calls`` -- ``(fn, args)`` whose ``fn(context, update, *args, sync=None)`` is a
        replica task (:mod:`.tasks`) -- for ``update``'s generation; results in call order.

        The first ``first`` calls (default: all) go one per worker in turn, and so do the rest
        (evaluations), again from the first worker: the workers that run a generation are the
        same every generation, and their replicas stay current.
        """
        self.addresses = self.executor.addresses(recent=True)
        if self._context is None:
            self._context = self.executor.put(self.context, prefix=f"esnb-context-{self.token}")
        first = len(calls) if first is None else first
        n = len(self.addresses)
        placement = [self.addresses[i % n] for i in range(first)] + \
                    [self.addresses[i % n] for i in range(len(calls) - first)]
        # workers known to map the driver's theta get the update's head with their task; the
        # others fetch the whole update, published once (none at all when every worker maps)
        head = update.head() if update.shared is not None else None
        whole = [head is None or where not in self.mapping for where in placement]
        handle = self.executor.put(update, prefix=f"esnb-update-{self.token}-"
                                   f"{update.generation}") if any(whole) else None
        self.published += handle is not None
        try:
            tasks = [(fn, (self._context, handle if w else head, *args))
                     for (fn, args), w in zip(calls, whole)]
            results = self.executor.run(tasks, label, workers=placement)
            stale = [i for i, r in enumerate(results) if r.get("stale")]
            if stale:
                self.syncs += len({placement[i] for i in stale})  # workers, not tasks
                state = self.executor.put(sync(), prefix=f"esnb-sync-{self.token}")
                try:
                    again = self.executor.run(
                        [(tasks[i][0], (*tasks[i][1], state)) for i in stale], label + "-sync",
                        workers=[placement[i] for i in stale])
                finally:
                    self.executor.release(state)
                for i, r in zip(stale, again):
                    results[i] = r
        finally:
            if handle is not None:
                self.executor.release(handle)
        maps: dict[str, bool] = {}  # a worker that was stale could not map: whole updates
        for i, where in enumerate(placement):
            maps[where] = maps.get(where, True) and i not in stale \
                and bool(results[i].get("host_theta"))
        self.mapping |= {where for where, ok in maps.items() if ok}
        self.mapping -= {where for where, ok in maps.items() if not ok}
        bad = [r for r in results if r.get("stale") or r["checksum"] != update.checksum]
        if bad:  # a synced replica cannot be stale: this is a bug, never a result to use
            raise RuntimeError(f"generation {update.generation}: {len(bad)} tasks ran on a "
                               f"replica that does not match the driver's state")
        return results

    @property
    def n_workers(self) -> int:
        return max(1, len(self.addresses) or len(self.executor.addresses()))

    def close(self) -> None:
        """Drop this run's replicas on every worker (and in this process)."""
        if self._context is not None:
            self.executor.release(self._context)
            self._context = None
        self.host_theta.close()
        token = self.token
        drop_replicas(token)
        try:
            self.executor.run_on_workers(lambda: drop_replicas(token))
        except Exception:  # noqa: BLE001 - closing: a lost cluster holds no replica either
            pass


def sync_state(generation: int, es, obs_stats, check: int) -> Sync:
    """The whole state of ``generation`` for a stale worker."""
    state: dict[str, Any] = es.adam.state_dict()
    return Sync(generation, es.theta.copy(), state, obs_stats.state_dict(), check)

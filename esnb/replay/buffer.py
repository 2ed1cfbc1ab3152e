"""``ReplayBuffer``: storage, sampler, limiter and eviction composed into one buffer of named
arrays (:class:`~esnb.replay.prioritized.PrioritizedReplayBuffer` is one with a prioritised
sampler).

Soft capacity, eviction and per-actor keys: Horgan et al. 2018, "Distributed Prioritized
Experience Replay" (Ape-X).

Items are written in a ring of ``capacity`` slots, one id per item (its insertion number; the
item lives in slot ``id % capacity``). Ids, not slots, are what :meth:`ReplayBuffer.add` and
:meth:`ReplayBuffer.sample` return and :meth:`ReplayBuffer.update_priorities` takes, so a
priority computed for an item that has since been evicted or overwritten is recognised and
dropped instead of landing on whatever now occupies the slot.

Capacity
--------
``capacity`` is the hard capacity: the ring's size. With ``soft_capacity`` set, the buffer may
hold more than ``soft_capacity`` items between calls to :meth:`ReplayBuffer.evict`, which
removes the excess (oldest first, or sampled by low priority). If the ring comes round to a
slot whose item is still stored (the hard capacity is reached because ``evict`` ran too rarely,
or an item outlived ``capacity`` insertions by surviving priority eviction), the new item
overwrites it: the oldest item goes, counted in ``stats()["overwritten"]``. Without a soft
capacity this is the usual FIFO ring.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from esnb.replay.limits import (
    FifoEviction,
    KeyFilter,
    PriorityEviction,
    RateLimiter,
    ReplayNotReady,
)
from esnb.replay.samplers import UniformSampler, check_priorities
from esnb.replay.stacks import StackStorage
from esnb.replay.state import COUNTERS, buffer_state, load_buffer_state
from esnb.replay.storage import ArrayStorage


class ReplayBuffer:
    """A replay buffer of named arrays; uniform sampling unless given another sampler.

    Parameters
    ----------
    capacity : int
        Hard capacity (slots preallocated per field).
    spec : mapping, optional
        ``{name: (shape, dtype)}``; without it the first batch added fixes the fields.
    sampler : UniformSampler or PrioritizedSampler, optional
        Default uniform.
    soft_capacity : int, optional
        Items kept after :meth:`evict` (``<= capacity``); None: no soft capacity.
    eviction : {"fifo", "priority"}
        How :meth:`evict` chooses the excess: oldest first, or sampled without replacement
        with ``P ∝ p_i^eviction_exponent``.
    eviction_exponent : float
        Exponent of priority eviction (Ape-X DPG: -0.4).
    min_size, samples_per_insert, error_buffer
        The rate limiter (see :class:`~esnb.replay.limits.RateLimiter`), or pass ``limiter``.
    limiter : RateLimiter, optional
    frame_storage : bool
        Store ``obs``/``next_obs`` stacks of Atari frames with each frame once
        (:class:`~esnb.replay.stacks.StackStorage`; needs ``spec``); sampling then drops the
        items whose frames the frame ring has overwritten (counted in ``overwritten``).
    frame_capacity : int, optional
        Frames the ring of a frame storage holds (default: ``capacity`` + 1/16 + stack).

    Examples
    --------
    >>> buf = ReplayBuffer(1000, spec={"obs": ((4,), "float32"), "action": "int64"})
    >>> ids = buf.add({"obs": np.zeros((3, 4)), "action": np.array([0, 1, 0])})
    >>> batch, ids, weights = buf.sample(2, np.random.default_rng(0))
    >>> batch["obs"].shape, len(buf)
    ((2, 4), 3)
    """

    def __init__(self, capacity: int, *, spec: Mapping | None = None, sampler=None,
                 soft_capacity: int | None = None, eviction: str = "fifo",
                 eviction_exponent: float = -0.4, min_size: int = 1,
                 samples_per_insert: float | None = None, error_buffer: float | None = None,
                 limiter: RateLimiter | None = None, frame_storage: bool = False,
                 frame_capacity: int | None = None):
        if frame_storage:
            self.storage = StackStorage(capacity, spec, frame_capacity)
        elif frame_capacity is not None:
            raise ValueError("frame_capacity is a frame storage's (frame_storage=True)")
        else:
            self.storage = ArrayStorage(capacity, spec)
        #: the storage may lose items' frames: sampling checks them (see _drop_unavailable)
        self.frame_storage = bool(frame_storage)
        cap = self.storage.capacity
        if soft_capacity is not None and (
            isinstance(soft_capacity, bool) or int(soft_capacity) != soft_capacity
            or not 1 <= soft_capacity <= cap
        ):
            raise ValueError(f"soft_capacity must be an integer in [1, capacity={cap}] or None, "
                             f"got {soft_capacity!r}")
        if eviction == "fifo":
            self.evictor = FifoEviction()
        elif eviction == "priority":
            self.evictor = PriorityEviction(eviction_exponent)
        else:
            raise ValueError(f"eviction must be 'fifo' or 'priority', got {eviction!r}")
        if limiter is None:
            limiter = RateLimiter(min_size, samples_per_insert, error_buffer)
        elif (min_size, samples_per_insert, error_buffer) != (1, None, None):
            raise ValueError("pass either limiter or min_size/samples_per_insert/error_buffer")
        self.limiter = limiter
        self.sampler = sampler if sampler is not None else UniformSampler()
        self.sampler.bind(cap)
        self.soft_capacity = None if soft_capacity is None else int(soft_capacity)
        self.keys = KeyFilter()
        self._ids = np.full(cap, -1, dtype=np.int64)
        self._valid = np.zeros(cap, dtype=bool)
        self._key_actor = np.full(cap, -1, dtype=np.int64)
        self._key_seq = np.full(cap, -1, dtype=np.int64)
        self._head = 0  # id of the next item
        self._tail = 0  # every id below it is gone
        self._n = 0
        self.counters = dict.fromkeys(COUNTERS, 0)

    # -- reading -----------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return self.storage.capacity

    @property
    def prioritized(self) -> bool:
        return self.sampler.prioritized

    def __len__(self) -> int:
        return self._n

    @property
    def filled(self) -> int:
        """Slots ever written (the ring's occupied part)."""
        return min(self._head, self.capacity)

    def ready(self, batch_size: int = 1) -> bool:
        """Whether :meth:`sample` of ``batch_size`` would pass the rate limiter now."""
        return self.limiter.blocked(int(batch_size), self._n, self.counters["inserted"],
                                    self.counters["sampled"]) is None

    def insert_ready(self, n: int = 1) -> bool:
        """Whether ``n`` more items stay within the samples-per-insert ratio (always True
        without one). :meth:`add` never refuses items; writers may back off while False."""
        return self.limiter.insert_blocked(int(n), self.counters["inserted"],
                                           self.counters["sampled"]) is None

    def high_water(self, actor: int) -> int:
        """Highest sequence number stored for ``actor`` (-1: none)."""
        return self.keys.high_water(actor)

    def stats(self) -> dict[str, Any]:
        """Size, capacities, memory (``bytes`` held by the storage, ``bytes_per_transition``
        = bytes / capacity) and counters (plain Python values)."""
        nbytes = int(self.storage.nbytes)
        out: dict[str, Any] = {"size": self._n, "capacity": self.capacity,
                               "soft_capacity": self.soft_capacity, "bytes": nbytes,
                               "bytes_per_transition": nbytes / self.capacity, **self.counters}
        if self.prioritized:
            out["max_priority"] = self.sampler.max_priority
        return out

    # -- writing -----------------------------------------------------------------------------
    def add(self, batch: Mapping, priorities=None, keys=None) -> np.ndarray:
        """Store a batch; returns one id per item (-1 for items dropped as duplicates).

        Parameters
        ----------
        batch : dict of arrays
            One array per field, all of the same length ``n`` (a leading batch dimension).
        priorities : float or array of n floats, optional
            Initial priorities (> 0, finite); without them items get the largest priority
            seen so far. A uniform buffer checks and ignores them.
        keys : (actor, seq), optional
            Actor id (an int or n ints) and increasing sequence numbers: items at or below
            their actor's high-water mark are dropped (see :class:`KeyFilter`).

        Raises
        ------
        ValueError
            For a malformed batch, priorities or keys, or ``n > capacity``; nothing is stored.
        """
        n, arrays = self.storage.check(batch)
        if n > self.capacity:
            raise ValueError(f"a batch of {n} items does not fit a buffer of capacity "
                             f"{self.capacity}")
        p = None if priorities is None else check_priorities(priorities, n)
        out = np.full(n, -1, dtype=np.int64)
        if keys is not None:
            actor, seq = KeyFilter.check(keys, n)
            keep, marks = self.keys.new(actor, seq)
        else:
            actor = seq = None
            keep, marks = np.ones(n, dtype=bool), {}
        m = int(keep.sum())
        if m:
            sel = np.flatnonzero(keep) if m < n else slice(None)
            ids = np.arange(self._head, self._head + m, dtype=np.int64)
            slots = ids % self.capacity
            occupied = self._valid[slots]
            if occupied.any():
                gone = slots[occupied]
                self.sampler.remove(gone)
                self._n -= len(gone)
                self.counters["overwritten"] += len(gone)
            self.storage.write(slots, {k: a[sel] for k, a in arrays.items()})
            self.sampler.add(slots, None if p is None else p[sel])
            self._ids[slots] = ids
            self._valid[slots] = True
            self._key_actor[slots] = -1 if actor is None else actor[sel]
            self._key_seq[slots] = -1 if seq is None else seq[sel]
            self._head += m
            self._tail = max(self._tail, self._head - self.capacity)
            self._n += m
            out[sel] = ids
        self.keys.commit(marks)
        self.counters["inserted"] += m
        self.counters["duplicates"] += n - m
        return out

    def update_priorities(self, ids, priorities) -> int:
        """Set the priorities of items by id; returns how many were still stored.

        Ids of items evicted or overwritten since they were sampled are skipped (counted in
        ``stats()["stale_updates"]``). A uniform buffer checks its input and changes nothing.
        """
        ids = np.asarray(ids)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise ValueError(f"ids must be a 1-d array of integers, got {ids.dtype} of shape "
                             f"{ids.shape}")
        if ids.size and ids.min() < 0:
            raise ValueError("ids must be >= 0 (ids of -1 mark items that were never stored)")
        p = check_priorities(priorities, len(ids))
        ids = ids.astype(np.int64, copy=False)
        slots = ids % self.capacity
        live = (self._ids.take(slots) == ids) & self._valid.take(slots)
        n_live = int(live.sum())
        if self.prioritized:
            if n_live == len(ids):
                self.sampler.update(slots, p)
            else:
                self.sampler.update(slots[live], p[live])
        self.counters["updated"] += n_live
        self.counters["stale_updates"] += len(ids) - n_live
        return n_live

    def evict(self, rng: np.random.Generator | None = None) -> int:
        """Remove the items beyond the soft capacity; returns how many.

        ``rng`` is required by priority eviction (it samples what leaves).
        """
        if self.soft_capacity is None or self._n <= self.soft_capacity:
            return 0
        k = self._n - self.soft_capacity
        if self.evictor.kind == "fifo":
            slots = self._oldest(k)
        else:
            if not isinstance(rng, np.random.Generator):
                raise ValueError("priority eviction needs rng, a numpy Generator")
            stored = np.flatnonzero(self._valid)
            slots = stored[self.evictor.choose(self.sampler.priorities(stored), k, rng)]
        self._remove(slots)
        return len(slots)

    def _oldest(self, k: int) -> np.ndarray:
        picked, need, t = [], k, self._tail
        while need > 0 and t < self._head:
            end = min(self._head, t + max(4 * need, 4096))
            ids = np.arange(t, end, dtype=np.int64)
            slots = ids % self.capacity
            live = (self._ids[slots] == ids) & self._valid[slots]
            take = slots[live][:need]
            picked.append(take)
            need -= len(take)
            t = end if need > 0 else int(self._ids[take[-1]]) + 1
        self._tail = t
        return np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)

    def _remove(self, slots: np.ndarray) -> None:
        self._valid[slots] = False
        self.sampler.remove(slots)
        self._n -= len(slots)
        self.counters["evicted"] += len(slots)

    # -- sampling ----------------------------------------------------------------------------
    def sample(self, batch_size: int, rng: np.random.Generator, beta: float | None = None
               ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """Draw ``batch_size`` items (with replacement).

        Returns
        -------
        batch : dict of arrays
        ids : int64 array
            For :meth:`update_priorities`.
        weights : float32 array
            Importance weights (all 1 for a uniform buffer).

        Raises
        ------
        ReplayNotReady
            (a ``ValueError``) when the rate limiter forbids sampling now (empty or under
            ``min_size``, or past the samples-per-insert ratio).
        ValueError
            For a bad ``batch_size``, ``rng`` or ``beta``.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        if not isinstance(rng, np.random.Generator):
            raise ValueError(f"rng must be a numpy Generator, got {type(rng).__name__}")
        if beta is None:
            beta = getattr(self.sampler, "beta", 0.0)
        elif isinstance(beta, bool) or not isinstance(beta, (int, float, np.floating)) \
                or not np.isfinite(beta) or beta < 0:
            raise ValueError(f"beta must be a finite number >= 0, got {beta!r}")
        n = int(batch_size)
        while True:
            reason = self.limiter.blocked(n, self._n, self.counters["inserted"],
                                          self.counters["sampled"])
            if reason is None and self._n == 0:
                reason = "the buffer is empty"
            if reason is not None:
                raise ReplayNotReady(f"cannot sample {n} items: {reason}")
            slots, weights = self.sampler.sample(n, rng, self._valid, self.filled, self._n,
                                                 float(beta))
            if not (self.frame_storage and self._drop_unavailable(slots)):
                break
        self.counters["sampled"] += n
        return self.storage.read(slots), self._ids.take(slots), weights

    def _drop_unavailable(self, slots: np.ndarray) -> bool:
        """Remove the items among ``slots`` whose frames are gone (the frame ring came round:
        they are overwritten, as a full ring's oldest items are); whether there were any.
        Sampling then draws again, so it never returns such an item."""
        gone = slots[~self.storage.available(slots)]
        if not len(gone):
            return False
        gone = np.unique(gone)
        self._valid[gone] = False
        self.sampler.remove(gone)
        self._n -= len(gone)
        self.counters["overwritten"] += len(gone)
        return True

    # -- state -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to rebuild the buffer: plain values and numpy arrays (only stored
        items, in id order; see :func:`esnb.replay.state.buffer_state`)."""
        return buffer_state(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output into this (same capacity, same sampler kind)
        buffer. Everything is checked before anything changes."""
        load_buffer_state(self, state)


__all__ = ["ReplayBuffer", "ReplayNotReady"]

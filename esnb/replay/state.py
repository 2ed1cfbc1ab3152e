"""A replay buffer's state: what a checkpoint stores and how it is checked when loaded.

Only stored items are saved (in id order); field ``name`` is under ``"field.name"``.
:func:`split_state` separates the JSON-able part from the arrays for
:func:`esnb.record.save_checkpoint`. (The functions take the buffer as ``self``: they are its
``state_dict``/``load_state_dict``, kept apart to keep the buffer readable.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from esnb.replay.samplers import check_priorities
from esnb.replay.storage import spec_from_json, spec_to_json

STATE_FORMAT = "esnb-replay"
STATE_VERSION = 1
#: prefix of a frame storage's own state (:meth:`StackStorage.state_dict`) in a buffer's
STORAGE = "storage."
COUNTERS = ("inserted", "duplicates", "overwritten", "evicted", "sampled", "updated",
             "stale_updates")


def buffer_state(self) -> dict[str, Any]:
    """Everything needed to rebuild the buffer: plain values and numpy arrays.

    Only stored items are saved (in id order); field ``name`` is under ``"field.name"``.
    See :func:`split_state` to write it with :func:`esnb.record.save_checkpoint`.
    """
    stored = np.flatnonzero(self._valid)
    slots = stored[np.argsort(self._ids[stored], kind="stable")]
    marks_actor, marks_seq = self.keys.state()
    state: dict[str, Any] = {
        "format": STATE_FORMAT,
        "format_version": STATE_VERSION,
        "capacity": self.capacity,
        "soft_capacity": self.soft_capacity,
        "sampler": self.sampler.state_dict(),
        "limiter": self.limiter.config(),
        "eviction": self.evictor.config(),
        "spec": None if self.storage.spec is None else spec_to_json(self.storage.spec),
        "head": self._head,
        "tail": self._tail,
        "counters": dict(self.counters),
        "ids": self._ids[slots].copy(),
        "key_actor": self._key_actor[slots].copy(),
        "key_seq": self._key_seq[slots].copy(),
        "marks_actor": marks_actor,
        "marks_seq": marks_seq,
    }
    if self.prioritized:
        state["priorities"] = self.sampler.priorities(slots).copy()
    if self.frame_storage:  # frames and frame ids: the storage's own state, under "storage."
        state.update({f"{STORAGE}{k}": v for k, v in self.storage.state_dict().items()})
    else:
        for k, a in self.storage.arrays.items():
            state[f"field.{k}"] = a[slots].copy()
    return state

def load_buffer_state(self, state: Mapping[str, Any]) -> None:
    """Restore :meth:`state_dict`'s output into this (same capacity, same sampler kind)
    buffer. Everything is checked before anything changes."""
    if state.get("format") != STATE_FORMAT or state.get("format_version") != STATE_VERSION:
        raise ValueError(f"not an esnb replay state (format {state.get('format')!r}, "
                         f"version {state.get('format_version')!r})")
    if int(state["capacity"]) != self.capacity:
        raise ValueError(f"state of a buffer of capacity {state['capacity']}, this one has "
                         f"{self.capacity}")
    kind = state["sampler"].get("kind")
    if kind != ("prioritized" if self.prioritized else "uniform"):
        raise ValueError(f"state of a {kind} buffer, this one is "
                         f"{'prioritized' if self.prioritized else 'uniform'}")
    if self.prioritized and float(state["sampler"]["alpha"]) != self.sampler.alpha:
        raise ValueError(f"state has alpha {state['sampler']['alpha']}, this buffer "
                         f"{self.sampler.alpha}")
    spec = None if state["spec"] is None else spec_from_json(state["spec"])
    if spec is not None and self.storage.spec is not None and spec != self.storage.spec:
        raise ValueError(f"state has fields {spec}, this buffer {self.storage.spec}")
    ids = np.asarray(state["ids"], dtype=np.int64)
    n = len(ids)
    fields = {k[len("field."):]: np.asarray(v) for k, v in state.items()
              if k.startswith("field.")}
    stored = {k[len(STORAGE):]: v for k, v in state.items() if k.startswith(STORAGE)}
    if bool(stored) != self.frame_storage:
        raise ValueError(f"state of a buffer {'with' if stored else 'without'} a frame storage, "
                         f"this one is {'with' if self.frame_storage else 'without'}")
    if spec is not None and not self.frame_storage:
        if sorted(fields) != sorted(spec):
            raise ValueError(f"state arrays {sorted(fields)} do not match its fields "
                             f"{sorted(spec)}")
        for k, (shape, dtype) in spec.items():
            if fields[k].shape != (n, *shape) or fields[k].dtype != dtype:
                raise ValueError(f"state field {k!r}: {fields[k].dtype} {fields[k].shape}, "
                                 f"expected {dtype} {(n, *shape)}")
    if n > self.capacity or (n and (ids.min() < 0 or len(np.unique(ids % self.capacity))
                                    != n or ids.max() >= int(state["head"]))):
        raise ValueError("state ids are inconsistent with its capacity and head")
    priorities = None
    if self.prioritized:
        priorities = check_priorities(state["priorities"], n)

    if self.frame_storage:  # checks everything before it changes anything
        self.storage.load_state_dict(stored)
    if self.storage.spec is None and spec is not None:
        self.storage.write(np.zeros(0, dtype=np.int64),
                           {k: np.zeros((0, *s), d) for k, (s, d) in spec.items()})
    self.sampler.bind(self.capacity)
    self.sampler.load_state_dict(state["sampler"])
    self._ids.fill(-1)
    self._valid.fill(False)
    self._key_actor.fill(-1)
    self._key_seq.fill(-1)
    slots = ids % self.capacity
    if n and not self.frame_storage:
        self.storage.write(slots, fields)
    self._ids[slots] = ids
    self._valid[slots] = True
    self._key_actor[slots] = np.asarray(state["key_actor"], dtype=np.int64)
    self._key_seq[slots] = np.asarray(state["key_seq"], dtype=np.int64)
    if self.prioritized and n:
        self.sampler.load_priorities(slots, priorities)
    self._head = int(state["head"])
    self._tail = int(state["tail"])
    self._n = n
    self.counters = {k: int(state["counters"].get(k, 0)) for k in COUNTERS}
    self.keys.load(np.asarray(state["marks_actor"]), np.asarray(state["marks_seq"]))


def split_state(state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(JSON-able meta, arrays)`` of a :meth:`ReplayBuffer.state_dict`."""
    meta = {k: v for k, v in state.items() if not isinstance(v, np.ndarray)}
    arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
    return meta, arrays


def join_state(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Inverse of :func:`split_state`."""
    return {**meta, **arrays}

"""Pixel replay storage: each uint8 frame stored once, stacked observations rebuilt on reading.

An Atari transition's ``obs`` and ``next_obs`` are 4 stacked 84x84 frames each, and
consecutive transitions share 3 of them: stored as arrays they cost 8 frames (56 KB) per
transition, 7 of them copies. :class:`FrameStorage` keeps two rings instead, as DeepMind's
replay does (Mnih et al. 2015's memory of single frames; Dopamine's circular replay):

- a **frame ring** of ``frame_capacity`` uint8 frames, each with an absolute frame id (ids only
  grow; id ``i`` lives at row ``i % frame_capacity``);
- **transitions** (``capacity`` slots, the :class:`~esnb.replay.storage.ArrayStorage`
  contract: ``check``/``write``/``read`` by slot): the ids of the ``stack`` frames of ``obs``
  (``obs_frames``) and of ``next_obs`` (``next_frames``), and the other fields as they are.

A transition then costs one frame (the newest of ``next_obs``) plus 2 x ``stack`` int64 ids and
its small fields; each episode adds one frame (its first). The writer,
:class:`~esnb.replay.stacks.StackStorage`, takes transitions as stacks and stores each frame it
has not seen recently; ids name frames, not positions, so streams of several actors may
interleave, and n-step transitions (``next_frames`` n steps on) cost nothing more.

Frames are overwritten oldest first. A transition whose frames are gone is not readable:
:meth:`FrameStorage.available` says which are (a replay evicts the others); with the default
``frame_capacity`` (``capacity`` + 1/16 + ``stack``) that is only ever the oldest few of a FIFO
of episodes longer than 16 steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from esnb.replay.storage import ArrayStorage, normalise_spec, spec_from_json, spec_to_json

STATE_FORMAT = "esnb-frames"
STATE_VERSION = 1
REFS = ("obs_frames", "next_frames")


class FrameStorage:
    """Transitions whose ``obs``/``next_obs`` are stacks of frames stored once.

    Parameters
    ----------
    capacity : int
        Transition slots.
    spec : mapping
        The other fields, ``{name: (shape, dtype)}`` (``action``, ``reward``, ...).
    frame_shape : tuple of int
        One frame's shape (84x84 grey for Atari).
    stack : int
        Frames per observation.
    frame_capacity : int, optional
        Frames held; default ``capacity + capacity // 16 + stack``.
    """

    def __init__(self, capacity: int, spec: Mapping, frame_shape=(84, 84), stack: int = 4,
                 frame_capacity: int | None = None):
        if isinstance(stack, bool) or int(stack) != stack or stack < 1:
            raise ValueError(f"stack must be an integer >= 1, got {stack!r}")
        self.stack = int(stack)
        fields = normalise_spec(spec)
        clash = sorted(set(fields) & {*REFS, "obs", "next_obs"})
        if clash:
            raise ValueError(f"replay fields {clash} are the frame storage's own")
        refs = {k: ((self.stack,), np.dtype(np.int64)) for k in REFS}
        self.transitions = ArrayStorage(capacity, {**refs, **fields})
        self.capacity = self.transitions.capacity
        self.frame_shape = tuple(int(s) for s in frame_shape)
        if frame_capacity is None:
            frame_capacity = self.capacity + self.capacity // 16 + self.stack
        if isinstance(frame_capacity, bool) or int(frame_capacity) != frame_capacity \
                or frame_capacity < self.stack + 1:
            raise ValueError(f"frame_capacity must be an integer > stack={self.stack}, got "
                             f"{frame_capacity!r}")
        self.frame_capacity = int(frame_capacity)
        self.frames = np.zeros((self.frame_capacity, *self.frame_shape), dtype=np.uint8)
        self.frame_head = 0  # id of the next frame
        self._written = np.zeros(self.capacity, dtype=bool)

    # -- sizes ---------------------------------------------------------------------------------
    @property
    def spec(self):
        return self.transitions.spec

    @property
    def nbytes(self) -> int:
        """Bytes held: the frame ring and every transition field (ids included)."""
        return self.frames.nbytes + self.transitions.nbytes

    @property
    def bytes_per_transition(self) -> float:
        """:attr:`nbytes` over ``capacity``: about one frame plus the small fields."""
        return self.nbytes / self.capacity

    @property
    def oldest_frame(self) -> int:
        """Id of the oldest frame still held."""
        return max(0, self.frame_head - self.frame_capacity)

    # -- writing -------------------------------------------------------------------------------
    def add_frames(self, frames) -> np.ndarray:
        """Store uint8 ``frames`` (``[n, *frame_shape]``); return their ids."""
        frames = np.asarray(frames)
        if frames.shape[1:] != self.frame_shape or frames.dtype != np.uint8:
            raise ValueError(f"frames must be uint8 of shape [n, {self.frame_shape}], got "
                             f"{frames.dtype} {frames.shape}")
        if len(frames) > self.frame_capacity:
            raise ValueError(f"{len(frames)} frames at once do not fit frame_capacity="
                             f"{self.frame_capacity}")
        ids = np.arange(self.frame_head, self.frame_head + len(frames), dtype=np.int64)
        self.frames[ids % self.frame_capacity] = frames
        self.frame_head += len(frames)
        return ids

    def check(self, batch: Mapping) -> tuple[int, dict[str, np.ndarray]]:
        """Validate a batch of transitions (``obs_frames``, ``next_frames`` and the fields):
        ids must name frames already stored and still held."""
        n, arrays = self.transitions.check(batch)
        for k in REFS:
            ids = arrays[k]
            if n and (ids.min() < self.oldest_frame or ids.max() >= self.frame_head):
                raise ValueError(f"{k} name frames outside the held ids [{self.oldest_frame}, "
                                 f"{self.frame_head})")
        return n, arrays

    def write(self, slots: np.ndarray, arrays: Mapping[str, np.ndarray]) -> None:
        """Store checked transitions at ``slots``."""
        self.transitions.write(slots, arrays)
        self._written[slots] = True

    # -- reading -------------------------------------------------------------------------------
    def available(self, slots) -> np.ndarray:
        """Which of ``slots`` hold a transition whose frames are all still stored."""
        slots = np.asarray(slots, dtype=np.int64)
        refs = self.transitions.arrays
        oldest = np.minimum(refs["obs_frames"][slots].min(axis=1),
                            refs["next_frames"][slots].min(axis=1))
        return self._written[slots] & (oldest >= self.oldest_frame)

    def read(self, slots) -> dict[str, np.ndarray]:
        """The transitions at ``slots`` with ``obs`` and ``next_obs`` rebuilt
        (``[n, stack, *frame_shape]`` uint8), and their other fields.

        Raises
        ------
        ValueError
            If a slot is empty or its frames were overwritten (see :meth:`available`).
        """
        slots = np.asarray(slots, dtype=np.int64)
        ok = self.available(slots)
        if not ok.all():
            raise ValueError(f"slots {slots[~ok][:5].tolist()} hold no transition whose frames "
                             f"are all stored (frames below id {self.oldest_frame} are gone)")
        out = self.transitions.read(slots)
        for ref, name in zip(REFS, ("obs", "next_obs")):
            out[name] = self.frames.take(out.pop(ref) % self.frame_capacity, axis=0)
        return out

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Plain values and arrays (:func:`esnb.replay.split_state` separates them for
        :func:`esnb.record.save_checkpoint`: one file). Only the frames still held are saved,
        oldest first."""
        held = np.arange(self.oldest_frame, self.frame_head, dtype=np.int64)
        state: dict[str, Any] = {
            "format": STATE_FORMAT, "format_version": STATE_VERSION,
            "capacity": self.capacity, "frame_capacity": self.frame_capacity,
            "frame_shape": list(self.frame_shape), "stack": self.stack,
            "spec": spec_to_json(self.spec), "frame_head": self.frame_head,
            "frames": self.frames[held % self.frame_capacity].copy(),
            "written": self._written.copy(),
        }
        for k, a in self.transitions.arrays.items():
            state[f"field.{k}"] = a.copy()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output into a storage of the same layout; everything
        is checked before anything changes."""
        if state.get("format") != STATE_FORMAT or state.get("format_version") != STATE_VERSION:
            raise ValueError(f"not an esnb frame-storage state (format {state.get('format')!r}, "
                             f"version {state.get('format_version')!r})")
        mine = {"capacity": self.capacity, "frame_capacity": self.frame_capacity,
                "frame_shape": list(self.frame_shape), "stack": self.stack}
        theirs = {k: state[k] for k in mine}
        if theirs != mine or spec_from_json(state["spec"]) != self.spec:
            raise ValueError(f"state of a frame storage {theirs} with fields {state['spec']}, "
                             f"this one is {mine} with {spec_to_json(self.spec)}")
        head = int(state["frame_head"])
        held = np.arange(max(0, head - self.frame_capacity), head, dtype=np.int64)
        frames = np.asarray(state["frames"])
        if frames.shape != (len(held), *self.frame_shape) or frames.dtype != np.uint8:
            raise ValueError(f"state frames {frames.dtype} {frames.shape} do not match its "
                             f"frame_head {head}")
        fields = {k: np.asarray(state[f"field.{k}"]) for k in self.transitions.arrays}
        for k, a in self.transitions.arrays.items():
            if fields[k].shape != a.shape or fields[k].dtype != a.dtype:
                raise ValueError(f"state field {k!r}: {fields[k].dtype} {fields[k].shape}, "
                                 f"expected {a.dtype} {a.shape}")
        written = np.asarray(state["written"], dtype=bool)
        if written.shape != (self.capacity,):
            raise ValueError(f"state 'written' has shape {written.shape}")
        self.frames[held % self.frame_capacity] = frames
        self.frame_head = head
        for k, a in self.transitions.arrays.items():
            a[...] = fields[k]
        self._written[...] = written


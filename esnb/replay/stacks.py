"""Replay storage for transitions that arrive as frame stacks: each frame stored once.

Actors send Atari transitions as they build them: ``obs`` and ``next_obs`` are uint8 stacks
of ``stack`` frames (``(4, 84, 84)``). :class:`StackStorage` takes them in that form (the
:class:`~esnb.replay.storage.ArrayStorage` contract: ``check``/``write``/``read`` by slot) and
keeps them in a :class:`~esnb.replay.frames.FrameStorage`: a frame ring plus, per transition,
the ids of its frames. A frame already among the recent ones is not stored again: it is found
by content (a CRC-32 of its bytes, then an exact comparison with the stored frame), so a
transition costs about one new frame (its newest) where the stacks cost ``2 x stack``.

Why by content, on the replay's side, rather than a writer per actor stream (ids handed out
as its episodes go) or actors sending only their newest frame: the frames read back are, byte for
byte, the ones the actor sent, whatever happened in between. A stream-keyed scheme has to
mirror every actor's episode boundaries, its n-step tail (an episode's last ``n`` transitions
share one ``next_obs``), broken steps that restart an episode without a transition, batches the
replay drops as duplicates, and a replay recreated from a checkpoint while actors go on; each is
a way for ids to name the wrong frames. Here none of them matters: a frame not found is stored
again, which costs memory (a few frames per batch of ``flush_size``), never correctness. The
price is one CRC and one dictionary look-up per frame sent (``2 x stack`` per transition).

Frames found are at most ``recent`` frames older than the newest, so with the default frame
ring (``capacity`` + 1/16 + ``stack``) every item of a buffer that keeps at most its soft
capacity (Ape-X: ``capacity // 2`` by default) keeps its frames; a buffer still checks
:meth:`StackStorage.available` on every sample and drops the items whose frames are gone.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from esnb.replay.frames import FrameStorage
from esnb.replay.storage import ArrayStorage, normalise_spec

STACKS = ("obs", "next_obs")
#: frames of the recent past that a new frame is looked up among (a dictionary of CRCs: ~0.5
#: MB); an actor's batches overlap its previous one by ``n_step + stack`` frames or so, which
#: stay found while fewer than ~20 batches of 200 of other actors come in between
RECENT = 4096


def is_frame_stack(shape, dtype) -> bool:
    """Whether observations of ``shape``/``dtype`` are stacks of Atari frames
    (``(stack > 1, 84, 84)`` uint8), whose replay stores each frame once. MinAtar's
    ``(k, 10, 10)`` are channels of one state, not frames over time: they stay arrays."""
    shape = tuple(int(s) for s in shape)
    return (np.dtype(dtype) == np.uint8 and len(shape) == 3 and shape[0] > 1
            and shape[1:] == (84, 84))


def check_stack_spec(spec: Mapping | None) -> dict:
    """The normalised ``spec`` of a frame-stack replay; one ``ValueError`` unless ``obs`` and
    ``next_obs`` are the same uint8 stacks of Atari frames (see :func:`is_frame_stack`)."""
    if spec is None:
        raise ValueError("a frame-stack replay needs its spec (obs, next_obs and fields)")
    spec = normalise_spec(spec)
    missing = [k for k in STACKS if k not in spec]
    if missing:
        raise ValueError(f"a frame-stack replay needs fields {list(STACKS)}; {missing} missing")
    if not is_frame_stack(*spec["obs"]) or spec["next_obs"] != spec["obs"]:
        raise ValueError(f"obs and next_obs must both be uint8 frame stacks (stack, 84, 84), "
                         f"got {spec['obs']} and {spec['next_obs']}")
    return spec


class StackStorage:
    """Transitions with stacked ``obs``/``next_obs``, each frame held once.

    Parameters
    ----------
    capacity : int
        Transition slots.
    spec : mapping
        All fields (``{name: (shape, dtype)}``), ``obs`` and ``next_obs`` uint8 stacks of the
        same shape ``(stack, *frame_shape)``.
    frame_capacity : int, optional
        Frames held (see :class:`~esnb.replay.frames.FrameStorage`).
    recent : int
        Frames looked up for a repeat (capped at half the frame ring).
    """

    def __init__(self, capacity: int, spec: Mapping, frame_capacity: int | None = None,
                 recent: int = RECENT):
        self.spec = check_stack_spec(spec)
        shape = self.spec["obs"][0]
        self.stack, self.frame_shape = shape[0], shape[1:]
        others = {k: v for k, v in self.spec.items() if k not in STACKS}
        self.frames = FrameStorage(capacity, others, self.frame_shape, self.stack,
                                   frame_capacity)
        self.capacity = self.frames.capacity
        self.recent = max(1, min(int(recent), self.frames.frame_capacity // 2))
        #: CRC-32 of a recent frame -> its id (insertion order = id order)
        self._recent: dict[int, int] = {}
        # validates batches against the full spec (one preallocated row, never written)
        self._checker = ArrayStorage(1, self.spec)

    @property
    def nbytes(self) -> int:
        """Bytes held: the frame ring and every transition field (frame ids included); the
        look-up dictionary (< 1 MB) is not counted."""
        return self.frames.nbytes

    def check(self, batch: Mapping) -> tuple[int, dict[str, np.ndarray]]:
        """Validate a batch (see :meth:`ArrayStorage.check`)."""
        return self._checker.check(batch)

    def write(self, slots: np.ndarray, arrays: Mapping[str, np.ndarray]) -> None:
        """Store checked transitions at ``slots``: new frames into the ring, ids into the
        slots."""
        n = len(slots)
        if n == 0:
            return
        both = np.concatenate([np.asarray(arrays[k], dtype=np.uint8) for k in STACKS], axis=1)
        # rows in chunks whose new frames cannot overwrite the recent ones they refer to
        per_chunk = max(1, (self.frames.frame_capacity - self.recent) // (2 * self.stack))
        ids = np.concatenate([self._frame_ids(both[i:i + per_chunk])
                              for i in range(0, n, per_chunk)])
        fields = {k: a for k, a in arrays.items() if k not in STACKS}
        self.frames.write(slots, {"obs_frames": ids[:, :self.stack],
                                  "next_frames": ids[:, self.stack:], **fields})

    def _frame_ids(self, both: np.ndarray) -> np.ndarray:
        """Ids of the frames of ``both`` (``[m, 2 * stack, *frame_shape]``), storing those not
        among the recent ones."""
        store, recent = self.frames, self._recent
        flat = np.ascontiguousarray(both).reshape(-1, *self.frame_shape)
        ids = np.empty(len(flat), dtype=np.int64)
        head, oldest, ring = store.frame_head, store.oldest_frame, store.frame_capacity
        new: list[int] = []  # rows of flat stored as new frames, ids head, head + 1, ...
        for i, frame in enumerate(flat):
            key = zlib.crc32(frame)
            fid = recent.get(key)
            if fid is not None and fid >= oldest:
                held = store.frames[fid % ring] if fid < head else flat[new[fid - head]]
                if held.tobytes() == frame.tobytes():  # ~8x faster than np.array_equal
                    ids[i] = fid
                    continue
            fid = head + len(new)
            new.append(i)
            recent.pop(key, None)  # a CRC collision: the newer frame takes the key
            recent[key] = fid
            ids[i] = fid
        if new:
            store.add_frames(flat[new])
        self._forget(store.frame_head - self.recent)
        return ids.reshape(len(both), 2 * self.stack)

    def _forget(self, below: int) -> None:
        recent = self._recent
        while recent:
            key = next(iter(recent))
            if recent[key] >= below:
                break
            del recent[key]

    def available(self, slots) -> np.ndarray:
        """Which of ``slots`` hold a transition whose frames are all still stored."""
        return self.frames.available(slots)

    def read(self, slots) -> dict[str, np.ndarray]:
        """The transitions at ``slots``, stacks rebuilt (see :meth:`FrameStorage.read`)."""
        return self.frames.read(slots)

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The frame storage's state plus the ids of the recent frames (their CRCs are
        recomputed on loading)."""
        return {**self.frames.state_dict(),
                "recent": np.fromiter(self._recent.values(), dtype=np.int64,
                                      count=len(self._recent))}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output; everything is checked before anything
        changes."""
        recent = np.asarray(state.get("recent", np.zeros(0, np.int64)), dtype=np.int64)
        head = int(state.get("frame_head", 0))
        lowest = max(0, head - self.frames.frame_capacity)
        if recent.size and (recent.min() < lowest or recent.max() >= head
                            or np.any(np.diff(recent) <= 0)):
            raise ValueError("state's recent frame ids are not increasing ids of held frames")
        self.frames.load_state_dict({k: v for k, v in state.items() if k != "recent"})
        ring = self.frames.frame_capacity
        self._recent = {zlib.crc32(np.ascontiguousarray(self.frames.frames[i % ring])): int(i)
                        for i in recent}

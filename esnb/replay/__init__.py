"""Replay buffers (no Dask here).

Composed TorchRL-style from parts: :class:`ArrayStorage` (preallocated named arrays; for pixels
:class:`FrameStorage`, each frame once, stacks rebuilt on reading, written by
:class:`StackStorage` from transitions sent as stacks: ``ReplayBuffer(frame_storage=True)``),
a sampler (:class:`UniformSampler`, :class:`PrioritizedSampler` over vectorised
:class:`SumTree` / :class:`MinTree`), a :class:`RateLimiter`, an eviction rule and per-actor
:class:`KeyFilter` marks. :class:`ReplayBuffer` and :class:`PrioritizedReplayBuffer` put them
together; :class:`~esnb.replay.server.ReplayServer` is one with a run's bookkeeping, which an
executor holds as an actor (:class:`esnb.runners.replay_service.ReplayService` recreates it
when its worker dies).
"""

from esnb.replay.buffer import ReplayBuffer
from esnb.replay.config import buffer_from_config, check_config
from esnb.replay.frames import FrameStorage
from esnb.replay.limits import (
    FifoEviction,
    KeyFilter,
    PriorityEviction,
    RateLimiter,
    ReplayNotReady,
)
from esnb.replay.prioritized import PrioritizedReplayBuffer
from esnb.replay.samplers import PrioritizedSampler, UniformSampler
from esnb.replay.stacks import StackStorage
from esnb.replay.state import join_state, split_state
from esnb.replay.storage import ArrayStorage
from esnb.replay.trees import MinTree, SumTree

__all__ = ["ArrayStorage", "FifoEviction", "FrameStorage", "KeyFilter",
           "MinTree", "PriorityEviction", "PrioritizedReplayBuffer", "PrioritizedSampler",
           "RateLimiter", "ReplayBuffer", "ReplayNotReady", "StackStorage", "SumTree",
           "UniformSampler",
           "buffer_from_config", "check_config", "join_state", "split_state"]

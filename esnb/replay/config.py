"""A replay buffer from a plain configuration dict (what a remote actor is built from)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from esnb.replay.buffer import ReplayBuffer
from esnb.replay.limits import PriorityEviction, RateLimiter
from esnb.replay.prioritized import PrioritizedReplayBuffer
from esnb.replay.samplers import PrioritizedSampler
from esnb.replay.storage import ArrayStorage


def check_config(config: Mapping[str, Any]) -> None:
    """Validate a buffer configuration (as :func:`buffer_from_config` takes) without
    allocating the buffer; raises ValueError."""
    cfg = dict(config)
    known = {"capacity", "prioritized", "alpha", "beta", "eps", "spec", "soft_capacity",
             "eviction", "eviction_exponent", "min_size", "samples_per_insert", "error_buffer",
             "frame_storage", "frame_capacity"}
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ValueError(f"unknown replay configuration keys {unknown}; known: {sorted(known)}")
    storage = ArrayStorage(cfg.get("capacity", 0))  # checks capacity, allocates nothing
    soft = cfg.get("soft_capacity")
    if soft is not None and (isinstance(soft, bool) or int(soft) != soft
                             or not 1 <= soft <= storage.capacity):
        raise ValueError(f"soft_capacity must be an integer in [1, capacity="
                         f"{storage.capacity}] or None, got {soft!r}")
    eviction = cfg.get("eviction", "fifo")
    if eviction == "priority":
        PriorityEviction(cfg.get("eviction_exponent", -0.4))
    elif eviction != "fifo":
        raise ValueError(f"eviction must be 'fifo' or 'priority', got {eviction!r}")
    limiter = RateLimiter(cfg.get("min_size", 1), cfg.get("samples_per_insert"),
                          cfg.get("error_buffer"))
    if limiter.min_size > (storage.capacity if soft is None else soft):
        raise ValueError(f"min_size {limiter.min_size} exceeds what the buffer keeps "
                         f"({storage.capacity if soft is None else soft}): it would never "
                         f"be ready")
    if cfg.get("prioritized"):
        PrioritizedSampler(cfg.get("alpha", 0.6), cfg.get("beta", 0.4), cfg.get("eps", 1e-6))
    if cfg.get("spec") is not None:
        from esnb.replay.storage import normalise_spec

        normalise_spec(cfg["spec"])
    if cfg.get("frame_storage"):
        from esnb.replay.stacks import check_stack_spec

        check_stack_spec(cfg.get("spec"))
    elif cfg.get("frame_capacity") is not None:
        raise ValueError("frame_capacity is a frame storage's (frame_storage=True)")


def buffer_from_config(config: Mapping[str, Any]) -> ReplayBuffer:
    """Build a buffer from a plain dict: ``{"capacity": ..., "prioritized": bool, ...}`` with
    the constructor arguments (used to create a buffer inside a remote actor)."""
    cfg = dict(config)
    prioritized = bool(cfg.pop("prioritized", False))
    cls = PrioritizedReplayBuffer if prioritized else ReplayBuffer
    try:
        return cls(**cfg)
    except TypeError as exc:
        raise ValueError(f"bad replay configuration {config!r}: {exc}") from None

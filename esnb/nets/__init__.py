"""One flat-parameter network family: :class:`MLP` specs (numpy forward and initialisations,
no torch), :class:`Layout` of named parts in one vector, and the torch twin
(:mod:`esnb.nets.torch_mlp`, loaded on first use)."""

from esnb.lazy import lazy_names
from esnb.nets.layout import Layout
from esnb.nets.mlp import MLP, init_fan_in, init_glorot, init_normc

__all__ = ["MLP", "FlatModule", "Layout", "init_fan_in", "init_glorot", "init_normc"]
__getattr__, __dir__ = lazy_names(__name__, {"FlatModule": "esnb.nets.torch_mlp"})

"""Several parts in one flat parameter vector: a dueling Q-network (torso and heads), a twin
critic (two MLPs), an actor-critic (policy, value and log-stds), Ape-X DPG's published
``[actor | critic]``. Parts are MLPs, convolutional torsos or plain vectors, laid end to end in
declaration order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from esnb.nets.conv import ConvTorso
from esnb.nets.mlp import MLP


@dataclass(frozen=True)
class Layout:
    """Named parts of one flat vector.

    Parameters
    ----------
    parts : iterable of (name, MLP, ConvTorso or int)
        An MLP or a :class:`~esnb.nets.conv.ConvTorso` takes its ``num_params``; an int is a
        plain vector of that length (log-stds).
    """

    parts: tuple[tuple[str, MLP | ConvTorso | int], ...]

    def __init__(self, parts: Iterable[tuple[str, MLP | ConvTorso | int]]):
        parts = tuple((str(n), p if isinstance(p, (MLP, ConvTorso)) else int(p))
                      for n, p in parts)
        names = [n for n, _ in parts]
        if len(set(names)) != len(names):
            raise ValueError(f"part names must be unique, got {names}")
        object.__setattr__(self, "parts", parts)

    def __getitem__(self, name: str) -> MLP | ConvTorso | int:
        return dict(self.parts)[name]

    @staticmethod
    def size(part: MLP | ConvTorso | int) -> int:
        return part.num_params if isinstance(part, (MLP, ConvTorso)) else int(part)

    @property
    def num_params(self) -> int:
        return sum(self.size(p) for _, p in self.parts)

    def offsets(self) -> dict[str, slice]:
        """``{name: slice}`` into the flat vector."""
        out, pos = {}, 0
        for name, part in self.parts:
            out[name] = slice(pos, pos + self.size(part))
            pos += self.size(part)
        return out

    def split(self, flat) -> dict:
        """``{name: view}`` of ``flat`` (numpy or torch; a view, not a copy)."""
        if tuple(flat.shape[-1:]) != (self.num_params,):
            raise ValueError(f"expected {self.num_params} parameters, got shape "
                             f"{tuple(flat.shape)}")
        return {name: flat[..., s] for name, s in self.offsets().items()}

    def join(self, **values) -> np.ndarray:
        """One float32 vector from every part's values (in declaration order)."""
        missing = [n for n, _ in self.parts if n not in values]
        if missing:
            raise ValueError(f"missing parts {missing}")
        vecs = [np.asarray(values[n], np.float32).ravel() for n, _ in self.parts]
        for (n, p), v in zip(self.parts, vecs):
            if v.size != self.size(p):
                raise ValueError(f"part {n!r} needs {self.size(p)} values, got {v.size}")
        return np.concatenate(vecs).astype(np.float32)

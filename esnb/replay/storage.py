"""Preallocated storage of named arrays: the "storage" part of a replay buffer.

A buffer's items are dicts of named fields (``obs``, ``action``, ``reward``, ...), each with a
fixed per-item shape and dtype. The spec is declared at construction or taken from the first
batch added; every field is then one preallocated numpy array of ``capacity`` rows, written and
read in batches by slot number.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: name -> (per-item shape, dtype)
Spec = dict[str, tuple[tuple[int, ...], np.dtype]]


def normalise_spec(spec: Mapping) -> Spec:
    """``{name: (shape, dtype)}`` with tuple shapes and numpy dtypes (accepts ``dtype`` only
    for scalar fields, or ``(shape, dtype)`` pairs)."""
    if not isinstance(spec, Mapping) or not spec:
        raise ValueError(f"a replay spec must be a non-empty mapping of field names, got {spec!r}")
    out: Spec = {}
    for name, entry in spec.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"replay field names must be non-empty strings, got {name!r}")
        if isinstance(entry, (tuple, list)) and len(entry) == 2 and not isinstance(entry[0], str):
            shape, dtype = entry
        else:
            shape, dtype = (), entry
        try:
            shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
            dtype = np.dtype(dtype)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"replay field {name!r}: bad spec entry {entry!r} ({exc})") from None
        if any(s < 0 for s in shape):
            raise ValueError(f"replay field {name!r}: negative dimension in shape {shape}")
        if dtype.kind == "O":
            raise ValueError(f"replay field {name!r}: object arrays cannot be stored")
        out[name] = (shape, dtype)
    return out


def spec_of(batch: Mapping) -> Spec:
    """The spec a batch implies: each field's shape after its leading (batch) dimension."""
    return normalise_spec({k: (np.shape(v)[1:], np.asarray(v).dtype) for k, v in batch.items()})


def spec_to_json(spec: Spec) -> dict:
    return {k: [list(shape), dtype.str] for k, (shape, dtype) in spec.items()}


def spec_from_json(doc: Mapping) -> Spec:
    return normalise_spec({k: (tuple(v[0]), np.dtype(v[1])) for k, v in doc.items()})


class ArrayStorage:
    """One preallocated array per field, ``capacity`` rows each.

    Parameters
    ----------
    capacity : int
        Rows (slots).
    spec : mapping, optional
        ``{name: (shape, dtype)}`` (or ``{name: dtype}`` for scalars). Without it, the first
        :meth:`check` fixes the spec from that batch.
    """

    def __init__(self, capacity: int, spec: Mapping | None = None):
        if isinstance(capacity, bool) or int(capacity) != capacity or capacity < 1:
            raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
        self.capacity = int(capacity)
        self.spec: Spec | None = None
        self.arrays: dict[str, np.ndarray] = {}
        if spec is not None:
            self._allocate(normalise_spec(spec))

    def _allocate(self, spec: Spec) -> None:
        self.spec = spec
        self.arrays = {k: np.zeros((self.capacity, *shape), dtype=dtype)
                       for k, (shape, dtype) in spec.items()}

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    def check(self, batch: Mapping) -> tuple[int, dict[str, np.ndarray]]:
        """Validate a batch against the spec (or infer the spec); return ``(n, arrays)``.

        Raises
        ------
        ValueError
            For a non-mapping, missing or unknown fields, fields of different lengths, a wrong
            per-item shape, or values that cannot be cast safely to the field's dtype (e.g.
            floats into an integer field). Nothing is stored or allocated then.
        """
        if not isinstance(batch, Mapping) or not batch:
            raise ValueError(f"a replay batch must be a non-empty dict of arrays, got "
                             f"{type(batch).__name__}")
        arrays = {}
        for k, v in batch.items():
            a = np.asarray(v)
            if a.ndim == 0:
                raise ValueError(f"replay field {k!r} is a scalar; a batch needs a leading "
                                 f"dimension (one row per item)")
            arrays[k] = a
        lengths = {k: a.shape[0] for k, a in arrays.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"replay batch fields have different lengths: {lengths}")
        n = next(iter(lengths.values()))
        spec = self.spec if self.spec is not None else spec_of(arrays)
        missing = sorted(set(spec) - set(arrays))
        unknown = sorted(set(arrays) - set(spec))
        if missing or unknown:
            raise ValueError(f"replay batch fields do not match the buffer: missing {missing}, "
                             f"unknown {unknown}; expected {sorted(spec)}")
        for k, (shape, dtype) in spec.items():
            a = arrays[k]
            if a.shape[1:] != shape:
                raise ValueError(f"replay field {k!r}: items of shape {a.shape[1:]}, the buffer "
                                 f"stores {shape}")
            if a.dtype != dtype and not np.can_cast(a.dtype, dtype, casting="same_kind"):
                raise ValueError(f"replay field {k!r}: dtype {a.dtype} cannot be stored as "
                                 f"{dtype}")
        return n, arrays

    def write(self, slots: np.ndarray, arrays: Mapping[str, np.ndarray]) -> None:
        """Store rows of ``arrays`` (already checked) at ``slots``."""
        if self.spec is None:
            self._allocate(spec_of(arrays))
        for k, dst in self.arrays.items():
            if dst.ndim == 1:
                dst.put(slots, arrays[k])  # ~10x faster than fancy setitem (measured)
            else:
                dst[slots] = arrays[k]

    def read(self, slots: np.ndarray) -> dict[str, np.ndarray]:
        """Copies of the rows at ``slots``, one array per field.

        ``take`` along axis 0: for 512 random rows of 2^20 it measured ~3x faster than fancy
        indexing (the rows are cache misses either way; take does less per row).
        """
        return {k: a.take(slots, axis=0) for k, a in self.arrays.items()}

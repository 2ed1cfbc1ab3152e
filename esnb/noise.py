"""The shared noise table of OpenAI-ES (Salimans et al. 2017, section 2.1).

Every process that needs perturbations builds the same float32 block of N(0, 1) noise from a
seed, so a perturbation travels as one integer (its offset into the table) instead of ``d``
floats. Workers build it once in a :class:`esnb.cluster.NoiseTablePlugin`; the driver builds
the same table for the update. Nothing here imports Dask.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

DEFAULT_SIZE = 25_000_000
DEFAULT_SEED = 123


@dataclass(frozen=True)
class NoiseConfig:
    """Which table to use.

    Attributes
    ----------
    size : int
        Number of float32 entries. esnb's default is 25M (100 MB per process); OpenAI's
        released code used 250M (1 GB: ``es_distributed/es.py``, ``count = 250000000``), which
        ``ES(preset="paper")`` selects. A table must be larger than the parameter count of the
        policies that draw from it.
    seed : int
        Seed of the generator that fills the table. Workers and driver must agree.
    """

    size: int = DEFAULT_SIZE
    seed: int = DEFAULT_SEED

    def __post_init__(self):
        if int(self.size) < 2:
            raise ValueError(f"noise table size must be >= 2, got {self.size}")

    @property
    def key(self) -> str:
        return f"{self.seed}-{self.size}"


class NoiseTable:
    """A read-only block of standard normal float32 noise built from a seed.

    Parameters
    ----------
    config : NoiseConfig
        Size and seed of the table.
    """

    def __init__(self, config: NoiseConfig = NoiseConfig()):
        self.config = config
        rng = np.random.Generator(np.random.PCG64(config.seed))
        self.noise = rng.standard_normal(config.size, dtype=np.float32)
        self.noise.flags.writeable = False
        self._sq_prefix: np.ndarray | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.noise.size

    def get(self, index: int, dim: int) -> np.ndarray:
        """The perturbation of ``dim`` entries starting at ``index`` (a read-only view)."""
        return self.noise[index : index + dim]

    def gather(self, indices: np.ndarray, dim: int) -> np.ndarray:
        """Rows ``noise[i:i+dim]`` for each index, stacked into a new ``[n, dim]`` array."""
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size == 0:
            return np.empty((0, dim), dtype=np.float32)
        return np.lib.stride_tricks.sliding_window_view(self.noise, dim)[indices]

    def sample_indices(self, rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
        """``n`` offsets drawn uniformly so that a whole perturbation of ``dim`` fits."""
        if dim > self.noise.size:
            raise ValueError(
                f"a policy of {dim} parameters does not fit a noise table of {self.noise.size}"
                " entries: build a larger table (NoiseConfig(size=...))"
            )
        return rng.integers(0, self.noise.size - dim + 1, size=n, dtype=np.int64)

    def squared_norms(self, indices: np.ndarray, dim: int) -> np.ndarray:
        """``||noise[i:i+dim]||^2`` per index, exact to float64 rounding.

        The prefix sum is kept in float64: in float32 a prefix over 25M squares is off by ~1e3.
        """
        with self._lock:
            if self._sq_prefix is None:
                prefix = np.empty(self.noise.size + 1, dtype=np.float64)
                prefix[0] = 0.0
                np.cumsum(np.square(self.noise, dtype=np.float64), out=prefix[1:])
                self._sq_prefix = prefix
        indices = np.asarray(indices, dtype=np.int64)
        return self._sq_prefix[indices + dim] - self._sq_prefix[indices]


_TABLES: dict[str, NoiseTable] = {}
_TABLES_LOCK = threading.Lock()


def get_noise_table(config: NoiseConfig = NoiseConfig()) -> NoiseTable:
    """The process-wide table for ``config``, built on first use (0.2 s for 25M entries)."""
    table = _TABLES.get(config.key)
    if table is not None:
        return table
    with _TABLES_LOCK:
        table = _TABLES.get(config.key)
        if table is None:
            table = NoiseTable(config)
            _TABLES[config.key] = table
    return table


def drop_noise_table(config: NoiseConfig) -> None:
    """Forget the process-wide table for ``config`` (frees its memory once unreferenced)."""
    with _TABLES_LOCK:
        _TABLES.pop(config.key, None)


def has_noise_table(config: NoiseConfig) -> bool:
    return config.key in _TABLES

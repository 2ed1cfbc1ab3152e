"""The shared noise table of OpenAI-ES (Salimans et al. 2017, section 2.1).

Every process that needs perturbations builds the same float32 block of N(0, 1) noise from a
seed, so a perturbation travels as one integer (its offset into the table) instead of ``d``
floats. :func:`get_noise_table` (the driver, and every worker: :class:`esnb.ES` has its executor
run it on each) keeps one table per host: the first process builds it into shared memory
(:mod:`esnb.shm`, a file in ``/dev/shm`` named by seed, size and dtype) and every other
process maps the same pages read-only, as OpenAI's and RLlib's ES did; where there
is no shared memory each process builds a private copy (one log line). The values are the
same either way. A machine's first build also writes the table to a disk cache that later
runs read instead of building it (:mod:`esnb.noise_cache`). Nothing here imports Dask.

**The same table on every host.** The values come from :mod:`esnb.normals`: a counter-based
integer stream turned into normals with IEEE 754 operations only, so they do not depend on the
numpy release, its SIMD code or the CPU. The builder of a host's table also records its SHA-256
and who built it (:attr:`NoiseTable.digest`, :attr:`NoiseTable.origin`, once per host); a run's
:class:`NoiseConfig` carries the driver's digest to its workers, and a worker whose table
differs refuses the run (:class:`NoiseTableMismatch`, naming both digests and builders).
"""

from __future__ import annotations

import os
import platform
import threading
from dataclasses import dataclass, field, replace

import numpy as np

from esnb import normals
from esnb.noise_cache import CachedFill
from esnb.shm import Block, open_block


@dataclass(frozen=True)
class NoiseConfig:
    """Which table to use.

    Attributes
    ----------
    size : int
        Number of float32 entries (:meth:`configured`: esnb's default, dask config
        ``esnb.noise.size``, is 25M: 100 MB per process); OpenAI's
        released code used 250M (1 GB: ``es_distributed/es.py``, ``count = 250000000``), which
        ``ES(preset="paper")`` selects. A table must be larger than the parameter count of the
        policies that draw from it.
    seed : int
        Seed of the stream that fills the table (:mod:`esnb.normals`; default: dask config
        ``esnb.noise.seed``).
    digest : str, optional
        The SHA-256 the table must have (the driver's, sent to its workers): a table with
        another refuses to be used (:class:`NoiseTableMismatch`). None: not checked.
    origin : str
        Who built the driver's table (numpy and esnb versions, host), for that error.
    """

    size: int
    seed: int
    digest: str | None = field(default=None, compare=False)
    origin: str = field(default="", compare=False)

    def __post_init__(self):
        if int(self.size) < 2:
            raise ValueError(f"noise table size must be >= 2, got {self.size}")

    @classmethod
    def configured(cls, size: int | None = None, seed: int | None = None) -> NoiseConfig:
        """``size`` and ``seed``, each None taken from esnb's dask config (``esnb.noise.size``,
        ``esnb.noise.seed``: their defaults are written once, in ``esnb.yaml``)."""
        from esnb import config

        return cls(int(config.get("noise.size") if size is None else size),
                   int(config.get("noise.seed") if seed is None else seed))

    def expecting(self, table: NoiseTable) -> NoiseConfig:
        """This config, requiring ``table``'s values (its digest) wherever it is used."""
        return replace(self, digest=table.digest, origin=table.origin)

    @property
    def key(self) -> str:
        return f"{self.seed}-{self.size}"

    @property
    def file_name(self) -> str:
        """The shared block's name: everything that fixes the values (the format version,
        seed, size, dtype) and the user, so that nobody maps another user's file."""
        return f"esnb-{os.getuid()}-noise-v2-{self.seed}-{self.size}-float32"

    def fill(self, out: np.ndarray) -> None:
        """Write the table's values into ``out`` (float32, ``size`` entries)."""
        normals.fill_standard_normal(self.seed, out)


class NoiseTableMismatch(ValueError):
    """This process's noise table is not the driver's: it would perturb with other noise."""


def describe_table(values: np.ndarray, sha256: str | None = None) -> dict:
    """What the builder of a table records beside it: its digest (``sha256`` when the caller
    has just checked it) and who built it."""
    from esnb._version import __version__

    return {"sha256": sha256 or normals.digest(values),
            "origin": f"numpy {np.__version__}, esnb {__version__}, host {platform.node()}"}


class NoiseTable:
    """A read-only block of standard normal float32 noise built from a seed.

    Parameters
    ----------
    config : NoiseConfig
        Size and seed of the table.
    shared : bool or str
        False: a private copy in this process. True: the host's shared copy (built here if no
        process has built it, see :mod:`esnb.shm`), else private with one log line. A string
        names the shared-memory directory instead of ``ESNB_SHM_DIR`` / ``/dev/shm``.
    """

    def __init__(self, config: NoiseConfig, shared: bool | str = False):
        self.config = config
        # the values from the disk cache when an earlier run built them (else built, cached)
        cached = CachedFill(config.file_name, config.seed, describe_table)
        if shared is False:
            out = np.empty(config.size, dtype=np.float32)
            cached.fill(out)
            self._block = Block(out, about=cached.describe(out))
        else:
            self._block = open_block(config.file_name, config.size, np.float32, cached.fill,
                                     directory=None if shared is True else shared,
                                     describe=cached.describe)
        self.noise = self._block.array
        #: SHA-256 of the values (computed once per host, by the table's builder)
        self.digest: str = self._block.about["sha256"]
        #: who built the values: numpy and esnb versions, host
        self.origin: str = self._block.about.get("origin", "unknown")
        self._block_dir = None if shared is True else (shared or None)
        self._prefix_block: Block | None = None
        self._sq_prefix: np.ndarray | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.noise.size

    def check(self, config: NoiseConfig) -> None:
        """Refuse to serve a run whose driver has another table (``config.digest``)."""
        if config.digest is not None and config.digest != self.digest:
            raise NoiseTableMismatch(
                f"noise table {config.key} differs between hosts: the driver's has SHA-256 "
                f"{config.digest[:16]}… ({config.origin}), the one of process {os.getpid()} "
                f"on {platform.node()} has {self.digest[:16]}… ({self.origin}) "
                f"{'in ' + self.shared_path if self.shared_path else '(a private copy)'}: "
                f"it would perturb with other noise. Install the same esnb on every host "
                f"(or remove that file)")

    @property
    def shared_path(self) -> str | None:
        """The shared-memory file this table maps, or None for a private copy."""
        return self._block.path

    def close(self) -> None:
        """Stop using the shared copy (removed when its last user closes); the values stay
        readable in this process while arrays reference them."""
        self._block.close()
        if self._prefix_block is not None:
            self._prefix_block.close()

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

    def _fill_prefix(self, out: np.ndarray) -> None:
        out[0] = 0.0
        np.cumsum(np.square(self.noise, dtype=np.float64), out=out[1:])

    def squared_norms(self, indices: np.ndarray, dim: int) -> np.ndarray:
        """``||noise[i:i+dim]||^2`` per index, exact to float64 rounding.

        The prefix sum is kept in float64: in float32 a prefix over 25M squares is off by ~1e3.
        """
        with self._lock:
            if self._sq_prefix is None:
                # 8 bytes per entry (200 MB for 25M): shared per host like the table, where
                # the table is (IW-ES replicas on every worker need it when sigma changes)
                name = self.config.file_name.replace("-float32", "-sqprefix-float64")
                self._prefix_block = open_block(
                    name, self.noise.size + 1, np.float64, self._fill_prefix,
                    directory=self._block_dir) if self.shared_path else None
                if self._prefix_block is None:
                    prefix = np.empty(self.noise.size + 1, dtype=np.float64)
                    self._fill_prefix(prefix)
                    self._sq_prefix = prefix
                else:
                    self._sq_prefix = self._prefix_block.array
        indices = np.asarray(indices, dtype=np.int64)
        return self._sq_prefix[indices + dim] - self._sq_prefix[indices]


_TABLES: dict[str, NoiseTable] = {}
_TABLES_LOCK = threading.Lock()


def get_noise_table(config: NoiseConfig) -> NoiseTable:
    """The process-wide table for ``config``: the host's shared copy, mapped on first use
    (built by the first process of the host: ~0.5 s for 25M entries).

    Raises
    ------
    NoiseTableMismatch
        ``config`` carries a digest (the driver's) and this table has another.
    """
    table = _TABLES.get(config.key)
    if table is None:
        with _TABLES_LOCK:
            table = _TABLES.get(config.key)
            if table is None:
                table = NoiseTable(config, shared=True)
                _TABLES[config.key] = table
    table.check(config)
    return table


def check_noise_table(config: NoiseConfig) -> None:
    """:func:`get_noise_table` for a run's start on every present worker (``client.run``):
    raises :class:`NoiseTableMismatch` where the table differs, returns nothing to send."""
    get_noise_table(config)


def drop_noise_table(config: NoiseConfig) -> None:
    """Forget the process-wide table for ``config``: this process stops using the shared copy
    (removed with its last user) and a private one is freed once unreferenced."""
    with _TABLES_LOCK:
        table = _TABLES.pop(config.key, None)
    if table is not None:
        table.close()


def has_noise_table(config: NoiseConfig) -> bool:
    return config.key in _TABLES


class TableLoad:
    """:func:`get_noise_table` on a thread of its own, started at once.

    A run's driver reads (or builds) its table while it makes the environment: reading the
    cache file, hashing and building run outside the GIL, and making the environment is
    Python, so the two overlap on one core (~0.1-0.2 s of an ES run's start-up).
    """

    def __init__(self, config: NoiseConfig):
        from concurrent.futures import ThreadPoolExecutor

        self.config = config
        self._had = has_noise_table(config)
        pool = ThreadPoolExecutor(1, thread_name_prefix="esnb-noise")
        self._future = pool.submit(get_noise_table, config)
        pool.shutdown(wait=False)

    def result(self) -> NoiseTable:
        return self._future.result()

    def discard(self) -> None:
        """The run failed before it used the table: wait for the thread, then drop the table if
        it opened it (a bad env id leaves no 100 MB table in this process or the host's)."""
        try:
            self._future.result()
        except Exception:  # the run's own error is the one to report
            pass
        if not self._had:
            drop_noise_table(self.config)


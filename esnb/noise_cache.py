"""The noise table kept on disk between runs, so a run's start does not rebuild it.

Building the default table (25M values, :mod:`esnb.normals`) costs 0.5-1 s of CPU on the
driver before the first generation can start (10 s for the paper's 250M), the largest item of
an ES run's start-up after the imports. Its values depend only on the seed, the size and the
format, so the first build on a machine also writes them to a cache file, and later runs
read them back instead (~0.05 s from the page cache for 100 MB) -- only the first process of
a host does either: the others map the host's shared copy (:mod:`esnb.shm`).

A cache file is ``<dir>/<table's file name>.cache``: a 64-byte header (the SHA-256 of the
values, hex) then the raw float32 values. It is written to a temporary name and renamed, so a
reader sees a whole file or none. A reader checks the values against the header's SHA-256 (the
check every table makes anyway, :func:`esnb.noise.describe_table`) and rebuilds on any
mismatch, a short file or an unreadable one, rewriting the file: a damaged cache costs one
rebuild and a log line, never a wrong table. Only tables this module built itself are
written, from :func:`esnb.normals.fill_standard_normal`.

Where: dask config ``esnb.noise.cache`` (``esnb.yaml``): ``auto`` is
``$XDG_CACHE_HOME/esnb/noise`` (``~/.cache/esnb/noise``), a path is used as given, ``false``
turns the cache off. numpy only (workers of other hosts use it too).
"""

from __future__ import annotations

import logging
import os

import numpy as np

from esnb import normals

log = logging.getLogger("esnb.noise")

#: bytes before the values: the hex SHA-256 (64 characters)
HEADER = 64
_WARNED: set[str] = set()


def cache_dir() -> str | None:
    """The cache directory (dask config ``esnb.noise.cache``), or None when it is off."""
    from esnb import config

    where = config.get("noise.cache")
    if where is False or where in (None, ""):
        return None
    if where == "auto":
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "esnb", "noise")
    return os.path.expanduser(str(where))


class CachedFill:
    """``fill(out)`` and ``describe(values)`` for :func:`esnb.shm.open_block` that read the
    table from the cache when it holds it, and write it there after building it.

    Parameters
    ----------
    name : str
        The table's file name (it names seed, size, format and user).
    seed : int
        The seed of the values (:func:`esnb.normals.fill_standard_normal`).
    describe : callable
        ``describe(values, sha256=None) -> dict`` with a ``"sha256"`` key
        (:func:`esnb.noise.describe_table`; given the digest, it does not hash again).
    directory : str, optional
        The cache directory; default :func:`cache_dir`.
    """

    def __init__(self, name: str, seed: int, describe, directory: str | None = None):
        self.seed = int(seed)
        self._describe = describe
        folder = cache_dir() if directory is None else directory
        self.path = os.path.join(folder, name + ".cache") if folder else None
        self.hit = False  # the values came from the cache (set by fill)
        self._sha256: str | None = None

    def fill(self, out: np.ndarray) -> None:
        if self.path is not None:
            self._sha256 = self._read(out)
            if self._sha256 is not None:
                self.hit = True
                return
        normals.fill_standard_normal(self.seed, out)

    def describe(self, values: np.ndarray) -> dict:
        about = self._describe(values, sha256=self._sha256)  # checked by _read on a hit
        if not self.hit and self.path is not None:
            self._write(values, about["sha256"])
        return about

    def _read(self, out: np.ndarray) -> str | None:
        """Read the cache into ``out``; its SHA-256 when it holds the right values, else None."""
        try:
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size != HEADER + out.nbytes:
                    raise ValueError(f"{os.fstat(f.fileno()).st_size} bytes, not "
                                     f"{HEADER + out.nbytes}")
                want = f.read(HEADER).decode("ascii")
                if f.readinto(memoryview(out).cast("B")) != out.nbytes:
                    raise ValueError("short read")
        except (FileNotFoundError, NotADirectoryError):  # not cached yet (or nowhere to be)
            return None
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            log.warning("noise cache %s unreadable (%s): building the table", self.path, exc)
            return None
        if normals.digest(out) != want:
            log.warning("noise cache %s does not hold the values its header names: building "
                        "the table and rewriting it", self.path)
            return None
        return want

    def _write(self, values: np.ndarray, sha256: str) -> None:
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(sha256.encode("ascii").ljust(HEADER, b" "))
                f.write(memoryview(np.ascontiguousarray(values)).cast("B"))
            os.replace(tmp, self.path)  # a reader sees the whole file or none
        except OSError as exc:
            folder = os.path.dirname(self.path)
            if folder not in _WARNED:
                _WARNED.add(folder)
                log.warning("cannot cache the noise table in %s (%s): each run on this host "
                            "builds it (dask config esnb.noise.cache: false silences this)",
                            folder, exc)
            try:
                os.remove(tmp)
            except OSError:
                pass
            return
        log.info("noise table cached in %s (%.0f MB; dask config esnb.noise.cache)",
                 self.path, values.nbytes / 2**20)

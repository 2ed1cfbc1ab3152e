"""Read-only arrays built once per host in shared memory (the noise table's storage).

A block is a file in a shared-memory directory (``/dev/shm``: tmpfs, so its pages are RAM
that every process mapping the file shares) named by what it holds. The protocol, with
``flock`` locks (the kernel releases them when a process dies, even by SIGKILL):

- **open**: take ``<name>.lock`` exclusively; if ``<name>`` is missing, build it in this
  process's memory, write it to a temporary file (``posix_fallocate`` first, so a full tmpfs
  is an error there), ``fsync`` and ``rename`` it into place, so a builder that dies
  midway leaves no half-written block under the name; take a *shared* lock on ``<name>``
  itself (this process uses it) and map it read-only; release ``<name>.lock``.
- **close**: under ``<name>.lock``, drop the shared lock and try an exclusive non-blocking
  one: it succeeds only when no other process uses the block, and then the file is removed.
  Mappings still referenced in this process stay valid (an unlinked file's pages live
  until the last mapping goes).

A block may carry a description computed by its builder from the values it wrote (the noise
table's digest and who built it): ``<name>.json``, written (temporary file, ``rename``) before
the block itself is renamed into place, read by every process that maps the block, and
removed with it. Temporary files found while holding ``<name>.lock`` belong to builders that
died (a live builder holds that lock), so they are removed. Where the directory is missing or not
writable, or the block does not fit, the array is built privately in this process, said
once in the log (``esnb.shm``). ``ESNB_SHM_DIR`` names the directory (default
``/dev/shm``; empty: always private). Nothing here imports Dask.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import logging
import mmap
import os
import secrets
import weakref
from collections.abc import Callable

import numpy as np

log = logging.getLogger("esnb.shm")

#: default directory of shared blocks (tmpfs on Linux)
DEFAULT_DIR = "/dev/shm"

_WARNED: set[str] = set()


def shared_dir() -> str | None:
    """The directory of shared blocks: ``ESNB_SHM_DIR``, else ``/dev/shm``; None when the
    variable is set empty (private copies only)."""
    return os.environ.get("ESNB_SHM_DIR", DEFAULT_DIR) or None


class Block:
    """A read-only 1-D array, shared with the host's other processes or private.

    Attributes
    ----------
    array : numpy.ndarray
        The values (read-only).
    path : str or None
        The shared file, or None for a private copy.
    about : dict
        What ``describe(values)`` said of the values when they were built (empty without
        ``describe``).
    """

    def __init__(self, array: np.ndarray, path: str | None = None, fd: int | None = None,
                 about: dict | None = None):
        array.flags.writeable = False
        self.array, self.path, self.about = array, path, dict(about or {})
        self._release = weakref.finalize(self, _release, path, fd) if fd is not None else None

    @property
    def shared(self) -> bool:
        return self.path is not None

    def close(self) -> None:
        """Stop using the block; the file is removed when no other process uses it."""
        if self._release is not None:
            self._release()


def open_block(name: str, size: int, dtype, fill: Callable[[np.ndarray], None],
               directory: str | None = None,
               describe: Callable[[np.ndarray], dict] | None = None) -> Block:
    """The block ``name`` of ``size`` entries of ``dtype``, filled by ``fill(out)`` once.

    Parameters
    ----------
    name : str
        File name; it must say everything that determines the values (``fill`` runs only
        when no file of that name exists).
    size : int
        Number of entries.
    dtype : numpy dtype
        Entry type.
    fill : callable
        ``fill(out)`` writes every entry of the writable array ``out``.
    directory : str, optional
        Where shared blocks live (default :func:`shared_dir`); ``""`` means private.
    describe : callable, optional
        ``describe(values) -> dict`` (JSON-serialisable), run by the builder on the values it
        wrote; every process reads the builder's answer as :attr:`Block.about` (a block found
        without one is described by the process that finds it).

    Returns
    -------
    Block
        Shared, or private when shared memory is unavailable (one log line).
    """
    directory = shared_dir() if directory is None else (directory or None)
    if directory is not None:
        try:
            return _open_shared(os.path.join(directory, name), int(size), np.dtype(dtype), fill,
                                describe)
        except OSError as exc:
            if directory not in _WARNED:
                _WARNED.add(directory)
                log.warning("no shared memory in %s (%s): each process builds its own copy",
                            directory, exc)
    out = np.empty(int(size), dtype=dtype)
    fill(out)
    return Block(out, about=describe(out) if describe else None)


def _open_shared(path: str, size: int, dtype: np.dtype, fill, describe) -> Block:
    nbytes = size * dtype.itemsize
    about = None
    with _Mutex(path):
        fd = _open_existing(path, nbytes)
        if fd is None:
            about = _build(path, nbytes, size, dtype, fill, describe)
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)  # "in use": close() removes the file only after us
            # mmap keeps a dup of the descriptor it maps, and a dup shares its flock: map
            # through a second open file so that close() drops the lock with the mapping alive
            map_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                mapped = mmap.mmap(map_fd, nbytes, access=mmap.ACCESS_READ)
            finally:
                os.close(map_fd)
            array = np.frombuffer(mapped, dtype=dtype, count=size)
            if describe is not None and about is None:
                about = _read_about(path)
                if about is None:  # a block from a builder that described nothing
                    about = describe(array)
                    _write_about(path, about)
        except BaseException:
            os.close(fd)
            raise
    return Block(array, path, fd, about)


def _about_path(path: str) -> str:
    return path + ".json"


def _read_about(path: str) -> dict | None:
    try:
        with open(_about_path(path)) as f:
            about = json.load(f)
    except (OSError, ValueError):
        return None
    return about if isinstance(about, dict) else None


def _write_about(path: str, about: dict) -> None:
    """``<path>.json`` replaced atomically (a reader never sees half of it)."""
    tmp = f"{_about_path(path)}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        with open(tmp, "x") as f:
            json.dump(about, f)
        os.chmod(tmp, 0o600)
        os.rename(tmp, _about_path(path))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class _Mutex:
    """``<path>.lock`` held exclusively: one process at a time builds, opens or releases."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        self.fd = os.open(self.path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # releases the lock


def _open_existing(path: str, nbytes: int) -> int | None:
    """A descriptor of the complete block at ``path``, or None when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    if os.fstat(fd).st_size == nbytes:
        return fd
    # a file of another size under a name that fixes the size is no block of ours: remove it
    # if nobody uses it, else leave it alone and go private
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OSError(f"{path} has the wrong size and is in use") from None
    os.unlink(path)
    os.close(fd)
    return None


def _build(path: str, nbytes: int, size: int, dtype: np.dtype, fill, describe) -> dict | None:
    """Build the block at ``path``; its description (written first) when ``describe``."""
    for stale in glob.glob(glob.escape(path) + ".tmp-*") + \
            glob.glob(glob.escape(_about_path(path)) + ".tmp-*"):  # builders that died
        os.unlink(stale)
    about = None
    tmp = f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.posix_fallocate(fd, 0, nbytes)  # a full tmpfs is an error now, before the build
        # built in private memory, then written: an array on a mapping of the file has to be
        # freed before the mapping can close, and anything that keeps it (a traceback that a
        # log record holds, a reference cycle) turned the close into a BufferError that hid
        # the build's own error
        out = np.empty(size, dtype=dtype)
        fill(out)
        if describe is not None:
            about = describe(out)
        data = memoryview(out).cast("B")
        while data:
            data = data[os.write(fd, data):]
        del data, out
        os.fsync(fd)
        if about is not None:
            _write_about(path, about)  # before the block: a block's description is its own
        os.rename(tmp, path)  # atomic: the name only ever shows a complete block
    except BaseException:
        os.unlink(tmp)
        raise
    finally:
        os.close(fd)
    return about


def _release(path: str, fd: int) -> None:
    """Drop this process's use of ``path``; remove the file if nobody else uses it."""
    try:
        mutex = _Mutex(path).__enter__()
    except OSError as exc:  # the directory is gone: nothing left to remove
        log.debug("could not release %s: %s", path, exc)
        os.close(fd)
        return
    try:
        os.close(fd)
        probe = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(path)  # nobody else holds a shared lock: the last user is gone
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_about_path(path))
        finally:
            os.close(probe)
    except BlockingIOError:
        pass  # another process still uses it
    except OSError as exc:  # removed already (FileNotFoundError) or not ours to remove
        log.debug("could not release %s: %s", path, exc)
    finally:
        mutex.__exit__()

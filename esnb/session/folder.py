"""A run folder belongs to one run (issue 36).

- **A live run holds its folder's lock.** :class:`FolderLock` takes an exclusive ``flock`` on
  ``.run.lock`` for as long as the run's process runs the run; the kernel drops it when the
  process ends, however it ends (a kill, a crash, a lost node), so no stale file can claim a
  folder and no damaged or copied ``attach.json`` can free one. :func:`lock_holder` asks the
  lock, not a file's text, whether a run is live there.
- **A folder that holds a run is not written by a new one.** :func:`run_files` lists what a
  run leaves (a checkpoint, its history, its summary, kept checkpoints); a new run is refused
  there in one line naming the folder and the ways on, unless the folder was the default of
  an unnamed run, which then takes the next free name (:func:`free_folder`) and says so.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

#: the lock file a live run holds in its folder
LOCK_FILE = ".run.lock"
#: what a run leaves in its folder (a plan or a log alone: the run made nothing to lose)
RUN_FILES = ("checkpoint.npz", "history.csv", "summary.json", "checkpoints")


def lock_holder(folder) -> int | None:
    """The pid of the live run that holds ``folder``'s lock (-1 when it wrote none), else
    None."""
    try:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, 32).decode(errors="replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


#: the folders this process holds: their lock file's descriptor and how many holders
_HELD: dict[Path, list[int]] = {}


class FolderLock:
    """The run folder ``folder`` held by this process until :meth:`release` (a context
    manager). Taking a folder another live run holds is one ``ValueError``; within one process
    the lock is shared (the session holds the folder for the run, the serving of the run for
    its attach file), released when its last holder releases it."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.key = self.folder.resolve()
        self.held = False

    def acquire(self) -> FolderLock:
        if self.held:
            return self
        if self.key in _HELD:
            _HELD[self.key][1] += 1
            self.held = True
            return self
        fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ValueError(in_use(self.folder, lock_holder(self.folder) or -1)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        _HELD[self.key] = [fd, 1]
        self.held = True
        return self

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        entry = _HELD[self.key]
        entry[1] -= 1
        if entry[1] == 0:
            del _HELD[self.key]
            fcntl.flock(entry[0], fcntl.LOCK_UN)
            os.close(entry[0])

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def in_use(folder, pid: int) -> str:
    """The line that refuses a live run's folder."""
    who = f"pid {pid}" if pid > 0 else "a live process"
    return (f"{folder} belongs to a run that is running ({who}): attach to it "
            f"(esnb.attach({str(folder)!r})) or choose another --name/--out")


def run_files(folder) -> list[str]:
    """What of a run ``folder`` holds (:data:`RUN_FILES`), in that order."""
    folder = Path(folder)
    return [name for name in RUN_FILES if (folder / name).exists()]


def check_new(folder, chosen: bool) -> Path:
    """``folder`` for a new run: refused in one line when a live run holds it or (``chosen``:
    the user named it) when it holds a run; an unnamed run's default folder that holds one is
    replaced by the next free name, said on stderr."""
    import sys

    folder = Path(folder)
    pid = lock_holder(folder)
    if pid is not None:
        raise ValueError(in_use(folder, pid))
    held = run_files(folder)
    if not held:
        return folder
    if chosen:
        raise ValueError(f"{folder} holds a run already ({', '.join(held)}): resume it "
                         f"(--resume {folder}) or choose another --name/--out for a new run")
    free = free_folder(folder)
    print(f"esnb: {folder} holds another run; this run is {free.name} ({free})",
          file=sys.stderr)
    return free


def free_folder(folder) -> Path:
    """``folder`` with the first suffix ``-2``, ``-3``... that names no run and no live run."""
    folder = Path(folder)
    for n in range(2, 10_000):
        candidate = folder.with_name(f"{folder.name}-{n}")
        if not run_files(candidate) and lock_holder(candidate) is None:
            return candidate
    raise ValueError(f"no free run folder beside {folder}: choose a --name/--out")

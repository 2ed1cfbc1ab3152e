"""A run's checkpoint and its replay, kept as a consistent pair (AES-RL, CEM-RL and Ape-X).

A replay is too large to go into the run's checkpoint at every save, so it has a file of its
own, next to the checkpoint, which this process writes as the server's state arrives in pieces
from the worker holding it (:mod:`esnb.replay.transfer`; the worker may be on another host):
``<stem>.replay-<token>.npz`` (``checkpoint.replay-1f3a....npz`` beside ``checkpoint.npz``).
:class:`ReplayCheckpoints` (a runner mixin) saves in this order:

1. the replay, to a file with a new token (written atomically; its mark records the token,
   its size and its inserted count);
2. the run's checkpoint (atomically), recording ``replay = {file, token, size, inserted}``;
3. only then the replay files of earlier checkpoints of the same stem are removed.

So whatever moment a run is killed at, the checkpoint on disk names a replay file that exists
and was written for it. On load, the file is checked against the record (missing, or of
another moment: a :class:`~esnb.record.CheckpointError`), and the restored server's counts
again once it is up. A replay that cannot be written (its worker just died) is carried over
from the newest replay file the run has (its last recovery checkpoint), under the new name.

The recovery checkpoints a :class:`~esnb.runners.replay_service.ReplayService` fetches every
few seconds (to recreate a replay whose worker died) go into the run folder
(``<stem>.replay-recovery.npz``, removed on close) when the run keeps checkpoints, else into a
private directory (mode 0700) removed on close; :meth:`ReplayCheckpoints._recovery_files`.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from esnb.record import CheckpointError, _fsync_dir
from esnb.replay.server import ReplayLost, checkpoint_mark

log = logging.getLogger("esnb.replay")

#: what a run's checkpoint records of its replay file
RECORD_KEYS = ("file", "token", "size", "inserted")


def paired_path(checkpoint, token: str) -> Path:
    """The replay file of checkpoint ``checkpoint`` written with ``token``."""
    checkpoint = Path(checkpoint)
    return checkpoint.with_name(f"{checkpoint.stem}.replay-{token}.npz")


def recovery_path(checkpoint) -> Path:
    """Where a run that keeps checkpoints at ``checkpoint`` writes its replay's recovery
    checkpoints."""
    return paired_path(checkpoint, "recovery")


def prune(checkpoint, keep: str | None) -> None:
    """Remove the replay files of earlier checkpoints at ``checkpoint`` (all but the file
    ``keep`` and the recovery file)."""
    checkpoint = Path(checkpoint)
    spare = {keep, recovery_path(checkpoint).name}
    for path in checkpoint.parent.glob(f"{checkpoint.stem}.replay-*.npz"):
        if path.name not in spare:
            try:
                path.unlink()
            except FileNotFoundError:
                pass


def check_record(checkpoint, record: dict | None) -> dict | None:
    """The replay file a checkpoint recorded, as ``{path, token, size, inserted}``, after
    checking it exists and was written for it; None when the checkpoint has no replay."""
    if not record:
        return None
    path = Path(checkpoint).parent / str(record["file"])
    if not path.exists():
        raise CheckpointError(f"{checkpoint} goes with the replay file {path}, which is missing "
                              f"(keep a run folder's files together)")
    mark = checkpoint_mark(path)
    want = {k: record[k] for k in ("token", "size", "inserted")}
    got = {k: mark.get(k) for k in want}
    if got != want:
        raise CheckpointError(f"{path} is not the replay {checkpoint} was saved with: it holds "
                              f"{got}, the checkpoint recorded {want}")
    return {"path": str(path), **want}


def _carry(source: dict, target: Path) -> None:
    """Put the replay file ``source["path"]`` at ``target`` too (a hard link, else a copy)."""
    tmp = target.with_name(target.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    try:
        os.link(source["path"], tmp)
    except OSError:
        shutil.copyfile(source["path"], tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    os.replace(tmp, target)
    _fsync_dir(target.parent)


class ReplayCheckpoints:
    """Runner mixin: ``save``/``load`` that keep the run's replay with its checkpoint.

    The runner has ``replay`` (a :class:`~esnb.runners.replay_service.ReplayService` or None),
    records ``self._replay_record`` in its checkpoint's meta under ``"replay"`` and sets it
    back when loading (``_load_replay_record``); hooks: :meth:`_before_replay_checkpoint`
    (pending writes, e.g. Ape-X's priorities) and :meth:`_replay_checkpointed` (the write's
    reply, with the drained infos of the same moment when :attr:`drain_with_replay`).
    """

    #: ask the replay for its drained infos with the file (Ape-X: env steps and episodes)
    drain_with_replay = False
    _replay_record: dict | None = None
    #: the replay file a loaded run starts from (``check_record``'s output)
    _replay_restore: dict | None = None

    def _before_replay_checkpoint(self) -> None:
        """Before the replay is written (hook)."""

    def _replay_checkpointed(self, reply: dict) -> None:
        """The replay's reply to the write (hook)."""

    def _load_replay_record(self, meta: dict) -> None:
        record = meta.get("replay")
        self._replay_record = dict(record) if record else None

    def save(self, path):
        """Write the replay (a new file), then the run's checkpoint naming it, then remove the
        replay files of earlier checkpoints."""
        path = Path(path)
        with self._iter_lock:
            self._replay_record = self._write_replay(path)
            out = super().save(path)
            prune(path, None if self._replay_record is None else self._replay_record["file"])
        return out

    def _write_replay(self, path: Path) -> dict | None:
        token = uuid.uuid4().hex[:16]
        target = paired_path(path, token)
        replay = self.replay
        if replay is not None and not replay.lost:
            try:
                self._before_replay_checkpoint()
                reply = replay.checkpoint_to(str(target), token, drain=self.drain_with_replay)
                self._replay_checkpointed(reply)
                return {"file": target.name, **{k: reply[k] for k in RECORD_KEYS[1:]}}
            except ReplayLost:
                log.warning("replay lost while saving: the checkpoint keeps its last recovery "
                            "checkpoint")
        source = replay.latest if replay is not None else self._replay_restore
        if source is None or not os.path.exists(source["path"]):
            if replay is not None:
                log.warning("the checkpoint %s holds no replay: none was written yet", path)
            return None
        _carry(source, target)
        if replay is not None:
            replay.adopt({**source, "path": str(target)})
        self._replay_restore = None if replay is not None else {**source, "path": str(target)}
        return {"file": target.name, **{k: source[k] for k in RECORD_KEYS[1:]}}

    @classmethod
    def load(cls, path, client=None, **overrides):
        runner = super().load(path, client=client, **overrides)
        runner._replay_restore = check_record(path, runner._replay_record)
        return runner

    def _recovery_files(self, explicit: str | None = None) -> dict[str, Any]:
        """Where the replay's recovery checkpoints go (``ReplayService`` arguments):
        ``explicit`` ('' never), else the run folder when the run keeps checkpoints (removed
        on close), else a private directory."""
        if explicit == "":
            return {"checkpoint_path": None}
        if explicit is not None:
            return {"checkpoint_path": str(explicit)}
        keeper = getattr(self, "_keeper", None)
        if keeper is not None:
            return {"checkpoint_path": str(recovery_path(keeper.path)), "remove_on_close": True}
        return {"private": True}

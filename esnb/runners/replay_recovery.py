"""The recovery checkpoints of a :class:`~esnb.runners.replay_service.ReplayService`:
:class:`RecoveryCheckpoints`, its mixin.

Where the replay can be lost (``executor.remote``) the service keeps a recovery checkpoint
every ``checkpoint_interval`` seconds: the server freezes a copy of its state and this process
fetches it in pieces and writes the file (:func:`esnb.replay.transfer.pull`, on a thread of its
own so the run goes on), into the run folder or into a private directory (mode 0700, removed
on close) when the run has none. Only the driver writes files: the server's worker may be on
another host. The service remembers the newest replay file written (``latest``: a recovery
checkpoint or the file a runner's checkpoint was paired with, see
:mod:`esnb.runners.replay_files`): a recreated server is filled from it.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import time
from typing import Any

from esnb.replay.server import ReplayLost, is_loss
from esnb.replay.transfer import pull

log = logging.getLogger("esnb.replay")


class RecoveryCheckpoints:
    """Recovery checkpoints fetched from the server and the newest replay file.

    A mixin of :class:`~esnb.runners.replay_service.ReplayService`: it works on the service's
    ``checkpoint_path``, ``checkpoint_interval``, ``latest``, counters (``checkpoints``,
    ``last_checkpoint_size``), its pull thread (``_pulls``) and its calls (``call``, ``ref``,
    ``observe``).
    """

    def surviving(self) -> dict[str, Any] | None:
        """The newest replay file that outlives :meth:`close` (a run checkpoint's), or None."""
        latest = self.latest
        if latest is None or not os.path.exists(latest["path"]):
            return None
        owned = self._private_dir is not None or self.remove_on_close
        if owned and os.path.abspath(latest["path"]) == os.path.abspath(self.checkpoint_path):
            return None
        return dict(latest)

    def _settle_pending(self) -> None:
        """Wait for a recovery checkpoint being fetched: one that landed is the newest file
        (it replaced the recovery file), one that failed is forgotten."""
        pending, self._pending_checkpoint = self._pending_checkpoint, None
        if pending is not None:
            try:
                self._checkpointed(pending.result(timeout=self.timeout))
            except Exception:  # noqa: BLE001 - a lost replay's checkpoint never lands
                log.debug("a recovery checkpoint did not land", exc_info=True)

    def maybe_checkpoint(self, force: bool = False) -> dict | None:
        """Start a recovery checkpoint if one is due (without waiting for it: it is fetched on
        a thread of its own); collect a finished one; count what servers lost earlier left in
        count files a worker of their host read since. Only where the server can be lost
        (``executor.remote``), unless forced (then it waits).

        Returns the finished checkpoint's report, if one completed since the last call.
        """
        if self._lost_counts is not None:
            for generation, inserted in self._lost_counts.poll():
                before = self.lost_items
                self.observe({"generation": generation, "inserted": inserted})
                log.warning("the count file of replay generation %d, read on its host once a "
                            "worker came back: %d inserted, %d more transitions lost than "
                            "counted at its loss", generation, inserted,
                            self.lost_items - before)
        if self.checkpoint_path is None or not (self.executor.remote or force):
            return None
        done = None
        pending = self._pending_checkpoint
        if pending is not None and (force or pending.done()):
            self._pending_checkpoint = None
            try:
                done = self._checkpointed(pending.result())
            except ReplayLost:
                raise
            except Exception as exc:
                if self.lost or is_loss(exc):
                    raise ReplayLost(f"the replay (generation {self.generation}) is lost: "
                                     f"{exc}") from exc
                raise
        due = time.monotonic() - self._last_checkpoint_time >= self.checkpoint_interval
        if (force or due) and self._pending_checkpoint is None:
            self._last_checkpoint_time = time.monotonic()
            token = f"recovery-{time.time_ns()}"
            if force or self._pulls is None:
                done = self._checkpointed(pull(self.call, self.checkpoint_path, token))
            else:
                self._pending_checkpoint = self._pulls.submit(
                    pull, self._call_of(self.generation), self.checkpoint_path, token)
        return done

    def _call_of(self, generation: int):
        """``call`` for a fetch on the pull thread: only the server of ``generation``, no
        bookkeeping (the runner's thread does that with the result)."""

        def call(method: str, *args):
            if self.generation != generation or self.lost:
                raise ReplayLost(f"the replay (generation {generation}) was replaced")
            return self.ref.submit(method, *args).result(timeout=self.timeout)

        return call

    def checkpoint_to(self, path: str, token: str, drain: bool = False) -> dict[str, Any]:
        """Write the replay to ``path`` (on this machine) now, marked ``token``, and wait; it
        becomes the newest file a recovery starts from. ``drain``: with
        :meth:`ReplayServer.drain`'s infos."""
        return self._checkpointed(pull(self.call, str(path), token, drain))

    def _checkpointed(self, done: dict) -> dict:
        if isinstance(done, dict):
            self.observe(done)
        self.checkpoints += 1
        self.last_checkpoint_size = int(done["size"])
        self.adopt({k: done[k] for k in ("path", "token", "size", "inserted")})
        return done

    def adopt(self, record: dict[str, Any]) -> None:
        """Make ``record`` (a replay file: ``path``, ``token``, ``size``, ``inserted``) the one a
        recovery starts from, unless a newer one is known."""
        if self.latest is None or int(record["inserted"]) >= int(self.latest["inserted"]):
            self.latest = dict(record)


def remove_owned(folder: str | None, path: str | None) -> None:
    """Remove a service's private checkpoint directory, or its own checkpoint file (on close,
    or when the process exits without one) with the partial writes of it that a killed writer
    left (``<name>*.tmp``: a run killed mid-write and resumed leaves one beside the file)."""
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        return
    _unlink(path)
    if path is not None:
        for partial in glob.glob(glob.escape(path) + "*.tmp"):
            _unlink(partial)


def _unlink(path: str | None) -> None:
    if path is not None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

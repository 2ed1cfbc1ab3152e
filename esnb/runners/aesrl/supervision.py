"""What keeps an AES-RL run's services alive, and what ends it: :class:`AESRLSupervision`, a
mixin of :class:`~esnb.runners.aesrl.aesrl.AESRL`.

Each turn of the iteration (:meth:`AESRLSupervision._supervise`) republishes critic weights
whose task was lost, recreates a lost replay (and resubmits the evaluations holding its old
handle) or a lost critic (its chunk in progress counted as ``critic_lost_updates``), and
refreshes the evaluation workers (the critic's left out with ``critic_exclusive``);
:meth:`AESRLSupervision._service_critic` collects a finished critic chunk and starts the next.
When a run ends, the evaluations in flight are cancelled (they updated nothing) or drained
(before the last checkpoint), and :meth:`AESRLSupervision.close` releases the replay and the
critic.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("esnb.aes")


class AESRLSupervision:
    """The replay, the critic and the evaluations in flight of an AES-RL run, supervised.

    A mixin: it works on the runner's ``replay``, ``critic``, ``pool``, ``counters``,
    ``controls``, ``config``, ``dist`` and ``_ready`` (see
    :class:`~esnb.runners.aesrl.aesrl.AESRL`), and stands before
    :class:`~esnb.runners.aesrl.common.PopulationRunner` among its bases.
    """

    # -- the critic and the replay -----------------------------------------------------------
    def _refresh(self, force: bool = False) -> None:
        exclude = self.critic.address if self.config.critic_exclusive else None
        self.pool.refresh(exclude, force)

    def _service_critic(self, force_target: int | None = None) -> None:
        """Collect a finished critic chunk (published) and start the next one if allowed."""
        env_steps = self.counters["env_steps"]
        if not self.critic.service(self.replay.info(), self.dist.mu, env_steps,
                                   env_steps >= self.controls["rl_start_step"], force_target):
            self._recover_critic()
        self.counters["critic_updates"] = self.critic.updates

    def _recover_critic(self) -> None:
        self.counters["critic_lost_updates"] += self.critic.abandon()
        self.critic.recover(avoid=(self.replay.address,))
        self.counters["critic_recreations"] += 1
        self._refresh(force=True)

    def _supervise(self) -> None:
        if self.critic.weights_lost:  # the published weights were lost for good: again
            self.critic.publish_version()
        try:
            self._service_replay()
        except Exception:  # no live worker yet: try again next time round
            if not self.replay.lost:
                raise
            log.exception("could not recreate the replay yet")
            return
        if self.critic.lost and self.critic.call is None:
            self._recover_critic()
        self._refresh()

    def _replay_recreated(self) -> None:
        # tasks holding the old replay's handle would wait for it until CALL_TIMEOUT: resubmit
        # them with the new one (a running one finishes unheard)
        self.pool.resubmit_all("the replay was recreated")

    def finish_critic(self, updates: int, timeout: float | None = None) -> float:
        """Keep the critic training (no new individuals) until it has made ``updates`` in all
        (at most ``critic_ratio`` per collected env step); returns the seconds it took."""
        t0 = time.perf_counter()
        with self._iter_lock:
            self._ensure_started()
            target = min(int(updates), int(self.config.critic_ratio
                                           * self.counters["env_steps"]))
            while self.counters["critic_updates"] < target or self.critic.call is not None:
                if timeout is not None and time.perf_counter() - t0 > timeout:
                    raise TimeoutError(f"critic at {self.counters['critic_updates']} updates "
                                       f"after {timeout} s")
                self._supervise()
                self._service_critic(force_target=target)
                if self.critic.call is None and self.counters["critic_updates"] >= target:
                    break
                time.sleep(0.005)
        return time.perf_counter() - t0

    # -- ending ------------------------------------------------------------------------------
    def _quiesce(self) -> None:
        # evaluations in flight push their episodes into the replay whatever happens (a running
        # task cannot be stopped): they land before the last checkpoint, not after it
        self._cancel_in_flight()
        if self.pool is not None:
            self.pool.drain()

    def _loop(self) -> None:
        try:
            super()._loop()
        finally:
            self._cancel_in_flight()

    def _cancel_in_flight(self) -> None:
        """Cancel the individuals still running (they updated nothing) when a run ends."""
        with self._iter_lock:
            cancelled = self.pool.cancel_all() if self.pool is not None else []
            cancelled += [pend for pend, _ in self._ready]  # finished, never applied
            self._ready.clear()
            for pend in cancelled:
                if pend.kind != "mean":
                    self.counters["cancelled"] += 1
                    self._dropped(pend)
            self._mean_eval_due = self.f_mu_update < self.dist.updates

    def close(self) -> None:
        """Stop the run, cancel what runs and release the replay and the critic."""
        super().close()
        self._cancel_in_flight()
        with self._iter_lock:
            if self.critic is not None:
                self.critic.wait()  # the chunk in progress samples from the replay
            if self.pool is not None:
                self.pool.drain()
                self.pool = None
            self._close_services()

"""The shared TD3 critic of AES-RL and CEM-RL: the actor that trains it, and its driver-side
owner.

- :class:`CriticServer` (the actor, plain Python) holds the
  :class:`~esnb.rl.td3.learner.CriticLearner`; each :meth:`CriticServer.train` call makes a chunk of
  updates on batches it samples from the replay itself and returns the learner's whole state
  (weights to publish, and what is needed to recreate the critic if its worker dies).
- :class:`Critic` (driver side) holds it through ``executor.actor(...)``: a Dask actor on a
  worker of its own (not the replay's, the last worker by address), or an object in this
  process. It keeps the latest state every train call returns, so when the critic's worker
  dies it is recreated on a live worker from that state (losing at most the chunk in
  progress, which the runner counts), and it publishes the critic's weights for the tasks of
  RL individuals (:meth:`Critic.publish`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from esnb.nets.policy import PolicySpec
from esnb.replay.server import is_loss
from esnb.runners.aesrl.tasks import SAMPLE_CHUNK, sample_chunks

log = logging.getLogger("esnb.aes")

#: the learner's state arrays (checkpoints keep them under these names)
STATE_KEYS = ("critic", "critic_target", "critic_adam_m", "critic_adam_v", "critic_adam_step",
              "target_policy", "critic_counters", "critic_rng")
#: replay fields a critic update needs
FIELDS = ("obs", "action", "reward", "next_obs", "done")


class CriticLost(RuntimeError):
    """The worker holding the critic actor is gone (recreate it with :meth:`Critic.recover`)."""


class CriticServer:
    """The shared critic as an actor (plain Python: it runs in-process too).

    Parameters
    ----------
    spec : PolicySpec
    td3 : dict
        :class:`~esnb.rl.td3.config.TD3Config` as a dict.
    seed : int
    state : dict of arrays, optional
        A :meth:`~esnb.rl.td3.learner.CriticLearner.state_dict` to continue from (after a loss).
    """

    def __init__(self, spec: PolicySpec, td3: dict, seed: int = 0, state: dict | None = None):
        import torch

        from esnb.rl.td3.config import TD3Config
        from esnb.rl.td3.learner import CriticLearner

        torch.set_num_threads(1)
        self.learner = CriticLearner(spec, TD3Config.from_dict(td3), seed)
        if state is not None:
            self.learner.load_state_dict(state)

    def train(self, replay, n_updates: int, target_policies,
              chunk: int = SAMPLE_CHUNK) -> dict[str, Any]:
        """``n_updates`` critic updates, split evenly over ``target_policies`` in turn (AES-RL:
        one, the mean; CEM-RL: the RL individuals, as its ``actor_steps // n_rl`` each).

        Returns the learner's state (publish ``state["critic"]``), ``updates`` made (fewer if
        the replay had too little), loss and Q statistics and where the time went.
        """
        t0 = time.perf_counter()
        policies = [np.asarray(p, dtype=np.float32) for p in target_policies]
        n = int(n_updates)
        shares = [n // len(policies) + (1 if i < n % len(policies) else 0)
                  for i in range(len(policies))]
        bs = self.learner.config.batch_size
        done, losses, qs, wait = 0, [], [], 0.0
        for policy, share in zip(policies, shares):
            if share <= 0:
                continue
            self.learner.set_target_policy(policy)
            it = sample_chunks(replay, bs, share, chunk, FIELDS)
            while True:
                tw = time.perf_counter()
                data = next(it, None)
                wait += time.perf_counter() - tw
                if data is None:
                    break
                stats = self.learner.train(data)
                done += stats["updates"]
                losses.append(stats["critic_loss"] * stats["updates"])
                qs.append(stats["q_mean"] * stats["updates"])
        version, _ = self.learner.publish()
        return {"state": self.learner.state_dict(), "updates": done, "version": version,
                "total_updates": self.learner.updates,
                "critic_loss": float(np.sum(losses) / done) if done else float("nan"),
                "q_mean": float(np.sum(qs) / done) if done else float("nan"),
                "seconds": time.perf_counter() - t0, "wait_seconds": wait}

    def state(self) -> dict[str, np.ndarray]:
        return self.learner.state_dict()


class Critic:
    """Driver-side owner of the :class:`CriticServer` actor, inline or on a cluster.

    Parameters
    ----------
    executor : InlineExecutor or DaskExecutor
    spec : PolicySpec
    td3 : dict
        :class:`~esnb.rl.td3.config.TD3Config` as a dict.
    seed : int
        Seed of the first server (a recreated one adds its generation).
    avoid : iterable of str
        Worker addresses to keep it off while another worker is alive (the replay's).
    state : dict of arrays, optional
        Start from this learner state.
    timeout : float
        Seconds to wait for the actor's creation.
    resources : dict, optional
        Worker resources to ask for instead (a GPU worker:
        :func:`~esnb.runners.placement.learner_resources`).
    """

    def __init__(self, executor, spec: PolicySpec, td3: dict, seed: int = 0,
                 avoid: Iterable[str] = (), state: dict | None = None, timeout: float = 60.0,
                 resources: dict | None = None):
        self.executor = executor
        self.spec = spec
        self.td3 = dict(td3)
        self.seed = int(seed)
        self.state = state
        self.updates = 0 if state is None else int(state["critic_counters"][0])
        self.recreations = 0
        self.lost_updates = 0  # updates of train calls lost with the critic's worker
        self.weights = None  # the published weights (a task result on a cluster)
        self.ref = executor.actor(CriticServer, spec, self.td3, self.seed, state,
                                  key="esnb-critic", avoid=tuple(avoid), place="last",
                                  timeout=timeout, resources=resources)
        if self.state is None:
            self.state = self.ref.submit("state").result(timeout=timeout)

    @property
    def address(self) -> str | None:
        return self.ref.address

    @property
    def generation(self) -> int:
        return self.ref.generation

    @property
    def lost(self) -> bool:
        return self.ref.lost

    def recover(self, avoid: Iterable[str] = ()) -> dict[str, Any]:
        """Recreate the critic on a live worker from its last returned state."""
        self.ref.avoid = tuple(avoid)
        self.ref.create(self.spec, self.td3, self.seed + self.ref.generation + 1, self.state,
                        exclude=(self.ref.address,))
        self.recreations += 1
        log.warning("critic actor lost; recreated on %s (generation %d) at %d updates",
                    self.address, self.generation, self.updates)
        return {"generation": self.generation, "updates": self.updates}

    def submit_train(self, replay_info, n_updates: int, policies,
                     chunk: int = SAMPLE_CHUNK):
        """Start a chunk of updates (:meth:`CriticServer.train`); a future."""
        if self.lost:
            raise CriticLost(f"the critic actor (generation {self.generation}) is lost")
        try:
            return self.ref.submit("train", replay_info, int(n_updates), list(policies),
                                   int(chunk))
        except Exception as exc:
            if is_loss(exc):
                raise CriticLost(str(exc)) from exc
            raise

    def result(self, future, timeout: float | None = None) -> dict[str, Any]:
        """A train call's result; keeps its state. A loss raises :class:`CriticLost`."""
        try:
            out = future.result(timeout=timeout)
        except Exception as exc:
            if self.lost or is_loss(exc):
                raise CriticLost(f"the critic actor (generation {self.generation}) is lost: "
                                 f"{exc}") from exc
            raise
        self.state = out["state"]
        self.updates = int(out["total_updates"])
        return out

    def train(self, replay_info, n_updates: int, policies, chunk: int = SAMPLE_CHUNK,
              avoid: Iterable[str] = (), attempts: int = 3) -> dict[str, Any]:
        """Train and wait; a lost critic is recreated, off ``avoid`` if possible (at most
        ``attempts`` times in a row)."""
        for _ in range(attempts):
            try:
                return self.result(self.submit_train(replay_info, n_updates, policies, chunk))
            except CriticLost:
                self.lost_updates += int(n_updates)
                self.recover(avoid=avoid)
        raise RuntimeError(f"the critic was lost {attempts} times in a row")

    # -- published weights -------------------------------------------------------------------
    def publish(self, prefix: str, priority: int = 100) -> Any:
        """Send the latest critic weights once for tasks to use (the previous ones are
        released; tasks holding them keep their own reference). Returns the handle."""
        old = self.weights
        self.weights = self.executor.put(np.asarray(self.state["critic"], dtype=np.float32),
                                         prefix=prefix, priority=priority)
        if old is not None:
            self.executor.release(old)
        return self.weights

    @property
    def weights_lost(self) -> bool:
        """Whether the published weights are gone for good (their task erred or was
        cancelled; a value published in this process never is)."""
        return getattr(self.weights, "status", None) in ("error", "cancelled")

    def close(self) -> None:
        if self.weights is not None:
            self.executor.release(self.weights)
            self.weights = None
        self.ref.release()


class ChunkedCritic(Critic):
    """AES-RL's critic in the background: chunks of ``chunk`` updates against the current mean
    as target policy, never past ``ratio`` updates per collected env step; each finished chunk
    is published as the next version of the weights (``esnb-critic-<name>-v<version>``).

    Parameters
    ----------
    *args, **kwargs
        As :class:`Critic`.
    name : str
        The run's name (task keys of the published weights).
    chunk : int
        Updates per call of the actor.
    ratio : float
        Critic updates allowed per collected env step.
    """

    def __init__(self, *args, name: str, chunk: int, ratio: float, **kwargs):
        super().__init__(*args, **kwargs)
        self.name = name
        self.chunk = int(chunk)
        self.ratio = float(ratio)
        self.call = None  # the chunk in progress (a future)
        self.call_n = 0
        self.stats: dict[str, float] = {}
        self.version = int(self.state["critic_counters"][1])
        self.publish_version()

    def publish_version(self) -> None:
        """Publish the latest weights (again, if their task was lost)."""
        self.publish(prefix=f"esnb-critic-{self.name}-v{self.version}")

    def service(self, replay_info, mu, env_steps: int, started: bool,
                force_target: int | None = None) -> bool:
        """Collect a finished chunk (publish it); start the next one if allowed (``started``:
        past the warm-up; ``force_target``: up to these updates in all, warm-up or not).

        Returns False when the critic is lost (recover it; :meth:`abandon` counts the chunk).
        """
        if self.call is not None:
            if not self.call.done():
                return True
            try:
                out = self.result(self.call)
            except CriticLost:
                return False  # the call is kept for abandon()
            self.call = None
            self.version = int(out["version"])
            self.publish_version()
            self.stats = {k: out[k] for k in ("critic_loss", "q_mean", "seconds",
                                              "wait_seconds")}
        if not started and force_target is None:
            return True
        allowed = int(self.ratio * env_steps) - self.updates
        chunk = self.chunk
        if force_target is not None:
            allowed = min(allowed, force_target - self.updates)
            chunk = min(chunk, max(allowed, 0))
        if allowed >= chunk > 0:
            try:
                self.call = self.submit_train(replay_info, chunk, [mu], SAMPLE_CHUNK)
            except CriticLost:
                return False
            self.call_n = chunk
        return True

    def abandon(self) -> int:
        """Forget the chunk in progress (its critic is lost); returns its updates."""
        lost = self.call_n if self.call is not None else 0
        self.call = None
        return lost

    def wait(self, timeout: float = 60.0) -> None:
        """Let the chunk in progress end (closing: it samples from the replay)."""
        if self.call is not None:
            try:
                self.call.result(timeout=timeout)
            except Exception:  # noqa: BLE001 - closing: nothing to do about it
                log.debug("critic chunk failed while closing", exc_info=True)
            self.call = None


def state_arrays(state: dict | None) -> dict[str, np.ndarray]:
    """A critic state as checkpoint arrays (empty when there is none yet)."""
    return {} if state is None else {k: np.asarray(v) for k, v in state.items()}


def critic_state_from(arrays: dict[str, np.ndarray]) -> dict | None:
    """The critic state stored by :func:`state_arrays`, or None."""
    if not all(k in arrays for k in STATE_KEYS):
        return None
    return {k: arrays[k] for k in STATE_KEYS}

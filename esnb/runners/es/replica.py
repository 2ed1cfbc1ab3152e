"""ES's state replicated on every worker: only scalars travel (Salimans et al. 2017,
Algorithm 2).

Each worker process keeps, per run, a :class:`Replica`: theta, Adam's state and the
observation statistics as of some generation. Every generation the driver publishes one small
:class:`Update` -- the previous generation's ordinary update as noise offsets and shaped
returns (an :class:`esnb.es.Step`), this generation's IW-ES updates
(:class:`esnb.es.iw.IWUpdate`), the observation sums that join the statistics -- and the
checksum of the state it leads to. The first task of a generation on a worker applies it with
the very methods the driver ran (:meth:`OpenAIES.tell`, :meth:`OpenAIES.tell_iw`: numpy
float32, same inputs, same bits), checks the checksum, and only then rolls out. A worker that
joined, restarted or missed a generation, or whose state would not match, answers "stale"
and is sent the whole state once (:class:`Sync`).

What the driver sends per generation is therefore O(population + observation size), whatever
the number of parameters: the noise offsets (int32), shaped returns (float64 pairs), env seeds
(int32) and statistic flags of the pairs, and the observation sums.

This module imports numpy only (it runs on lean workers).
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from esnb.envs.obs_stats import ObsStats
from esnb.es.iw import Batch, IWUpdate
from esnb.es.openai_es import OpenAIES, Step
from esnb.noise import NoiseConfig, get_noise_table

#: replicas a worker keeps (runs of other runners, older tokens) before dropping the oldest
MAX_REPLICAS = 4


@dataclass(frozen=True)
class Update:
    """What turns generation ``generation - 1``'s state into ``generation``'s."""

    generation: int
    step: Step | None  # the previous generation's ordinary update (None: no batch came back)
    iw: tuple[IWUpdate, ...]  # this generation's IW-ES updates of the batch ``step`` made
    obs: tuple | None  # (sum, sumsq, count) of the previous batch's observations
    sigma: float  # the perturbation scale of this generation's rollouts
    checksum: int  # of theta and the observation normalisation after applying it
    shared: str | None = None  # the state in a file on the driver's host (:mod:`.host_theta`)
    host: str = ""  # that host's name
    header: bool = False  # only what tasks mapping ``shared`` read: nothing to apply

    def head(self) -> Update:
        """This update without its contents (:attr:`step`, :attr:`iw`, :attr:`obs`): what a
        task on the driver's host needs, sent with the task itself (no published update)."""
        return Update(self.generation, None, (), None, self.sigma, self.checksum, self.shared,
                      self.host, header=True)


@dataclass(frozen=True)
class Sync:
    """The whole state of one generation, for a worker whose replica is missing or stale."""

    generation: int
    theta: np.ndarray
    adam: dict
    obs: dict
    checksum: int


def normalisation(stats: ObsStats, obs_norm: bool):
    """The float32 mean and std rollouts normalise with (None, None without normalisation)."""
    if not obs_norm:
        return None, None
    return stats.mean.astype(np.float32), stats.std.astype(np.float32)


def checksum(theta: np.ndarray, mean: np.ndarray | None, std: np.ndarray | None) -> int:
    """CRC-32 of what rollouts use: theta and the observation normalisation."""
    crc = zlib.crc32(np.ascontiguousarray(theta).tobytes())
    for a in (mean, std):
        if a is not None:
            crc = zlib.crc32(np.ascontiguousarray(a).tobytes(), crc)
    return crc


class Replica:
    """One run's ES state in a worker process."""

    def __init__(self, noise: NoiseConfig, sync: Sync, obs_norm: bool):
        self.es = OpenAIES(sync.theta, get_noise_table(noise))
        self.es.load_state_dict({"theta": sync.theta, **sync.adam})
        self.obs = ObsStats(len(sync.obs["sum"]))
        self.obs.load_state_dict(sync.obs)
        self.obs_norm = bool(obs_norm)
        self.generation = int(sync.generation)
        self.batch: Batch | None = None
        self.lock = threading.Lock()

    def normalisation(self):
        return normalisation(self.obs, self.obs_norm)

    def checksum(self) -> int:
        return checksum(self.es.theta, *self.normalisation())

    def advance(self, update: Update) -> bool:
        """Apply ``update`` (once, whichever task of the generation comes first); False when
        this replica cannot reach the update's state (it missed a generation, or would not
        match the driver's checksum)."""
        if self.generation == update.generation:
            return True
        if self.generation != update.generation - 1:
            return False
        if update.step is not None:
            _, self.batch = self.es.tell(update.step)
        for iw in update.iw:
            if self.batch is None:
                return False
            self.es.tell_iw(self.batch, iw, self.es.iw_gradient(self.batch, iw))
        if update.obs is not None:
            self.obs.add(*update.obs)
        self.generation = update.generation
        return self.checksum() == update.checksum


_REPLICAS: OrderedDict[str, Replica] = OrderedDict()
_LOCK = threading.Lock()


def replica_for(noise: NoiseConfig, token: str, update: Update, sync: Sync | None,
                obs_norm: bool) -> Replica | None:
    """This process's replica of run ``token`` at ``update.generation`` (installed from
    ``sync`` when given), or None when it is stale (the driver then sends a :class:`Sync`)."""
    with _LOCK:
        replica = _REPLICAS.get(token)
        if sync is not None and (replica is None or replica.generation != sync.generation
                                 or replica.checksum() != sync.checksum):
            replica = _REPLICAS[token] = Replica(noise, sync, obs_norm)
        if replica is None:
            return None
        _REPLICAS.move_to_end(token)
        while len(_REPLICAS) > MAX_REPLICAS:
            _REPLICAS.popitem(last=False)
    with replica.lock:
        if not replica.advance(update):
            with _LOCK:
                _REPLICAS.pop(token, None)
            return None
    return replica


def drop_replicas(token: str) -> int:
    """Forget run ``token``'s replica in this process (a run's ``close``); 1 if there was one."""
    with _LOCK:
        return int(_REPLICAS.pop(token, None) is not None)

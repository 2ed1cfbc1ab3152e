"""When a buffer may be sampled (rate limiter), which items leave it (eviction), and which
deliveries it has already seen (per-actor keys).

Eviction follows Ape-X (Horgan et al. 2018, "Distributed Prioritized Experience Replay"): the
buffer has a *soft* capacity and the excess is removed periodically, either oldest first (their
Atari setting, every 100 learner steps) or sampled without replacement with probability
proportional to ``p_i^-0.4`` (their DPG setting), so low-priority items leave first. The rate
limiter mirrors Reverb's: a minimum size before the first sample and an optional
samples-per-insert ratio.
"""

from __future__ import annotations

import numpy as np


class ReplayNotReady(ValueError):
    """Sampling now would break the rate limiter (too few items, or too many samples per
    insert). Learners wait and retry; nothing changed in the buffer."""


def _number(name: str, value, low: float, *, integer: bool = False, open_low: bool = False):
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok:
        ok = np.isfinite(value) and (value > low if open_low else value >= low)
        if integer:
            ok = ok and float(value).is_integer()
    if not ok:
        what = "an integer" if integer else "a finite number"
        raise ValueError(f"{name} must be {what} {'>' if open_low else '>='} {low:g}, "
                         f"got {value!r}")
    return int(value) if integer else float(value)


class RateLimiter:
    """Gate on sampling: a minimum size, and optionally at most ``samples_per_insert``
    sampled items per inserted item.

    Parameters
    ----------
    min_size : int
        Items the buffer must hold before any sample.
    samples_per_insert : float, optional
        With it, a sample of ``n`` items is allowed only while
        ``sampled + n <= samples_per_insert * inserted + error_buffer - samples_per_insert *
        min_size`` (Reverb's ``SampleToInsertRatio``): the learner cannot run ahead of the
        actors. Inserts running ahead of samples by more than
        ``min_size + error_buffer / samples_per_insert`` items are *reported*
        (:meth:`insert_blocked`), never refused: the actors back off themselves.
    error_buffer : float, optional
        Slack of the ratio, in sampled items (default ``samples_per_insert * min_size``, so
        sampling may start as soon as ``min_size`` items are in).
    """

    def __init__(self, min_size: int = 1, samples_per_insert: float | None = None,
                 error_buffer: float | None = None):
        self.min_size = _number("min_size", min_size, 1, integer=True)
        self.samples_per_insert = None if samples_per_insert is None else _number(
            "samples_per_insert", samples_per_insert, 0.0, open_low=True)
        if error_buffer is not None and self.samples_per_insert is None:
            raise ValueError("error_buffer needs samples_per_insert")
        if self.samples_per_insert is not None:
            default = self.samples_per_insert * self.min_size
            self.error_buffer = default if error_buffer is None else _number(
                "error_buffer", error_buffer, 0.0)
        else:
            self.error_buffer = None

    def blocked(self, n: int, size: int, inserted: int, sampled: int) -> str | None:
        """Why a sample of ``n`` cannot be taken now, or None when it can."""
        if size < self.min_size:
            return f"the buffer holds {size} items, sampling needs at least {self.min_size}"
        if self.samples_per_insert is not None:
            spi = self.samples_per_insert
            allowed = spi * inserted + self.error_buffer - spi * self.min_size
            if sampled + n > allowed:
                return (f"samples per insert limit {spi:g}: {sampled} items sampled, "
                        f"{inserted} inserted; {n} more would exceed {allowed:,.0f}")
        return None

    def insert_blocked(self, n: int, inserted: int, sampled: int) -> str | None:
        """Why inserting ``n`` more items would run too far ahead of sampling, or None.

        Reverb blocks such inserts; a replay served to many actors must not block its one
        thread, so esnb only reports it (:meth:`ReplayBuffer.insert_ready`) and the actors
        back off themselves.
        """
        if self.samples_per_insert is None:
            return None
        spi = self.samples_per_insert
        ahead = spi * (inserted + n) - sampled
        limit = spi * self.min_size + self.error_buffer
        if ahead > limit:
            return (f"samples per insert limit {spi:g}: {inserted} inserted, {sampled} "
                    f"sampled; {n} more would put inserts {ahead / spi:,.0f} items ahead "
                    f"(limit {limit / spi:,.0f})")
        return None

    def config(self) -> dict:
        return {"min_size": self.min_size, "samples_per_insert": self.samples_per_insert,
                "error_buffer": self.error_buffer}


class FifoEviction:
    """Remove the oldest items beyond the soft capacity (Ape-X DQN)."""

    kind = "fifo"

    def config(self) -> dict:
        return {"eviction": self.kind}


class PriorityEviction:
    """Remove the excess sampled without replacement, ``P(i) ∝ p_i^exponent`` (Ape-X DPG:
    ``exponent = -0.4``, so low-priority items are the likeliest to go).

    Sampling without replacement uses the Gumbel top-k trick (keys ``exponent * log p_i +
    Gumbel noise``, keep the ``k`` largest), which equals successive weighted draws and costs
    one O(N) pass: this runs every ~100 learner steps, not per sample.
    """

    kind = "priority"

    def __init__(self, exponent: float = -0.4):
        self.exponent = _number("eviction exponent", exponent, -np.inf)

    def choose(self, priorities: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        """Positions (into ``priorities``) of ``k`` items to evict."""
        keys = self.exponent * np.log(priorities) + rng.gumbel(size=priorities.shape)
        if k >= len(keys):
            return np.arange(len(keys))
        return np.argpartition(-keys, k)[:k]

    def config(self) -> dict:
        return {"eviction": self.kind, "eviction_exponent": self.exponent}


class KeyFilter:
    """Per-actor high-water marks of delivered sequence numbers.

    Every item may carry a key ``(actor, seq)``. An item whose ``seq`` is at or below its
    actor's mark was delivered before (a retried call or task) and is dropped, whether or not
    its first copy is still stored. Hence each actor must number its items increasingly in the
    order it delivers them.
    """

    def __init__(self):
        self.marks: dict[int, int] = {}

    @staticmethod
    def check(keys, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(actor, seq)`` as int64 arrays of length ``n`` (actor may be one int), or a
        ValueError."""
        if not isinstance(keys, (tuple, list)) or len(keys) != 2:
            raise ValueError("keys must be a pair (actor, seq): actor an int or n ints, seq n "
                             f"ints; got {type(keys).__name__}")
        out = []
        for name, value in zip(("actor", "seq"), keys, strict=True):
            a = np.asarray(value)
            if a.dtype.kind not in "iu" or (a.size and a.min() < 0):
                raise ValueError(f"key {name} must be non-negative integers, got {a.dtype} "
                                 f"{a.ravel()[:3].tolist()}...")
            if a.ndim == 0 and name == "actor":
                a = np.full(n, int(a))
            if a.shape != (n,):
                raise ValueError(f"key {name} must have one value per item ({n}), got shape "
                                 f"{a.shape}")
            out.append(a.astype(np.int64, copy=False))
        return out[0], out[1]

    def new(self, actor: np.ndarray, seq: np.ndarray) -> tuple[np.ndarray, dict[int, int]]:
        """Mask of items not delivered before (first copy of each key), and the marks to
        commit once they are stored."""
        keep = np.zeros(len(seq), dtype=bool)
        marks = {}
        for a in np.unique(actor):
            where = np.flatnonzero(actor == a)
            s = seq[where]
            mark = self.marks.get(int(a), -1)
            _, first = np.unique(s, return_index=True)
            fresh = first[s[first] > mark]
            keep[where[fresh]] = True
            if len(s):
                marks[int(a)] = max(mark, int(s.max()))
        return keep, marks

    def commit(self, marks: dict[int, int]) -> None:
        self.marks.update(marks)

    def high_water(self, actor: int) -> int:
        """The highest sequence number delivered by ``actor`` (-1: none yet)."""
        return self.marks.get(int(actor), -1)

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        actors = np.array(sorted(self.marks), dtype=np.int64)
        return actors, np.array([self.marks[a] for a in actors.tolist()], dtype=np.int64)

    def load(self, actors: np.ndarray, seqs: np.ndarray) -> None:
        self.marks = {int(a): int(s) for a, s in zip(actors, seqs, strict=True)}

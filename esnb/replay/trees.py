"""Vectorised segment trees over priorities: a sum-tree (sampling) and a min-tree (IS weights).

Schaul et al. 2016, "Prioritized Experience Replay", appendix B.2.1: a binary tree whose
leaves hold the priorities and whose inner nodes hold the sum (or minimum) of their children;
sampling an item proportionally to its priority is a descent from the root.

Both trees work on whole batches with numpy: an update writes the leaves and recomputes the
parents level by level (a few array operations per level), and a sample descends all its
values at once. There is no per-item Python loop, which measured 11-17x slower at capacity
2^20 and batch 512.

With numpy the cost is the number of array operations (each a few microseconds on 512
items), so: levels with few nodes are recomputed whole and contiguously; a descent jumps to
the level of 4096 nodes with one ``cumsum`` + ``searchsorted``; scattered reads and writes use
``take``/``put`` (``put`` measured ~10x faster than fancy assignment for 512 float64s); and a
prioritised buffer updates its sum- and min-tree in one pass (:func:`update_together`). A
16-ary layout (fewer levels, wider operations) measured ~1.4x slower per cycle and was
dropped.

Layout: an array of ``2 * size`` values, ``size`` the capacity rounded up to a power of two;
node ``k`` has children ``2k`` and ``2k + 1``; leaf ``i`` is node ``size + i``. Only the levels
from ``top`` (at most 4096 nodes) down are kept up to date; the root's value is computed from
level ``top`` when asked.
"""

from __future__ import annotations

import numpy as np

#: the level a descent jumps to holds at most this many nodes
_TOP_LEVEL = 12


def _as_index(indices, capacity: int) -> np.ndarray:
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise ValueError(f"tree indices must be integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64, copy=False).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= capacity):
        raise ValueError(
            f"tree indices must be in [0, {capacity}), got values in [{idx.min()}, {idx.max()}]"
        )
    return idx


class _SegmentTree:
    """Shared layout and batch update; subclasses choose the reduction."""

    _fill: float = 0.0
    branching = 2

    def __init__(self, capacity: int):
        if isinstance(capacity, bool) or int(capacity) != capacity or capacity < 1:
            raise ValueError(f"tree capacity must be an integer >= 1, got {capacity!r}")
        self.capacity = int(capacity)
        size = 1
        while size < self.capacity:
            size *= 2
        self.size = size
        self.depth = size.bit_length() - 1  # levels below the root
        # Nodes above level ``top`` (at most 4096 nodes) are never stored: the root's value
        # is one reduction of that level when asked, which saved ~2 x 12 tiny array
        # operations per update (the upper levels cost per call, not per element).
        self.top = min(self.depth, _TOP_LEVEL)
        self.tree = np.full(2 * size, self._fill, dtype=np.float64)

    def _reduce(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def levels(self) -> list[np.ndarray]:
        """Views of the stored node values level by level, from level ``top`` (at most 4096
        nodes; the root is their reduction) down to the (padded) leaves."""
        return [self.tree[1 << k:2 << k] for k in range(self.top, self.depth + 1)]

    @property
    def top_level(self) -> np.ndarray:
        return self.tree[1 << self.top:2 << self.top]

    def update(self, indices, values) -> None:
        """Set leaves ``indices`` to ``values`` and refresh their ancestors.

        Duplicate indices take the last value given for them.
        """
        update_together([self], indices, [values])

    def __getitem__(self, indices) -> np.ndarray | float:
        if np.isscalar(indices):
            return float(self.tree[self.size + _as_index([indices], self.capacity)[0]])
        return self.tree.take(self.size + _as_index(indices, self.capacity))

    @property
    def leaves(self) -> np.ndarray:
        """A view of the ``capacity`` leaf values."""
        return self.tree[self.size:self.size + self.capacity]

    def clear(self) -> None:
        self.tree.fill(self._fill)

    def rebuild(self) -> None:
        """Recompute every inner node from the leaves (after writing ``leaves`` in bulk)."""
        tree = self.tree
        lo = self.size
        while lo > 1 << self.top:
            tree[lo >> 1:lo] = self._reduce(tree[lo:2 * lo:2], tree[lo + 1:2 * lo:2])
            lo >>= 1


def update_together(trees: list[_SegmentTree], indices, values: list) -> None:
    """Update the same leaves of several trees of one capacity in one pass over the levels.

    ``values`` holds one array (or scalar) per tree; duplicate indices take the last value.
    A parent listed twice is simply computed twice (same value), which is cheaper than
    deduplicating with ``np.unique`` (a sort) at every level.
    """
    first = trees[0]
    idx = _as_index(indices, first.capacity)
    if idx.size == 0:
        return
    vals = []
    for v in values:
        v = np.asarray(v, dtype=np.float64).ravel()
        if v.size != 1 and v.size != idx.size:
            raise ValueError(f"{idx.size} indices but {v.size} values")
        # broadcast_to costs ~8 us of Python per call: only for a scalar
        vals.append(v if v.size == idx.size else np.broadcast_to(v, idx.shape))
    nodes = idx + first.size
    for t, v in zip(trees, vals, strict=True):
        t.tree.put(nodes, v)
    level_nodes = first.size
    top_nodes = 1 << first.top
    n = len(nodes)
    # levels of at most ~8 nodes per update are recomputed whole: one contiguous pass
    contiguous = 8 * n
    # both children of every parent in one gather ([left..., right...]): one `take` per level
    # and tree instead of two (interleaved A/B runs on a busy machine: +0-14% cycles/s)
    children = np.empty(2 * n, dtype=np.int64)
    while level_nodes > top_nodes and level_nodes > contiguous:
        nodes = nodes >> 1
        np.left_shift(nodes, 1, out=children[:n])
        np.add(children[:n], 1, out=children[n:])
        for t in trees:
            arr = t.tree
            pair = arr.take(children)
            arr.put(nodes, t._reduce(pair[:n], pair[n:]))
        level_nodes >>= 1
    while level_nodes > top_nodes:
        lo = level_nodes
        for t in trees:
            arr = t.tree
            arr[lo >> 1:lo] = t._reduce(arr[lo:2 * lo:2], arr[lo + 1:2 * lo:2])
        level_nodes >>= 1


class SumTree(_SegmentTree):
    """Sum-tree: ``total`` in O(1), batch updates and batch proportional sampling.

    Parameters
    ----------
    capacity : int
        Number of leaves (rounded up internally to a power of two; extra leaves stay 0).

    Examples
    --------
    >>> t = SumTree(4)
    >>> t.update([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0])
    >>> t.total
    10.0
    >>> t.find([0.5, 1.0, 9.99]).tolist()
    [0, 1, 3]
    """

    _fill = 0.0

    def _reduce(self, left, right):
        return left + right

    @property
    def total(self) -> float:
        return float(self.top_level.sum())

    def find(self, values, return_leaves: bool = False):
        """Leaf index of each prefix-sum ``value`` in ``[0, total)`` (and, with
        ``return_leaves``, the leaf values found, saving the caller a gather).

        Leaf ``i`` owns the interval ``[sum(leaves[:i]), sum(leaves[:i+1]))``. Rounding can
        move a value sitting on a boundary to a neighbouring leaf; a value walked into an
        empty leaf by rounding is searched again with a descent that never enters an empty
        subtree.
        """
        v = np.asarray(values, dtype=np.float64).ravel().copy()
        tree = self.tree
        k = self.top
        lo = 1 << k
        level = tree[lo:2 * lo]
        cum = np.cumsum(level)
        pos = np.searchsorted(cum, v, side="right")
        if v.size and pos.max() >= lo:  # a value at or past the end, by rounding
            np.minimum(pos, np.flatnonzero(level > 0)[-1], out=pos)
        v -= cum.take(pos) - level.take(pos)
        node = pos + lo
        lsum = np.empty_like(v)
        right = np.empty(v.shape, dtype=bool)
        for _ in range(self.depth - k):
            node <<= 1
            tree.take(node, out=lsum)
            np.greater_equal(v, lsum, out=right)
            np.subtract(v, lsum, out=v, where=right)
            node += right
        found = tree.take(node)
        leaf = node - self.size
        empty = found <= 0
        if empty.any():
            leaf[empty] = self._find_safe(np.asarray(values, dtype=np.float64).ravel()[empty])
            found = tree.take(leaf + self.size)
        return (leaf, found) if return_leaves else leaf

    def _find_safe(self, v: np.ndarray) -> np.ndarray:
        """Descent that never enters a subtree whose sum is 0 (for rounding edge cases)."""
        v = v.copy()
        level = self.top_level
        cum = np.cumsum(level)
        positive = np.flatnonzero(level > 0)
        # the first non-empty node whose interval ends past v (else the last non-empty one)
        pos = np.searchsorted(cum[positive], v, side="right")
        pos = positive[np.minimum(pos, len(positive) - 1)]
        v = np.maximum(v - (cum[pos] - level[pos]), 0.0)
        node = pos + (1 << self.top)
        tree = self.tree
        for _ in range(self.depth - self.top):
            left = 2 * node
            lsum = tree.take(left)
            rsum = tree.take(left + 1)
            go_right = (rsum > 0) & ((v >= lsum) | (lsum <= 0))
            v -= np.where(go_right, lsum, 0.0)
            node = left + go_right
        return node - self.size

    def sample(self, n: int, rng: np.random.Generator, return_leaves: bool = False):
        """``n`` leaf indices drawn with replacement, P(i) = leaf_i / total (and their leaf
        values with ``return_leaves``).

        Stratified as in Schaul et al.: ``[0, total)`` is cut into ``n`` equal segments and one
        value drawn uniformly in each, which lowers the variance of a batch's composition
        (each draw keeps the marginal probability ``leaf_i / total``).
        """
        total = self.total
        if not total > 0:
            raise ValueError("cannot sample from a sum-tree whose total is 0")
        seg = total / n
        values = (np.arange(n) + rng.random(n)) * seg
        np.minimum(values, np.nextafter(total, 0.0), out=values)
        return self.find(values, return_leaves)


class MinTree(_SegmentTree):
    """Min-tree: the smallest leaf in O(1) (empty leaves hold +inf)."""

    _fill = np.inf

    def _reduce(self, left, right):
        return np.minimum(left, right)

    @property
    def min(self) -> float:
        return float(self.top_level.min())

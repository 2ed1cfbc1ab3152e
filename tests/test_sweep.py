"""``esnb.runners.sweep.map_runs``: whole runs as tasks of the executor, inline and on a real
LocalCluster; results in the order of the items, a failed run named."""

from __future__ import annotations

import pytest

from esnb.runners.executor import InlineExecutor
from esnb.runners.sweep import map_runs


def square(x: int) -> int:
    if x < 0:
        raise ValueError("negative")
    return x * x


@pytest.mark.parametrize("where", [False, InlineExecutor()], ids=["false", "executor"])
def test_inline_runs_one_after_another_in_order(where):
    seen = []
    out = map_runs(square, [3, 1, 2], where, progress=False, order=[2, 0, 1],
                   on_result=lambda k, r: seen.append((k, r)))
    assert out == [9, 1, 4]
    assert seen == [(2, 4), (0, 9), (1, 1)]  # inline: finished in submission order
    with pytest.raises(RuntimeError, match=r"run 1 \(-1\) failed: negative"):
        map_runs(square, [2, -1, 3], where, progress=False)
    with pytest.raises(RuntimeError, match="run minus one failed"):
        map_runs(square, [-1], where, progress=False, describe=lambda x: "minus one")


def test_cluster_runs_come_back_in_item_order(client):
    items = list(range(12))
    assert map_runs(square, items, client, progress=False,
                    order=items[::-1]) == [x * x for x in items]
    with pytest.raises(RuntimeError, match=r"run 3 \(-5\) failed"):
        map_runs(square, [1, 2, 3, -5, 4], client, progress=False)

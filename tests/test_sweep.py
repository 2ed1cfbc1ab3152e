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


def test_planned_runs_side_by_side_each_a_session_run_with_its_folder(tmp_path, client):
    """``esnb.session.sweep.run_plans``: each plan runs whole in one task, into its folder, as
    ``esnb train`` runs it; inline and on a cluster the runs end alike (ES is seeded)."""
    from esnb.session.options import RunOptions
    from esnb.session.plan import plan
    from esnb.session.sweep import run_plans

    def plans(where):
        return [plan("es", {"env": "CartPole-v1", "seed": seed, "population": 8,
                            "noise_size": 200_000},
                     RunOptions.of(out=str(tmp_path / where / f"seed{seed}"), final_eval=2,
                                   progress=False),
                     {"generations": 2}, check_cluster_now=False) for seed in (0, 1)]

    inline = run_plans(plans("inline"), False, progress=False)
    remote = run_plans(plans("cluster"), client, progress=False)
    for a, b in zip(inline, remote):
        assert a.code == b.code == 0 and len(a.records) == 2
        assert (a.folder / "summary.json").exists() and (b.folder / "checkpoint.npz").exists()
        assert [r["return_mean"] for r in a.records] == [r["return_mean"] for r in b.records]
        assert a.summary["final_eval_mean"] == b.summary["final_eval_mean"]
    with pytest.raises(ValueError, match="its own run folder"):
        run_plans(plans("again")[:1] * 2, False, progress=False)
    with pytest.raises(ValueError, match="inline/seed0 holds a run already"):
        plans("inline")  # a finished run's folder is not planned over

"""The fault soak (``esnb bench soak --faults``), shorter: Ape-X DQN, AES-RL and IMPALA on a
4-worker LocalCluster through killed workers, a killed replay, an added worker and a driver
stopped with SIGTERM and resumed; every lost transition is counted, as the soak's own count
(taken with the inserting workers frozen) says (issue 28)."""

from __future__ import annotations

import pytest

from esnb.bench.soak.faults import measure


@pytest.mark.slow
def test_every_fault_is_survived_and_every_lost_transition_counted(tmp_path):
    report = measure(workers=4, seed=3, between=1, folder=str(tmp_path), progress=lambda s: None,
                     quick=True)
    runs = report["runs"]
    assert set(runs) == {"apex", "aesrl", "impala"}
    for name, run in runs.items():
        kinds = sorted(f["kind"] for f in run["faults"])
        want = ["add_worker", "kill_worker", "sigterm"] + (["kill_replay"] if name != "impala"
                                                           else [])
        assert kinds == sorted(want), (name, kinds)
        assert all(run["checks"].values()), (name, run["checks"])
        assert run["inserted"] > 0 and run["peak_driver_mb"] > 50 and run["peak_workers_mb"] > 200
        assert all(f["seconds_to_recover"] is not None for f in run["faults"])
    for name in ("apex", "aesrl"):
        run = runs[name]
        assert run["lost"] == run["lost_expected"]
        kill = next(f for f in run["faults"] if f["kind"] == "kill_replay")["detail"]
        assert kill["counted"] == kill["lost"] == kill["inserted_at_kill"] - kill["restored"]
        stop = next(f for f in run["faults"] if f["kind"] == "sigterm")["detail"]
        assert stop["inserted_at_stop"] == stop["restored"] and stop["exit_code"] == 143

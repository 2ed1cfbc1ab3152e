"""``esnb bench impala-vs-rllib``: its rates (its flags and its missing peer:
tests/test_bench_peers.py)."""

from esnb.bench.peers.impala_vs_rllib import rates


def test_rates_are_agent_steps_over_the_timed_seconds():
    r = rates({"sampled": 1200, "trained": 640, "seconds": 4.0}, workers=2)
    assert (r["actor_fps"], r["actor_fps_per_worker"], r["learner_fps"]) == (300, 150, 160)


def test_esnb_side_runs_the_shared_workload_at_the_frame_size_asked(monkeypatch):
    """esnb's side of the side by side runs the workload both sides are given (the module's
    unroll length, batch, slots and environments; small here), not the laptop preset's own
    Atari values, at the frame size given."""
    from esnb.bench.peers import impala_vs_rllib as bench

    for name, value in (("UNROLL", 4), ("BATCH", 2), ("SLOTS", 1), ("ENVS", 2)):
        monkeypatch.setattr(bench, name, value)
    out = bench.esnb_rate("ALE/Pong-v5", workers=1, iterations=1, screen=42)
    assert (out["unroll"], out["batch"], out["envs"], out["side"]) == (4, 2, 2, 42)
    assert out["updates"] == 10 and out["trained"] == 10 * 4 * 2
    assert out["sampled"] > 0 and out["actor_fps"] > 0

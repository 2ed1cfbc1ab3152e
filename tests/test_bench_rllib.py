"""``esnb bench impala-vs-rllib``: its rates (its flags and its missing peer:
tests/test_bench_peers.py)."""

from esnb.bench.peers.impala_vs_rllib import rates


def test_rates_are_agent_steps_over_the_timed_seconds():
    r = rates({"sampled": 1200, "trained": 640, "seconds": 4.0}, workers=2)
    assert (r["actor_fps"], r["actor_fps_per_worker"], r["learner_fps"]) == (300, 150, 160)


def test_esnb_side_runs_the_shared_workload_at_the_frame_size_asked():
    """esnb's side of the side by side gives the workload both sides share (unrolls of 20 in
    batches of 32, 2 slots of 16 environments a worker), not the laptop preset's own Atari
    batches, at the frame size given."""
    from esnb.bench.peers.impala_vs_rllib import BATCH, ENVS, SLOTS, UNROLL, esnb_rate

    out = esnb_rate("ALE/Pong-v5", workers=1, iterations=1, screen=42)
    assert (out["unroll"], out["batch"], out["envs"]) == (UNROLL, BATCH, SLOTS * ENVS)
    assert out["updates"] == 10 and out["trained"] == 10 * UNROLL * BATCH
    assert out["sampled"] > 0 and out["actor_fps"] > 0

"""``esnb bench impala-vs-rllib``: its rates (its flags and its missing peer:
tests/test_bench_peers.py)."""

from esnb.bench.peers.impala_vs_rllib import rates


def test_rates_are_agent_steps_over_the_timed_seconds():
    r = rates({"sampled": 1200, "trained": 640, "seconds": 4.0}, workers=2)
    assert (r["actor_fps"], r["actor_fps_per_worker"], r["learner_fps"]) == (300, 150, 160)

"""``esnb bench es-vs-evotorch``: the network EvoTorch is given, and the esnb side of a round
(its flags and its missing peer: tests/test_bench_peers.py)."""

import pytest

from esnb.bench.peers.es_vs_evotorch import esnb_params, esnb_rate, network
from esnb.runners.es.config import ESConfig


def test_evotorch_gets_es_policy():
    """EvoTorch's network is ES's default MLP (17-64-64-6 on HalfCheetah: 5,702 parameters)."""
    es = ESConfig.build(env="HalfCheetah-v5")
    assert network(es) == ("Linear(obs_length, 64) >> Tanh() >> Linear(64, 64) >> Tanh() >> "
                           "Linear(64, act_length)")
    assert esnb_params(es) == 17 * 64 + 64 + 64 * 64 + 64 + 64 * 6 + 6 == 5702
    relu = ESConfig.build(env="HalfCheetah-v5", hidden=(8,), activation="relu")
    assert network(relu) == "Linear(obs_length, 8) >> ReLU() >> Linear(8, act_length)"


@pytest.mark.slow
def test_esnb_side_of_a_round_counts_whole_generations():
    """ES on a real LocalCluster in a fresh interpreter: HalfCheetah never terminates, so one
    timed generation of 4 episodes is 4,000 steps, at a positive rate."""
    out = esnb_rate("HalfCheetah-v5", workers=1, generations=1, population=4)
    assert out["steps"] == 4 * 1000
    assert out["seconds"] > 0 and out["per_core"] == out["steps"] / out["seconds"] > 0

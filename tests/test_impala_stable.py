"""IMPALA holds what it learned: the parameters a CartPole run ends with, judged on new seeds
(not the best evaluation on the way), as `esnb bench impala` reports them."""

import logging

import pytest

from esnb.bench.impala import FINAL_EPISODES, SOLVED, solve
from esnb.cluster import make_client


@pytest.mark.slow
def test_the_final_parameters_hold_475_on_new_seeds():
    client = make_client(2, dashboard_address=":0", set_as_default=False,
                         silence_logs=logging.ERROR)
    try:
        r = solve(client, "CartPole-v1", seed=0, time_limit=1e9, eval_interval=50,
                  learner_steps=2000, progress=lambda line: None)
    finally:
        client.close()
    assert r["learner_steps"] == 2000  # the whole budget: the learning rate reached 0
    assert r["solved"]
    assert r["confirm_eval_mean"] >= SOLVED, (r["confirm_eval_mean"], FINAL_EPISODES)

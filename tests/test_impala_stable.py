"""IMPALA holds what it learned: the parameters a CartPole run ends with, judged on new seeds
(not the best evaluation on the way), as `esnb bench impala` reports them.

The claim itself is BENCHMARKS.md's ("IMPALA after it solves": 5 of 5 seeds on a 2-worker
cluster held >= 475 with the learning rate decayed to 0, 4 of 5 at a constant rate). On a
cluster a run's course depends on timing (policy lag), so this test runs the same bench path
inline, where a seed gives the same run every time: seed 1 ends at 499 on 50 new seeds. Inline
the actors take turns with the learner and the picture is weaker (seeds 0 and 2 ended at 421
and 257, the latter never solving): the pin checks the path -- a learner-step budget, the
learning rate reaching 0 at its end, the final parameters judged on new seeds -- not the
statistics.
"""

import pytest

from esnb.bench.impala.learning import FINAL_EPISODES, SOLVED, solve


@pytest.mark.slow
def test_the_final_parameters_hold_475_on_new_seeds():
    r = solve(False, "CartPole-v1", seed=1, time_limit=1e9, eval_interval=1000,
              learner_steps=2000, progress=lambda line: None)
    assert r["learner_steps"] == 2000  # the whole budget: the learning rate reached 0
    assert r["confirm_eval_mean"] >= SOLVED, (r["confirm_eval_mean"], FINAL_EPISODES)

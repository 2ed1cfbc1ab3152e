"""ES and IW-ES give bitwise the numbers they gave before the orchestration was rebuilt.

The digests below were recorded on main before any runner code moved (commit 9f351fc): theta,
the observation sums and the returns of 4 generations for four configurations covering plain
OpenAI-ES, observation normalisation with early terminations, IW-ES with a fixed K, adaptive K
with relu, action noise and raw shaping. A refactoring that changes one bit fails here; the
inline-vs-cluster tests (test_es_reproducible.py) then carry the guarantee to any worker count.
"""

import hashlib

import numpy as np
import pytest

from esnb import ES

CASES = {
    "cartpole": (dict(env="CartPole-v1", population=10, sigma=0.1, lr=0.05, seed=1,
                      noise_size=200_000, eval_interval=2, eval_episodes=2),
                 "b6df3ebbdb41aaaad7ea780ab673fcb04d227f3c9036b30bb402ca41d847b4e0"),
    "hopper_obsnorm": (dict(env="Hopper-v5", population=8, sigma=0.05, lr=0.03, seed=3,
                            max_episode_steps=60, obs_stat_prob=0.5, eval_interval=1,
                            eval_episodes=2, noise_size=1_000_000),
                       "9036ef31dbf6de5a2ee7fe38ed64694a2f997ffb5dbb0646b65a9dda5972f14d"),
    "iw_k3": (dict(env="Pendulum-v1", population=8, sigma=0.1, lr=1e-4, seed=5, iw_k=3,
                   noise_size=500_000, max_episode_steps=50, eval_interval=0),
              "b218af94bc0c9945532430fc041fe6b1ae53ae58b32f2cafd79baf179349a90b"),
    "iw_auto_relu_noise": (dict(env="InvertedPendulum-v5", population=6, sigma=0.05, lr=1e-3,
                                seed=7, iw_k="auto", iw_k_max=4, hidden=(16,),
                                activation="relu", action_noise=0.01, shaping="raw",
                                noise_size=300_000, max_episode_steps=40, eval_interval=3),
                           "1798e2caeade79f7072b6444bcf017f2975d5b60b7fb0f36a95a953de89bead8"),
}
IW_UPDATES = {"iw_k3": [0, 3, 3, 3], "iw_auto_relu_noise": [0, 1, 2, 4]}


def digest(runner) -> str:
    h = hashlib.sha256()
    h.update(runner.theta.tobytes())
    h.update(np.asarray(runner.obs_stats.sum).tobytes())
    h.update(runner.history.return_mean.to_numpy().tobytes())
    h.update(runner.history.eval_return.to_numpy().tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("name", list(CASES))
def test_es_numbers_are_bitwise_those_recorded_before_the_rebuild(name):
    config, expected = CASES[name]
    runner = ES(**config, client=False)
    runner.step(4)
    if name in IW_UPDATES:  # the IW updates happened (a digest of plain ES would be no test)
        assert runner.history.iw_updates.tolist() == IW_UPDATES[name]
    assert digest(runner) == expected

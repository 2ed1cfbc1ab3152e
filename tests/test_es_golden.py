"""ES and IW-ES give bitwise the numbers recorded here: a change of the code that moves one bit
fails, and the inline-vs-cluster tests (test_es_reproducible.py) carry the guarantee to any
worker count.

Four configurations, 4 generations each: plain OpenAI-ES, observation normalisation with early
terminations, IW-ES with a fixed K, adaptive K with relu, action noise and raw shaping; the
digest covers theta, the observation sums and the returns.

Recorded on main before the orchestration was rebuilt (commit 9f351fc); the rebuild (issue 13)
reproduced them. Re-recorded once, when the optimiser moved from torch's Adam to esnb's numpy
Adam (issue 17: workers replicate the update without torch, and torch's kernels -- fused
multiply-adds, a vectorised sqrt one ulp off in ~0.7% of elements -- cannot be reproduced
elsewhere): the first generation's numbers are unchanged, later ones differ in the last bits
(returns agree to ~1e-8 relative), and the IW update counts are the same.

The bits depend on the numerical kernels as well as on the code: numpy, OpenBLAS and MuJoCo
choose theirs from the CPU (AVX-512 or AVX2) and change them between releases. The first
recording was made on a CPU with AVX-512; on an AVX2-only machine all four digests differed
(OpenBLAS's Haswell kernels against its Prescott ones moved them too, measured), so
tests/conftest.py pins every x86-64 machine to AVX2 kernels, and the digests below were
recorded again (2026-11-25) on those, with the packages of :data:`RECORDED_WITH`. A failure
with other versions than those may come from the packages: check against the previous
release before suspecting the code.
"""

import hashlib
import importlib.metadata
import os

import numpy as np
import pytest

from esnb import ES

CASES = {
    "cartpole": (dict(env="CartPole-v1", population=10, sigma=0.1, lr=0.05, seed=1,
                      noise_size=200_000, eval_interval=2, eval_episodes=2),
                 "72342194827cd9ee2733dea776bee2cb678aa9c5449eb4a50b8f0cf554aa1397"),
    "hopper_obsnorm": (dict(env="Hopper-v5", population=8, sigma=0.05, lr=0.03, seed=3,
                            max_episode_steps=60, obs_stat_prob=0.5, eval_interval=1,
                            eval_episodes=2, noise_size=1_000_000),
                       "17de22fb80f789764d973dbc837f51430631e6ab16511c8b91b92dfa277d61f4"),
    "iw_k3": (dict(env="Pendulum-v1", population=8, sigma=0.1, lr=1e-4, seed=5, iw_k=3,
                   noise_size=500_000, max_episode_steps=50, eval_interval=0),
              "512bb821b01eb11f6321c47b0faac7506d7d281525b50d76309d3e23dc9a95d0"),
    "iw_auto_relu_noise": (dict(env="InvertedPendulum-v5", population=6, sigma=0.05, lr=1e-3,
                                seed=7, iw_k="auto", iw_k_max=4, hidden=(16,),
                                activation="relu", action_noise=0.01, shaping="raw",
                                noise_size=300_000, max_episode_steps=40, eval_interval=3),
                           "e23dd135a04d11f59c9e3037c85ee92f8d7d085634d763bbc2db58bfc7db0293"),
}
IW_UPDATES = {"iw_k3": [0, 3, 3, 3], "iw_auto_relu_noise": [0, 1, 2, 4]}
#: the packages the digests were recorded with (AVX2 kernels, see the module's docstring)
RECORDED_WITH = {"numpy": "2.4.6", "mujoco": "4.0.0", "gymnasium": "1.4.0"}


def digest(runner) -> str:
    h = hashlib.sha256()
    h.update(runner.theta.tobytes())
    h.update(np.asarray(runner.obs_stats.sum).tobytes())
    h.update(runner.history.return_mean.to_numpy().tobytes())
    h.update(runner.history.eval_return.to_numpy().tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("name", list(CASES))
def test_es_numbers_are_bitwise_those_recorded(name):
    config, expected = CASES[name]
    runner = ES(**config, client=False)
    runner.step(4)
    if name in IW_UPDATES:  # the IW updates happened (a digest of plain ES would be no test)
        assert runner.history.iw_updates.tolist() == IW_UPDATES[name]
    installed = {name: importlib.metadata.version(name) for name in RECORDED_WITH}
    assert digest(runner) == expected, (
        f"recorded with {RECORDED_WITH}, running with {installed}; kernel pins: "
        f"{ {k: os.environ.get(k) for k in ('OPENBLAS_CORETYPE', 'NPY_DISABLE_CPU_FEATURES')} }")

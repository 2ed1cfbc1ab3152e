"""IMPALA on Atari frames, actor to learner: the batch the learner trains on holds exactly the
frames the actors saw, with the actions taken on them, and the learner's network gives the
actions the log-probabilities the actors sampled them with (before any learner step), so
V-trace's ratios start at 1. Checked on ALE/Pong-v5 with a network whose policy depends
strongly on the frames (its head scaled up): a frame shifted by one step, a transposed stack or
another scale would change the log-probabilities."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from esnb.envs import make_env
from esnb.rl.impala.learner import LossConfig, vtrace_inputs
from esnb.rl.impala.unrolls import UnrollQueue
from esnb.runners.impala import Impala
from esnb.runners.impala.tasks import drop_actors, impala_unrolls

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_learners_batch_is_the_actors_frames_and_log_probs():
    r = Impala("ALE/Pong-v5", client=False, seed=3, envs_per_actor=2, eval_interval=0)
    try:
        spec, learner = r.spec, r.learner
        # a policy that depends on the frames: the head's weights scaled up
        flat = learner.flat
        parts = spec.layout.split(flat)
        parts["policy"][:] *= 3000.0
        learner.model.load(spec.layout.join(**parts))
        payload = learner.actor_payload()
        cfg = dataclasses.replace(r.actor_config, run="frame-path")
        T = 30
        u = impala_unrolls(cfg, payload, slot=0, task=0, segments=2, unroll_length=T)
        # (1) the unrolls hold the frames the games showed: replay env 0's actions on a fresh
        # game reset with the seed the slot drew first
        seed = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            [cfg.seed, 0, 0]))).integers(2**31 - 1)
        env = make_env("ALE/Pong-v5", **r.config.env_kwargs)  # the frames the run makes
        obs, _ = env.reset(seed=int(seed))
        E = cfg.envs_per_actor
        for s in range(2):  # unroll u = s * E + e
            col = s * E
            if s == 0:
                np.testing.assert_array_equal(u["obs"][0, col], np.asarray(obs).ravel())
            for t in range(T):
                obs, *_ = env.step(int(u["actions"][t, col]))
                np.testing.assert_array_equal(u["obs"][t + 1, col], np.asarray(obs).ravel())
        env.close()
        # (2) the learner's batch is those unrolls, in order
        queue = UnrollQueue()
        queue.add(u)
        batch = queue.take(2 * E, T)
        np.testing.assert_array_equal(batch.obs, u["obs"])
        np.testing.assert_array_equal(batch.actions, u["actions"])
        assert batch.obs.dtype == np.uint8 and batch.obs.shape == (T + 1, 2 * E, 4 * 84 * 84)
        # (3) the learner's log pi of the taken actions is the actors' log mu, frame by frame
        x = vtrace_inputs(learner.model, batch, LossConfig.of(r.config))
        logp = x["logp"].detach().numpy()
        spread = float(np.ptp(logp))
        assert spread > 1.0, "the scaled head should make the policy frame-dependent"
        np.testing.assert_allclose(logp, batch.behaviour_log_probs, atol=2e-3)
        # a batch one step out of line would not match
        shifted = dataclasses.replace(batch, obs=np.concatenate([batch.obs[1:],
                                                                 batch.obs[-1:]]))
        off = vtrace_inputs(learner.model, shifted, LossConfig.of(r.config))["logp"]
        assert not np.allclose(off.detach().numpy(), batch.behaviour_log_probs, atol=0.05)
        with torch.no_grad():
            assert torch.isfinite(x["values"]).all()
    finally:
        drop_actors("frame-path")
        r.close()

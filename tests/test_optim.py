"""esnb's optimizers (esnb.rl.optim) are torch.optim's CPU updates bit for bit, keep its state
layout (so checkpoints move between them), refuse bad values in one line, and keep torch's
compiler out of a process that trains (the reason they exist: importing ``torch._dynamo`` costs
a fresh process as long again as ``import torch``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from esnb.rl.optim import Adam, RMSprop, load_optimizer_arrays, optimizer_arrays

CASES = [
    (Adam, torch.optim.Adam, dict(lr=1e-3)),
    (Adam, torch.optim.Adam, dict(lr=5e-4, eps=1e-5, betas=(0.8, 0.99))),
    (RMSprop, torch.optim.RMSprop, dict(lr=7e-4, alpha=0.99, eps=0.1)),
    (RMSprop, torch.optim.RMSprop, dict(lr=1e-3, alpha=0.95, eps=1e-5, centered=True)),
    (RMSprop, torch.optim.RMSprop, dict(lr=1e-3, alpha=0.9, eps=1e-6, momentum=0.5,
                                        centered=True)),
]


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)  # the reference and esnb's copy start from the same weights
    return torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 4 * 4, 3))


def _train(net, opt, steps: int, lrs=None):
    gen = torch.Generator().manual_seed(7)
    for t in range(steps):
        if lrs is not None:
            for group in opt.param_groups:
                group["lr"] = lrs[t]
        x = torch.randn(5, 2, 6, 6, generator=gen)
        loss = net(x).square().sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


@pytest.mark.parametrize("ours, theirs, kwargs", CASES)
def test_each_update_is_torchs_bit_for_bit_with_its_state_names(ours, theirs, kwargs):
    a, b = _net(0), _net(0)
    opt_a, opt_b = ours(a.parameters(), **kwargs), theirs(b.parameters(), **kwargs)
    lrs = [kwargs["lr"] * (1 + (t % 3)) for t in range(40)]  # a live lr, changed mid-run
    _train(a, opt_a, 40, lrs)
    _train(b, opt_b, 40, lrs)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
        sa, sb = opt_a.state[pa], opt_b.state[pb]
        assert set(sa) == set(sb)
        for name in sa:
            assert torch.equal(sa[name], sb[name]), name


@pytest.mark.parametrize("ours, theirs, kwargs", CASES[::2])
def test_a_checkpoint_of_torchs_state_resumes_in_esnbs_and_back(ours, theirs, kwargs):
    a, b = _net(1), _net(1)
    # a run saved with torch's optimizer, resumed with esnb's (and the other way), goes on as
    # torch's own would
    opt_b = theirs(b.parameters(), **kwargs)
    _train(b, opt_b, 10)
    opt_a = ours(a.parameters(), **kwargs)
    a.load_state_dict(b.state_dict())
    load_optimizer_arrays(opt_a, a, optimizer_arrays(opt_b, b, "opt."), "opt.")
    _train(a, opt_a, 10)
    opt_b2 = theirs(b.parameters(), **kwargs)
    load_optimizer_arrays(opt_b2, b, optimizer_arrays(opt_a, a, "opt."), "opt.")
    b.load_state_dict(a.state_dict())
    _train(b, opt_b2, 10)
    # torch's own run of the same three calls (each restarts the batches' generator)
    ref2 = _net(1)
    opt_ref2 = theirs(ref2.parameters(), **kwargs)
    for _ in range(3):
        _train(ref2, opt_ref2, 10)
    for pb, pr in zip(b.parameters(), ref2.parameters(), strict=True):
        assert torch.equal(pb, pr)


def test_bad_values_are_one_clear_line():
    p = [torch.nn.Parameter(torch.zeros(3))]
    with pytest.raises(ValueError, match="lr must be >= 0, got -1"):
        Adam(p, lr=-1)
    with pytest.raises(ValueError, match="betas must be in"):
        Adam(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="alpha must be in"):
        RMSprop(p, alpha=1.5)
    with pytest.raises(TypeError, match="non-empty iterable of tensors"):
        Adam([])


def test_training_each_learner_leaves_torchs_compiler_unimported():
    """A fresh process that builds and steps IMPALA's, Ape-X's (DQN and DPG) and TD3's
    learners never imports torch._dynamo (torch.optim would, on the first optimizer)."""
    code = textwrap.dedent("""
        import sys
        import numpy as np
        from esnb import ApeXDPGConfig, ApeXDQNConfig
        from esnb.rl.apex.nets import DPGSpec, QNetSpec
        from esnb.rl.td3 import CriticLearner, TD3Config, actor_spec, init_actor
        from esnb.runners.aesrl.config import AESRLConfig
        from esnb.runners.apex.learner import dpg_learner, dqn_learner
        from esnb.runners.impala import Impala

        for optimizer in ("adam", "rmsprop", "rmsprop_tf"):
            r = Impala("CartPole-v1", client=False, seed=0, batch_size=2, unroll_length=5,
                       envs_per_actor=2, eval_interval=0, updates_per_iteration=1,
                       optimizer=optimizer)
            r.start(learner_steps=2)
            r.wait()
            assert r.learner.version == 2
            r.close()
        rng = np.random.default_rng(0)
        b = {"obs": rng.standard_normal((32, 4)).astype(np.float32),
             "next_obs": rng.standard_normal((32, 4)).astype(np.float32),
             "reward": rng.standard_normal(32).astype(np.float32),
             "discount": np.full(32, 0.9, np.float32), "action": rng.integers(0, 2, 32)}
        for optimizer in ("adam", "rmsprop_centered"):
            cfg = ApeXDQNConfig.build(optimizer=optimizer)
            dqn_learner(cfg, QNetSpec(4, 2, (8,), dueling=True), 0).update(b, np.ones(32))
        b["action"] = rng.uniform(-1, 1, (32, 1)).astype(np.float32)
        spec = DPGSpec(4, 1, (-2.0,), (2.0,), (8, 8), (8, 8))
        dpg_learner(ApeXDPGConfig.build(), spec, 0).update(b, np.ones(32))
        spec = actor_spec(4, 1, (-2.0,), (2.0,), (8,))
        td3 = CriticLearner(spec, TD3Config.of(AESRLConfig.build(), critic_hidden=(8, 8)), seed=0)
        td3.set_target_policy(init_actor(spec, rng))
        td3.td3_step({"obs": b["obs"], "action": b["action"], "reward": b["reward"],
                      "next_obs": b["next_obs"], "done": np.zeros(32, np.float32)})
        td3.td3_step({"obs": b["obs"], "action": b["action"], "reward": b["reward"],
                      "next_obs": b["next_obs"], "done": np.zeros(32, np.float32)})
        print("DYNAMO", "torch._dynamo" in sys.modules)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "DYNAMO False" in p.stdout, p.stdout[-2000:]


def test_the_startup_bench_alternates_its_programs_and_reports_medians(monkeypatch):
    from esnb.bench import startup

    # the harness, on programs of known cost: "torch" does twice the arithmetic of "esnb"
    monkeypatch.setattr(startup, "PROGRAMS", {
        "torch": "sum(i * i for i in range(4_000_000))",
        "esnb": "sum(i * i for i in range(2_000_000))",
        "import torch": "pass"})
    seen = []
    r = startup.measure(repeats=2, progress=seen.append)
    assert [s.split(":")[0] for s in seen] == [
        "round 1/2, torch", "round 1/2, esnb", "round 1/2, import torch",
        "round 2/2, import torch", "round 2/2, esnb", "round 2/2, torch"]
    med = r["median"]
    assert med["torch"]["cpu_s"] > med["esnb"]["cpu_s"] > med["import torch"]["cpu_s"] > 0
    assert r["ratio"]["cpu_s"] > 1.2

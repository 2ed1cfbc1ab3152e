"""Learners on a device (issue 22, item 4): the ``device`` setting of every torch learner, its
refusals, tensors and optimiser state on the device, parameters published as CPU float32,
checkpoints that load on another device, and the critic actor placed on a worker labelled
``GPU``. This machine has no GPU: every run here is ``device="cpu"`` (or ``auto``, which is
the CPU here); the GPU label is a CPU worker's."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from esnb.device import device_problem, resolve_device
from esnb.record import CheckpointError, load_checkpoint, save_checkpoint
from esnb.runners.placement import learner_resources

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: every algorithm of the registry with a torch learner (all but ES)
TORCH_ALGORITHMS = ("aesrl", "apex", "apex-dpg", "cemrl", "eorl", "impala")


def _no_cuda_message(word: str) -> str:
    """What a refusal of ``word`` says on this machine (with CUDA: ``cuda:99`` is refused)."""
    if not torch.cuda.is_available():
        return (f"device {word!r} requested but torch {torch.__version__} sees no CUDA device "
                f"(torch.cuda.is_available() is False), got {word!r}")
    n = torch.cuda.device_count()
    return f"device {word!r} requested but torch {torch.__version__} sees {n} CUDA device"


#: refused on every machine: no CUDA at all, or not 100 devices
UNUSABLE = "cuda" if not torch.cuda.is_available() else "cuda:99"


def _configs():
    from esnb.runners.eorl.config import CBEConfig, EpisodeConfig, HERConfig, PERConfig
    from esnb.runners.registry import algorithms

    found = algorithms()
    assert set(found) - set(TORCH_ALGORITHMS) == {"es"}
    return [found[name].load_config() for name in TORCH_ALGORITHMS] + [
        EpisodeConfig, PERConfig, HERConfig, CBEConfig]  # EORL's baselines


# -- the setting -----------------------------------------------------------------------------
def test_resolution():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    for word in ("auto", "cpu"):
        assert device_problem(word) is None


def test_every_torch_learner_config_declares_device_once_and_es_has_none():
    from esnb import ESConfig
    from esnb.settings import RLSettings

    declared = RLSettings.declarations()["device"][0]
    for cls in _configs():
        meta, default = cls.declarations()["device"]
        assert default == "auto" and meta.check is declared.check, cls
        assert cls.build(device="cpu").device == "cpu"
    assert "device" not in ESConfig.names()


@pytest.mark.parametrize("word", ["gpu", "cuda:x", "CPU", "cuda:-1", ""])
def test_an_unknown_device_names_the_accepted_ones(word):
    expected = (f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N' (N a CUDA device index), "
                f"got {word!r}")
    for cls in _configs():
        with pytest.raises(ValueError) as err:
            cls.build(device=word)
        assert str(err.value) == expected


def test_cuda_without_cuda_is_refused_with_what_was_found():
    from esnb import ApeX, Impala

    expected = _no_cuda_message(UNUSABLE)
    for cls in _configs():
        with pytest.raises(ValueError) as err:
            cls.build(device=UNUSABLE)
        assert str(err.value).startswith(expected)
    for runner in (ApeX, Impala):  # the Python API: before anything is built
        with pytest.raises(ValueError, match="sees no CUDA device|CUDA devices?"):
            runner("CartPole-v1", device=UNUSABLE, client=False)
    with pytest.raises(ValueError, match="sees no CUDA device|CUDA devices?"):
        resolve_device(UNUSABLE)


@pytest.mark.parametrize("algo, word, expected", [
    ("apex", UNUSABLE, _no_cuda_message(UNUSABLE)),
    ("impala", "gpu", "device must be 'auto', 'cpu', 'cuda' or 'cuda:N'"),
    ("eorl", UNUSABLE, _no_cuda_message(UNUSABLE)),
])
def test_the_cli_refuses_a_device_in_one_line_before_any_cluster(algo, word, expected):
    env = "bitflip" if algo == "eorl" else "CartPole-v1"
    out = subprocess.run([sys.executable, "-m", "esnb.cli", "train", algo, "--env", env,
                          "--device", word], capture_output=True, text=True, timeout=300,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and out.stdout == "", out
    assert len(lines) == 1 and lines[0].startswith(f"esnb: error: {expected}"), lines


# -- learners: tensors on the device, CPU float32 out, state that loads on another device ----
def _dqn(device, seed=0):
    from esnb import ApeXDQNConfig
    from esnb.rl.apex.nets import QNetSpec
    from esnb.runners.apex.learner import dqn_learner

    net = QNetSpec(4, 2, (16, 16), dueling=True)
    return dqn_learner(ApeXDQNConfig.build(device=device), net, seed)


def _dpg(device, seed=0):
    from esnb import ApeXDPGConfig
    from esnb.rl.apex.nets import DPGSpec
    from esnb.runners.apex.learner import dpg_learner

    spec = DPGSpec(4, 1, (-2.0,), (2.0,), (16, 16), (16, 16))
    return dpg_learner(ApeXDPGConfig.build(device=device), spec, seed)


def _batch(rng, n=32, act_dim=None):
    b = {"obs": rng.normal(size=(n, 4)).astype(np.float32),
         "next_obs": rng.normal(size=(n, 4)).astype(np.float32),
         "reward": rng.normal(size=n).astype(np.float32),
         "discount": np.full(n, 0.97, np.float32)}
    b["action"] = (rng.integers(0, 2, n) if act_dim is None
                   else rng.uniform(-2, 2, (n, act_dim)).astype(np.float32))
    return b


def _on(device: torch.device, modules, optimizers) -> None:
    """Every parameter, buffer and optimiser state tensor is on ``device``."""
    tensors = [t for m in modules for t in (*m.parameters(), *m.buffers())]
    tensors += [v for opt in optimizers for st in opt.state.values() for v in st.values()
                if torch.is_tensor(v) and v.numel() > 1]
    assert tensors and {t.device for t in tensors} == {device}


def _float32(a) -> None:
    assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.flags.owndata


@pytest.mark.parametrize("make, act_dim", [(_dqn, None), (_dpg, 1)])
def test_apex_learners_on_the_device_publish_cpu_float32_and_resume_elsewhere(make, act_dim):
    rng = np.random.default_rng(0)
    a = make("cpu")
    assert a.device == torch.device("cpu")
    for _ in range(3):
        td, _ = a.update(_batch(rng, act_dim=act_dim), np.ones(32))
    assert td.dtype == np.float64
    nets = [a.online, a.target] if make is _dqn else [a.actor, a.critic, a.actor_target,
                                                       a.critic_target]
    opts = [a.opt] if make is _dqn else [a.actor_opt, a.critic_opt]
    _on(torch.device("cpu"), nets, opts)
    _float32(a.params())
    # saved on the CPU, loaded where "auto" resolves (CUDA on a GPU machine), same run on
    meta, arrays = a.state_dict()
    assert all(isinstance(v, np.ndarray) for v in arrays.values())
    b = make("auto", seed=9)
    b.load_state_dict(meta, arrays)
    assert b.device == resolve_device("auto")
    _on(resolve_device("auto"), [b.online] if make is _dqn else [b.actor, b.critic],
        [b.opt] if make is _dqn else [b.actor_opt, b.critic_opt])
    batch = _batch(rng, act_dim=act_dim)
    np.testing.assert_allclose(a.update(batch, np.ones(32))[0], b.update(batch, np.ones(32))[0],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.params(), b.params(), rtol=1e-5, atol=1e-6)


def test_td3_critic_on_the_device_publishes_cpu_float32_and_resumes_elsewhere():
    from esnb import AESRLConfig
    from esnb.rl.td3 import CriticLearner, TD3Config, actor_spec, init_actor

    spec = actor_spec(4, 1, [-1.0], [1.0], hidden=(16, 16))

    def learner(device, seed):
        cfg = TD3Config.of(AESRLConfig.build(device=device, actor_hidden=(16, 16),
                                             critic_hidden=(16, 16), batch_size=32))
        out = CriticLearner(spec, cfg, seed=seed)
        out.set_target_policy(init_actor(spec, np.random.default_rng(0)))
        return out

    rng = np.random.default_rng(1)

    def batches(k=4):
        return {"obs": rng.normal(size=(k, 32, 4)), "action": rng.uniform(-1, 1, (k, 32, 1)),
                "reward": rng.normal(size=(k, 32)), "next_obs": rng.normal(size=(k, 32, 4)),
                "done": np.zeros((k, 32))}

    a = learner("cpu", 0)
    a.train(batches())
    _on(torch.device("cpu"), [a.critic, a.target, a.target_actor], [a.opt])
    version, weights = a.publish()
    _float32(weights)
    state = a.state_dict()
    b = learner("auto", 7)
    b.load_state_dict(state)
    assert b.critic.pair.flat.device == resolve_device("auto")
    np.testing.assert_array_equal(b.critic.flat(), a.critic.flat())
    same = batches()
    np.testing.assert_allclose(a.train(same)["critic_loss"], b.train(same)["critic_loss"],
                               rtol=1e-5)


def test_impala_learner_on_the_device_publishes_cpu_float32_and_resumes_elsewhere():
    from esnb import ImpalaConfig
    from esnb.envs.make import env_spaces
    from esnb.rl.impala.actor_critic import ActorCriticSpec, init_actor_critic
    from esnb.rl.impala.learner import LossConfig
    from esnb.rl.impala.unrolls import UnrollQueue
    from esnb.runners.impala.runner import impala_learner

    obs_space, act_space, _ = env_spaces("CartPole-v1")
    cfg = ImpalaConfig.build()
    spec = ActorCriticSpec.for_spaces(obs_space, act_space, (16,), cfg.activation,
                                      cfg.init_log_std)
    flat = init_actor_critic(spec, np.random.default_rng(0))

    def learner(device):
        return impala_learner(ImpalaConfig.build(device=device, obs_norm=True), spec, flat)

    q = UnrollQueue()
    truncated = np.zeros((5, 4), bool)
    truncated[1, 1] = True
    for v in range(3):  # unrolls of T=5 steps from 4 environments, one truncation each
        rng = np.random.default_rng(v)
        q.add({"obs": rng.normal(size=(6, 4, 4)).astype(np.float32),
               "actions": rng.integers(0, 2, (5, 4)), "rewards": np.ones((5, 4), np.float32),
               "terminated": np.zeros((5, 4), bool),
               "truncated": truncated,
               "behaviour_log_probs": np.full((5, 4), -0.69, np.float32),
               "trunc_t": np.array([1]), "trunc_u": np.array([1]),
               "trunc_obs": np.ones((1, 4), np.float32), "finite": np.ones(4, bool),
               "version": v})
    loss = LossConfig.of(ImpalaConfig.build())
    a = learner("cpu")
    a.step(q.take(4, 5), loss, lr=1e-3)
    _on(torch.device("cpu"), [a.model], [a.opt])
    payload = a.actor_payload()
    _float32(payload["params"])
    assert payload["obs_mean"].dtype == np.float32
    meta, arrays = a.state_dict()
    assert all(isinstance(v, np.ndarray) for v in arrays.values())
    b = learner("auto")
    b.load_state_dict(meta, arrays)
    assert b.model.flat.device == resolve_device("auto")
    same = q.take(4, 5)
    a.step(same, loss, lr=1e-3)
    b.step(same, loss, lr=1e-3)
    np.testing.assert_allclose(a.flat, b.flat, rtol=1e-5, atol=1e-6)


def test_eorl_population_on_the_device_publishes_cpu_float32_and_resumes_elsewhere():
    from esnb import EORLConfig
    from esnb.runners.eorl.evolution import EORLLearner

    cfg = EORLConfig.build(device="cpu", n=3, episodes=6, seed=2)
    a = EORLLearner.of(cfg)
    for _ in range(3):
        a.run_episode(cfg.to_dict())  # the live controls, as the runner gives them
    assert {a.net.theta.device, a.net._m.device} == {torch.device("cpu")}
    _float32(a.net.flat(0))
    state = a.net.state_dict()
    b = EORLLearner.of(cfg.replace(device="auto"))
    b.net.load_state_dict(state)
    assert b.net.theta.device == resolve_device("auto")
    x = np.random.default_rng(0).normal(size=(5, a.net.obs_dim)).astype(np.float32)
    np.testing.assert_allclose(a.net.q_values(x), b.net.q_values(x), rtol=1e-6)


def test_a_runner_saved_on_one_device_resumes_on_another(tmp_path):
    """An Ape-X checkpoint written with device="cpu" loads with device="auto"; one written
    with a device this machine lacks is refused in one line saying how to resume, and resumes
    with device="cpu"."""
    from esnb import ApeX

    kw = dict(num_actors=2, seed=3, client=False, min_size=200, eval_interval=0,
              replay_checkpoint="", learner_chunk=8, iteration_seconds=0.01, capacity=2048)
    a = ApeX("CartPole-v1", device="cpu", **kw)
    a.step(4)
    assert a.learner_steps > 0
    path = tmp_path / "cpu.npz"
    a.save(path)
    b = ApeX.load(path, client=False, device="auto")
    assert b.config.device == "auto" and b.learner.device == resolve_device("auto")
    np.testing.assert_array_equal(b.params(), a.params())
    assert b.learner_steps == a.learner_steps
    b.step(1)
    assert b.learner_steps > a.learner_steps

    meta, arrays = load_checkpoint(path)
    meta["config"]["device"] = UNUSABLE  # as a GPU machine would have written it
    gpu = tmp_path / "gpu.npz"
    save_checkpoint(gpu, "ApeX", meta, arrays)
    with pytest.raises(CheckpointError) as err:
        ApeX.load(gpu, client=False)
    assert str(err.value).count("\n") == 0
    assert str(err.value).startswith(f"{gpu}: saved with {_no_cuda_message(UNUSABLE)[:40]}")
    assert str(err.value).endswith("load it with device='auto' or 'cpu' to resume here")
    with pytest.raises(CheckpointError, match="unknown setting 'devise'"):
        ApeX.load(gpu, client=False, devise="cpu")  # a misspelt override is refused
    c = ApeX.load(gpu, client=False, device="cpu")
    np.testing.assert_array_equal(c.params(), a.params())
    for r in (a, b, c):
        r.close()


# -- placement ---------------------------------------------------------------------------------
def test_learner_resources_ask_for_a_gpu_worker_only_when_the_device_wants_one():
    plain = {"tcp://a": {"resources": {}}, "tcp://b": {"resources": {"esnb-actor": 1}}}
    gpu = {**plain, "tcp://g": {"resources": {"GPU": 1}}}
    for device in ("cuda", "cuda:1", "auto"):
        assert learner_resources(gpu, device) == {"GPU": 1}
        assert learner_resources(plain, device) is None  # none declared: where it ran
        assert learner_resources(gpu, device, None) is None
    assert learner_resources(gpu, "cpu") is None
    assert learner_resources(plain, "cpu", {"GPU": 1}) == {"GPU": 1}  # asked for explicitly
    assert learner_resources({"inline": {"nthreads": 1, "resources": {}}}, "cuda") is None


def test_make_client_gpu_workers_bad_input():
    from esnb.cluster import make_client

    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="gpu_workers must be an integer >= 0"):
            make_client(1, gpu_workers=bad)
    with pytest.raises(ValueError, match="gpu_workers adds LocalCluster workers; this cluster "
                                         "is 'slurm': start its GPU workers with --resources "
                                         "GPU=1"):
        make_client(1, gpu_workers=1, cluster_type="slurm")


@pytest.mark.slow
def test_the_critic_lands_on_the_worker_labelled_gpu():
    """A LocalCluster with one plain and one GPU-labelled worker (a CPU worker with the
    label: there is no GPU here): the AES-RL critic, device="cpu", asked for the GPU resource,
    is created and trains there."""
    from esnb import AESRL
    from esnb.cluster import make_client

    client = make_client(1, gpu_workers=1, dashboard_address=":0", set_as_default=False,
                         silence_logs=logging.ERROR)
    try:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        labelled = [a for a, w in workers.items() if w["resources"].get("GPU") == 1]
        assert len(workers) == 2 and len(labelled) == 1
        runner = AESRL("InvertedPendulum-v5", seed=0, client=client, device="cpu",
                       critic_resources={"GPU": 1}, actor_hidden=(8,), critic_hidden=(16,),
                       rl_start_step=100, critic_chunk=50, eval_episodes=1,
                       max_episode_steps=50, batch_size=16, critic_exclusive=False)
        seen = []
        runner.add_observer(lambda row: seen.append(runner.critic.address))
        runner.start(env_steps=400).wait(timeout=600)
        assert seen and set(seen) == set(labelled)
        assert runner.counters["critic_updates"] > 0
        assert runner.critic_state["critic"].dtype == np.float32
        runner.close()
    finally:
        client.close()

"""``esnb play`` reproduces a run's final evaluation; ``esnb export`` writes the policy with
its normalisation and action head, and onnxruntime (and TorchScript) compute esnb's actions on
1,000 observations to 1e-5; bad input is one line."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort  # the test extra: a missing package fails here, not skipped
import pytest
import torch
from conftest import SMALL_NOISE

from esnb.cli import main
from esnb.nets.acting import ActingPolicy
from esnb.nets.export import write
from esnb.nets.policy import PolicySpec
from esnb.rl.td3.actor import NumpyTD3Actor
from esnb.runners.playback import load_run

ENV = "HalfCheetah-v5"


@pytest.fixture(scope="module")
def es_run(tmp_path_factory):
    """A short ES run on a 2-worker LocalCluster, final evaluation of 3 episodes."""
    out = tmp_path_factory.mktemp("runs") / "es"
    code = main(["train", "es", "--env", ENV, "--generations", "3", "--workers", "2",
                 "--population", "8", "--noise-size", str(SMALL_NOISE), "--max-episode-steps",
                 "100", "--no-progress", "--final-eval", "3", "--out", str(out)])
    assert code == 0
    return out


def test_play_reproduces_the_final_evaluation(es_run, capsys):
    summary = json.loads((es_run / "summary.json").read_text())
    capsys.readouterr()
    assert main(["play", str(es_run), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["algorithm"] == "ES" and doc["generation"] == 3 and doc["episodes"] == 3
    # the same seeds, in this process instead of on the cluster: the same returns
    assert doc["mean"] == summary["final_eval_mean"]
    assert doc["std"] == summary["final_eval_std"]
    assert len(set(doc["returns"])) == 3  # three episodes, three seeds
    # the checkpoint file names the run as well as its folder; the line says both figures
    assert main(["play", str(es_run / "checkpoint.npz")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("ES ") and line.count("±") == 2 and "final evaluation" in line


def observations(spec: PolicySpec, mean, std, n: int, rng) -> np.ndarray:
    """``n`` observations around the statistics, a share of them beyond the clip."""
    return (mean + 3.0 * std * rng.standard_normal((n, spec.obs_dim))).astype(np.float32)


def onnx_actions(path, obs: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["action"], {"obs": obs})[0]


def test_exported_run_matches_esnb_under_onnxruntime_and_torchscript(es_run, tmp_path):
    assert main(["export", str(es_run)]) == 0
    assert main(["export", str(es_run), "--format", "torchscript",
                 "--out", str(tmp_path / "p.pt")]) == 0
    policy = load_run(es_run).acting_policy()
    assert policy.obs_mean is not None  # ES normalises: the file must fold that in
    rng = np.random.default_rng(0)
    obs = observations(policy.spec, policy.obs_mean, policy.obs_std, 1000, rng)
    want = policy.actions(obs)
    np.testing.assert_allclose(onnx_actions(es_run / "policy.onnx", obs), want, atol=1e-5,
                               rtol=0)
    traced = torch.jit.load(str(tmp_path / "p.pt"))
    np.testing.assert_allclose(traced(torch.from_numpy(obs)).numpy(), want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("head", ["bounds", "tanh", "discrete"])
def test_large_parameters_every_head_match_to_1e5(tmp_path, head):
    """Parameters of a trained policy's size (not the small initial ones), clipped actions
    and normalised inputs in the clip: every head of esnb's rollouts, as ONNX."""
    rng = np.random.default_rng(1)
    discrete = head == "discrete"
    spec = PolicySpec(17, 6, (64, 64), discrete=discrete,
                      low=() if discrete else (-1.0,) * 6, high=() if discrete else (1.0,) * 6)
    flat = (0.3 * rng.standard_normal(spec.num_params)).astype(np.float32)
    mean, std = rng.standard_normal(17), np.exp(rng.standard_normal(17))
    policy = ActingPolicy(spec, flat, mean, std, head="tanh" if head == "tanh" else "bounds")
    obs = observations(spec, mean, std, 1000, rng)
    got = onnx_actions(write(policy, tmp_path / "p.onnx", "onnx"), obs)
    want = policy.actions(obs)
    if discrete:
        assert got.dtype == np.int64 and (got == want).all()
        assert len(np.unique(want)) > 1
        return
    if head == "bounds":
        assert (np.abs(want) == 1.0).any() and (np.abs(want) < 1.0).any()  # bounds matter
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    if head == "tanh":  # the head TD3's actors act with (AES-RL's and CEM-RL's mean)
        unnormalised = ActingPolicy(spec, flat, head="tanh")
        td3 = NumpyTD3Actor(spec, flat)
        np.testing.assert_array_equal(unnormalised.actions(obs),
                                      np.stack([td3.act(o) for o in obs]))


def test_cemrl_mean_exports_as_its_td3_actor(tmp_path):
    from esnb.runners.aesrl import CEMRL

    runner = CEMRL("InvertedPendulum-v5", seed=0, actor_hidden=(16, 16), client=False)
    path = tmp_path / "cemrl.npz"
    runner.save(path)
    assert main(["export", str(path), "--out", str(tmp_path / "c.onnx")]) == 0
    obs = np.random.default_rng(2).standard_normal((1000, 4)).astype(np.float32)
    td3 = NumpyTD3Actor(runner.spec, runner.mu)
    np.testing.assert_allclose(onnx_actions(tmp_path / "c.onnx", obs),
                               np.stack([td3.act(o) for o in obs]), atol=1e-5, rtol=0)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def bad_inputs(tmp_path) -> None:
    """What the table's rows name under ``tmp_path``."""
    from esnb.runners.eorl import EORL
    from esnb.runners.es import ES

    (tmp_path / "empty").mkdir()
    (tmp_path / "outdir").mkdir()
    (tmp_path / "f").write_text("a file, not a folder")
    (tmp_path / "damaged.npz").write_bytes(b"not a checkpoint")
    ES("CartPole-v1", population=4, noise_size=200_000, client=False).save(tmp_path / "es.npz")
    EORL("bitflip", {"n_bits": 4}, client=False).save(tmp_path / "eorl.npz")


@pytest.mark.parametrize("argv, message", [
    (["play", "{tmp}/empty"], "no checkpoint at {tmp}/empty"),
    (["export", "{tmp}/empty"], "no checkpoint at {tmp}/empty"),
    (["export", "{tmp}/empty", "--format", "tflite"], "--format: invalid choice: 'tflite'"),
    (["play", "{tmp}/empty", "--episodes", "0"], "--episodes: must be an integer >= 1, got '0'"),
    (["export", "{tmp}/eorl.npz"], "EORL has no policy esnb can export or render: it holds a "
                                   "population of Monte-Carlo Q-networks"),
    (["play", "{tmp}/damaged.npz"], "{tmp}/damaged.npz is damaged or not an esnb checkpoint"),
    # the file to write, checked before the checkpoint is loaded (issue 36)
    (["export", "{tmp}/es.npz", "--out", "{tmp}/outdir"],
     "--out {tmp}/outdir is a folder: give the file to write (e.g. {tmp}/outdir/policy.onnx)"),
    (["export", "{tmp}/es.npz", "--out", "{tmp}/f/p.onnx"],
     "--out {tmp}/f/p.onnx: {tmp}/f is a file, not a folder"),
])
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    bad_inputs(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own line
        code = exit_.code
    assert code == 2
    assert message.replace("{tmp}", str(tmp_path)) in one_error_line(capsys)
    assert not list(tmp_path.rglob("policy.*")) and not list(tmp_path.rglob("*.onnx"))


@pytest.mark.parametrize("env, settings", [("CartPole-v1", {}),
                                           ("Pendulum-v1", {"obs_norm": True})])
def test_impala_exports_the_policy_its_greedy_evaluations_act_with(tmp_path, env, settings):
    """IMPALA's export is its policy MLP: argmax of the logits, or the Gaussian mean clipped to
    the bounds, after the actors' observation normalisation -- NumpyActor.greedy's actions on
    1,000 observations, to 1e-5 under onnxruntime (and exactly, for discrete actions)."""
    from esnb.rl.impala.actor_critic import NumpyActor
    from esnb.runners.impala import Impala

    r = Impala(env, client=False, seed=0, hidden=(32, 32), envs_per_actor=4, batch_size=4,
               unroll_length=10, updates_per_iteration=5, eval_interval=0, **settings)
    try:
        r.step(2)
        policy = r.acting_policy()
        payload = r.learner.actor_payload()
        actor = NumpyActor(r.spec, payload["params"], payload["obs_mean"], payload["obs_std"])
    finally:
        r.close()
    rng = np.random.default_rng(2)
    obs = (3 * rng.standard_normal((1000, r.spec.obs_dim))).astype(np.float32)
    got = onnx_actions(write(policy, tmp_path / "impala.onnx", "onnx"), obs)
    want = actor.greedy(obs)
    if r.spec.discrete:
        assert (got == want).all()
    else:
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)

"""How IMPALA's network is drawn (the ``init_scheme`` setting): today's default, or OpenAI
baselines' A2C/PPO init (orthogonal weights, zero biases, gain sqrt 2, policy output 0.01, value
output 1), which a Pong probe tried (docs/results/probes/impala-pong-ortho)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

from esnb.nets.conv import ConvTorso
from esnb.nets.mlp import orthogonal
from esnb.rl.impala.actor_critic import ActorCriticSpec, init_actor_critic
from esnb.runners.impala import Impala

SQRT2 = np.sqrt(2.0)


def _pong_spec() -> ActorCriticSpec:
    frames = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    return ActorCriticSpec.for_spaces(frames, spaces.Discrete(6), (), "relu", 0.0,
                                      torso=ConvTorso("impala-shallow", (4, 84, 84), 1 / 255))


def _assert_orthogonal(w: np.ndarray, gain: float) -> None:
    m = w.reshape(w.shape[0], -1).astype(np.float64)
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    np.testing.assert_allclose(gram, gain**2 * np.eye(len(gram)), atol=1e-5 * max(gain**2, 1))


@pytest.mark.parametrize("shape", [(16, 4, 8, 8), (6, 256), (256, 2592), (300, 20), (1, 64)])
def test_orthogonal_rows_or_columns_at_the_gain(shape):
    w = orthogonal(shape, 1.7, np.random.default_rng(0))
    assert w.shape == shape and w.dtype == np.float32
    _assert_orthogonal(w, 1.7)
    np.testing.assert_array_equal(w, orthogonal(shape, 1.7, np.random.default_rng(0)))
    assert not np.array_equal(w, orthogonal(shape, 1.7, np.random.default_rng(1)))


def test_the_orthogonal_pong_network_has_a2cs_gains_and_zero_biases():
    spec = _pong_spec()
    flat = init_actor_critic(spec, np.random.default_rng(3), "orthogonal")
    assert flat.shape == (spec.num_params,) and flat.dtype == np.float32
    parts = spec.layout.split(flat)
    torso, offset = parts["torso"], 0
    for name, shape in spec.torso.tensors:
        n = int(np.prod(shape))
        t = torso[offset:offset + n].reshape(shape)
        offset += n
        if name.endswith(".b"):
            assert not t.any(), name
        else:
            _assert_orthogonal(t, SQRT2)
    for part, gain in (("fc", SQRT2), ("policy", 0.01), ("value", 1.0)):
        mlp = {"fc": spec.fc, "policy": spec.policy.mlp, "value": spec.value.mlp}[part]
        (w, shape, b), = mlp.slices()
        _assert_orthogonal(parts[part][w].reshape(shape), gain)
        assert not parts[part][b].any(), part
    # the default is what it was: the same draws as before the setting existed
    default = init_actor_critic(spec, np.random.default_rng(3))
    np.testing.assert_array_equal(default, init_actor_critic(spec, np.random.default_rng(3),
                                                             "default"))
    assert parts["torso"].size and not np.array_equal(default, flat)
    with pytest.raises(ValueError, match="init_scheme must be one of"):
        init_actor_critic(spec, np.random.default_rng(3), "xavier")
    with pytest.raises(ValueError, match="a torso's init scheme must be one of"):
        spec.torso.init(np.random.default_rng(3), "xavier")


def test_the_orthogonal_mlps_on_vectors_have_a2cs_gains():
    spec = ActorCriticSpec.for_spaces(spaces.Box(-1, 1, (4,), np.float32), spaces.Discrete(2),
                                      (64, 64), "tanh", -0.5)
    parts = spec.layout.split(init_actor_critic(spec, np.random.default_rng(5), "orthogonal"))
    for name, out_gain in (("policy", 0.01), ("value", 1.0)):
        mlp = {"policy": spec.policy.mlp, "value": spec.value.mlp}[name]
        layers = mlp.slices()
        assert len(layers) == 3
        for k, (w, shape, b) in enumerate(layers):
            _assert_orthogonal(parts[name][w].reshape(shape), out_gain if k == 2 else SQRT2)
            assert not parts[name][b].any()


def test_the_scheme_is_a_setting_of_the_run_and_kept_with_it(tmp_path):
    small = dict(client=False, seed=2, max_episode_steps=50, actors=1, envs_per_actor=2,
                 unroll_length=5, batch_size=2, updates_per_iteration=1, eval_interval=0)
    runs = {scheme: Impala("MinAtar/Breakout-v1", init_scheme=scheme, **small)
            for scheme in ("default", "orthogonal")}
    try:
        spec = runs["orthogonal"].spec
        first = {k: r.params.copy() for k, r in runs.items()}
        torso = spec.layout.split(first["orthogonal"])["torso"]
        shape = spec.torso.tensors[0][1]  # the first convolution's weight
        _assert_orthogonal(torso[:int(np.prod(shape))].reshape(shape), SQRT2)
        assert spec.layout.split(first["default"])["torso"].std() < torso.std()
        runs["orthogonal"].step(1)
        runs["orthogonal"].save(tmp_path / "ckpt.npz")
        assert runs["orthogonal"].config.init_scheme == "orthogonal"
    finally:
        for r in runs.values():
            r.close()
    back = Impala.load(tmp_path / "ckpt.npz", client=False)
    try:
        assert back.config.init_scheme == "orthogonal"
    finally:
        back.close()
    with pytest.raises(ValueError, match="init_scheme"):
        Impala("MinAtar/Breakout-v1", init_scheme="xavier", **small)


def test_a_kept_folder_from_before_a_setting_existed_is_its_default(tmp_path):
    """A kept seed saved before ``init_scheme`` existed (the entry's default-init seed 0, now a
    probe) ran what its default does now: not refused for lacking it where the entry gives the
    default, refused under the laptop preset that now gives ``orthogonal`` on ALE ids."""
    from esnb.bench.results import catalogue
    from esnb.bench.results.runs import check_kept_folder

    entry = catalogue.entry("impala-pong")
    saved = (Path(__file__).parents[1] / "docs" / "results" / "probes"
             / "impala-pong-default-seed0" / "summary.json")
    assert "init_scheme" not in json.loads(saved.read_text())["config"]
    (tmp_path / "summary.json").write_text(saved.read_text())
    default = dataclasses.replace(entry, settings={**entry.settings, "init_scheme": "default"})
    check_kept_folder(default, 0, tmp_path)
    with pytest.raises(ValueError, match=r"init_scheme 'default' \(now 'orthogonal'\)"):
        check_kept_folder(entry, 0, tmp_path)

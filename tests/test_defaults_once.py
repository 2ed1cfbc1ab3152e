"""Every default is written once: in one ``setting(...)`` of one settings dataclass.

The checks read the declarations themselves (no grep of the source): a setting shared by
several algorithms is inherited or derived, never declared again; a derived field never
restates its parent's default; the maths-level configs and the networks' specs have no
defaults of their own; the named presets and the results catalogue change only what differs
from the laptop defaults.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections import defaultdict

import pytest

from esnb.runners.registry import algorithms
from esnb.settings import EnvSettings, Settings, derive, setting


def settings_classes() -> list[type[Settings]]:
    """Every settings dataclass of every registered algorithm (and their bases)."""
    found: set[type] = set()
    for algo in algorithms().values():
        module = importlib.import_module(algo.config.partition(":")[0])
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Settings) and obj is not Settings:
                found.update(c for c in obj.__mro__
                             if issubclass(c, Settings) and c is not Settings)
    return sorted(found, key=lambda c: (c.__module__, c.__qualname__))


def own_declarations(cls: type) -> dict[str, dataclasses.Field]:
    """The fields ``cls`` itself declares (not inherited unchanged)."""
    mine = cls.__dict__.get("__annotations__", {})
    return {f.name: f for f in dataclasses.fields(cls) if f.name in mine}


def test_the_registry_sees_every_algorithms_settings():
    names = {c.__name__ for c in settings_classes()}
    assert {"EnvSettings", "ESConfig", "AESRLConfig", "CEMRLConfig", "ApeXDQNConfig",
            "ApeXDPGConfig", "ImpalaConfig", "EORLConfig"} <= names


def test_no_setting_is_declared_twice_with_the_same_meaning():
    """Two ``setting(...)`` calls with one name and one help are one setting written twice:
    it belongs in a shared base (as env, seed, max_episode_steps and env_kwargs in
    :class:`EnvSettings`) or is re-declared with ``derive``."""
    declared = defaultdict(list)
    for cls in settings_classes():
        for name, f in own_declarations(cls).items():
            if "esnb" in f.metadata and "parent" not in f.metadata:
                declared[(name, f.metadata["esnb"].help)].append(cls.__qualname__)
    twice = {key: where for key, where in declared.items() if len(where) > 1}
    assert not twice, twice


def test_the_environment_settings_come_from_one_base():
    for cls in settings_classes():
        if issubclass(cls, EnvSettings) and cls is not EnvSettings:
            for name in ("seed", "max_episode_steps", "env_kwargs"):
                f = own_declarations(cls).get(name)
                assert f is None or "parent" in f.metadata, (cls.__qualname__, name)


def test_derived_fields_change_something_and_never_restate_the_default():
    for cls in settings_classes():
        for name, f in own_declarations(cls).items():
            parent = f.metadata.get("parent")
            if parent is None or not issubclass(cls, parent):
                continue  # no parent, or a declaration shared across families (seed, gamma)
            inherited = {g.name: g for g in dataclasses.fields(parent)}[name]
            assert (f.default != inherited.default
                    or f.metadata["esnb"] != inherited.metadata["esnb"]), (cls, name)


def test_derive_refuses_a_restated_default():
    @dataclasses.dataclass(frozen=True)
    class Base(Settings):
        size: int = setting(8, low=1, help="a size")

    with pytest.raises(ValueError, match="already defaults to 8"):
        derive(Base, "size", 8)
    assert derive(Base, "size", paper=16).default == 8


@pytest.mark.parametrize("path", ["esnb.rl.td3:TD3Config", "esnb.rl.impala:LossConfig"])
def test_maths_configs_take_their_values_from_the_settings(path):
    module, _, name = path.partition(":")
    cls = getattr(importlib.import_module(module), name)
    with_default = [f.name for f in dataclasses.fields(cls)
                    if f.default is not dataclasses.MISSING
                    or f.default_factory is not dataclasses.MISSING]
    assert not with_default, with_default


@pytest.mark.parametrize("path, free", [
    ("esnb.rl.apex.nets:QNetSpec", {"activation", "torso"}),
    ("esnb.rl.apex.nets:DPGSpec", set()),
    ("esnb.rl.apex.nstep:apex_schedule", set()),
    ("esnb.rl.impala.actor_critic:ActorCriticSpec", {"torso"}),
    ("esnb.rl.impala.actor_critic:ActorCriticSpec.for_spaces", {"torso"}),
    ("esnb.rl.td3.actor:actor_spec", set()),
    ("esnb.rl.td3.nets:TwinCritic", {"generator", "flat"}),
])
def test_rl_specs_take_the_runs_settings(path, free):
    """The networks' specs of rl/ (sizes, dueling heads, initial log-std, exploration) take
    every value a run's settings hold from the caller: no default of their own. ``free``: the
    arguments that are no setting (QNetSpec's ReLU, a conv torso made from the ``torso``
    setting by :func:`~esnb.nets.conv.choose_torso`, a generator, given weights)."""
    module, _, name = path.partition(":")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    defaults = {p.name for p in inspect.signature(obj).parameters.values()
                if p.default is not inspect.Parameter.empty}
    assert defaults <= free, defaults - free


def test_td3_and_loss_configs_are_the_runs_settings():
    from esnb.rl.impala import LossConfig
    from esnb.rl.td3 import TD3Config
    from esnb.runners.aesrl.config import AESRLConfig
    from esnb.runners.impala.config import ImpalaConfig

    aes = AESRLConfig.build("paper", critic_lr=3e-4)
    td3 = TD3Config.of(aes)
    assert (td3.actor_hidden, td3.critic_lr, td3.tau) == (aes.actor_hidden, 3e-4, aes.tau)
    imp = ImpalaConfig.build(entropy_cost=0.02, vtrace_lambda=0.9)
    loss = LossConfig.of(imp)
    assert (loss.entropy_cost, loss.vtrace_lambda) == (0.02, 0.9)


def test_named_presets_change_only_what_differs():
    for cls in settings_classes():
        laptop = cls.preset_values("laptop")
        for preset, changes in cls.presets.items():
            same = {k: v for k, v in changes.items() if laptop[k] == v}
            assert not same, (cls.__qualname__, preset, same)
            built = cls.build(preset)
            assert all(getattr(built, k) == v for k, v in changes.items())


def test_the_results_catalogue_sets_only_what_differs_from_its_preset():
    """An entry of the results page names the settings it changes, and only those: a value
    equal to its preset's would restate a default (an EORL table cell's ``settings`` are the
    cell's environment, not a runner's settings)."""
    from esnb.bench.results.catalogue import ENTRIES

    registry = algorithms()
    for e in ENTRIES:
        if e.algorithm == "eorl-table":
            continue
        preset = registry[e.algorithm].load_config().preset_values(e.preset)
        same = {k: v for k, v in e.settings.items() if preset[k] == v}
        assert not same, (e.key, same)


def test_the_demo_is_a_preset_of_es():
    from esnb.runners.es.config import ESConfig

    demo = ESConfig.build("demo")
    assert demo.env == "HalfCheetah-v5" and demo.sigma == ESConfig.build().sigma
    with pytest.raises(ValueError, match="'laptop', 'paper', 'demo'"):
        ESConfig.build("demos")

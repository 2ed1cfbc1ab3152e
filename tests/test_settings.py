"""One declaration per setting: validation, presets, controls, CLI flags and docs derived from
a config dataclass (esnb.settings), checked on a small config and on ES's."""

import argparse
from dataclasses import dataclass

import pytest

from esnb.runners.es.config import PAPER_NOISE_SIZE, ESConfig
from esnb.settings import (
    Settings,
    add_arguments,
    derive,
    given,
    markdown_table,
    preset_table,
    setting,
)


@dataclass(frozen=True)
class Toy(Settings):
    algorithm = "Toy"

    env: str = setting("CartPole-v1", control=True, help="environment id")
    sigma: float = setting(0.02, low=0.0, low_open=True, high=10.0, live=True, log=True,
                           help="noise std", paper=0.05, why="shorter runs")
    hidden: tuple = setting((64, 64), low=1, help="layer sizes")
    cap: int | None = setting(None, kind="int", low=1, help="episode cap")
    mode: str = setting("a", choices=("a", "b"), live=True, help="a mode")
    extra: dict = setting({}, help="extra arguments")
    k: int = setting(0, low=0, high=9, special=("auto",), help="updates")

    @classmethod
    def prepare(cls, values):
        if values.get("k") == "auto":
            values = {**values, "k": 9}
        return values

    def check(self):
        if self.mode == "b" and self.cap is None:
            raise ValueError("mode 'b' needs cap")


@dataclass(frozen=True)
class Toy2(Toy):
    algorithm = "Toy2"
    sigma: float = derive(Toy, "sigma", 0.5)


def test_defaults_and_presets():
    assert Toy.build().sigma == 0.02
    assert Toy.build(preset="paper").sigma == 0.05
    assert Toy.build(preset="paper", sigma=0.1).sigma == 0.1  # an override beats the preset
    assert Toy2.build().sigma == 0.5 and Toy2.declarations()["sigma"][0].help == "noise std"
    with pytest.raises(ValueError, match="preset must be one of 'laptop', 'paper'"):
        Toy.build(preset="cluster")


@pytest.mark.parametrize("kw, message", [
    (dict(sigma=0), r"sigma must be a number in \(0, 10\], got 0"),
    (dict(sigma="x"), "sigma must be a number"),
    (dict(sigma=float("nan")), "sigma must be a number"),
    (dict(hidden="ab"), "hidden must be a sequence of integers >= 1, got 'ab'"),
    (dict(hidden=(64, 0)), "hidden must be a sequence of integers >= 1"),
    (dict(cap=0), r"cap must be an integer in \[1, inf\), or None"),
    (dict(mode="c"), "mode must be one of 'a', 'b'"),
    (dict(extra=[1]), "extra must be a mapping with string keys"),
    (dict(extra={"f": object()}), "extra must be a mapping"),
    (dict(k="many"), r"k must be an integer in \[0, 9\], or 'auto'"),
    (dict(mode="b"), "mode 'b' needs cap"),
    (dict(sigmaa=1), r"unknown setting 'sigmaa' \(did you mean 'sigma'\?\) for Toy"),
])
def test_bad_values_name_the_setting(kw, message):
    with pytest.raises(ValueError, match=message):
        Toy.build(**kw)


def test_values_are_coerced_and_special_words_prepared():
    t = Toy.build(hidden=[32], cap=5.0, k="auto", extra={"a": 1})
    assert t.hidden == (32,) and t.cap == 5 and isinstance(t.cap, int) and t.k == 9
    assert t.to_dict()["hidden"] == [32]
    assert Toy.from_dict(t.to_dict()) == t
    with pytest.raises(ValueError, match="unknown setting"):
        Toy.from_dict({**t.to_dict(), "old": 1})


def test_controls_come_from_live_and_shown_fields():
    c = Toy.build(sigma=0.03).controls()
    assert [x.name for x in c.schema] == ["env", "sigma", "mode"]
    assert c["sigma"] == 0.03 and c.schema[1].default == 0.02 and c.schema[1].log
    assert not c.schema[0].live and c.schema[1].live
    with pytest.raises(ValueError, match="env is fixed"):
        c.set(env="x")


def test_cli_flags_show_defaults_and_only_given_values_override():
    p = argparse.ArgumentParser()
    add_arguments(p, Toy)
    text = p.format_help()
    assert "noise std [default: 0.02; paper: 0.05; live]" in text
    assert "{a,b}" in text and "--hidden HIDDEN [HIDDEN ...]" in text
    args = p.parse_args(["--sigma", "0.5", "--hidden", "8", "8", "--cap", "none",
                         "--extra", '{"x": 2}', "--k", "auto"])
    assert given(args, Toy) == {"sigma": 0.5, "hidden": [8, 8], "cap": None,
                                "extra": {"x": 2}, "k": "auto"}
    assert given(p.parse_args([]), Toy) == {}  # nothing given: the preset decides
    with pytest.raises(SystemExit):
        p.parse_args(["--k", "1.5"])


def test_docs_tables():
    table = markdown_table(Toy)
    assert "| `sigma` | `0.02` | `0.05` | yes |" in table
    assert preset_table(Toy).count("\n") == 2 and "shorter runs" in preset_table(Toy)


def test_es_config_paper_preset_and_auto():
    paper = ESConfig.build(preset="paper")
    assert paper.noise_size == PAPER_NOISE_SIZE and paper.action_noise == 0.01
    auto = ESConfig.build(iw_k="auto", iw_k_max=4)
    assert auto.iw_k == 4 and auto.iw_adaptive


def test_every_algorithm_has_a_paper_preset_that_builds():
    """--preset paper for every algorithm: its config builds, takes every declared paper value,
    explains each difference, and yields the controls a runner would hold."""
    from esnb.runners.registry import algorithms

    configs = {algo.load_config() for algo in algorithms().values()}
    assert {c.algorithm for c in configs} >= {"ES", "AESRL", "CEMRL", "ApeX", "ApeX-DPG",
                                              "Impala", "EORL"}
    for config in configs:
        paper = config.build(preset="paper")
        laptop = config.build()
        differs = 0
        for name, (meta, default) in config.declarations().items():
            if meta.has_paper:
                want = tuple(meta.paper) if isinstance(meta.paper, list) else meta.paper
                assert getattr(paper, name) == want, (config.algorithm, name)
                if meta.paper != default:
                    differs += 1
                    assert meta.why, f"{config.algorithm}.{name}: say why laptop differs"
            else:
                assert getattr(paper, name) == getattr(laptop, name), (config.algorithm, name)
        paper.controls()
        assert differs or config.algorithm in ("EORL", "VAN", "PER", "HER", "CBE",
                                               "CEMRLRoundRobin"), config.algorithm

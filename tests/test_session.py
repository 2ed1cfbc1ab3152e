"""The run session (:mod:`esnb.session`): options declared once and their flags generated, a
plan checked before anything starts and kept as a file, and no import running back up."""

from __future__ import annotations

import subprocess
import sys

import pytest

from esnb.session.options import RunOptions
from esnb.session.plan import RunPlan, plan


def test_every_option_is_a_flag_of_esnb_train_and_checked_when_made():
    from esnb.cli import build_parser

    parser = build_parser()
    train = next(a for a in parser._actions if getattr(a, "choices", None)
                 and "train" in a.choices).choices["train"]
    es = next(a for a in train._actions if getattr(a, "choices", None)).choices["es"]
    flags = {s for a in es._actions for s in a.option_strings}
    for name in RunOptions.names():
        assert "--" + name.replace("_", "-") in flags, name
    with pytest.raises(ValueError, match=r"^workers must be an integer in \[0, inf\), got -1"):
        RunOptions.of(workers=-1)
    with pytest.raises(ValueError, match=r"unknown setting 'wokers' \(did you mean 'workers'"):
        RunOptions.of(wokers=2)
    assert RunOptions.of() == RunOptions()  # the defaults are the declarations'


def test_a_plan_is_checked_first_and_its_file_holds_it_whole(tmp_path):
    options = RunOptions.of(workers=0, out=str(tmp_path / "run"), keep_every=3)
    planned = plan("es", {"env": "CartPole-v1", "sigma": 0.05}, options, {"generations": 4})
    assert planned.folder.is_dir() and planned.command == "train es"
    assert planned.settings["sigma"] == 0.05 and planned.budget == {"generations": 4.0}
    assert RunPlan.read(planned.write()) == planned
    for settings, budget, message in (
            ({"sigma": -1}, {}, r"^sigma must be a number"),
            ({"sigmaa": 1}, {}, r"^unknown setting 'sigmaa'"),
            ({}, {"generations": -2}, r"^--generations must be a finite number >= 0"),
            ({"env": "CartPole-v9"}, {}, "CartPole-v1")):
        with pytest.raises(ValueError, match=message):
            plan("es", settings, RunOptions.of(workers=0, out=str(tmp_path / "bad")), budget)
    assert not (tmp_path / "bad").exists()  # refused before the folder is made
    with pytest.raises(ValueError, match="--at needs --fork RUN"):
        plan("es", {}, RunOptions.of(workers=0, at=3))
    with pytest.raises(ValueError, match="unknown algorithm 'ess'"):
        plan("ess")


def test_launch_sorts_its_keywords_into_options_budget_and_settings():
    from esnb.session.launch import _split

    algo, options, budget, flags, settings = _split(
        "apex", {"keep_every": 5, "steps": 1000, "learner_steps": 7, "lr": 1e-4})
    assert algo.name == "apex" and options == {"keep_every": 5} and not flags
    assert budget == {"env_steps": 1000, "learner_steps": 7} and settings == {"lr": 1e-4}
    _, _, budget, flags, _ = _split("eorl", {"episodes": 50, "size": 6})
    assert budget == {"episodes": 50} and flags == {"size": 6}


def test_importing_a_building_block_loads_no_runner():
    p = subprocess.run([sys.executable, "-c", "import esnb.noise, esnb.envs, esnb.settings, sys;"
                        " print([m for m in sys.modules if 'runners' in m])"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "[]", (p.stdout, p.stderr)

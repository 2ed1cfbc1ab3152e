"""``esnb bench es-vs-evotorch``: its flags, the one clear line when EvoTorch is missing, and
the esnb side of a round. EvoTorch and Ray are an optional extra that CI does not install (the
bench's figures come from a run with them: BENCHMARKS.md); the interpreter running these tests
is the real one without EvoTorch."""

import importlib.util
import subprocess
import sys

import pytest

from esnb.bench.es_vs_evotorch import esnb_params, esnb_rate, network
from esnb.runners.es.config import ESConfig


def bench(*args):
    return subprocess.run([sys.executable, "-m", "esnb.cli", "bench", "es-vs-evotorch", *args],
                          capture_output=True, text=True, timeout=300)


def test_help_lists_the_flags_and_the_extra():
    p = bench("--help")
    assert p.returncode == 0, p.stderr
    for flag in ("--env", "--population", "--workers", "--repeats", "--generations",
                 "--steps", "--evotorch-python", "--json"):
        assert flag in p.stdout
    assert "esnb[evotorch]" in p.stdout and "HalfCheetah-v5" in p.stdout


@pytest.mark.parametrize("flags", [[], ["--evotorch-python", sys.executable]])
def test_without_evotorch_one_line_names_the_extra_and_the_flag(flags):
    assert importlib.util.find_spec("evotorch") is None, "needs an interpreter without evotorch"
    p = bench("--repeats", "1", *flags)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "pip install 'esnb[evotorch]'" in lines[0] and "--evotorch-python" in lines[0]
    assert sys.executable in lines[0]
    assert "round" not in p.stdout  # checked before anything is measured


@pytest.mark.parametrize("args, says", [
    (["--evotorch-python", "/nonexistent/python"], "--evotorch-python /nonexistent/python: "
                                                   "cannot run it"),
    (["--repeats", "0"], "--repeats: must be an integer >= 1"),
    (["--population", "5"], "population must be even"),
    (["--workers", "0"], "--workers: must be an integer >= 1"),
])
def test_bad_input_is_one_clear_line(args, says):
    p = bench(*args)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and says in p.stderr, p.stderr
    assert "round" not in p.stdout


def test_evotorch_gets_es_policy():
    """EvoTorch's network is ES's default MLP (17-64-64-6 on HalfCheetah: 5,702 parameters)."""
    es = ESConfig.build(env="HalfCheetah-v5")
    assert network(es) == ("Linear(obs_length, 64) >> Tanh() >> Linear(64, 64) >> Tanh() >> "
                           "Linear(64, act_length)")
    assert esnb_params(es) == 17 * 64 + 64 + 64 * 64 + 64 + 64 * 6 + 6 == 5702
    relu = ESConfig.build(env="HalfCheetah-v5", hidden=(8,), activation="relu")
    assert network(relu) == "Linear(obs_length, 8) >> ReLU() >> Linear(8, act_length)"


@pytest.mark.slow
def test_esnb_side_of_a_round_counts_whole_generations():
    """ES on a real LocalCluster in a fresh interpreter: HalfCheetah never terminates, so one
    timed generation of 4 episodes is 4,000 steps, at a positive rate."""
    out = esnb_rate("HalfCheetah-v5", workers=1, generations=1, population=4)
    assert out["steps"] == 4 * 1000
    assert out["seconds"] > 0 and out["per_core"] == out["steps"] / out["seconds"] > 0

"""``esnb bench impala-vs-rllib``: its flags, the one clear line when RLlib is missing, and the
esnb side of a round on ALE/Pong-v5. Ray and RLlib are an optional extra that CI does not
install (the bench's figures come from a run with them: BENCHMARKS.md); the interpreter running
these tests is the real one without Ray."""

import importlib.util
import subprocess
import sys

import pytest

from esnb.bench.impala_vs_rllib import rates


def bench(*args):
    return subprocess.run([sys.executable, "-m", "esnb.cli", "bench", "impala-vs-rllib", *args],
                          capture_output=True, text=True, timeout=300)


def test_help_lists_the_flags_and_the_extra():
    p = bench("--help")
    assert p.returncode == 0, p.stderr
    for flag in ("--env", "--workers", "--rounds", "--iterations", "--rllib-python", "--json"):
        assert flag in p.stdout
    assert "esnb[rllib]" in p.stdout and "ALE/Pong-v5" in p.stdout


@pytest.mark.parametrize("flags", [[], ["--rllib-python", sys.executable]])
def test_without_ray_one_line_names_the_extra_and_the_flag(flags):
    assert importlib.util.find_spec("ray") is None, "needs an interpreter without ray"
    p = bench("--rounds", "1", *flags)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "pip install 'esnb[rllib]'" in lines[0] and "--rllib-python" in lines[0]
    assert sys.executable in lines[0]
    assert "round" not in p.stdout  # checked before anything is measured


@pytest.mark.parametrize("args, says", [
    (["--rllib-python", "/nonexistent/python"], "--rllib-python /nonexistent/python: "
                                                "cannot run it"),
    (["--rounds", "0"], "--rounds: must be an integer >= 1"),
    (["--iterations", "0"], "--iterations: must be an integer >= 1"),
    (["--workers", "0"], "--workers: must be an integer >= 1"),
])
def test_bad_input_is_one_clear_line(args, says):
    p = bench(*args)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and says in p.stderr, p.stderr
    assert "round" not in p.stdout


def test_rates_are_agent_steps_over_the_timed_seconds():
    r = rates({"sampled": 1200, "trained": 640, "seconds": 4.0}, workers=2)
    assert (r["actor_fps"], r["actor_fps_per_worker"], r["learner_fps"]) == (300, 150, 160)

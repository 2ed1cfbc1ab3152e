"""The benchmarks against a peer in an interpreter of its own (``esnb bench es-vs-evotorch``,
``esnb bench impala-vs-rllib``): their flags, the one clear line when the peer is missing, and
their bad input. The peers (EvoTorch, RLlib; both pull in Ray) are optional extras that CI does
not install (the benches' figures come from runs with them: BENCHMARKS.md); the interpreter
running these tests is the real one without them."""

import importlib.util
import subprocess
import sys

import pytest

#: bench -> (peer module, its extra, its interpreter flag, the rounds flag, the bench's env,
#: its own flags, its own bad input)
PEERS = {
    "es-vs-evotorch": ("evotorch", "evotorch", "--evotorch-python", "--repeats",
                       "HalfCheetah-v5", ("--population", "--generations", "--steps"),
                       (["--population", "5"], "population must be even")),
    "impala-vs-rllib": ("ray", "rllib", "--rllib-python", "--rounds", "ALE/Pong-v5",
                        ("--iterations", "--screen-size"),
                        (["--iterations", "0"], "--iterations: must be an integer >= 1")),
}


def bench(name, *args):
    return subprocess.run([sys.executable, "-m", "esnb.cli", "bench", name, *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", sorted(PEERS))
def test_help_lists_the_flags_and_the_extra(name):
    _, extra, flag, rounds, env, own, _ = PEERS[name]
    p = bench(name, "--help")
    assert p.returncode == 0, p.stderr
    for f in ("--env", "--workers", rounds, flag, "--json", *own):
        assert f in p.stdout
    assert f"esnb[{extra}]" in p.stdout and env in p.stdout


@pytest.mark.parametrize("name", sorted(PEERS))
@pytest.mark.parametrize("given", [False, True], ids=["default", "this-python"])
def test_without_the_peer_one_line_names_the_extra_and_the_flag(name, given):
    module, extra, flag, rounds, *_ = PEERS[name]
    assert importlib.util.find_spec(module) is None, f"needs an interpreter without {module}"
    p = bench(name, rounds, "1", *([flag, sys.executable] if given else []))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert f"pip install 'esnb[{extra}]'" in lines[0] and flag in lines[0]
    assert sys.executable in lines[0]
    assert "round" not in p.stdout  # checked before anything is measured


def test_a_frame_size_too_small_is_one_clear_line():
    p = bench("impala-vs-rllib", "--screen-size", "4")
    assert p.returncode == 2 and "--screen-size: must be an integer >= 8" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "round" not in p.stdout


@pytest.mark.parametrize("name", sorted(PEERS))
@pytest.mark.parametrize("case", ["python", "rounds", "workers", "own"])
def test_bad_input_is_one_clear_line(name, case):
    _, _, flag, rounds, _, _, own = PEERS[name]
    args, says = {
        "python": ([flag, "/nonexistent/python"], f"{flag} /nonexistent/python: cannot run it"),
        "rounds": ([rounds, "0"], f"{rounds}: must be an integer >= 1"),
        "workers": (["--workers", "0"], "--workers: must be an integer >= 1"),
        "own": own,
    }[case]
    p = bench(name, *args)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and says in p.stderr, p.stderr
    assert "round" not in p.stdout

"""``esnb bench atari-frames``: esnb's Atari wrapper, gymnasium's chain and the emulator alone,
timed on the same actions; the bench refuses to report if the two wrappers' frames differ.
Budgets are agent steps, not seconds."""

import json
import statistics

import pytest

from esnb.bench import frames
from esnb.cli import main


def test_bench_atari_frames_prints_and_writes_its_figures(tmp_path, capsys):
    out = tmp_path / "frames.json"
    assert main(["bench", "atari-frames", "--env", "ALE/Breakout-v5", "--steps", "120",
                 "--rounds", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "the frames equal bit for bit" in printed and "esnb AtariFrames" in printed
    r = json.loads(out.read_text())
    assert r["env"] == "ALE/Breakout-v5" and r["steps"] == 120 and r["rounds"] == 2
    assert set(r["all"]) == set(frames.KINDS) and all(len(v) == 2 for v in r["all"].values())
    s = r["seconds"]
    assert all(s[k] > 0 for k in frames.KINDS)
    assert r["speedup"] == pytest.approx(s["gymnasium"] / s["esnb"])
    # each wrapper's median time over the emulator's, from the same medians (how far above 1
    # they sit is a figure for BENCHMARKS.md: a timed assertion would race a loaded machine)
    med = {k: statistics.median(v) for k, v in r["all"].items()}
    for k in ("esnb", "gymnasium"):
        assert r["over_emulator"][k] == pytest.approx(med[k] / med["emulator"])


def test_frames_that_differ_are_an_error_not_a_figure(monkeypatch):
    """A wrapper whose frames are not gymnasium's is caught by the bench's digest."""
    import gymnasium as gym

    chain = frames._gymnasium_chain

    def shifted(env_id):  # gymnasium's chain, its frames stacked 3 deep instead of 4
        return gym.wrappers.FrameStackObservation(chain(env_id).env, 3)

    monkeypatch.setattr(frames, "_gymnasium_chain", shifted)
    with pytest.raises(RuntimeError, match="frames differ"):
        frames.measure("ALE/Pong-v5", steps=20, rounds=1)

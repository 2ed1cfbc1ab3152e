"""``esnb bench learner``: each learner's update at its paper's size, timed on a device; a
device this process cannot use is one line. Budgets are updates, not seconds."""

import json

import numpy as np
import pytest
import torch

from esnb.bench.learner import CASES, measure
from esnb.cli import main


def test_bench_learner_prints_and_writes_each_case(tmp_path, capsys):
    out = tmp_path / "learner.json"
    assert main(["bench", "learner", "--cases", "td3", "--device", "cpu", "--updates", "2",
                 "--repeats", "2", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "learner updates on cpu" in printed and "twin critic + actor 256-256" in printed
    r = json.loads(out.read_text())
    assert r["device"] == "cpu" and r["updates"] == 2 and r["repeats"] == 2
    (row,) = r["rows"]
    assert row["case"] == "td3" and row["device"] == "cpu"
    assert row["updates_per_s"] > 0
    assert row["samples_per_s"] == pytest.approx(256 * row["updates_per_s"])
    assert row["seconds_per_update"] == pytest.approx(1 / row["updates_per_s"])


def test_the_apex_case_is_the_papers_learner_on_frames():
    """One update of the Ape-X case: the Nature torso over uint8 4x84x84 frames, batch 512."""
    update = CASES["apex-dqn"].make(torch.device("cpu"), 0)
    td, info = update()
    assert td.shape == (512,) and np.isfinite(td).all()
    assert np.isfinite(info["loss"]) and info["grad_norm"] > 0


def test_the_impala_case_is_the_deep_network_on_unrolls_of_frames():
    """The IMPALA case's update (at 2 unrolls of 2 steps here: the bench's 32 x 20 is the
    same code): the deep torso over uint8 frames, the paper preset's loss and optimiser."""
    from esnb.bench.learner import _impala

    stats = _impala(torch.device("cpu"), 0, T=2, B=2)()
    assert np.isfinite(stats["loss"]) and stats["grad_norm"] > 0
    assert CASES["impala"].samples == 32 * 20


def test_the_shallow_impala_case_is_the_laptop_presets_atari_learner():
    """The learner Pong runs with here: the shallow torso, Pong's 6 actions, Adam."""
    from esnb.bench.learner import LAPTOP_FRAMES, _impala

    stats = _impala(torch.device("cpu"), 0, T=2, B=2, preset="laptop",
                    torso="impala-shallow", actions=6, frames=LAPTOP_FRAMES)()
    assert np.isfinite(stats["loss"]) and stats["grad_norm"] > 0
    assert LAPTOP_FRAMES == (4, 84, 84)
    assert CASES["impala-shallow"].samples == 32 * 20


def test_both_layouts_are_measured_in_the_same_rounds_with_their_ratio(tmp_path, capsys):
    out = tmp_path / "learner.json"
    assert main(["bench", "learner", "--cases", "td3", "--device", "cpu", "--updates", "1",
                 "--repeats", "2", "--layout", "both", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "td3 on cpu: channels-last / contiguous = " in printed
    rows = json.loads(out.read_text())["rows"]
    assert sorted(row["layout"] for row in rows) == ["channels-last", "contiguous"]
    with pytest.raises(ValueError, match="unknown memory layout"):
        measure(["td3"], "cpu", layouts=("nhwc",))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_device_torch_cannot_see_is_one_line(capsys):
    assert main(["bench", "learner", "--device", "cuda", "--updates", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("esnb: error: device 'cuda' requested but torch") and "\n" not in err
    with pytest.raises(ValueError, match="unknown learner case"):
        measure(["dqn"], "cpu")

"""TensorBoard logging read back with TensorBoard's own reader: every numeric history column
equals the history, control changes are text at the step of the iteration that used them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import SMALL_NOISE, run_with_control_changes

import esnb
from esnb.cli import main

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)
from tensorboard.util import tensor_util  # noqa: E402


def read_events(logdir) -> dict[str, list[tuple[int, object]]]:
    acc = EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["tensors"]:
        out[tag] = [(e.step, tensor_util.make_ndarray(e.tensor_proto))
                    for e in acc.Tensors(tag)]
    return out


def scalar_columns(history):
    import pandas as pd

    return [c for c in history.columns if pd.api.types.is_numeric_dtype(history[c])]


def test_every_history_column_and_each_change_read_back(tmp_path):
    runner, _ = run_with_control_changes(
        lambda r: esnb.TensorBoard(r, tmp_path / "tb", flush_every=0))

    events = read_events(tmp_path / "tb")
    history = runner.history
    steps = history.env_steps.astype(int).tolist()
    for column in scalar_columns(history):
        expected = [(s, np.float32(v)) for s, v in zip(steps, history[column])
                    if math.isfinite(v)]
        got = [(s, np.float32(v)) for s, v in events.get(column, [])]
        assert got == expected, column
    assert "eval_return" in events and len(events["eval_return"]) < len(history)  # NaNs left out
    texts = [(s, v.item().decode()) for s, v in events["controls"]]
    at = dict(zip(history.generation, steps))
    assert texts == [(at[3], "sigma 0.02 → 0.05"),
                     (at[6], "lr 0.01 → 0.005, shaping centered_ranks → raw")]


def test_cli_tensorboard_flag_writes_into_the_run_folder(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "es", "--env", "CartPole-v1", "--generations", "3", "--workers", "0",
                 "--population", "10", "--noise-size", str(SMALL_NOISE), "--no-progress",
                 "--final-eval", "1", "--out", str(out), "--tensorboard"])
    assert code == 0
    events = read_events(out / "tensorboard")
    assert [s for s, _ in events["return_mean"]] == sorted(s for s, _ in events["return_mean"])
    assert len(events["generation"]) == 3
    assert [float(v) for _, v in events["generation"]] == [1.0, 2.0, 3.0]

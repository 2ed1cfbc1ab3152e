"""MLflow logging read back with MLflow's own client: the settings as parameters, every numeric
history column as a metric equal to the history, control changes as tags at the step of the
iteration that used them, the final evaluation and the checkpoint of ``esnb train --mlflow``."""

from __future__ import annotations

import json
import math

import mlflow  # the test extra (mlflow-skinny): a missing package fails here, not skipped
import numpy as np
import pandas as pd
from conftest import SMALL_NOISE, run_with_control_changes
from mlflow.tracking import MlflowClient

import esnb
from esnb.cli import main
from esnb.views.mlflow_tracker import tracking_uri


def test_every_history_column_and_each_change_read_back(tmp_path):
    runner, log = run_with_control_changes(
        lambda r: esnb.MLflow(r, str(tmp_path / "mlruns"), experiment="tests", flush_every=0),
        name="es-mlflow")

    client = MlflowClient(tracking_uri(str(tmp_path / "mlruns")))
    run = client.get_run(log.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "es-mlflow"
    assert run.data.params["population"] == "10" and run.data.params["env"] == "CartPole-v1"
    assert json.loads(run.data.params["hidden"]) == list(runner.config.hidden)
    assert run.data.tags["esnb.algorithm"] == "ES"
    history = runner.history
    steps = history.env_steps.astype(int).tolist()
    numeric = [c for c in history.columns if pd.api.types.is_numeric_dtype(history[c])]
    for column in numeric:
        expected = [(s, float(v)) for s, v in zip(steps, history[column]) if math.isfinite(v)]
        got = sorted((m.step, m.value) for m in client.get_metric_history(log.run_id, column))
        assert got == sorted(expected), column
    assert len(client.get_metric_history(log.run_id, "eval_return")) < len(history)  # NaNs out
    at = dict(zip(history.generation, steps))
    changes = sorted((k, v) for k, v in run.data.tags.items() if k.startswith("esnb.controls."))
    assert changes == [("esnb.controls.0001", f"step {at[3]}: sigma 0.02 → 0.05"),
                       ("esnb.controls.0002",
                        f"step {at[6]}: lr 0.01 → 0.005, shaping centered_ranks → raw")]


def test_cli_mlflow_logs_the_run_its_final_evaluation_and_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # --mlflow without a URI: ./mlruns
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    out = tmp_path / "run"
    assert main(["train", "es", "--env", "CartPole-v1", "--generations", "3", "--workers", "0",
                 "--population", "10", "--noise-size", str(SMALL_NOISE), "--no-progress",
                 "--final-eval", "2", "--out", str(out), "--name", "cli-run", "--mlflow"]) == 0
    summary = json.loads((out / "summary.json").read_text())

    mlflow.set_tracking_uri(tracking_uri("mlruns"))
    runs = mlflow.search_runs(experiment_names=["esnb"])
    assert len(runs) == 1
    row = runs.iloc[0]
    assert row["status"] == "FINISHED" and row["tags.mlflow.runName"] == "cli-run"
    assert row["params.population"] == "10" and row["tags.esnb.algorithm"] == "ES"
    assert row["metrics.generation"] == 3  # the last value of each column
    assert row["metrics.final_eval_mean"] == summary["final_eval_mean"]
    assert row["metrics.final_eval_std"] == summary["final_eval_std"]
    assert row["metrics.final_eval_episodes"] == 2
    client = MlflowClient(tracking_uri("mlruns"))
    steps = sorted(m.step for m in client.get_metric_history(row["run_id"], "generation"))
    assert steps == [int(s) for s in pd.read_csv(out / "history.csv").env_steps]
    artifacts = [f.path for f in client.list_artifacts(row["run_id"])]
    assert artifacts == ["checkpoint.npz"]
    local = client.download_artifacts(row["run_id"], "checkpoint.npz", str(tmp_path))
    assert open(local, "rb").read() == (out / "checkpoint.npz").read_bytes()
    assert np.isfinite(row["metrics.return_mean"])

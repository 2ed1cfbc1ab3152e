"""MLflow logging read back with MLflow's own client: the settings as parameters, every numeric
history column as a metric equal to the history, control changes as tags at the step of the
iteration that used them, the final evaluation and the checkpoint of ``esnb train --mlflow``."""

from __future__ import annotations

import json
import math

import mlflow  # the test extra (mlflow-skinny): a missing package fails here, not skipped
import numpy as np
import pandas as pd
import pytest
from conftest import SMALL_NOISE, run_with_control_changes
from mlflow.tracking import MlflowClient

import esnb
from esnb.cli import main
from esnb.views import mlflow_tracker
from esnb.views.mlflow_tracker import default_uri, tracking_uri


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


def test_cli_mlflow_logs_the_run_its_final_evaluation_and_checkpoint(tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.chdir(tmp_path)  # --mlflow without a URI: ./mlflow.db, or ./mlruns (skinny)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    out = tmp_path / "run"
    assert main(["train", "es", "--env", "CartPole-v1", "--generations", "3", "--workers", "0",
                 "--population", "10", "--noise-size", str(SMALL_NOISE), "--no-progress",
                 "--final-eval", "2", "--out", str(out), "--name", "cli-run", "--mlflow"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    store = tracking_uri(default_uri())
    # the run's last line says how to open its store, no hidden variable left unsaid
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert said.startswith("esnb: MLflow run ") and said.endswith(
        mlflow_tracker.open_with(store)), said
    if default_uri() == "mlruns":  # mlflow-skinny alone: MLflow 3's folder store
        assert "MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri " \
               f"{tmp_path / 'mlruns'}" in said
    else:
        assert said.endswith("mlflow ui --backend-store-uri sqlite:///mlflow.db"), said

    mlflow.set_tracking_uri(store)
    runs = mlflow.search_runs(experiment_names=["esnb"])
    assert len(runs) == 1
    row = runs.iloc[0]
    assert row["status"] == "FINISHED" and row["tags.mlflow.runName"] == "cli-run"
    assert row["params.population"] == "10" and row["tags.esnb.algorithm"] == "ES"
    assert row["metrics.generation"] == 3  # the last value of each column
    assert row["metrics.final_eval_mean"] == summary["final_eval_mean"]
    assert row["metrics.final_eval_std"] == summary["final_eval_std"]
    assert row["metrics.final_eval_episodes"] == 2
    client = MlflowClient(store)
    steps = sorted(m.step for m in client.get_metric_history(row["run_id"], "generation"))
    assert steps == [int(s) for s in pd.read_csv(out / "history.csv").env_steps]
    artifacts = [f.path for f in client.list_artifacts(row["run_id"])]
    assert artifacts == ["checkpoint.npz"]
    local = client.download_artifacts(row["run_id"], "checkpoint.npz", str(tmp_path))
    assert open(local, "rb").read() == (out / "checkpoint.npz").read_bytes()
    assert np.isfinite(row["metrics.return_mean"])


def test_the_default_store_is_one_mlflow_ui_opens(monkeypatch):
    """``--mlflow`` without a URI: MLFLOW_TRACKING_URI, else the database ``mlflow ui`` opens by
    default where MLflow's database store is installed, else the folder ./mlruns (the command
    that opens it says MLFLOW_ALLOW_FILE_STORE=true)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking.example:5000")
    assert default_uri() == "http://tracking.example:5000"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.setattr(mlflow_tracker, "database_store", lambda: True)
    assert default_uri() == "sqlite:///mlflow.db"
    assert mlflow_tracker.open_with("sqlite:///mlflow.db") == \
        "mlflow ui --backend-store-uri sqlite:///mlflow.db"
    monkeypatch.setattr(mlflow_tracker, "database_store", lambda: False)
    assert default_uri() == "mlruns"
    assert mlflow_tracker.open_with("file:///x/mlruns") == \
        "MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri /x/mlruns"
    with pytest.raises(ValueError, match=r"^--mlflow sqlite:///m.db: a database store needs "
                                         r"MLflow's database support: pip install mlflow"):
        mlflow_tracker.check_destination("sqlite:///m.db")


def test_a_web_server_that_is_no_mlflow_server_is_one_line_at_once():
    """A server that answers, but not as MLflow: one request without MLflow's retries, one line
    naming --mlflow and the URI; MLflow's own retry settings are left as they were."""
    import os
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_error(404)

        do_POST = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        started = time.monotonic()
        with pytest.raises(ValueError) as err:
            mlflow_tracker.check_destination(uri)
        assert time.monotonic() - started < 10  # not MLflow's minutes of retries
    finally:
        server.shutdown()
        server.server_close()
    line = str(err.value)
    assert line.startswith(f"--mlflow {uri}: no MLflow tracking server answers there: ")
    assert "404" in line and "\n" not in line
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ

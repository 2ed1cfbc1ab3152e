"""A run in MLflow: its settings as parameters, every numeric history column as a metric,
each control change as a tag, and at the end the final evaluation and the checkpoint.

Needs ``pip install 'esnb[mlflow]'`` (``mlflow-skinny``: the client, no server). Attach it to
any runner, or pass ``--mlflow [URI]`` to ``esnb train``::

    log = esnb.MLflow(runner)            # ./mlruns; rows already there are logged too
    runner.start(generations=100)
    ...
    log.close()

then ``mlflow ui --backend-store-uri ./mlruns`` or ``mlflow.search_runs``. A folder (the
default ``mlruns``) is MLflow's file store, which MLflow 3 keeps in maintenance mode behind
``MLFLOW_ALLOW_FILE_STORE=true`` (esnb sets it for a folder it is given); a server's
``http://`` URI or a ``sqlite:///`` database (full ``mlflow``) work as MLflow documents. The
experiment is ``MLFLOW_EXPERIMENT_NAME`` if set, else ``esnb``; the MLflow run is named as
the esnb run, tagged ``esnb.algorithm``. Steps are as :class:`~esnb.views.tracking.Tracker`
chooses them (env steps, else the iteration).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from esnb.views.tracking import Tracker

#: the default tracking location: a folder beside the run's command
DEFAULT_URI = "mlruns"
#: MLflow's limits on one ``log_batch`` call
_MAX_METRICS, _MAX_PARAMS = 1000, 100


def tracking_uri(uri: str | None) -> str:
    """``uri`` as MLflow takes it: a URI with a scheme as given, a folder (default
    ``mlruns``) as an absolute ``file:`` URI, MLflow's file store allowed for it."""
    uri = uri or DEFAULT_URI
    if "://" in uri or uri.startswith("file:"):
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        return uri
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return Path(uri).resolve().as_uri()


def _client():
    try:
        from mlflow.entities import Metric, Param, RunStatus
        from mlflow.tracking import MlflowClient
    except ImportError:  # the optional extra is missing
        raise ImportError("MLflow logging needs the mlflow-skinny (or mlflow) package: "
                          "pip install 'esnb[mlflow]'") from None
    return MlflowClient, Metric, Param, RunStatus


class MLflow(Tracker):
    """Log ``runner`` to an MLflow run.

    Parameters
    ----------
    runner : esnb.runners.base.Runner
    uri : str, optional
        Tracking URI or folder (default ``mlruns``; see :func:`tracking_uri`).
    experiment : str, optional
        Default ``MLFLOW_EXPERIMENT_NAME``, else ``"esnb"`` (created if missing).
    history : bool
        Also log the rows the runner already has.
    flush_every : float
        Seconds between batches sent to MLflow.

    Attributes
    ----------
    run_id : str
    uri : str
    """

    def __init__(self, runner, uri: str | None = None, experiment: str | None = None, *,
                 history: bool = True, flush_every: float = 5.0):
        client_cls, self._Metric, param_cls, self._status = _client()
        self.uri = tracking_uri(uri)
        self._client = client_cls(tracking_uri=self.uri)
        name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "esnb"
        found = self._client.get_experiment_by_name(name)
        experiment_id = found.experiment_id if found else self._client.create_experiment(name)
        self.run_id = self._client.create_run(
            experiment_id, run_name=runner.name,
            tags={"esnb.algorithm": runner.algorithm}).info.run_id
        params = [param_cls(key, value if isinstance(value, str) else json.dumps(value))
                  for key, value in runner.config_dict().items()]
        for start in range(0, len(params), _MAX_PARAMS):
            self._client.log_batch(self.run_id, params=params[start:start + _MAX_PARAMS])
        self._pending: list = []
        self._n_changes = 0
        super().__init__(runner, history=history, flush_every=flush_every)

    def _scalars(self, step: int, values: dict[str, float]) -> None:
        now = int(time.time() * 1000)
        self._pending += [self._Metric(key, value, now, step) for key, value in values.items()]

    def _changes(self, step: int, text: str) -> None:
        self._n_changes += 1
        self._client.set_tag(self.run_id, f"esnb.controls.{self._n_changes:04d}",
                             f"step {step}: {text}")

    def _file(self, path: Path) -> None:
        self._client.log_artifact(self.run_id, str(path))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), _MAX_METRICS):
            self._client.log_batch(self.run_id, metrics=pending[start:start + _MAX_METRICS])

    def _close(self, failed: bool) -> None:
        status = self._status.FAILED if failed else self._status.FINISHED
        self._client.set_terminated(self.run_id, self._status.to_string(status))

    def __repr__(self) -> str:
        return f"<MLflow {self.uri!r} run {self.run_id} rows={self.rows}>"

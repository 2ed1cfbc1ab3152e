"""A run in MLflow: its settings as parameters, every numeric history column as a metric,
each control change as a tag, and at the end the final evaluation and the checkpoint.

Needs ``pip install 'esnb[mlflow]'`` (``mlflow-skinny``: the client, no server). Attach it to
any runner, or pass ``--mlflow [URI]`` to ``esnb train``::

    log = esnb.MLflow(runner)            # the default store; rows already there are logged too
    runner.start(generations=100)
    ...
    log.close()

then ``mlflow ui`` (see :attr:`MLflow.open_with`) or ``mlflow.search_runs``. The default store
(:func:`default_uri`) is MLflow's own: ``MLFLOW_TRACKING_URI`` if set, else the database
``./mlflow.db`` (``sqlite:///mlflow.db``, what ``mlflow ui`` opens when started in the same
folder) where MLflow's database store is installed (full ``mlflow``, or ``sqlalchemy`` and
``alembic`` beside ``mlflow-skinny``); with ``mlflow-skinny`` alone, the folder ``./mlruns``,
MLflow's file store, which MLflow 3 keeps in maintenance mode behind
``MLFLOW_ALLOW_FILE_STORE=true`` (esnb sets it for a folder it writes; open it with
``MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri ./mlruns``). A server's
``http(s)://`` URI and the other database URIs work as MLflow documents; every destination is
checked first (:func:`check_destination`). The experiment is ``MLFLOW_EXPERIMENT_NAME`` if
set, else ``esnb``; the MLflow run is named as the esnb run, tagged ``esnb.algorithm``. Steps
are as :class:`~esnb.views.tracking.Tracker` chooses them (env steps, else the iteration).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from esnb.views.tracking import Tracker

#: the default store without MLflow's database store (mlflow-skinny alone): a folder
FOLDER_URI = "mlruns"
#: the default store with it: what ``mlflow ui`` opens when started in the same folder
DATABASE_URI = "sqlite:///mlflow.db"
#: MLflow's limits on one ``log_batch`` call
_MAX_METRICS, _MAX_PARAMS = 1000, 100
#: the database URIs MLflow's SQLAlchemy store takes (a ``+driver`` may follow), their ports
_DATABASES = {"sqlite": 0, "postgresql": 5432, "mysql": 3306, "mssql": 1433}
#: URIs MLflow resolves with credentials of its own (not probed here)
_HOSTED = ("databricks", "databricks-uc", "uc")


def database_store() -> bool:
    """Whether MLflow's database (SQLAlchemy) store can be used here."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("sqlalchemy", "alembic"))


def default_uri() -> str:
    """The store ``--mlflow`` without a URI writes: ``MLFLOW_TRACKING_URI`` if set, else
    ``sqlite:///mlflow.db`` where MLflow's database store is installed, else ``mlruns``."""
    return (os.environ.get("MLFLOW_TRACKING_URI") or
            (DATABASE_URI if database_store() else FOLDER_URI))


def _scheme(uri: str) -> str:
    """``uri``'s scheme, lower case, without a ``+driver`` ("" for a plain folder)."""
    if "://" not in uri and not uri.startswith("file:"):
        return ""
    return uri.split(":", 1)[0].lower().split("+")[0]


def _file_path(uri: str) -> Path:
    """The folder of a ``file:`` URI."""
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    return Path(url2pathname(urlsplit(uri).path))


def tracking_uri(uri: str | None) -> str:
    """``uri`` as MLflow takes it: a URI with a scheme as given, a folder as an absolute
    ``file:`` URI, MLflow's file store allowed for it (default :func:`default_uri`)."""
    uri = uri or default_uri()
    scheme = _scheme(uri)
    if scheme in ("", "file"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    if scheme:
        return uri
    return Path(uri).resolve().as_uri()


def open_with(uri: str) -> str:
    """The command that opens the store ``uri`` (as :func:`tracking_uri` gives it) in
    MLflow's UI."""
    scheme = _scheme(uri)
    if scheme in ("http", "https"):
        return f"open {uri} in a browser"
    if scheme == "file":
        return (f"MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri "
                f"{_file_path(uri)}")
    return f"mlflow ui --backend-store-uri {uri}"


def _ask_server(uri: str, flag: str) -> None:
    """One request to the tracking server at ``uri``, without MLflow's retries: it answers as
    an MLflow server (not another web server, not one that refuses these credentials)."""
    from esnb.destinations import PROBE_TIMEOUT

    client_cls = _client()[0]
    quick = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
             "MLFLOW_HTTP_REQUEST_TIMEOUT": str(int(PROBE_TIMEOUT))}
    saved = {key: os.environ.get(key) for key in quick}
    os.environ.update(quick)
    try:
        client_cls(tracking_uri=uri).search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - MlflowException, requests' errors...
        raise ValueError(f"{flag} {uri}: no MLflow tracking server answers there: "
                         f"{first_line(exc)}") from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def first_line(exc: BaseException, limit: int = 300) -> str:
    """``exc``'s message in one line of at most ``limit`` characters."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_destination(uri: str | None, flag: str = "--mlflow") -> str:
    """``uri`` (default :func:`default_uri`) is a store MLflow can write, checked without
    MLflow's retries: a folder (or ``file:``) that is one or can be made, a ``sqlite:///``
    file whose folder can be written (MLflow's database store installed), a server or
    database that accepts a connection within a few seconds, or a Databricks URI. One
    ``ValueError`` line naming ``flag`` otherwise; the URI MLflow will be given."""
    from esnb.destinations import check_file, check_folder, probe_server

    given = uri or default_uri()
    scheme = _scheme(given)
    if scheme == "":
        check_folder(given, flag)
    elif scheme == "file":
        check_folder(_file_path(given), flag, given)
    elif scheme in ("http", "https"):
        probe_server(given, flag)
        _ask_server(given, flag)
    elif scheme in _DATABASES:
        if not database_store():
            raise ValueError(f"{flag} {given}: a database store needs MLflow's database "
                             f"support: pip install mlflow (or sqlalchemy and alembic beside "
                             f"mlflow-skinny); or give a folder")
        if scheme == "sqlite":
            path = given.split("://", 1)[1]
            if not path.startswith("/") or path in ("/", "/:memory:"):
                raise ValueError(f"{flag} {given}: a sqlite store is sqlite:///FILE "
                                 f"(relative) or sqlite:////ABSOLUTE/FILE")
            check_file(path[1:], flag)
        else:
            probe_server(given, flag, {scheme: _DATABASES[scheme]})
    elif scheme not in _HOSTED:
        raise ValueError(f"{flag} {given}: MLflow stores no runs at a {scheme}:// URI; give a "
                         f"folder, file:, sqlite:///FILE, http(s)://HOST:PORT (a tracking "
                         f"server), postgresql/mysql/mssql:// or databricks")
    return tracking_uri(given)


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
        Tracking URI or folder (default :func:`default_uri`; see :func:`tracking_uri`).
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
    open_with : str
        The command that opens the store in MLflow's UI.
    """

    def __init__(self, runner, uri: str | None = None, experiment: str | None = None, *,
                 history: bool = True, flush_every: float = 5.0):
        client_cls, self._Metric, param_cls, self._status = _client()
        self.uri = tracking_uri(uri)
        self.open_with = open_with(self.uri)
        if _scheme(self.uri) in _DATABASES:  # not its table creation's INFO lines, per run
            import logging

            for logger in ("mlflow.store.db.utils", "alembic"):
                logging.getLogger(logger).setLevel(logging.WARNING)
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

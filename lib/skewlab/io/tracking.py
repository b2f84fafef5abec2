"""MLflow tracking for skewlab experiments, through ``MlflowClient`` only.

One MLflow run per experiment configuration (a sweep is a parent run with one
nested child run per configuration). Everything goes through an explicit
``MlflowClient`` and explicit run ids: no ``mlflow.start_run`` and no global
"active run", so several runs can be written from one process (a sweep, a DAG
task) without stepping on each other.

MLflow is imported lazily (it takes seconds), so building
:class:`TrackingSettings` in a DAG file or the CLI costs nothing.
"""

from __future__ import annotations

import csv
import logging
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError, SkewlabError
from skewlab.services.datadir import resolve_home

if TYPE_CHECKING:
    from mlflow import MlflowClient

log = logging.getLogger(__name__)

PARENT_RUN_TAG = "mlflow.parentRunId"
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
"""MLflow 3 opens an experiment without this tag in its GenAI view (traces, token usage);
skewlab's experiments are runs with params, metrics and plots: the classic view."""
RUN_STATUSES = ("FINISHED", "FAILED", "KILLED", "RUNNING", "SCHEDULED")

# MLflow's per-request limits for log_batch (mlflow.utils.validation).
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_PARAM_VALUE_LENGTH = 6000

_QUIET_LOGGERS = ("mlflow", "alembic", "sqlalchemy", "urllib3", "git")


class TrackingError(SkewlabError):
    """An MLflow operation failed; the message names the run or experiment."""


def default_data_dir() -> Path:
    """The data directory every service shares: ``$SKEWLAB_HOME`` or ``./.skewlab``."""

    return resolve_home()


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class TrackingSettings:
    """Where MLflow keeps runs (``tracking_uri``) and artifacts (``artifact_location``).

    Defaults live under the data directory: ``sqlite:///<data_dir>/mlflow.db``
    and ``<data_dir>/mlartifacts``. A local artifact path is made absolute (a
    relative one would depend on the cwd of whoever logs next). Use
    :meth:`for_data_dir` / :meth:`from_env` rather than filling both by hand.
    """

    tracking_uri: str = ""
    artifact_location: str = ""
    data_dir: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        data_dir = Path(self.data_dir).resolve() if self.data_dir else default_data_dir()
        uri = self.tracking_uri or f"sqlite:///{data_dir / 'mlflow.db'}"
        artifacts = self.artifact_location or str(data_dir / "mlartifacts")
        scheme = urlparse(uri).scheme
        if scheme not in ("sqlite", "postgresql", "mysql", "mssql", "http", "https", "file"):
            raise ConfigError(
                f"tracking_uri {uri!r}: scheme must be one of sqlite, postgresql, mysql, "
                "mssql, http, https, file"
            )
        if scheme == "sqlite" and not uri.startswith("sqlite:///"):
            raise ConfigError(f"tracking_uri {uri!r}: use sqlite:///<absolute path>")
        if "://" not in artifacts:
            artifacts = str(Path(artifacts).resolve())
        object.__setattr__(self, "data_dir", str(data_dir))
        object.__setattr__(self, "tracking_uri", uri)
        object.__setattr__(self, "artifact_location", artifacts)

    @classmethod
    def for_data_dir(cls, data_dir: str | Path) -> TrackingSettings:
        """The defaults under ``data_dir``."""
        return cls(data_dir=str(data_dir))

    @classmethod
    def for_runs(cls, data_dir: str | Path) -> TrackingSettings:
        """Where runs are logged: a configured server (``MLFLOW_TRACKING_URI``, see
        :meth:`from_env`) when there is one, else the defaults under ``data_dir``."""
        return (
            cls.from_env() if os.environ.get("MLFLOW_TRACKING_URI") else cls.for_data_dir(data_dir)
        )

    @classmethod
    def from_env(cls) -> TrackingSettings:
        """``MLFLOW_TRACKING_URI`` / ``SKEWLAB_ARTIFACT_LOCATION`` if set, else the defaults."""
        return cls(
            tracking_uri=os.environ.get("MLFLOW_TRACKING_URI", ""),
            artifact_location=env_settings().artifact_location or "",
        )

    @property
    def sqlite_path(self) -> Path | None:
        """The database file of a ``sqlite:///`` store, else ``None``."""
        if not self.tracking_uri.startswith("sqlite:///"):
            return None
        return Path(self.tracking_uri[len("sqlite:///") :])


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What one run holds: identity, status, params, latest metrics, user tags."""

    run_id: str
    run_name: str
    experiment_id: str
    status: str
    start_time_ms: int | None
    end_time_ms: int | None
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    parent_run_id: str | None
    artifact_uri: str


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _safe_dirname(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "experiment"


class Tracker:
    """Experiments and runs in one MLflow store.

    Invariants: every call names its run by id (no global active run);
    experiments are created once per name with their artifacts under
    ``settings.artifact_location/<name>``; batched calls respect MLflow's
    per-request limits (1000 metrics, 100 params or tags).

    Args:
        settings: where the store is (default: :meth:`TrackingSettings.from_env`).
        now_ms: wall clock in epoch milliseconds for metric timestamps (injected
            for tests; MLflow needs epoch time, not the monotonic clock).
    """

    def __init__(
        self,
        settings: TrackingSettings | None = None,
        *,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.settings = settings or TrackingSettings.from_env()
        self._now_ms = now_ms or _wall_ms
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
        db = self.settings.sqlite_path
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)
        if "://" not in self.settings.artifact_location:
            Path(self.settings.artifact_location).mkdir(parents=True, exist_ok=True)
        from mlflow import MlflowClient

        self.client: MlflowClient = MlflowClient(tracking_uri=self.settings.tracking_uri)
        self._experiments: dict[str, str] = {}

    # ------------------------------------------------------------ experiments / runs

    def experiment_id(self, name: str) -> str:
        """Id of experiment ``name``, created (with its artifact location) if missing."""
        if not name or not name.strip():
            raise ConfigError("experiment name must be a non-empty string")
        cached = self._experiments.get(name)
        if cached is not None:
            return cached
        from mlflow.exceptions import MlflowException

        exp = self.client.get_experiment_by_name(name)
        kind = {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}
        if exp is None:
            location = self.settings.artifact_location.rstrip("/") + "/" + _safe_dirname(name)
            try:
                exp_id = self.client.create_experiment(name, artifact_location=location, tags=kind)
                log.info("created MLflow experiment %r (%s) at %s", name, exp_id, location)
            except MlflowException:
                exp = self.client.get_experiment_by_name(name)  # created concurrently
                if exp is None:
                    raise
                exp_id = exp.experiment_id
        else:
            exp_id = exp.experiment_id
            if EXPERIMENT_KIND_TAG not in exp.tags:  # made before skewlab set the kind
                self.client.set_experiment_tag(exp_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        self._experiments[name] = exp_id
        return exp_id

    def start_run(
        self,
        experiment: str,
        run_name: str,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, Any] | None = None,
        parent_run_id: str | None = None,
    ) -> str:
        """Create a RUNNING run in ``experiment`` with ``params`` and ``tags``; its id.

        ``parent_run_id`` nests the run under another (MLflow's
        ``mlflow.parentRunId`` tag), e.g. one child per sweep configuration.
        """
        exp_id = self.experiment_id(experiment)
        all_tags = {str(k): str(v) for k, v in (tags or {}).items()}
        if parent_run_id is not None:
            all_tags[PARENT_RUN_TAG] = parent_run_id
        run = self.client.create_run(
            exp_id, start_time=self._now_ms(), tags=all_tags, run_name=run_name
        )
        run_id: str = run.info.run_id
        if params:
            self.log_params(run_id, params)
        log.debug("started run %s (%s) in %r", run_id, run_name, experiment)
        return run_id

    @contextmanager
    def run(
        self,
        experiment: str,
        run_name: str,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, Any] | None = None,
        parent_run_id: str | None = None,
    ) -> Iterator[str]:
        """``with tracker.run(...) as run_id:`` ends FINISHED, or FAILED on an exception."""
        run_id = self.start_run(experiment, run_name, params, tags, parent_run_id)
        try:
            yield run_id
        except BaseException:
            self.end_run(run_id, "FAILED")
            raise
        self.end_run(run_id, "FINISHED")

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        """Terminate ``run_id`` with ``status`` (FINISHED, FAILED or KILLED)."""
        status = status.upper()
        if status not in ("FINISHED", "FAILED", "KILLED"):
            raise ConfigError(f"end status must be FINISHED, FAILED or KILLED, got {status!r}")
        self.client.set_terminated(run_id, status=status, end_time=self._now_ms())

    # ------------------------------------------------------------ params / metrics / tags

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        """Log params (values as strings, at most 6000 characters each), batched."""
        from mlflow.entities import Param

        items = []
        for k, v in params.items():
            text = str(v)
            if len(text) > MAX_PARAM_VALUE_LENGTH:
                raise ConfigError(
                    f"param {k!r} is {len(text)} characters; MLflow keeps at most "
                    f"{MAX_PARAM_VALUE_LENGTH} (log it as an artifact instead)"
                )
            items.append(Param(str(k), text))
        for chunk in _chunks(items, MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, params=chunk)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        """Set tags (values as strings), batched."""
        from mlflow.entities import RunTag

        items = [RunTag(str(k), str(v)) for k, v in tags.items()]
        for chunk in _chunks(items, MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, tags=chunk)

    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        """Log ``{name: value}`` at ``step`` (0 if omitted) in as few requests as allowed."""
        from mlflow.entities import Metric

        ts = self._now_ms()
        items = [Metric(str(k), float(v), ts, int(step or 0)) for k, v in metrics.items()]
        for chunk in _chunks(items, MAX_METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=chunk)

    def log_series(
        self,
        run_id: str,
        name: str,
        values: Sequence[float],
        steps: Sequence[int] | None = None,
    ) -> int:
        """Log a whole metric series (``values[i]`` at ``steps[i]``, default ``i``).

        Sent with ``log_batch`` in chunks of 1000 (MLflow's limit per request).
        Non-finite values are skipped (a series of imbalance ratios may hold a
        NaN for an empty window). Returns how many points were logged.
        """
        from mlflow.entities import Metric

        vals = [float(v) for v in values]
        st = list(range(len(vals))) if steps is None else [int(s) for s in steps]
        if len(st) != len(vals):
            raise ConfigError(f"series {name!r}: {len(vals)} values but {len(st)} steps")
        ts = self._now_ms()
        items = [Metric(name, v, ts, s) for v, s in zip(vals, st) if math.isfinite(v)]
        for chunk in _chunks(items, MAX_METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=chunk)
        return len(items)

    # ------------------------------------------------------------ artifacts

    def log_artifact(self, run_id: str, path: str | Path, artifact_path: str | None = None) -> None:
        """Copy a local file (or a directory's files) into the run's artifacts."""
        p = Path(path)
        if not p.exists():
            raise ConfigError(f"artifact {p} does not exist")
        if p.is_dir():
            self.client.log_artifacts(run_id, str(p), artifact_path)
        else:
            self.client.log_artifact(run_id, str(p), artifact_path)

    def log_dict(self, run_id: str, data: Mapping[str, Any], artifact_file: str) -> None:
        """Store ``data`` as a JSON (or ``.yaml``) artifact named ``artifact_file``."""
        self.client.log_dict(run_id, dict(data), artifact_file)

    def log_table(
        self,
        run_id: str,
        rows: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Any]],
        artifact_file: str,
    ) -> None:
        """Store a table (row dicts or a dict of columns) as a ``.csv`` or ``.json`` artifact.

        JSON goes through MLflow's own table format (shown by the MLflow UI);
        CSV is a plain header + rows file for spreadsheets and ``skewlab compare``.
        """
        columns = _columns(rows)
        suffix = Path(artifact_file).suffix.lower()
        if suffix == ".json":
            self.client.log_table(run_id, columns, artifact_file)
        elif suffix == ".csv":
            names = list(columns)
            n = len(next(iter(columns.values()), []))
            with tempfile.TemporaryDirectory(prefix="skewlab-") as tmp:
                local = Path(tmp) / Path(artifact_file).name
                with local.open("w", newline="") as fh:
                    writer = csv.writer(fh)
                    writer.writerow(names)
                    for i in range(n):
                        writer.writerow([columns[c][i] for c in names])
                parent = str(Path(artifact_file).parent)
                self.client.log_artifact(run_id, str(local), None if parent == "." else parent)
        else:
            raise ConfigError(f"table artifact must end in .csv or .json, got {artifact_file!r}")

    def artifact_dir(self, run_id: str) -> Path | None:
        """The local directory of the run's artifacts (``None`` for remote stores)."""
        uri = self.client.get_run(run_id).info.artifact_uri
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file"):
            return Path(unquote(parsed.path))
        return None

    def list_artifacts(self, run_id: str, path: str | None = None) -> list[str]:
        """Artifact paths (files and directories) directly under ``path`` of the run."""
        return [f.path for f in self.client.list_artifacts(run_id, path)]

    # ------------------------------------------------------------ reading back

    def get_run_summary(self, run_id: str) -> RunSummary:
        """Params, latest metric values, user tags and identity of ``run_id``."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException as exc:
            raise TrackingError(f"cannot read MLflow run {run_id!r}: {exc}") from exc
        tags = dict(run.data.tags)
        return RunSummary(
            run_id=run.info.run_id,
            run_name=run.info.run_name or "",
            experiment_id=run.info.experiment_id,
            status=run.info.status,
            start_time_ms=run.info.start_time,
            end_time_ms=run.info.end_time,
            params=dict(run.data.params),
            metrics={k: float(v) for k, v in run.data.metrics.items()},
            tags={k: v for k, v in tags.items() if not k.startswith("mlflow.")},
            parent_run_id=tags.get(PARENT_RUN_TAG),
            artifact_uri=run.info.artifact_uri,
        )

    def metric_history(self, run_id: str, name: str) -> list[tuple[int, float]]:
        """``(step, value)`` of every point of metric ``name``, ordered by step."""
        points = self.client.get_metric_history(run_id, name)
        return sorted((int(m.step), float(m.value)) for m in points)

    def child_runs(self, parent_run_id: str) -> list[str]:
        """Ids of the runs nested under ``parent_run_id``, oldest first."""
        parent = self.client.get_run(parent_run_id)
        runs = self.client.search_runs(
            [parent.info.experiment_id],
            filter_string=f"tags.`{PARENT_RUN_TAG}` = '{parent_run_id}'",
            order_by=["attributes.start_time ASC"],
        )
        return [r.info.run_id for r in runs]

    def compare(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        """One row per run: ``run_id``, ``run_name``, ``status``, ``params.*``, ``metrics.*``.

        Every row has the same keys (the union over the runs; ``None`` where a
        run lacks a param or metric), so the rows print as one table.
        """
        summaries = [self.get_run_summary(r) for r in run_ids]
        params = sorted({k for s in summaries for k in s.params})
        metrics = sorted({k for s in summaries for k in s.metrics})
        rows = []
        for s in summaries:
            row: dict[str, Any] = {"run_id": s.run_id, "run_name": s.run_name, "status": s.status}
            row.update({f"params.{k}": s.params.get(k) for k in params})
            row.update({f"metrics.{k}": s.metrics.get(k) for k in metrics})
            rows.append(row)
        return rows


def _columns(
    rows: Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Any]],
) -> dict[str, list[Any]]:
    """A dict of equal-length columns from row dicts or columns."""
    if isinstance(rows, Mapping):
        cols = {str(k): list(v) for k, v in rows.items()}
    else:
        names: list[str] = []
        for r in rows:
            names.extend(k for k in r if k not in names)
        cols = {n: [r.get(n) for r in rows] for n in names}
    if len({len(v) for v in cols.values()}) > 1:
        raise ConfigError("table columns have different lengths")
    return cols

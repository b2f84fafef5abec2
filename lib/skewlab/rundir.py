"""The run directory: the one place that names every file and Delta app id of a run.

Every process of a live run gets the run directory and its role; it asks
:class:`RunDir` where its settings, markers, logs and checkpoints are, and
:func:`app_id` which Delta app id its writes carry. No other module builds
such a path or app id. A process reads its settings once, at its start
(:func:`settings_text`, then its settings type's parser), and passes them down.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skewlab.envsettings import env_settings

__all__ = ["DELTA_ROOT_ENV", "RunDir", "app_id", "delta_root_of", "settings_text"]

DELTA_ROOT_ENV = "SKEWLAB_DELTA_ROOT"
"""Where the Delta tables live (a path or ``s3://...``); default ``<data dir>/delta``."""


def delta_root_of(home: str | Path) -> str:
    """The Delta root of runs under data dir ``home`` (``$SKEWLAB_DELTA_ROOT`` wins)."""
    return env_settings().delta_root or str(Path(home) / "delta")


def settings_text(arg: str) -> str:
    """A process's settings argument as JSON text, read once at its start: the file at
    ``arg`` (:attr:`RunDir.route_settings`, :meth:`RunDir.worker_settings`) if it exists,
    else ``arg`` itself (the JSON)."""
    path = Path(arg)
    return path.read_text() if path.exists() else arg


def app_id(job: str, run_id: str) -> str:
    """The Delta app id of ``job``'s idempotent writes for run ``run_id``: ``<job>:<run_id>``.

    ``job`` is one of ``route``, ``work-<i>`` (:meth:`RunDir.worker_app`),
    ``aggregate``, ``monitor``, ``controller``, ``scaleout``, ``scaleout-decisions``
    or a control step's name (``rebalance``, ``autoscale``, ``scale-out``).
    """
    return f"{job}:{run_id}"


@dataclass(frozen=True)
class RunDir:
    """``<home>/runs/<run_id>``: where one run's files live, named once.

    Files (all directly in :attr:`path`): ``handle.json`` (the run's handle),
    ``settings.json`` (the run's settings as a whole), ``route.json`` /
    ``worker-<i>.json`` (per-process settings), markers ``route.ready``,
    ``route.stop``, ``workers.stop``, ``spares.stop``, ``worker-<i>.ready``,
    ``stop`` (autoscale), ``expected.json`` / ``quality.json`` (results a later
    task reads), ``hangs.txt`` (hung workers found, a line each), ``mlflow.json``
    (the open MLflow run), ``mlflow-not-logged.json`` (what it could not log into it),
    logs ``<role>.log``, and the route job's Spark ``checkpoint/`` and ``spark/`` data folders.
    """

    path: Path

    @classmethod
    def of(cls, path: str | Path) -> RunDir:
        """The run dir at ``path`` (its name is the run id)."""
        return cls(Path(path))

    @classmethod
    def at(cls, home: str | Path, run_id: str) -> RunDir:
        """``<home>/runs/<run_id>`` (``home`` resolved; nothing created)."""
        return cls(Path(home).resolve() / "runs" / run_id)

    @classmethod
    def create(cls, home: str | Path, run_id: str) -> RunDir:
        """:meth:`at`, created if missing."""
        d = cls.at(home, run_id)
        d.path.mkdir(parents=True, exist_ok=True)
        return d

    @property
    def run_id(self) -> str:
        """The run's id: the name of :attr:`path`."""
        return self.path.name

    def __str__(self) -> str:
        return str(self.path)

    # ------------------------------------------------------------ settings and state

    @property
    def handle(self) -> Path:
        """The run's :class:`~skewlab.live.driver.handle.RunHandle` (JSON)."""
        return self.path / "handle.json"

    @property
    def settings(self) -> Path:
        """The run's settings as one JSON document."""
        return self.path / "settings.json"

    @property
    def route_settings(self) -> Path:
        """The route job's settings (:class:`~skewlab.spark.route.RouteSettings` as JSON)."""
        return self.path / "route.json"

    def worker_settings(self, i: int) -> Path:
        """Instance ``i``'s settings (:class:`~skewlab.live.worker.settings.WorkerSettings`)."""
        return self.path / f"worker-{i}.json"

    @property
    def expected(self) -> Path:
        """The plain count of ``events`` (the aggregate phase, for a later quality task)."""
        return self.path / "expected.json"

    @property
    def quality(self) -> Path:
        """The data-quality report (for a later summarize task)."""
        return self.path / "quality.json"

    @property
    def mlflow_run(self) -> Path:
        """The run's open MLflow run (id, store, URL), so a later process can attach to it."""
        return self.path / "mlflow.json"

    @property
    def mlflow_not_logged(self) -> Path:
        """What the run could not log into its MLflow run (the server unreachable)."""
        return self.path / "mlflow-not-logged.json"

    @property
    def drain_progress(self) -> Path:
        """The last drain progress line the DAG's sensor logged (it logs only changes)."""
        return self.path / "drain.progress"

    @property
    def controller_state(self) -> Path:
        """The autoscale controller's persisted state."""
        return self.path / "controller-state.json"

    # ------------------------------------------------------------ markers

    @property
    def route_ready(self) -> Path:
        """Written by the route job once its query runs and a warm-up micro-batch is done:
        JSON with the start-up times ``t_process``, ``t_session``, ``t_query``,
        ``t_warm`` (epoch s) and ``spark_ui`` (the Spark UI's URL or null)."""
        return self.path / "route.ready"

    @property
    def route_stop(self) -> Path:
        """Touched to make the route job finish what is available and exit."""
        return self.path / "route.stop"

    @property
    def workers_stop(self) -> Path:
        """Touched to stop workers ``0 .. W-1`` once they are drained."""
        return self.path / "workers.stop"

    @property
    def spares_stop(self) -> Path:
        """Touched to stop the spare instances (``W ..``) of a scale-out run."""
        return self.path / "spares.stop"

    def worker_stop(self, i: int, workers: int) -> Path:
        """The stop marker of instance ``i``: workers' below ``workers``, else the spares'."""
        return self.workers_stop if i < workers else self.spares_stop

    def worker_go(self, i: int) -> Path:
        """Touched to release instance ``i``'s warm process (``skewlab.live.worker.warm``)."""
        return self.path / f"worker-{i}.go"

    def worker_ready(self, i: int) -> Path:
        """Written by instance ``i`` once it restored its state and reads."""
        return self.path / f"worker-{i}.ready"

    @property
    def stop(self) -> Path:
        """The autoscale run's stop marker."""
        return self.path / "stop"

    @property
    def hangs(self) -> Path:
        """Hung workers the supervisor found and what it did, one line each (summary)."""
        return self.path / "hangs.txt"

    # ------------------------------------------------------------ logs and data

    def log(self, role: str) -> Path:
        """The log of process ``role`` (``route``, ``worker-<i>``, ``monitor``...)."""
        return self.path / f"{role}.log"

    @property
    def checkpoint(self) -> Path:
        """The route job's Spark streaming checkpoint."""
        return self.path / "checkpoint"

    @property
    def spark_workers(self) -> Path:
        """The Spark worker engine's requests, attempts and event log
        (:mod:`skewlab.live.driver.spark_launcher`, ``SKEWLAB_WORKER_ENGINE=spark``)."""
        return self.path / "spark-workers"

    @property
    def splitter_states(self) -> Path:
        """The route job's splitter states, a file per source partition and micro-batch,
        written by the tasks that route (inside the checkpoint: the two are recovered, or
        deleted, together)."""
        return self.checkpoint / "skewlab-splitters"

    @property
    def spark_data(self) -> Path:
        """The route job's Spark warehouse / temp folder."""
        return self.path / "spark"

    @property
    def route_warmup(self) -> Path:
        """The route job's warm-up query: its checkpoint and scratch Delta root (deleted
        once the warm-up batch is done)."""
        return self.path / "route-warmup"

    # ------------------------------------------------------------ topics and Delta app ids

    @property
    def events_topic(self) -> str:
        """The run's input topic."""
        return f"events-{self.run_id}"

    @property
    def routed_topic(self) -> str:
        """The route job's output topic (partition = worker)."""
        return f"routed-{self.run_id}"

    def app(self, job: str) -> str:
        """:func:`app_id` of ``job`` for this run."""
        return app_id(job, self.run_id)

    @staticmethod
    def worker_app(i: int, run_id: str) -> str:
        """The Delta app id of worker ``i``'s writes: ``work-<i>:<run_id>``."""
        return app_id(f"work-{i}", run_id)

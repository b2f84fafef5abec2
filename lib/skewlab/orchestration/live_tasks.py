"""The phase tasks of ``skewlab_experiment``: one phase of a live run per Airflow task.

In DAG order: :func:`ensure_services`, :func:`create_topics`, :func:`start_route_job`,
:func:`produce`, :func:`poke_drained` (a sensor: the route job and workers drained),
:func:`aggregate` (the verdict), :func:`summarize`, and :func:`stop_run` whatever happened.
Each task reopens the run from its handle, as the object of its kind
(:func:`~skewlab.live.driver.run.open_run`: a grouping run or an autoscale run), and
calls that phase.
Details: docs/live-run.md, section ``skewlab.orchestration.live_tasks``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.io.run_links import run_url, serve_hint
from skewlab.io.tracking import Tracker, TrackingSettings
from skewlab.live.autoscale.settings import AutoscaleSettings
from skewlab.live.report.tracking import LiveRun
from skewlab.orchestration.runs import result_for_xcom, settings_from_xcom
from skewlab.rundir import RunDir, delta_root_of

if TYPE_CHECKING:
    from skewlab.live.driver.base import PhasedRun
    from skewlab.live.driver.context import RunContext
    from skewlab.live.driver.run import Run
    from skewlab.quality.report import QualityReport

log = logging.getLogger(__name__)

AUTOSCALE = "autoscale"
ProgressFn = Callable[[dict[str, float]], None]

__all__ = [
    "aggregate",
    "create_topics",
    "ensure_services",
    "mlflow_url",
    "poke_drained",
    "produce",
    "quality_report",
    "start_route_job",
    "stop_run",
    "summarize",
    "wait_for_completion",
]


def _ref(ctx: RunContext) -> dict[str, Any]:
    return {"mode": "grouping", "run_id": ctx.handle.run_id, "run_dir": ctx.handle.run_dir}


@contextmanager
def _opened(ref: Mapping[str, Any], progress: ProgressFn | None = None) -> Iterator[PhasedRun]:
    """The run in this task, of either kind (:func:`~skewlab.live.driver.run.open_run`);
    released at the end (processes and topics stay: ``stop_jobs`` ends them)."""
    from skewlab.live.driver.run import open_run

    run = open_run(ref["run_dir"], progress)
    try:
        yield run
    finally:
        run.release()


@contextmanager
def _resumed(ref: Mapping[str, Any], progress: ProgressFn | None = None) -> Iterator[Run]:
    """The grouping run in this task; its loops stopped and client closed at the end
    (processes and topics stay: they belong to the run, ``stop_jobs`` ends them)."""
    from skewlab.live.driver.run import Run

    run = Run.resume(ref["run_dir"], progress)
    try:
        yield run
    finally:
        run.release()


def ensure_services(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A new run of the settings (XCom dict): its run dir and handle, the broker running."""
    from skewlab.live.driver.run import Run

    s = settings_from_xcom(settings)
    if isinstance(s, AutoscaleSettings):
        from skewlab.live.autoscale.run import AutoscaleRun

        auto = AutoscaleRun.new(s, detached=True)
        bootstrap = auto.services()
        auto.release()
        log.info("run %s: broker %s, run dir %s", auto.run_id, bootstrap, auto.files)
        return {"mode": AUTOSCALE, "run_id": auto.run_id, "run_dir": str(auto.files)}
    run = Run.new(s, detached=True)
    bootstrap = run.services()
    h = run.handle
    log.info("run %s: broker %s, run dir %s", h.run_id, bootstrap, h.run_dir)
    url = mlflow_url(h.home, {"run_id": h.run_id})
    if url:
        hint = serve_hint(TrackingSettings.for_runs(h.home).tracking_uri)
        log.info("MLflow run (filled while the run goes): %s%s", url, f" ({hint})" if hint else "")
    return _ref(run.ctx)


def create_topics(ref: Mapping[str, Any]) -> dict[str, Any]:
    """Create the run's ``events`` and ``routed`` topics."""
    with _opened(ref) as run:
        run.topics()
        log.info("topics %s, %s", run.handle.events_topic, run.handle.routed_topic)
    return dict(ref)


def start_route_job(ref: Mapping[str, Any]) -> dict[str, Any]:
    """Start the route job and the workers (an autoscale run: its monitor and controller)
    in the background; wait until they are ready."""
    with _opened(ref) as run:
        run.start()
        if run.handle.route_cmd:
            log.info("route job: %s", " ".join(run.handle.route_cmd))
        pids = {name: rec.pid for name, rec in run.handle.procs.items()}
        log.info("background processes (pids): %s", pids)
    return dict(ref)


def produce(ref: Mapping[str, Any], progress: ProgressFn | None = None) -> dict[str, Any]:
    """Produce the workload (a scale-out run also drains here: its state manager owns the
    workers); an autoscale run produces its speed plan while its controller scales."""
    with _opened(ref, progress) as run:
        run.produce_task()
        produced = run.handle.produced or {}
        log.info("produced %s events in %.1f s", produced.get("events"), produced.get("seconds"))
    return dict(ref)


def wait_for_completion(ref: Mapping[str, Any], progress: ProgressFn | None = None) -> dict:
    """Stop the route job (it drains all input first), then wait for the workers to exit."""
    with _opened(ref, progress) as run:
        run.drain()
    return dict(ref)


def poke_drained(
    ref: Mapping[str, Any],
    logger: logging.Logger | None = None,
    wait_s: float = 15.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """One poke of the drain sensor: True once the run is drained (phase 5 done); False
    while a child still drains after ``wait_s``, so the sensor frees its worker slot
    between pokes (:meth:`~skewlab.live.driver.base.PhasedRun.poke_drain` of the run's
    kind). ``logger`` gets a grouping run's progress line when it changed."""
    with _opened(ref) as run:
        return run.poke_drain(wait_s, logger, clock, sleep)


def mlflow_url(home: str | Path, result: Mapping[str, Any]) -> str | None:
    """The page of the run's MLflow run: the row's ``mlflow_url``, else the run's open live
    run (``<run dir>/mlflow.json``), else built from the row's ``mlflow_run_id``."""
    if result.get("mlflow_url"):
        return str(result["mlflow_url"])
    if result.get("run_id"):
        live = LiveRun.find(RunDir.at(home, str(result["run_id"])))
        if live is not None:
            return live.url
    rid = result.get("mlflow_run_id")
    if not rid:
        return None
    tracker = Tracker(TrackingSettings.for_runs(home))
    experiment = tracker.client.get_run(str(rid)).info.experiment_id
    return run_url(tracker.settings.tracking_uri, experiment, str(rid))


def aggregate(ref: Mapping[str, Any]) -> dict[str, Any]:
    """Merge the partials into results; the row so far: run id and exactness verdict."""
    with _opened(ref) as run:
        report = run.aggregate()
        return {"run_id": ref["run_id"], "exact": run.exact, "exactness": report.summary()}


def quality_report(home: str | Path, run_id: str, window_s: float) -> QualityReport:
    """The data-quality suites on run ``run_id`` under data dir ``home``.

    A run with a handle (a DAG run) is checked with its input counts and the
    report is saved for the summarize task; otherwise only the tables.
    """
    from skewlab.io.delta.store import DeltaStore
    from skewlab.quality import check_run

    home = Path(home).resolve()
    run_dir = RunDir.at(home, run_id)
    if run_dir.handle.is_file():
        with _resumed({"run_dir": str(run_dir)}) as run:
            return run.check_quality()
    return check_run(DeltaStore(delta_root_of(home)), run_id, window_s=window_s, home=home)


def record_failed_quality(settings: Mapping[str, Any], result: Mapping[str, Any]) -> str | None:
    """The MLflow run of a live run whose quality check failed; its id, or None.

    ``summarize`` will not run after the failed check, yet the run (its plots,
    metrics and the failing report, which the check saved) is what a user opens
    to see why. Tables checked without a run handle have nothing to summarize.
    """

    run_dir = RunDir.at(settings["home"], result["run_id"])
    if settings.get("mode") == AUTOSCALE or not run_dir.handle.is_file():
        return None
    rid = summarize(settings, {**result, "quality_ok": False}).get("mlflow_run_id")
    return str(rid) if rid else None


def summarize(settings: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """Summary, plots and the MLflow run (with the quality report); the full row."""
    run_dir = RunDir.at(settings["home"], result["run_id"])
    with _opened({"run_dir": str(run_dir)}) as run:
        row = result_for_xcom(run.summarize())
    for key in ("quality_ok", "quality"):
        if key in result:
            row[key] = result[key]
    return row


def stop_run(ref: Mapping[str, Any] | None) -> list[str]:
    """Kill whatever of the run still runs and delete its topics (unless ``keep_topics``).

    Safe after any task, and when no run started (``ref`` None): returns the
    names of the processes it killed.
    """
    if not ref or "run_dir" not in ref:
        return []
    if not RunDir.of(ref["run_dir"]).handle.is_file():
        return []
    with _opened(ref) as run:
        return run.stop()

"""The phase tasks of ``skewlab_experiment``: one phase of a live run per Airflow task.

Each function is what one task does; they pass a small JSON-safe *ref*
(``{"mode": "grouping", "run_id": ..., "run_dir": ...}``) from task to task,
and the run's state lives in ``<run dir>/handle.json``
(:class:`~skewlab.live.handle.RunHandle`), so each task may run in its own
process, on a retry or after a scheduler restart:

=====================  ==================================================
task                   function
=====================  ==================================================
``ensure_services``    :func:`ensure_services` (new run id, broker)
``create_topics``      :func:`create_topics`
``start_route_job``    :func:`start_route_job` (route job + workers, detached)
``produce``            :func:`produce` (control loops in this task)
``wait_for_completion``:func:`wait_for_completion` (drain)
``aggregate``          :func:`aggregate` (merge + exactness)
``check_quality``      :func:`quality_report`
``summarize``          :func:`summarize` (summary, plots, MLflow)
``stop_jobs``          :func:`stop_run` (kill leftovers, delete topics)
=====================  ==================================================

**Autoscale runs stay one step.** The consumer-group autoscaling experiment
(:func:`skewlab.live.autoscale.run.run_autoscale`) runs its monitor,
controller and consumers as threads of one process around one metadata topic
(the stop -> ack -> start protocol); splitting it would mean re-attaching
those threads across processes. So with ``mode: autoscale`` :func:`produce`
runs the whole experiment and every other phase passes its row through.

Errors are :class:`~skewlab.errors.SkewlabError` with one-line messages; the
DAG turns them into ``AirflowFailException``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.orchestration.runs import result_for_xcom, settings_from_xcom

if TYPE_CHECKING:
    from skewlab.live.phases import RunContext
    from skewlab.quality import QualityReport

log = logging.getLogger(__name__)

AUTOSCALE = "autoscale"
ProgressFn = Callable[[dict[str, float]], None]

__all__ = [
    "aggregate",
    "create_topics",
    "ensure_services",
    "produce",
    "quality_report",
    "start_route_job",
    "stop_run",
    "summarize",
    "wait_for_completion",
]


def _ref(ctx: RunContext) -> dict[str, Any]:
    return {"mode": "grouping", "run_id": ctx.handle.run_id, "run_dir": ctx.handle.run_dir}


def _autoscale(ref: Mapping[str, Any]) -> bool:
    return ref.get("mode") == AUTOSCALE


@contextmanager
def _resumed(ref: Mapping[str, Any], progress: ProgressFn | None = None) -> Iterator[RunContext]:
    """The run's context in this task; its loops stopped and client closed at the end
    (processes and topics stay: they belong to the run, ``stop_jobs`` ends them)."""
    from skewlab.live.phases import resume

    ctx = resume(ref["run_dir"], progress)
    try:
        yield ctx
    finally:
        for loop in (ctx.rebalancer, ctx.manager):
            if loop is not None:
                loop[1].set()
        if ctx.client is not None:
            ctx.client.close()


def ensure_services(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A new run of the settings (XCom dict): its run dir and handle, the broker running."""
    from skewlab.live.autoscale.run import AutoscaleSettings
    from skewlab.live.phases import ensure_services as ensure
    from skewlab.live.phases import new_run

    s = settings_from_xcom(settings)
    if isinstance(s, AutoscaleSettings):
        return {"mode": AUTOSCALE}
    ctx = new_run(s, detached=True)
    bootstrap = ensure(ctx)
    log.info("run %s: broker %s, run dir %s", ctx.handle.run_id, bootstrap, ctx.run_dir)
    return _ref(ctx)


def create_topics(ref: Mapping[str, Any]) -> dict[str, Any]:
    """Create the run's ``events`` and ``routed`` topics."""
    from skewlab.live import phases

    if _autoscale(ref):
        return dict(ref)
    with _resumed(ref) as ctx:
        phases.create_topics(ctx)
        log.info("topics %s, %s", ctx.handle.events_topic, ctx.handle.routed_topic)
    return dict(ref)


def start_route_job(ref: Mapping[str, Any]) -> dict[str, Any]:
    """Start the route job and the workers in the background; wait for the route query."""
    from skewlab.live import phases

    if _autoscale(ref):
        return dict(ref)
    with _resumed(ref) as ctx:
        phases.start_jobs(ctx)
        log.info("route job: %s", " ".join(ctx.handle.route_cmd))
        pids = {name: rec.pid for name, rec in ctx.handle.procs.items()}
        log.info("background processes (pids): %s", pids)
    return dict(ref)


def produce(
    ref: Mapping[str, Any], settings: Mapping[str, Any], progress: ProgressFn | None = None
) -> dict[str, Any]:
    """Produce the workload (a scale-out run also drains here: its state manager owns the
    workers); an autoscale run runs whole here and returns its row as ``result``."""
    from skewlab.live import phases

    if _autoscale(ref):
        from skewlab.live.autoscale.run import run_autoscale

        s = settings_from_xcom(settings)
        return {"mode": AUTOSCALE, "result": result_for_xcom(run_autoscale(s))}  # type: ignore[arg-type]
    with _resumed(ref, progress) as ctx:
        phases.produce_and_drain(ctx)
        produced = ctx.handle.produced or {}
        log.info("produced %s events in %.1f s", produced.get("events"), produced.get("seconds"))
    return dict(ref)


def wait_for_completion(ref: Mapping[str, Any], progress: ProgressFn | None = None) -> dict:
    """Stop the route job (it drains all input first), then wait for the workers to exit."""
    from skewlab.live import phases

    if _autoscale(ref):
        return dict(ref)
    with _resumed(ref, progress) as ctx:
        phases.drain(ctx)
    return dict(ref)


def aggregate(ref: Mapping[str, Any]) -> dict[str, Any]:
    """Merge the partials into results; the row so far: run id and exactness verdict."""
    from skewlab.live import phases

    if _autoscale(ref):
        return dict(ref["result"])
    with _resumed(ref) as ctx:
        report = phases.aggregate(ctx)
    return {"run_id": ref["run_id"], "exact": report.exact, "exactness": report.summary()}


def quality_report(home: str | Path, run_id: str, window_s: float) -> QualityReport:
    """The data-quality suites on run ``run_id`` under data dir ``home``.

    A run with a handle (a DAG run) is checked with its input counts and the
    report is saved for the summarize task; otherwise only the tables.
    """
    from skewlab.io.delta import DeltaStore
    from skewlab.live import phases
    from skewlab.live.experiment import delta_root_of
    from skewlab.live.handle import HANDLE_FILE
    from skewlab.quality import check_run

    home = Path(home).resolve()
    run_dir = home / "runs" / run_id
    if (run_dir / HANDLE_FILE).is_file():
        with _resumed({"run_dir": str(run_dir)}) as ctx:
            return phases.check_quality(ctx)
    return check_run(DeltaStore(delta_root_of(home)), run_id, window_s=window_s)


def record_failed_quality(settings: Mapping[str, Any], result: Mapping[str, Any]) -> str | None:
    """The MLflow run of a live run whose quality check failed; its id, or None.

    ``summarize`` will not run after the failed check, yet the run (its plots,
    metrics and the failing report, which the check saved) is what a user opens
    to see why. Tables checked without a run handle have nothing to summarize.
    """
    from skewlab.live.handle import HANDLE_FILE

    run_dir = Path(settings["home"]).resolve() / "runs" / result["run_id"]
    if settings.get("mode") == AUTOSCALE or not (run_dir / HANDLE_FILE).is_file():
        return None
    rid = summarize(settings, {**result, "quality_ok": False}).get("mlflow_run_id")
    return str(rid) if rid else None


def summarize(settings: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """Summary, plots and the MLflow run (with the quality report); the full row."""
    from skewlab.live import phases

    if settings.get("mode") == AUTOSCALE:
        return dict(result)
    run_dir = Path(settings["home"]).resolve() / "runs" / result["run_id"]
    with _resumed({"run_dir": str(run_dir)}) as ctx:
        summary = phases.summarize(ctx)
    row = result_for_xcom(summary)
    for key in ("quality_ok", "quality"):
        if key in result:
            row[key] = result[key]
    return row


def stop_run(ref: Mapping[str, Any] | None) -> list[str]:
    """Kill whatever of the run still runs and delete its topics (unless ``keep_topics``).

    Safe after any task, and when no run started (``ref`` None): returns the
    names of the processes it killed.
    """
    from skewlab.live import phases
    from skewlab.live.handle import HANDLE_FILE

    if not ref or _autoscale(ref) or "run_dir" not in ref:
        return []
    if not (Path(ref["run_dir"]) / HANDLE_FILE).is_file():
        return []
    with _resumed(ref) as ctx:
        return phases.stop(ctx)

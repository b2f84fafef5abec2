"""
### skewlab_experiment: one live experiment, triggered from the UI

Runs the same library functions as the CLI. By default (`autoscale` = `none`) the grouping
experiment of `skewlab run` (`skewlab.live.driver.run.run_experiment`): events produced into
the embedded Kafka broker at the chosen rate, routed by the Spark route job with the chosen
**grouping**, processed by W worker processes, written to Delta, checked exact against a
plain count of the input, and logged as one MLflow run. On top of KEY grouping it can run a
**rebalance** policy (hot keys move by message sets) *or* a **scale-out** policy
(overloaded workers are split onto new instances by bottleneck-score thresholds). With
`autoscale` set to an algorithm it runs the consumer-group autoscaling experiment of
`skewlab autoscale` (`skewlab.live.autoscale.run.AutoscaleRun`) instead.

**Params** (the trigger form's fields cannot hold a bad value: choices are drop-downs,
numbers are brought back into their range, each field says what it allows; `validate_params`
checks again; a param the chosen experiment, workload or policy would ignore is refused
unless it keeps its default):

- grouping experiment: `strategy` (grouping), `workers`, `partitions`, `workload` (`zipf`,
  `country`, `country-half`, `eps-switch`, `dynamic`, `trace`) with its fields `skew` (R %,
  country), `zipf_s` (zipf, dynamic), `keys` (zipf, eps-switch, dynamic), `trace_file`
  (trace), `rate` (events/s), `duration` (s), `load_ramp_factor` (1: constant) and
  `load_ramp_every` (s), `service_us` (per-event busy work), `window` (s), `seed`;
- rebalance (needs `strategy` = `key`): `rebalance` (`none`, `smalops`, `dlb-h`, `dlb-l`,
  `lptf`), `rebalance_interval` (s), `rebalance_params` (JSON, e.g. `{"theta": 15}`);
- scale-out (needs `strategy` = `key`, `service_us` > 0, no rebalance): `scale_out` (`none`,
  `checkpoint`, `active-backup`, `restart`), `max_instances` (2..16), `scale_out_interval`
  (s), `scale_out_params` (JSON thresholds 0..100 and policy keys, e.g.
  `{"alarming": 40, "scale_out": 70, "scale_in": 20, "cooldown_s": 10}`);
- autoscale (instead of the grouping experiment): `autoscale` (`none`, `mwf`, `bfd`, ...,
  `kafka:N`), `autoscale_workload` (`stream:delta=5`, `step:...`, `const:...`),
  `autoscale_capacity` (C_bar, bytes/s), `autoscale_iteration` (s), with `partitions` and
  `duration`.

**Tasks** (one phase of the live run each, a method of `skewlab.live.driver.run.Run`, through
`skewlab.orchestration.live_tasks`; the run's state is `<data dir>/runs/<run>/handle.json`,
so each task may run in its own process):

1. `validate_params`: params -> `ExperimentSettings` or `AutoscaleSettings`; a bad value or
   combination, or a run too large for the data dir's disk, fails the run with one line
   saying what is allowed, before anything starts.
2. `ensure_services`: a new run id and run dir; the embedded broker started if no bootstrap
   is configured.
3. `create_topics`: `events-<run>` and `routed-<run>`.
4. `start_route_job`: the Spark route job (`spark-submit jobs/route.py` with
   `SKEWLAB_SPARK_SUBMIT=1` or a cluster `SKEWLAB_SPARK_MASTER`, else `python -m
   skewlab.live.mains.route_job`) and the W workers, detached in the background (pids and command
   in the handle); waits until the route query runs.
5. `produce`: the workload at the target rate; a `rebalance` or `scale_out` loop runs in
   this task meanwhile. The scale-out state manager starts and stops worker instances, so a
   scale-out run also drains here (the next task then has nothing left to do).
6. `wait_for_completion`: the route job drains all input and exits, then the workers. A
   sensor in `reschedule` mode: each poke looks for up to 15 s, then gives the worker slot
   back for 10 s; it logs a progress line only when the line changed.
7. `aggregate`: partials merged into results; exactness against a plain count of the input.
8. `check_quality`: the Great Expectations suites (`skewlab.quality.check_run`) on the run's
   Delta tables: `quarantine` (every row has a reason), `key_loads` / `partition_loads`
   (non-negative, no missing window), `results` (one row per window and key, counts
   non-negative, equal to the input counts). A failed expectation **fails the task** with
   one line naming it and up to 5 offending rows. An autoscale run writes none of these
   tables: the task records why it skipped them.
9. `summarize`: summary, plots and one MLflow run with the quality report.
10. `stop_jobs` (trigger rule `all_done`: runs whatever failed before it): kills every
    process of the run still running (the route job's Spark JVM too) and deletes the
    run's topics. It sits before `record_result`, not after: Airflow decides a run's state
    by its last tasks, and an always-succeeding last task would hide a failure.
11. `record_result`: pushes `mlflow_run_id`, `mlflow_run_url`, `exact` and `summary` to XCom
    (the task's **MLflow run** button opens that URL), tags the MLflow
    run with this DAG run and with the strategy and policies (`strategy`, `rebalance`,
    `scale_out`, `autoscale`; `none` when off), and **fails if the run was not exact** (or
    its key state was not, after a rebalance or scale-out).

The tasks that start or feed the run do not retry (a retry would start a second route job
or produce the workload twice); a failed task fails with one line (the error and, for a
process, the tail of its log). **Autoscale runs** (`autoscale` != `none`) go through the
same tasks, each one phase of `skewlab.live.autoscale.run.AutoscaleRun` (the same run id,
handle, broker, launcher, exactness check and MLflow run): `ensure_services` (run id,
broker), `create_topics` (data, monitor, consumer.metadata, processed), `start_route_job`
(the monitor and the controller, detached; the controller starts the consumers), `produce`
(the speed plan), `wait_for_completion` (the group's committed offsets reach the ends,
then the processes exit), `aggregate` (every offset processed once, no overlapping
ownership), `check_quality` (skipped), `summarize`, `stop_jobs`.

Task logs come from the loggers `skewlab.dags.experiment` and `skewlab.*` (the library's);
the MLflow run's URL is logged by `ensure_services` (the run fills while it goes) and by
`record_result`, the Great Expectations Data Docs page by `check_quality`.

Data directory: `$SKEWLAB_HOME` (set by `skewlab airflow`), else `./.skewlab`.
Compare runs in MLflow (`skewlab-live-<workload family>` and `skewlab-autoscale-live`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

from airflow.sdk import (
    BaseOperatorLink,
    Param,
    PokeReturnValue,
    TriggerRule,
    dag,
    get_current_context,
    task,
)

from skewlab.orchestration.params import param_schemas

log = logging.getLogger("skewlab.dags.experiment")
"""Named after the project (the DAG processor imports this file under a hashed name)."""

MLFLOW_URL_KEY = "mlflow_run_url"
"""The XCom of ``record_result`` that :class:`MlflowRunLink` opens."""
POKE_INTERVAL_S = 10.0
"""Seconds between two pokes of ``wait_for_completion`` (its slot is free meanwhile)."""


class MlflowRunLink(BaseOperatorLink):
    """The task's **MLflow run** button: the URL ``record_result`` pushed to XCom."""

    name = "MLflow run"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        url = XCom.get_value(ti_key=ti_key, key=MLFLOW_URL_KEY)
        return str(url) if url else ""


@dag(
    dag_id="skewlab_experiment",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    doc_md=__doc__,
    tags=["skewlab", "experiment", "live"],
    params={name: Param(**kwargs) for name, kwargs in param_schemas().items()},
    default_args={"owner": "skewlab", "retries": 1, "retry_delay": timedelta(seconds=10)},
    max_active_runs=1,
)
def skewlab_experiment() -> None:
    """Validate params -> run the live experiment -> check data quality -> record the result."""

    @task
    def validate_params() -> dict[str, Any]:
        """Build the experiment settings from the params (fails with one line if bad)."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.errors import ConfigError
        from skewlab.orchestration.params import check_size, settings_from_params
        from skewlab.orchestration.runs import settings_to_xcom

        params = dict(get_current_context()["params"])
        try:
            settings = settings_from_params(params)
            warnings = check_size(settings)  # before any service starts
        except ConfigError as exc:
            raise AirflowFailException(f"bad params: {exc}") from None
        for warning in warnings:
            log.warning("%s", warning)
        log.info("settings: %s", settings)
        return settings_to_xcom(settings)

    def fail(exc: Exception) -> NoReturn:
        """Fail the task with the error's one-line message (no retry)."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.orchestration.paramspec import one_line

        raise AirflowFailException(one_line(exc)) from None

    @task(retries=0)
    def ensure_services(settings: dict[str, Any]) -> dict[str, Any]:
        """A new run (id, run dir, handle) and a running broker."""
        from skewlab.errors import SkewlabError
        from skewlab.orchestration import live_tasks

        try:
            return live_tasks.ensure_services(settings)
        except SkewlabError as exc:
            fail(exc)

    @task(retries=0)
    def create_topics(ref: dict[str, Any]) -> dict[str, Any]:
        """The run's `events` and `routed` topics."""
        from skewlab.errors import SkewlabError
        from skewlab.orchestration import live_tasks

        try:
            return live_tasks.create_topics(ref)
        except SkewlabError as exc:
            fail(exc)

    @task(retries=0, execution_timeout=timedelta(minutes=10))
    def start_route_job(ref: dict[str, Any]) -> dict[str, Any]:
        """The Spark route job and the workers in the background; waits until routing."""
        from skewlab.errors import SkewlabError
        from skewlab.orchestration import live_tasks

        try:
            return live_tasks.start_route_job(ref)
        except SkewlabError as exc:
            fail(exc)

    @task(retries=0, execution_timeout=timedelta(hours=2))
    def produce(ref: dict[str, Any]) -> dict[str, Any]:
        """The workload at the target rate, with the control loop (autoscale: the whole run)."""
        from skewlab.errors import SkewlabError
        from skewlab.orchestration import live_tasks
        from skewlab.orchestration.runs import progress_logger

        try:
            return live_tasks.produce(ref, progress=progress_logger(log))
        except SkewlabError as exc:
            fail(exc)

    @task.sensor(retries=0, mode="reschedule", poke_interval=POKE_INTERVAL_S, timeout=3600.0)
    def wait_for_completion(ref: dict[str, Any]) -> PokeReturnValue:
        """Stop the route job once it has routed everything, then the workers; done when
        all exited (no slot held while they drain)."""
        from skewlab.errors import SkewlabError
        from skewlab.orchestration import live_tasks

        try:
            done = live_tasks.poke_drained(ref, log)
        except SkewlabError as exc:
            fail(exc)
        return PokeReturnValue(is_done=done, xcom_value=dict(ref))

    @task(retries=0)
    def aggregate(ref: dict[str, Any]) -> dict[str, Any]:
        """Merge the partials into results; the exactness verdict against the input."""
        from skewlab.errors import SkewlabError
        from skewlab.orchestration import live_tasks

        try:
            return live_tasks.aggregate(ref)
        except SkewlabError as exc:
            fail(exc)

    @task
    def check_quality(settings: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """Run the data-quality suites on the run's Delta tables; fail on a broken expectation.

        With the run's handle, the input counts `aggregate` saved are checked too, and the
        report is kept for `summarize` (which logs it to MLflow). Returns `result` with the
        quality verdict added. On a failure the run is summarized into MLflow first (with
        the failing report), then the task fails naming the expectations and the rows.
        """
        from pathlib import Path

        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.orchestration.runs import quality_skip_reason

        skipped = quality_skip_reason(settings)
        if skipped is not None:
            log.info("data quality of %s: %s", result["run_id"], skipped)
            return {**result, "quality_ok": None, "quality": skipped}

        from skewlab.io.tracking import Tracker, TrackingSettings
        from skewlab.orchestration.live_tasks import quality_report
        from skewlab.quality import log_quality

        home = Path(settings["home"]).resolve()
        report = quality_report(home, result["run_id"], float(settings["window_s"]))
        rid = result.get("mlflow_run_id")
        if rid:
            log_quality(Tracker(TrackingSettings.for_runs(home)), rid, report)
        log.info("%s", report.summary())
        page = report.run_page or report.data_docs  # the run's own page, else the index
        docs = page.as_uri() if page else None
        if docs:
            log.info("data docs (Great Expectations): %s", docs)
        if not report.ok:
            from skewlab.errors import SkewlabError
            from skewlab.orchestration.live_tasks import record_failed_quality

            where = ""
            try:
                failed_rid = record_failed_quality(settings, result)
            except SkewlabError as exc:  # the quality verdict is the message that matters
                log.warning("could not record the run in MLflow: %s", exc)
                failed_rid = None
            if failed_rid:
                where = f" (MLflow run {failed_rid})"
            raise AirflowFailException(report.summary() + where)
        return {**result, "quality_ok": True, "quality": report.summary(), "data_docs": docs}

    @task(retries=0)
    def summarize(settings: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """Summary, plots and the MLflow run (with the quality report); the full row."""
        from skewlab.errors import SkewlabError
        from skewlab.orchestration import live_tasks

        try:
            return live_tasks.summarize(settings, result)
        except SkewlabError as exc:
            fail(exc)

    @task(trigger_rule=TriggerRule.ALL_DONE)
    def stop_jobs() -> list[str]:
        """Kill the run's processes still running, delete its topics; runs whatever failed."""
        from skewlab.orchestration import live_tasks

        ref = get_current_context()["ti"].xcom_pull(task_ids="ensure_services")
        killed = live_tasks.stop_run(ref)
        if killed:
            log.warning("killed leftover processes of the run: %s", ", ".join(killed))
        return killed

    @task
    def record_result(settings: dict[str, Any], result: dict[str, Any]) -> str | None:
        """Push the MLflow run id, verdict and row to XCom; tag the run; fail if not exact."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.io.tracking import Tracker, TrackingSettings
        from skewlab.orchestration import live_tasks
        from skewlab.orchestration.runs import run_tags, verdict

        context = get_current_context()
        ti = context["ti"]
        rid = result.get("mlflow_run_id")
        url = live_tasks.mlflow_url(settings["home"], result) if rid else None
        ti.xcom_push(key="mlflow_run_id", value=rid)
        ti.xcom_push(key=MLFLOW_URL_KEY, value=url)
        ti.xcom_push(key="exact", value=bool(result.get("exact")))
        ti.xcom_push(key="summary", value=result)
        if rid:
            tracker = Tracker(TrackingSettings.for_runs(settings["home"]))
            tags = {**run_tags(settings), "airflow.dag_id": ti.dag_id, "airflow.run_id": ti.run_id}
            tracker.set_tags(rid, tags)
        log.info("run %s: %s", result["run_id"], result["exactness"])
        if url:
            from skewlab.io.run_links import serve_hint

            hint = serve_hint(TrackingSettings.for_runs(settings["home"]).tracking_uri)
            log.info("MLflow run %s: %s%s", rid, url, f" ({hint})" if hint else "")
        problem = verdict(result)
        if problem is not None:
            raise AirflowFailException(problem)
        return rid

    settings = validate_params()
    ref = wait_for_completion(produce(start_route_job(create_topics(ensure_services(settings)))))
    row = summarize(settings, check_quality(settings, aggregate(ref)))
    stopped = stop_jobs()
    row >> stopped
    recorded = record_result(settings, row)
    recorded.operator.operator_extra_links = (MlflowRunLink(),)
    stopped >> recorded


skewlab_experiment()

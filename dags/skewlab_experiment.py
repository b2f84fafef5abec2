"""
### skewlab_experiment: one live experiment, triggered from the UI

Runs the same library functions as the CLI. By default (`autoscale` = `none`) the grouping
experiment of `skewlab run` (`skewlab.live.experiment.run_experiment`): events produced into
the embedded Kafka broker at the chosen rate, routed by the Spark route job with the chosen
**grouping**, processed by W worker processes, written to Delta, checked exact against a
plain count of the input, and logged as one MLflow run. On top of KEY grouping it can run a
**rebalance** policy (hot keys move by message sets) *or* a **scale-out** policy
(overloaded workers are split onto new instances by bottleneck-score thresholds). With
`autoscale` set to an algorithm it runs the consumer-group autoscaling experiment of
`skewlab autoscale` (`skewlab.live.autoscale.run.run_autoscale`) instead.

**Params** (validated by the trigger form, then again by `validate_params`; a param the
chosen experiment or policy would ignore is refused unless it keeps its default):

- grouping experiment: `strategy` (grouping), `workers`, `partitions`, `workload` (spec such
  as `zipf:s=1.1,v=2.72` or `country:R80`), `rate` (events/s), `duration` (s), `load_ramp`
  (e.g. `2x/500s`, empty: constant), `service_us` (per-event busy work), `window` (s), `seed`;
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

**Tasks**

1. `validate_params`: params -> `ExperimentSettings` or `AutoscaleSettings`; a bad value or
   combination fails the run with one line saying what is allowed, before anything starts.
2. `run_experiment`: the live run (no retries: a retry would start a second experiment).
3. `check_quality`: the Great Expectations suites (`skewlab.quality.check_run`) on the run's
   Delta tables: `quarantine` (every row has a reason), `key_loads` / `partition_loads`
   (non-negative, no missing window), `results` (one row per window and key, counts
   non-negative). The report goes to the MLflow run (`quality/report.md`, `.json`); a failed
   expectation **fails the task** with one line naming it and up to 5 offending rows. An
   autoscale run writes none of these tables: the task records why it skipped them.
4. `record_result`: pushes `mlflow_run_id`, `exact` and `summary` to XCom, tags the MLflow
   run with this DAG run and with the strategy and policies (`strategy`, `rebalance`,
   `scale_out`, `autoscale`; `none` when off), and **fails if the run was not exact** (or
   its key state was not, after a rebalance or scale-out).

Data directory: `$SKEWLAB_HOME` (set by `skewlab airflow`), else `./.skewlab`.
Compare runs in MLflow (`skewlab-live-<workload family>` and `skewlab-autoscale-live`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from skewlab.orchestration.params import param_schemas

log = logging.getLogger(__name__)


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
        from skewlab.orchestration.params import settings_from_params
        from skewlab.orchestration.runs import settings_to_xcom

        params = dict(get_current_context()["params"])
        try:
            settings = settings_from_params(params)
        except ConfigError as exc:
            raise AirflowFailException(f"bad params: {exc}") from None
        log.info("settings: %s", settings)
        return settings_to_xcom(settings)

    @task(retries=0, execution_timeout=timedelta(hours=2))
    def run_experiment(settings: dict[str, Any]) -> dict[str, Any]:
        """Run the experiment the settings select (`skewlab run` or `skewlab autoscale`)."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.errors import SkewlabError
        from skewlab.orchestration.paramspec import one_line
        from skewlab.orchestration.runs import progress_logger, run_for_xcom, settings_from_xcom

        try:
            return run_for_xcom(settings_from_xcom(settings), progress=progress_logger(log))
        except SkewlabError as exc:
            raise AirflowFailException(one_line(exc)) from None

    @task
    def check_quality(settings: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """Run the data-quality suites on the run's Delta tables; fail on a broken expectation.

        Exactness against the input is `run_experiment`'s verdict (the input topic is gone
        by now); the suites here check the tables themselves. Returns `result` with the
        quality verdict added.
        """
        from pathlib import Path

        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.orchestration.runs import quality_skip_reason

        skipped = quality_skip_reason(settings)
        if skipped is not None:
            log.info("data quality of %s: %s", result["run_id"], skipped)
            return {**result, "quality_ok": None, "quality": skipped}

        from skewlab.io.delta import DeltaStore
        from skewlab.io.tracking import Tracker, TrackingSettings
        from skewlab.live.experiment import delta_root_of
        from skewlab.quality import check_run, log_quality

        home = Path(settings["home"]).resolve()
        store = DeltaStore(delta_root_of(home))
        report = check_run(store, result["run_id"], window_s=float(settings["window_s"]))
        rid = result.get("mlflow_run_id")
        if rid:
            log_quality(Tracker(TrackingSettings.for_runs(home)), rid, report)
        log.info("%s", report.summary())
        if not report.ok:
            raise AirflowFailException(report.summary())
        return {**result, "quality_ok": True, "quality": report.summary()}

    @task
    def record_result(settings: dict[str, Any], result: dict[str, Any]) -> str | None:
        """Push the MLflow run id, verdict and row to XCom; tag the run; fail if not exact."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.io.tracking import Tracker, TrackingSettings
        from skewlab.orchestration.runs import run_tags, verdict

        context = get_current_context()
        ti = context["ti"]
        rid = result.get("mlflow_run_id")
        ti.xcom_push(key="mlflow_run_id", value=rid)
        ti.xcom_push(key="exact", value=bool(result.get("exact")))
        ti.xcom_push(key="summary", value=result)
        if rid:
            tracker = Tracker(TrackingSettings.for_runs(settings["home"]))
            tags = {**run_tags(settings), "airflow.dag_id": ti.dag_id, "airflow.run_id": ti.run_id}
            tracker.set_tags(rid, tags)
        log.info("run %s: %s (mlflow run %s)", result["run_id"], result["exactness"], rid)
        problem = verdict(result)
        if problem is not None:
            raise AirflowFailException(problem)
        return rid

    settings = validate_params()
    record_result(settings, check_quality(settings, run_experiment(settings)))


skewlab_experiment()

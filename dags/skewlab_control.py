"""
### skewlab_control: a live run's rebalance, autoscale and scale-out loops, one interval per run

Scheduled (every minute by default), this DAG makes **one decision per control loop and
data interval** on a live run's Delta tables, through the same library functions the
in-process loops call (`skewlab.control`):

- **rebalance**: `key_loads` of the interval -> the rebalance policy (smalops, dlb-h, dlb-l,
  lptf) -> a new `assignments` version when a key moves (the route job picks it up at its
  next micro-batch) + a `decisions` row; the policy's state is checkpointed to
  `operator_state` (run `<run>#control-rebalance`) between intervals;
- **autoscale**: `partition_loads` of the interval -> the bin-packing heuristic (mwf, bfd...)
  -> the iteration's `consumer_assignments` + a `decisions` row (what the consumer group
  should be; a controller executes it);
- **scale-out**: per worker, signals of the interval from `key_loads` and `partials` (input
  rate, lag, busy; capacity `1e6 / service_us`) -> bottleneck score -> the scale-out policy
  of each operator (checkpoint, active-backup, restart; its state in `operator_state`, run
  `<run>#control-scale-out`) -> checkpoints of the worker state (`operator_state`, run
  `<run>#g<g>`) + one `decisions` row per action. Starting / stopping instances and the
  routing switch are only *recorded*: the in-process state manager
  (`skewlab run --scale-out`) owns the worker processes and carries them out.

Every write is a Delta app transaction keyed by the data interval: a retried or cleared
run writes nothing twice, and an interval older than the last decided one is not decided
again. Sub-minute loops (SMALOPS' 10 s) stay in process (`skewlab run --rebalance`).

**Params** (a manual run: the trigger form; a scheduled run: the JSON object in the Airflow
Variable `skewlab_control`, laid over the defaults): `run_id` (the live run), `delta_root`
(empty: `$SKEWLAB_DELTA_ROOT`, else `<data dir>/delta`), `rebalance` + `workers` +
`rebalance_lead` + `rebalance_params`, `autoscale` + `autoscale_capacity` + `autoscale_params`,
`scale_out` + `scale_out_params` (`service_us` required; `workers` is shared with rebalance).
A loop set to `none` is skipped. Bad params fail `plan` with one line naming what is allowed.

**Schedule**: `$SKEWLAB_CONTROL_SCHEDULE` when the DAG is parsed: a cron expression
(default `* * * * *`), or `off` for manual runs only. Catchup is off; one run at a time.

**Tasks**: `plan` (validate) -> one task per registered loop (`rebalance`, `autoscale`,
`scale-out`), each reading its data interval from the context.
XCom of each loop task: the step's result (status, reason, tables written, numbers).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import CronDataIntervalTimetable, Param, dag, get_current_context, task

from skewlab.control import STEPS
from skewlab.orchestration.control.params import control_schedule, param_schemas

log = logging.getLogger(__name__)

SCHEDULE = control_schedule()


@dag(
    dag_id="skewlab_control",
    schedule=CronDataIntervalTimetable(SCHEDULE, timezone="UTC") if SCHEDULE else None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    doc_md=__doc__,
    tags=["skewlab", "control", "rebalance", "autoscale", "scale-out"],
    params={name: Param(**kwargs) for name, kwargs in param_schemas().items()},
    default_args={"owner": "skewlab", "retries": 2, "retry_delay": timedelta(seconds=5)},
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=10),
)
def skewlab_control() -> None:
    """Validate the params -> one decision per registered control loop."""

    @task
    def plan() -> dict[str, Any]:
        """The validated settings (fails with one line if a param or the interval is bad)."""
        from airflow.sdk import Variable
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.errors import ConfigError
        from skewlab.orchestration.control.params import (
            VARIABLE,
            interval_ms,
            settings_from_params,
            uses_variable,
        )

        context = get_current_context()
        dag_run = context["dag_run"]
        variable = Variable.get(VARIABLE, default=None) if uses_variable(dag_run.run_type) else None
        try:
            settings = settings_from_params(dict(context["params"]), variable=variable)
            start, end = interval_ms(
                context.get("data_interval_start"), context.get("data_interval_end")
            )
        except ConfigError as exc:
            raise AirflowFailException(f"bad params: {exc}") from None
        log.info("run %s, interval [%d, %d): %s", settings.run_id, start, end, settings.steps)
        return settings.to_dict()

    @task(execution_timeout=timedelta(minutes=5))
    def control_step(name: str, planned: dict[str, Any]) -> dict[str, Any]:
        """Run loop ``name`` over this run's data interval (skipped when it is ``none``)."""
        from airflow.sdk.exceptions import (
            AirflowException,
            AirflowFailException,
            AirflowSkipException,
        )

        from skewlab.control import run_step
        from skewlab.errors import ConfigError, SkewlabError
        from skewlab.io.delta import DeltaStore
        from skewlab.orchestration.control.params import ControlSettings, interval_ms
        from skewlab.orchestration.paramspec import one_line

        settings = ControlSettings.from_dict(planned)
        step = settings.step(name)
        if step is None:
            raise AirflowSkipException(f"{name} is off (none)")
        context = get_current_context()
        try:
            start, end = interval_ms(
                context.get("data_interval_start"), context.get("data_interval_end")
            )
            store = DeltaStore(settings.delta_root)
            result = run_step(name, store, settings.run_id, step.policy, step.params, start, end)
        except ConfigError as exc:
            raise AirflowFailException(f"{name}: {one_line(exc)}") from None
        except SkewlabError as exc:  # Delta conflicts and the like: worth a retry
            raise AirflowException(f"{name}: {one_line(exc)}") from None
        log.info("%s", result.describe())
        return result.to_dict()

    planned = plan()
    for name in STEPS:
        control_step.override(task_id=name)(name, planned)


skewlab_control()

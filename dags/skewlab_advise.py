"""
### skewlab_advise: which strategy a stream needs (`skewlab advise` from a form)

Characterises a user's stream, simulates every grouping and rebalance policy (with a
small sweep of each one's main parameter) on the stream itself, ranks them (load
imbalance, p99 queueing delay, DIST_COST, keys moved per minute), marks the Pareto set
and names one recommendation with its reason and the `skewlab run` command that runs it
live. The same code as `skewlab advise` (docs/advise.md).

**Params** (the trigger form; give exactly one input)

- Input: `trace` (a CSV / JSON-lines / Parquet file the Airflow worker can read, with
  `format`), or `topic` + `bootstrap` (a Kafka topic, its newest `records` records,
  offsets untouched), or `delta` (a Delta table's path).
- `workers`, `service_us` (per-event service time), `rate` (empty: from the
  timestamps, else 80 % of capacity), `slack`, `seed`.
- `verify` (true / false) and `verify_events`: also run the recommendation and KEY
  grouping live and compare them with the simulator (`skewlab advise --verify`).

**Tasks**

1. `plan`: validates the params (a bad or missing input fails the run with one line,
   before anything is read).
2. `advise`: reads the stream (bad rows counted and logged), runs the advice, writes
   `advice.json` and the plots under `$SKEWLAB_HOME/runs/advise-<UTC time>/` and one
   MLflow run (`skewlab-advise` experiment: the ranking table, the plots, the
   recommendation as tags); with `verify`, the live runs and the simulator-vs-live
   table (logged, and `verify.csv` in the MLflow run). XCom: the recommendation, its
   reason, the command, the MLflow run id, the verify records.

Data directory: `$SKEWLAB_HOME` (set by `skewlab airflow`), else `./.skewlab`.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from skewlab.commands.advise import PARAMS

log = logging.getLogger("skewlab.dags.advise")
"""Named after the project (the DAG processor imports this file under a hashed name)."""


@dag(
    dag_id="skewlab_advise",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    doc_md=__doc__,
    tags=["skewlab", "advise"],
    params={name: Param(**kwargs) for name, kwargs in PARAMS.items()},
    default_args={"owner": "skewlab", "retries": 0, "retry_delay": timedelta(seconds=10)},
    max_active_runs=2,
)
def skewlab_advise() -> None:
    """Validate the form -> advise."""

    @task
    def plan() -> dict[str, Any]:
        """The params, checked as ``skewlab advise`` checks its flags."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.commands.advise import AdviseSettings
        from skewlab.errors import ConfigError

        params = dict(get_current_context()["params"])
        try:
            AdviseSettings.from_params(params)
        except (ConfigError, TypeError, ValueError) as exc:
            raise AirflowFailException(f"bad params: {exc}") from None
        return params

    @task(execution_timeout=timedelta(minutes=30))
    def advise(planned: dict[str, Any]) -> dict[str, Any]:
        """Run the advice and log its MLflow run; return the recommendation."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.commands.advise import AdviseSettings, execute, run_verify
        from skewlab.errors import SkewlabError
        from skewlab.io.run_links import run_link

        settings = AdviseSettings.from_params(planned)
        try:
            done = execute(settings, progress=None, warn=log.warning)
        except SkewlabError as exc:
            raise AirflowFailException(str(exc)) from None
        if done.tracker is not None and done.run_id is not None:
            ti = get_current_context()["ti"]
            done.tracker.set_tags(
                done.run_id, {"airflow.dag_id": ti.dag_id, "airflow.run_id": ti.run_id}
            )
            log.info("MLflow run %s: %s", done.run_id, run_link(done.tracker, done.run_id))
        checked: list[dict[str, Any]] = []
        if settings.verify:
            try:
                result = run_verify(done, settings)
            except BaseException:
                done.end("FAILED")
                raise
            for line in result.table().splitlines():
                log.info("%s", line)
            checked = [  # plain JSON for XCom: no inf
                {k: (v if not isinstance(v, float) or math.isfinite(v) else None)
                 for k, v in rec.items()}
                for rec in result.records()
            ]  # fmt: skip
        done.end("FINISHED")
        doc = done.doc
        log.info("recommended: %s", doc["recommended"])
        log.info("why: %s", doc["reason"])
        log.info("run it live: %s", doc["run"])
        return {
            "recommended": doc["recommended"],
            "reason": doc["reason"],
            "run": doc["run"],
            "mlflow_run_id": done.run_id,
            "advice": str(done.files["advice"]),
            "verify": checked,
        }

    advise(plan())  # type: ignore[arg-type]  # an XComArg stands for the dict at parse time


skewlab_advise()

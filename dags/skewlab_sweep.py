"""
### skewlab_sweep: a grid of experiments, one MLflow child run per cell, one comparison

The grid is **strategies x workloads x worker counts x seeds**. Each cell runs in its own
mapped task (dynamic task mapping) and is logged as a child run under one parent MLflow
run; the last task compares the cells and writes the table and the plots to the parent.

**Params** (the trigger form: every field typed, its allowed values under it; the
defaults run a small custom grid of 4 sim cells)

- Grid: `preset`: `custom` (the grid below) or a seed reproduction that fixes strategies,
  workloads, workers and the service time:
  - `dkg-country`: key, shuffle, pkg, dkg on DKG's `country:R0` .. `country:R100`
    (steps of 20), 10 workers, 1 ms per event;
  - `smalops-zipf`: every grouping on SMALOPS' Zipf (s=1.1, v=2.72, 10,000 keys),
    8 partitions, 50 us per event;
  - `scale-workers`: key, pkg, dkg, w-choices on `country:R80` with W = 4, 8, 16, 32.
- Grid: `mode`: `sim` (default: the simulator, seconds per cell) or `live` (one small live
  experiment per cell through the embedded broker, Spark and Delta; at most 24 cells).
- Grid: `strategies` (a multi-select of the groupings), `workloads` (one spec per line),
  `workers` and `seeds` (JSON lists of integers).
- Cell size: `events` (sim), `service_us`, `rate` (empty: sim runs at 80 % of the workers'
  capacity, live at 2,000 events/s), `duration` and `partitions` (live), `window`.

A value outside its schema is refused by the form (or the API); `plan` checks again and
fails with one line naming the param, the bad value and what is allowed.

**Tasks**

1. `plan`: params -> validated sweep settings and the list of cells (a bad value fails
   the run with one line, before anything starts).
2. `start_parent`: creates the parent MLflow run (`skewlab-sweep-<preset>` experiment),
   or finds it again on a retry; its URL is in the task log.
3. `run_cell` (mapped over the cells, one at a time: live cells share the broker and
   the cores): runs the cell and logs its child run; a cell already finished under the
   parent is not run again; the child run's URL is in the task log. No task polls: a cell
   runs to its end in its task.
4. `compare` (runs even if some cells failed): reads the child runs back from MLflow,
   writes `comparison/sweep.csv`, `sweep.md` and the plots `imbalance.png`,
   `p99_latency.png`, `throughput.png`, `moved_state.png` to the parent run, ends it
   FINISHED (or FAILED and fails the task if a cell is missing). XCom: `parent_run_id`,
   `parent_run_url`.

Task logs come from the logger `skewlab.dags.sweep` (and `skewlab.orchestration.*`).

Data directory: `$SKEWLAB_HOME` (set by `skewlab airflow`), else `./.skewlab`.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from skewlab.io.run_links import run_link, run_url
from skewlab.orchestration.sweep_form import param_schemas

log = logging.getLogger("skewlab.dags.sweep")
"""Named after the project (the DAG processor imports this file under a hashed name)."""


@dag(
    dag_id="skewlab_sweep",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    doc_md=__doc__,
    tags=["skewlab", "sweep", "experiment"],
    params={name: Param(**kwargs) for name, kwargs in param_schemas().items()},
    default_args={"owner": "skewlab", "retries": 1, "retry_delay": timedelta(seconds=10)},
    max_active_runs=1,
)
def skewlab_sweep() -> None:
    """Plan the grid -> start the parent run -> one mapped task per cell -> compare."""

    @task
    def plan() -> dict[str, Any]:
        """Validate the params; return the settings and the cells."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.errors import ConfigError
        from skewlab.orchestration.sweep_form import settings_from_params
        from skewlab.orchestration.sweep_grid import grid_cells

        try:
            settings = settings_from_params(dict(get_current_context()["params"]))
        except ConfigError as exc:
            raise AirflowFailException(f"bad params: {exc}") from None
        log.info("sweep: preset %s, grid %s", settings.preset or "custom", settings.to_dict())
        cells = [c.to_dict() for c in grid_cells(settings)]
        log.info("sweep: %d cells in %s mode", len(cells), settings.mode)
        return {"settings": settings.to_dict(), "cells": cells}

    @task
    def cells_of(planned: dict[str, Any]) -> list[dict[str, Any]]:
        """The cells to map over."""
        cells: list[dict[str, Any]] = planned["cells"]
        return cells

    @task
    def start_parent(planned: dict[str, Any]) -> str:
        """Create (or find again) the parent MLflow run of this DAG run."""
        from skewlab.io.tracking import Tracker, TrackingSettings
        from skewlab.orchestration import sweep_cells
        from skewlab.orchestration.sweep_grid import SweepSettings

        settings = SweepSettings.from_dict(planned["settings"])
        ti = get_current_context()["ti"]
        tracker = Tracker(TrackingSettings.for_runs(settings.home))
        rid = sweep_cells.start_parent(tracker, settings, key=f"{ti.dag_id}/{ti.run_id}")
        tracker.set_tags(rid, {"airflow.dag_id": ti.dag_id, "airflow.run_id": ti.run_id})
        log.info("parent MLflow run %s: %s", rid, run_link(tracker, rid))
        return rid

    @task(max_active_tis_per_dagrun=1, execution_timeout=timedelta(minutes=30))
    def run_cell(cell: dict[str, Any], planned: dict[str, Any], parent: str) -> dict[str, Any]:
        """Run one cell and log its child run; return its table row."""
        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.errors import SkewlabError
        from skewlab.io.tracking import Tracker, TrackingSettings
        from skewlab.orchestration import sweep_cells
        from skewlab.orchestration.sweep_grid import SweepCell, SweepSettings

        settings = SweepSettings.from_dict(planned["settings"])
        tracker = Tracker(TrackingSettings.for_runs(settings.home))
        try:
            row = sweep_cells.run_cell(settings, SweepCell.from_dict(cell), parent, tracker)
        except SkewlabError as exc:
            raise AirflowFailException(" ".join(str(exc).split())) from None
        rid = row["child_run_id"]
        log.info("cell %s: MLflow run %s: %s", row["cell"], rid, run_link(tracker, rid))
        return row

    @task(trigger_rule="all_done")
    def compare(planned: dict[str, Any], parent: str) -> str:
        """Write the comparison to the parent run; fail if a cell is missing."""
        from pathlib import Path

        from airflow.sdk.exceptions import AirflowFailException

        from skewlab.io.tracking import Tracker, TrackingSettings
        from skewlab.orchestration import sweep_compare
        from skewlab.orchestration.sweep_grid import SweepSettings

        settings = SweepSettings.from_dict(planned["settings"])
        tracker = Tracker(TrackingSettings.for_runs(settings.home))
        ti = get_current_context()["ti"]
        out = Path(settings.home) / "sweeps" / ti.run_id.replace(":", "_").replace("+", "_")
        result = sweep_compare.compare(settings, parent, tracker, out)
        ti.xcom_push(key="parent_run_id", value=parent)
        exp_id = tracker.client.get_run(parent).info.experiment_id
        ti.xcom_push(
            key="parent_run_url",
            value=run_url(tracker.settings.tracking_uri, exp_id, parent),
        )
        log.info("%s", result["markdown"])
        log.info("comparison on the parent MLflow run %s: %s", parent, run_link(tracker, parent))
        if result["missing"]:
            raise AirflowFailException(
                f"{len(result['missing'])} of {result['cells']} cells did not finish: "
                + ", ".join(result["missing"][:5])
            )
        return parent

    planned = plan()
    parent = start_parent(planned)
    rows = run_cell.partial(planned=planned, parent=parent).expand(cell=cells_of(planned))
    done = compare(planned, parent)
    rows >> done


skewlab_sweep()

"""One sweep cell run and logged: the parent MLflow run, the child run, its metrics."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.errors import SkewlabError
from skewlab.grouping import make_grouping
from skewlab.io.tracking import PARENT_RUN_TAG
from skewlab.orchestration.sweep_grid import (
    CELL_METRICS,
    CELL_TAG,
    SWEEP_TAG,
    SweepCell,
    SweepSettings,
)
from skewlab.runsettings import ExperimentSettings
from skewlab.sim.engine import SimConfig, simulate
from skewlab.sim.service import ConstantService
from skewlab.workload.spec import parse_workload

if TYPE_CHECKING:
    from skewlab.io.tracking import RunSummary, Tracker

__all__ = ["cell_row", "find_cell_run", "run_cell", "start_parent"]

log = logging.getLogger(__name__)


def _quote(value: str) -> str:
    """``value`` safe inside a single-quoted MLflow filter string."""
    return value.replace("\\", "").replace("'", "")


def _settings_params(settings: SweepSettings) -> dict[str, str]:
    out = {}
    for k, v in settings.to_dict().items():
        if k == "home":
            continue
        out[k] = ",".join(str(x) for x in v) if isinstance(v, list) else str(v)
    return out


def start_parent(tracker: Tracker, settings: SweepSettings, key: str) -> str:
    """The parent run of sweep ``key`` (e.g. the Airflow run id): found, or created RUNNING.

    Finding it first makes the task idempotent: a retry reuses the parent
    instead of starting a second sweep.
    """
    exp_id = tracker.experiment_id(settings.experiment)
    found = tracker.client.search_runs(
        [exp_id], filter_string=f"tags.`{SWEEP_TAG}` = '{_quote(key)}'", max_results=1
    )
    if found:
        rid: str = found[0].info.run_id
        log.info("sweep %s: reusing parent run %s", key, rid)
        return rid
    tags = {SWEEP_TAG: key, "mode": settings.mode, "preset": settings.preset or "custom"}
    rid = tracker.start_run(
        settings.experiment, f"sweep-{key}", params=_settings_params(settings), tags=tags
    )
    tracker.log_metrics(rid, {"cells": float(settings.n_cells)})
    log.info("sweep %s: parent run %s, %d cells", key, rid, settings.n_cells)
    return rid


def find_cell_run(tracker: Tracker, parent_run_id: str, cell: SweepCell) -> str | None:
    """Id of a FINISHED child run of ``cell`` under the parent, if one exists."""

    exp_id = tracker.client.get_run(parent_run_id).info.experiment_id
    found = tracker.client.search_runs(
        [exp_id],
        filter_string=(
            f"tags.`{PARENT_RUN_TAG}` = '{_quote(parent_run_id)}' "
            f"and tags.`{CELL_TAG}` = '{_quote(cell.name)}' and attributes.status = 'FINISHED'"
        ),
        max_results=1,
    )
    return found[0].info.run_id if found else None


def _sim_metrics(settings: SweepSettings, cell: SweepCell) -> dict[str, float]:

    config = SimConfig(
        service=ConstantService(settings.service_us * 1e-6),
        window_s=settings.window_s,
        seed=cell.seed,
    )
    result = simulate(
        make_grouping(cell.strategy, workers=cell.workers),
        parse_workload(cell.workload, seed=cell.seed),
        settings.events,
        settings.cell_rate(cell.workers),
        config=config,
    )
    return {
        "events": float(result.events),
        "rate": float(result.rate),
        "imb_score": result.imb_score,
        "std_dev": result.std_dev,
        "dist_cost": result.dist_cost,
        "p99_ms": result.sojourn.p99 * 1e3,
        "p50_ms": result.sojourn.p50 * 1e3,
        "queue_p99_ms": result.queue_delay.p99 * 1e3,
        "throughput": result.throughput,
        "moved_state": float(result.partials - result.window_keys),
        "wall_s": result.wall_s,
    }


def _extra_partials(delta_root: Path, run_id: str) -> int:
    """Rows of ``key_loads`` beyond one per (window, key): the partials to merge."""
    from skewlab.io.delta.store import DeltaStore

    t = DeltaStore(delta_root).read("key_loads", run_id=run_id, columns=["window_start", "key"])
    pairs = set(zip(t["window_start"].to_pylist(), t["key"].to_pylist()))
    return t.num_rows - len(pairs)


def _live_metrics(settings: SweepSettings, cell: SweepCell) -> dict[str, float]:
    from skewlab.live.driver.run import run_experiment

    s = ExperimentSettings(
        strategy=cell.strategy,
        workers=cell.workers,
        partitions=settings.partitions,
        workload=cell.workload,
        rate=settings.cell_rate(cell.workers),
        duration_s=settings.duration_s,
        service_us=settings.service_us,
        window_s=settings.window_s,
        seed=cell.seed,
        home=settings.home,
        mlflow=False,
    )
    summary = run_experiment(s)
    if not summary.exact:
        raise SkewlabError(
            f"cell {cell.name}: run {summary.run_id} is not exact: {summary.exactness}"
        )
    moved = _extra_partials(Path(settings.home) / "delta", summary.run_id)
    return {
        "events": float(summary.events),
        "rate": float(summary.produce_rate),
        "imb_score": summary.imb_score,
        "std_dev": summary.std_dev,
        "dist_cost": summary.dist_cost,
        "p99_ms": summary.p99_ms,
        "p50_ms": summary.p50_ms,
        "throughput": summary.throughput,
        "moved_state": float(moved + summary.tuples_migrated),
        "wall_s": summary.wall_s,
        "exact": 1.0,
    }


def run_cell(
    settings: SweepSettings, cell: SweepCell, parent_run_id: str, tracker: Tracker
) -> dict[str, Any]:
    """Run ``cell`` and log it as a child run of ``parent_run_id``; its table row.

    Steps: 1. a FINISHED child run of this cell already exists -> return its row
    (a retried task does not run the cell twice); 2. start the child run
    (params: the cell; tags: strategy, workload, mode, the cell name);
    3. simulate or run live; 4. log the metrics and end FINISHED -- or FAILED,
    re-raising, if step 3 failed.
    """
    done = find_cell_run(tracker, parent_run_id, cell)
    if done is not None:
        log.info("cell %s: already done (run %s)", cell.name, done)
        return cell_row(cell, tracker.get_run_summary(done))
    params = {**cell.to_dict(), "mode": settings.mode, "rate": settings.cell_rate(cell.workers)}
    if settings.mode == "sim":
        params.update(events=settings.events, service_us=settings.service_us)
    else:
        params.update(duration_s=settings.duration_s, partitions=settings.partitions)
    tags = {
        "strategy": cell.strategy,
        "workload": cell.workload,
        "workers": cell.workers,
        "mode": settings.mode,
        CELL_TAG: cell.name,
    }
    rid = tracker.start_run(settings.experiment, cell.name, params, tags, parent_run_id)
    try:
        metrics = (
            _sim_metrics(settings, cell)
            if settings.mode == "sim"
            else _live_metrics(settings, cell)
        )
        tracker.log_metrics(rid, {k: v for k, v in metrics.items() if math.isfinite(v)})
    except BaseException:
        tracker.end_run(rid, "FAILED")
        raise
    tracker.end_run(rid, "FINISHED")
    log.info(
        "cell %s: imbScore %.2f%% p99 %.3f ms", cell.name, metrics["imb_score"], metrics["p99_ms"]
    )
    return cell_row(cell, tracker.get_run_summary(rid))


def cell_row(cell: SweepCell, run: RunSummary) -> dict[str, Any]:
    """One table row: the cell, the run status and its metrics (``None`` where missing)."""
    row: dict[str, Any] = {
        "cell": cell.name,
        "strategy": cell.strategy,
        "workload": cell.workload,
        "workers": cell.workers,
        "seed": cell.seed,
        "status": run.status,
        "events": run.metrics.get("events"),
    }
    row.update({m: run.metrics.get(m) for m in CELL_METRICS})
    row["child_run_id"] = run.run_id
    return row

"""Experiment sweeps: a grid of cells, one MLflow child run per cell, one comparison.

The DAG ``skewlab_sweep`` stays thin (ARCHITECTURE.md, Orchestration); the sweep
itself lives in :mod:`.sweep_grid` (presets, settings, cells), :mod:`.sweep_form` (the
DAG's params), :mod:`.sweep_cells` (one cell run and logged) and :mod:`.sweep_compare`,
as functions tested without Airflow; this module gathers their names:

* :data:`PRESETS` names the seed reproductions (``dkg-country``, ``smalops-zipf``...).
* :func:`settings_from_params` validates the DAG params (grid, mode, preset) once
  and builds a frozen :class:`SweepSettings`; every error is a one-line
  :class:`~skewlab.errors.ConfigError` naming the allowed values.
* :func:`grid_cells` expands the grid ``workloads x workers x seeds x strategies``
  into :class:`SweepCell` s (one mapped task each).
* :func:`start_parent` creates (or, on a retry, finds) the parent MLflow run.
* :func:`run_cell` runs one cell -- the simulator (``mode="sim"``, seconds) or
  :func:`skewlab.live.experiment.run_experiment` (``mode="live"``) -- and logs
  it as a child run of the parent. A cell already FINISHED under the parent is
  not run again (retries are idempotent).
* :func:`compare` reads the child runs back from MLflow and writes the
  comparison to the parent run: ``sweep.csv``, ``sweep.md`` and one plot per
  metric of :data:`PLOT_METRICS` (imbalance, p99 latency, throughput, moved
  state per strategy); it ends the parent FINISHED, or FAILED if a cell is missing.

The metrics of a cell (same names in both modes):

==================  ==================================================================
``imb_score``       DLB imbScore %, (max - mean) / mean of the workers' loads
``std_dev``         DKG STD_DEV %, per-window standard deviation of the load shares
``dist_cost``       DKG DIST_COST, workers used per distinct key
``p99_ms``          p99 latency in ms: sim = sojourn (queueing + service), live = end-to-end
``throughput``      events/s processed (sim: events / makespan)
``moved_state``     partial aggregates shipped to the merge step beyond one per
                    (window, key) (DKG's WorkerBolt -> AggregatorBolt topology; 0 for KEY
                    grouping), plus the tuples migrated by a live rebalance
==================  ==================================================================

Nothing heavy is imported at module import (the DAG file imports this module
at parse time): the simulator, MLflow and matplotlib are imported inside functions.
"""

from __future__ import annotations

from skewlab.orchestration.sweep_cells import cell_row, find_cell_run, run_cell, start_parent
from skewlab.orchestration.sweep_form import CUSTOM, param_schemas, settings_from_params
from skewlab.orchestration.sweep_grid import (
    CELL_METRICS,
    CELL_TAG,
    MAX_CELLS,
    MODES,
    PLOT_METRICS,
    PRESETS,
    SWEEP_TAG,
    TABLE_COLUMNS,
    Preset,
    SweepCell,
    SweepSettings,
    grid_cells,
)

__all__ = [
    "CELL_METRICS",
    "CELL_TAG",
    "CUSTOM",
    "MAX_CELLS",
    "MODES",
    "PLOT_METRICS",
    "PRESETS",
    "SWEEP_TAG",
    "TABLE_COLUMNS",
    "Preset",
    "SweepCell",
    "SweepSettings",
    "cell_row",
    "find_cell_run",
    "grid_cells",
    "param_schemas",
    "run_cell",
    "settings_from_params",
    "start_parent",
]

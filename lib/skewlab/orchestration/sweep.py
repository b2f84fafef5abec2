"""Experiment sweeps: a grid of cells, one MLflow child run per cell, one comparison.

This module gathers the names of :mod:`.sweep_grid` (presets, settings, cells),
:mod:`.sweep_form` (the DAG's params), :mod:`.sweep_cells` (one cell run and logged) and
:mod:`.sweep_compare`; it imports nothing heavy (the DAG file imports it at parse time).
What each step does and the metrics of a cell: docs/orchestration.md, "Sweeps".
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

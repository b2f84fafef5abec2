"""Experiment sweeps: a grid of cells, one MLflow child run per cell, one comparison.

The DAG ``skewlab_sweep`` stays thin (ARCHITECTURE.md, Orchestration); the sweep
itself lives here, as functions tested without Airflow:

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

import itertools
import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.errors import ConfigError, SkewlabError
from skewlab.grouping import GROUPING_NAMES, make_grouping
from skewlab.io.tracking import PARENT_RUN_TAG
from skewlab.orchestration.form_schema import check_params, form_param
from skewlab.services.datadir import resolve_home
from skewlab.sim import ConstantService, SimConfig, simulate
from skewlab.workload import parse_workload
from skewlab.workload.spec import WORKLOAD_NAMES

if TYPE_CHECKING:
    from skewlab.io.tracking import RunSummary, Tracker

__all__ = [
    "CELL_METRICS",
    "MAX_CELLS",
    "MODES",
    "PLOT_METRICS",
    "PRESETS",
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

log = logging.getLogger(__name__)

MODES = ("sim", "live")
MAX_CELLS = {"sim": 400, "live": 24}
"""Largest grid per mode: a live cell takes about a minute of the whole machine."""

CELL_TAG = "sweep.cell"
SWEEP_TAG = "sweep.key"
CELL_METRICS = ("imb_score", "std_dev", "dist_cost", "p99_ms", "throughput", "moved_state")
PLOT_METRICS: tuple[tuple[str, str, str], ...] = (
    ("imb_score", "imbalance", "imbScore % (lower is better)"),
    ("p99_ms", "p99_latency", "p99 latency, ms"),
    ("throughput", "throughput", "throughput, events/s"),
    ("moved_state", "moved_state", "moved state, partials"),
)
"""``(metric, plot file stem, y label)`` of each comparison plot."""

TABLE_COLUMNS = (
    "cell",
    "strategy",
    "workload",
    "workers",
    "seed",
    "status",
    "events",
    *CELL_METRICS,
    "child_run_id",
)


@dataclass(frozen=True)
class Preset:
    """A named seed reproduction: the grid (and service time) it fixes."""

    name: str
    description: str
    strategies: tuple[str, ...]
    workloads: tuple[str, ...]
    workers: tuple[int, ...]
    service_us: float


PRESETS: dict[str, Preset] = {
    "dkg-country": Preset(
        "dkg-country",
        "DKG's country-skew datasets COUNTRY_SKEW_R0..R100: key, shuffle, pkg and dkg "
        "on 10 workers at 1 ms per event (DKG's processDuration)",
        ("key", "shuffle", "pkg", "dkg"),
        tuple(f"country:R{r}" for r in (0, 20, 40, 60, 80, 100)),
        (10,),
        1000.0,
    ),
    "smalops-zipf": Preset(
        "smalops-zipf",
        "SMALOPS' Zipf workload (s=1.1, v=2.72, 10,000 keys) on 8 partitions at 50 us per "
        "event: every grouping against hashing",
        GROUPING_NAMES,
        ("zipf:s=1.1,v=2.72,keys=10000",),
        (8,),
        50.0,
    ),
    "scale-workers": Preset(
        "scale-workers",
        "how imbalance grows with W: key, pkg, dkg and w-choices on country:R80 with "
        "4, 8, 16 and 32 workers at 1 ms per event",
        ("key", "pkg", "dkg", "w-choices"),
        ("country:R80",),
        (4, 8, 16, 32),
        1000.0,
    ),
}
"""The presets of ``skewlab_sweep`` (param ``preset``): each replaces the grid's strategies,
workloads and worker counts and the service time; seeds, mode, events and window stay."""


@dataclass(frozen=True)
class SweepSettings:
    """A validated sweep (STYLE rule 6): the grid, the mode and how big each cell is.

    Invariants: every strategy and workload is valid, no list is empty or has
    duplicates, and the grid has at most :data:`MAX_CELLS` ``[mode]`` cells.
    ``rate`` ``None`` in sim mode means ``load * W / service`` (80 % of capacity).
    """

    strategies: tuple[str, ...] = ("key", "shuffle", "pkg", "dkg")
    workloads: tuple[str, ...] = ("zipf:s=1.1,v=2.72",)
    workers: tuple[int, ...] = (4,)
    seeds: tuple[int, ...] = (0,)
    mode: str = "sim"
    preset: str = ""
    events: int = 200_000
    service_us: float = 1000.0
    load: float = 0.8
    rate: float | None = None
    duration_s: float = 5.0
    partitions: int = 2
    window_s: float = 5.0
    experiment: str = "skewlab-sweep"
    home: str = field(default=".skewlab", compare=False)

    def __post_init__(self) -> None:

        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.preset and self.preset not in PRESETS:
            raise ConfigError(
                f"unknown preset {self.preset!r}; valid: {', '.join(sorted(PRESETS))}"
            )
        for name in ("strategies", "workloads", "workers", "seeds"):
            values = getattr(self, name)
            if not values:
                raise ConfigError(f"{name} must list at least one value")
            if len(set(values)) != len(values):
                raise ConfigError(f"{name} lists a value twice: {list(values)}")
        for w in self.workers:
            if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= 64:
                raise ConfigError(f"workers must be integers in 1..64, got {w!r}")
        for s in self.seeds:
            if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                raise ConfigError(f"seeds must be integers >= 0, got {s!r}")
        for name in self.strategies:
            make_grouping(name, workers=max(self.workers))
        for spec in self.workloads:
            parse_workload(spec, seed=0)
        if self.events < 1:
            raise ConfigError(f"events must be >= 1, got {self.events}")
        if not self.service_us > 0 and self.mode == "sim":
            raise ConfigError(f"service_us must be > 0 in sim mode, got {self.service_us}")
        if self.service_us < 0:
            raise ConfigError(f"service_us must be >= 0, got {self.service_us}")
        if not 0 < self.load <= 10:
            raise ConfigError(f"load must be in (0, 10], got {self.load}")
        if self.rate is not None and not self.rate > 0:
            raise ConfigError(f"rate must be > 0 events/s, got {self.rate}")
        for name in ("duration_s", "window_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be > 0 s, got {value}")
        if not 1 <= self.partitions <= 64:
            raise ConfigError(f"partitions must be in 1..64, got {self.partitions}")
        if not self.experiment.strip():
            raise ConfigError("experiment must be a non-empty name")
        n = self.n_cells
        if n > MAX_CELLS[self.mode]:
            raise ConfigError(
                f"the grid has {n} cells; {self.mode} mode allows at most {MAX_CELLS[self.mode]}"
            )

    @property
    def n_cells(self) -> int:
        """Size of the grid."""
        return len(self.strategies) * len(self.workloads) * len(self.workers) * len(self.seeds)

    def cell_rate(self, workers: int) -> float:
        """Arrival rate of a cell: ``rate`` if set, else ``load * W / service`` (sim)."""
        if self.rate is not None:
            return self.rate
        if self.mode == "live":
            return 2000.0
        return self.load * workers / (self.service_us * 1e-6)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (tuples as lists); :meth:`from_dict` rebuilds and re-validates."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepSettings:
        names = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"unknown sweep setting(s) {', '.join(unknown)}")
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**kw)


@dataclass(frozen=True)
class SweepCell:
    """One point of the grid; ``name`` is unique within a sweep (the child run's name)."""

    index: int
    strategy: str
    workload: str
    workers: int
    seed: int

    @property
    def name(self) -> str:
        return f"{self.index:03d}-{self.strategy}-{self.workload}-W{self.workers}-s{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepCell:
        return cls(**dict(data))


# --------------------------------------------------------------------------- params


CUSTOM = "custom"
"""The ``preset`` choice that runs the grid of the form (``""`` is accepted as a synonym)."""
GRID, SIZES = "Grid", "Cell size"
_WORKLOAD_PATTERN = (
    "^(" + "|".join(sorted(WORKLOAD_NAMES, key=len, reverse=True)) + ")(:.+)?$"
    "|^COUNTRY_(HALF_)?SKEW_R[0-9]+$"
)

_PARAM_DOCS: dict[str, tuple[Any, dict[str, Any], str, str, str]] = {
    "preset": (
        CUSTOM,
        {
            "type": "string",
            "enum": [CUSTOM, *PRESETS],
            "values_display": {
                CUSTOM: "custom: the grid below",
                **{p.name: f"{p.name}: {p.description}" for p in PRESETS.values()},
            },
        },
        "A seed reproduction that fixes strategies, workloads, workers and service time, "
        "or custom: the grid below.",
        "Preset",
        GRID,
    ),
    "mode": (
        "sim",
        {"type": "string", "enum": list(MODES)},
        "sim: the simulator, seconds per cell; live: one small live experiment per cell "
        f"(at most {MAX_CELLS['live']} cells).",
        "Mode",
        GRID,
    ),
    "strategies": (
        ["key", "shuffle", "pkg", "dkg"],
        {
            "type": "array",
            "items": {"type": "string", "enum": list(GROUPING_NAMES)},
            "examples": list(GROUPING_NAMES),
            "minItems": 1,
            "uniqueItems": True,
        },
        "Groupings to compare.",
        "Strategies",
        GRID,
    ),
    "workloads": (
        ["zipf:s=1.1,v=2.72"],
        {
            "type": "array",
            "items": {"type": "string", "pattern": _WORKLOAD_PATTERN},
            "minItems": 1,
            "maxItems": 20,
            "uniqueItems": True,
        },
        "Workload specs, one per line, e.g. zipf:s=1.1,v=2.72,keys=10000 or country:R80.",
        "Workloads",
        GRID,
    ),
    "workers": (
        [4],
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": 64},
            "minItems": 1,
            "maxItems": 16,
            "uniqueItems": True,
        },
        "Worker counts W, a JSON list such as [4, 8, 16].",
        "Workers",
        GRID,
    ),
    "seeds": (
        [0],
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
            "minItems": 1,
            "maxItems": 20,
            "uniqueItems": True,
        },
        "Workload seeds, a JSON list such as [0, 1, 2] (each seed repeats every cell).",
        "Seeds",
        GRID,
    ),
    "events": (
        200_000,
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10_000_001},
        "sim: events per cell.",
        "Events",
        SIZES,
    ),
    "service_us": (
        1000.0,
        {"type": "number", "minimum": 0, "exclusiveMaximum": 1e6},
        "Service time per event, us (sim: > 0).",
        "Service time (us)",
        SIZES,
    ),
    "rate": (
        None,
        {"type": ["number", "null"], "exclusiveMinimum": 0},
        "Events/s (empty: sim 80% of the workers' capacity, live 2000).",
        "Rate (events/s)",
        SIZES,
    ),
    "duration": (
        5.0,
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 3600},
        "live: seconds of producing per cell.",
        "Duration (s)",
        SIZES,
    ),
    "partitions": (
        2,
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 65},
        "live: input partitions.",
        "Partitions",
        SIZES,
    ),
    "window": (
        5.0,
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 3600},
        "Metrics window, s.",
        "Window (s)",
        SIZES,
    ),
}
"""DAG param name -> (default, JSON schema, description, form title, form section).
Integer scalars use exclusive bounds so the form refuses a bad value instead of
clamping it (:mod:`skewlab.orchestration.form_schema`)."""

_PARAM_WORDS = {
    "workloads": "a list of 1..20 workload specs without repeats, each name[:args] with name "
    f"one of {', '.join(WORKLOAD_NAMES)} (lower case), or DKG's COUNTRY_SKEW_R<n>"
}
"""What a param allows, in words, where its schema says it badly (a pattern)."""
_PARAM_FIELDS = {"duration": "duration_s", "window": "window_s"}


def param_schemas() -> dict[str, dict[str, Any]]:
    """``{name: kwargs}`` for ``airflow.sdk.Param(**kwargs)`` of ``skewlab_sweep``: every
    default submittable, the allowed values in each description."""
    return {
        name: form_param(
            name, default, schema, doc, title=title, section=section, words=_PARAM_WORDS.get(name)
        )
        for name, (default, schema, doc, title, section) in _PARAM_DOCS.items()
    }


def settings_from_params(
    params: Mapping[str, Any], home: str | None = None, experiment: str | None = None
) -> SweepSettings:
    """Validate the DAG params and build the sweep settings (one-line ConfigError if bad).

    Each param is checked against its form schema first (:func:`form_schema.check_params`:
    one line naming the param, the bad value and what is allowed; unknown names are
    refused). A ``preset`` other than ``custom`` replaces ``strategies``, ``workloads``,
    ``workers`` and ``service_us``; the other params apply as given.
    """

    params = dict(params)
    if params.get("preset") == "":
        params["preset"] = CUSTOM
    check_params(params, {name: doc[1] for name, doc in _PARAM_DOCS.items()}, _PARAM_WORDS)
    values = {name: params.get(name, doc[0]) for name, doc in _PARAM_DOCS.items()}
    preset = values.pop("preset")
    preset = "" if preset == CUSTOM else preset
    kw: dict[str, Any] = {
        _PARAM_FIELDS.get(name, name): tuple(value) if isinstance(value, list | tuple) else value
        for name, value in values.items()
    }
    if preset:
        p = PRESETS[preset]
        kw.update(
            strategies=p.strategies,
            workloads=p.workloads,
            workers=p.workers,
            service_us=p.service_us,
        )
    name = experiment or f"skewlab-sweep-{preset or 'custom'}"
    try:
        return SweepSettings(**kw, preset=preset, experiment=name, home=str(resolve_home(home)))
    except ConfigError as exc:
        raise ConfigError(" ".join(str(exc).split())) from None


def grid_cells(settings: SweepSettings) -> list[SweepCell]:
    """The grid in a fixed order: workload, then W, then seed, then strategy (fastest)."""
    product = itertools.product(
        settings.workloads, settings.workers, settings.seeds, settings.strategies
    )
    return [
        SweepCell(i, strategy, workload, workers, seed)
        for i, (workload, workers, seed, strategy) in enumerate(product)
    ]


# --------------------------------------------------------------------------- MLflow runs


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
    from skewlab.io.delta import DeltaStore

    t = DeltaStore(delta_root).read("key_loads", run_id=run_id, columns=["window_start", "key"])
    pairs = set(zip(t["window_start"].to_pylist(), t["key"].to_pylist()))
    return t.num_rows - len(pairs)


def _live_metrics(settings: SweepSettings, cell: SweepCell) -> dict[str, float]:
    from skewlab.live.experiment import ExperimentSettings, run_experiment

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

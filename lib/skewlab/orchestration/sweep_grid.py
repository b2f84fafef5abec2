"""A sweep's grid: presets, the validated settings and the cells they expand into."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from skewlab.errors import ConfigError
from skewlab.grouping import GROUPING_NAMES, make_grouping
from skewlab.workload.spec import parse_workload

__all__ = [
    "CELL_METRICS",
    "CELL_TAG",
    "MAX_CELLS",
    "MODES",
    "PLOT_METRICS",
    "PRESETS",
    "SWEEP_TAG",
    "TABLE_COLUMNS",
    "Preset",
    "SweepCell",
    "SweepSettings",
    "grid_cells",
]

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
        """Rebuild from :meth:`to_dict`'s form (lists back to tuples), validated again.

        Raises :class:`~skewlab.errors.ConfigError` naming any unknown setting."""
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
        """The child run's name: index, strategy, workload, W and seed (unique in a sweep)."""
        return f"{self.index:03d}-{self.strategy}-{self.workload}-W{self.workers}-s{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        """The cell as a JSON-safe dict (an Airflow mapped task's argument)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepCell:
        """The cell :meth:`to_dict` wrote."""
        return cls(**dict(data))


def grid_cells(settings: SweepSettings) -> list[SweepCell]:
    """The grid in a fixed order: workload, then W, then seed, then strategy (fastest)."""
    product = itertools.product(
        settings.workloads, settings.workers, settings.seeds, settings.strategies
    )
    return [
        SweepCell(i, strategy, workload, workers, seed)
        for i, (workload, workers, seed, strategy) in enumerate(product)
    ]

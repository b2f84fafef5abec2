"""Seed-reproduction experiments (``skewlab experiment NAME``).

Each module listed in :data:`MODULES` exposes ``EXPERIMENTS: dict[str,
Experiment]``; :func:`registry` merges them. An experiment is a function
``(ExperimentArgs) -> ExperimentReport``: it runs in the simulator or offline
(pure library), prints nothing itself, and returns a table (ours beside the
paper's figures), the plots it saved under ``args.out`` and the parameters, which
the command prints and logs as one MLflow run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skewlab.experiments.claims import Claim
from skewlab.registry import resolve

MODULES: tuple[str, ...] = (
    "skewlab.experiments.smalops",
    "skewlab.experiments.dlb",
    "skewlab.experiments.autoscale",
    "skewlab.experiments.scaleout",
    "skewlab.experiments.dkg",
)
"""Modules that contribute experiments (a module that does not exist yet is skipped)."""


@dataclass(frozen=True)
class ExperimentArgs:
    """What every experiment gets: where to write, how big, which seed."""

    out: Path
    scale: float = 1.0
    """Fraction of the paper's size (1.0 = the paper's; tests use ~0.01)."""
    seed: int = 1
    progress: Callable[[str], None] | None = None


@dataclass
class ExperimentReport:
    """The outcome: a printable table, the plots, params and scalar metrics for MLflow."""

    title: str
    table: str
    plots: list[Path] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    """The paper's claims beside our values, each judged by its rule (``skewlab reproduce``)."""
    setup: str = ""
    """The setup this run used, in a few lines (stated in the reproduction report)."""


Experiment = Callable[[ExperimentArgs], ExperimentReport]


def registry() -> Mapping[str, Experiment]:
    """Every experiment by name, from the modules in :data:`MODULES`."""
    merged: dict[str, Experiment] = {}
    for name in MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        merged.update(module.EXPERIMENTS)
    return merged


def get(name: str) -> Experiment:
    """The experiment called ``name``; an unknown name lists the valid ones."""
    return resolve(registry(), name, "experiment")

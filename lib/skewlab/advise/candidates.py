"""The strategies ``advise`` tries, and one simulated run of each on the user's stream.

A :class:`Candidate` is a grouping with its parameters, optionally with a rebalance
policy on top of KEY grouping (as ``skewlab run --rebalance`` runs it). :func:`candidates`
lists every grouping of :data:`skewlab.grouping.GROUPING_NAMES` and every policy of
:data:`skewlab.rebalance.REBALANCER_NAMES` (but ``none``, which is KEY grouping), each
with a small sweep of its main parameter (:data:`SWEEPS`). :func:`evaluate` runs one in
the simulator (:func:`skewlab.sim.simulate`) over the replayed stream and returns its
:class:`Outcome`: the four figures a user weighs. Details: docs/advise.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skewlab.advise.base import StreamWorkload
from skewlab.errors import ConfigError
from skewlab.grouping import GROUPING_NAMES, make_grouping
from skewlab.metrics import imb_score
from skewlab.rebalance import REBALANCER_NAMES, make_rebalancer
from skewlab.sim.engine import Progress, SimConfig, simulate
from skewlab.sim.rebalance_hook import RebalanceHook, StateTransfer
from skewlab.sim.result import SimResult
from skewlab.sim.service import ConstantService
from skewlab.spec import scaled_grouping_params

__all__ = [
    "SWEEPS",
    "Candidate",
    "Outcome",
    "SimSettings",
    "candidates",
    "evaluate",
    "rebalance_interval",
    "simulate_candidate",
    "window_of",
]

SWEEPS: Mapping[str, tuple[str, tuple[Any, ...]]] = {
    "dkg": ("initial_pool", (2, 4)),
    "d-choices": ("d", (None, 4)),
    "w-choices": ("theta", (None, 0.02)),
    "smalops": ("threshold", (0.05, 0.1)),
    "dlb-h": ("theta", (10.0, 20.0)),
    "dlb-l": ("theta", (15.0,)),
    "lptf": ("theta", (15.0,)),
}
"""Main parameter and the values tried of each strategy that has one (``None``: the
strategy's own default rule). Values that do not fit ``W`` (``d >= W``) are left out."""

STATE = StateTransfer()
"""A moved key's state: 1 ms plus its bytes at 1 Gbit/s (SMALOPS' split-state hand-off)."""

MAX_REBALANCE_S = 10.0
"""The live rebalancer's default interval (``--rebalance-interval``)."""

MAX_WINDOW_S = 5.0
"""The live run's default load window (``--window``)."""


@dataclass(frozen=True)
class Candidate:
    """One strategy to try: ``grouping`` with ``params``, or ``key`` with ``rebalance``.

    ``label`` names it in the table (``dkg initial_pool=4``, ``key+dlb-h theta=10``).
    """

    grouping: str
    params: Mapping[str, Any] = field(default_factory=dict)
    rebalance: str | None = None
    rebalance_params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.rebalance is not None and self.grouping != "key":
            raise ConfigError(f"a rebalance policy runs on key grouping, not {self.grouping!r}")

    @property
    def label(self) -> str:
        """``grouping[+policy] [param=value ...]``."""
        name = self.grouping if self.rebalance is None else f"key+{self.rebalance}"
        shown = {**self.params, **self.rebalance_params}
        extra = " ".join(f"{k}={_fmt(v)}" for k, v in shown.items() if v is not None)
        return f"{name} {extra}".strip()


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def candidates(workers: int) -> tuple[Candidate, ...]:
    """Every grouping and every rebalance policy with its :data:`SWEEPS` values for
    ``workers`` workers, groupings first, in registry order."""
    out: list[Candidate] = []
    for name in GROUPING_NAMES:
        param, values = SWEEPS.get(name, ("", (None,)))
        for v in values:
            if param == "d" and v is not None and v >= workers:
                continue
            out.append(Candidate(name, {param: v} if param and v is not None else {}))
    for policy in REBALANCER_NAMES:
        if policy == "none":
            continue
        param, values = SWEEPS.get(policy, ("", (None,)))
        for v in values:
            out.append(Candidate("key", {}, policy, {param: v} if param else {}))
    return tuple({c.label: c for c in out}.values())


@dataclass(frozen=True)
class SimSettings:
    """How every candidate is simulated: ``workers``, constant ``service_s`` per event,
    the load ``window_s`` (DIST_COST and imbalance are per window) and the rebalancers'
    ``interval_s``."""

    workers: int
    service_s: float
    window_s: float
    interval_s: float
    seed: int = 0
    poisson: bool = False
    """Poisson arrivals at the replay's rate (a stream without timestamps)."""

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"workers must be >= 1, got {self.workers}")
        for name in ("service_s", "window_s", "interval_s"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ConfigError(f"{name} must be a number > 0, got {v!r}")


def _nice(x: float) -> float:
    """``x`` rounded down to two significant digits (at least 1 ms)."""
    if x <= 1e-3:
        return 1e-3
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return float(f"{math.floor(x / step) * step:.3g}")


def window_of(span_s: float) -> float:
    """The load window: :data:`MAX_WINDOW_S`, shorter for a stream under ten windows long."""
    return _nice(min(MAX_WINDOW_S, span_s / 10.0))


def rebalance_interval(span_s: float) -> float:
    """The rebalancers' interval: :data:`MAX_REBALANCE_S`, shorter so a stream sees at least
    ten decisions."""
    return _nice(min(MAX_REBALANCE_S, span_s / 10.0))


@dataclass(frozen=True)
class Outcome:
    """One candidate's figures on the stream.

    ``imbalance`` is the events-weighted mean over load windows of imbScore (DLB Eq. 2,
    ``100 * std / mean`` of the workers' events in the window); ``p99_ms`` the 99th
    percentile of the queueing delay (wait before service); ``dist_cost`` DKG's DIST_COST
    (mean workers a key reached over the whole stream); ``keys_moved_min`` /
    ``state_moved_min`` the rebalancer's key moves and state bytes per minute of the
    stream (0 without one).
    """

    candidate: Candidate
    imbalance: float
    p99_ms: float
    dist_cost: float
    keys_moved_min: float
    state_moved_min: float
    p50_ms: float = 0.0
    sojourn_p99_ms: float = 0.0
    throughput: float = 0.0
    worker_loads: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """The candidate's label."""
        return self.candidate.label

    def figures(self) -> dict[str, float]:
        """The four ranked figures plus state per minute, by name."""
        return {
            "imbalance": self.imbalance,
            "p99_ms": self.p99_ms,
            "dist_cost": self.dist_cost,
            "keys_moved_min": self.keys_moved_min,
            "state_moved_min": self.state_moved_min,
        }


def window_imbalance(window_loads: np.ndarray) -> float:
    """imbScore of each load window, averaged weighted by the window's events (a stream's
    last, nearly empty window weighs nothing); 0 for no events."""
    loads = np.asarray(window_loads, dtype=np.float64)
    if loads.size == 0:
        return 0.0
    weights = loads.sum(axis=1)
    if weights.sum() <= 0:
        return 0.0
    scores = np.array([imb_score(row) for row in loads])
    return float((scores * weights).sum() / weights.sum())


def simulate_candidate(
    candidate: Candidate,
    workload: StreamWorkload,
    settings: SimSettings,
    events: int | None = None,
    progress: Progress | None = None,
    span_s: float | None = None,
) -> tuple[SimResult, list[RebalanceHook], float]:
    """One simulated run of ``candidate`` over the first ``events`` events of ``workload``:
    the simulator's result, its rebalance hooks and the span DKG's timings were scaled to
    (``span_s``, by default the replay's last arrival time)."""
    n = len(workload.stream) if events is None else events
    span = span_s if span_s is not None else max(float(workload.times()[n - 1]), 1e-9)
    params, _ = scaled_grouping_params(candidate.grouping, candidate.params, span)
    grouping = make_grouping(candidate.grouping, workers=settings.workers, **params)
    hooks: list[RebalanceHook] = []
    if candidate.rebalance is not None:
        rb = make_rebalancer(
            candidate.rebalance, settings.workers, **dict(candidate.rebalance_params)
        ).build()
        hooks.append(RebalanceHook(rb, interval_s=settings.interval_s, handoff=STATE))
    config = SimConfig(
        service=ConstantService(settings.service_s),
        window_s=settings.window_s,
        seed=settings.seed,
        arrivals="poisson" if settings.poisson else "workload",
    )
    r = simulate(
        grouping, workload, n, workload.arrival_rate, config=config, hooks=hooks, progress=progress
    )
    return r, hooks, span


def evaluate(
    candidate: Candidate,
    workload: StreamWorkload,
    settings: SimSettings,
    events: int | None = None,
    progress: Progress | None = None,
    span_s: float | None = None,
) -> Outcome:
    """Simulate ``candidate`` over the first ``events`` events of ``workload`` (all by default).

    DKG's timings are scaled to the stream's length (``span_s``, by default its last
    arrival time) as a live run scales them (:func:`skewlab.spec.scaled_grouping_params`);
    a rebalancer runs every ``settings.interval_s`` with SMALOPS' split-state hand-off
    (:data:`STATE`).
    """
    r, hooks, span = simulate_candidate(candidate, workload, settings, events, progress, span_s)
    minutes = span / 60.0
    moves = [m for h in hooks for d in (*h.decisions, *h.online) for m in d.moves]
    return Outcome(
        candidate=candidate,
        imbalance=window_imbalance(r.window_loads),
        p99_ms=r.queue_delay.p99 * 1e3,
        dist_cost=r.dist_cost,
        keys_moved_min=len(moves) / minutes,
        state_moved_min=sum(m.state_bytes for m in moves) / minutes,
        p50_ms=r.queue_delay.p50 * 1e3,
        sojourn_p99_ms=r.sojourn.p99 * 1e3,
        throughput=r.throughput,
        worker_loads=r.worker_loads,
    )

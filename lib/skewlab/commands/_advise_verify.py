"""``skewlab advise --verify``: the recommendation and KEY grouping, simulated and live.

1. the stream's first ``--verify-events`` events are written as a trace (key, size; no
   timestamps: the producer and the simulator both pace it at the verify rate, the
   service time scaled so the offered load is the advice's);
2. each strategy is simulated on exactly those events (evenly spaced arrivals);
3. each runs live through ``skewlab run``'s machinery (:func:`run_experiment`) with
   ``--workload trace:<that file>``;
4. per metric: the simulator's figure, the live one, the relative error.

Calibrated: the live pipeline's fixed latency, which the simulator does not model, is
measured on the KEY run (live p99 - simulated p99 sojourn) and added to the other
strategy's simulated p99. Details: docs/advise.md, "--verify".
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.advise import Advice
from skewlab.advise.base import Stream, StreamWorkload
from skewlab.advise.candidates import (
    Candidate,
    SimSettings,
    evaluate,
    rebalance_interval,
    window_imbalance,
    window_of,
)
from skewlab.advise.readers import write_trace_csv
from skewlab.report.table import format_table

if TYPE_CHECKING:
    from skewlab.commands.advise import AdviseSettings

METRICS = ("imbalance", "dist_cost", "p99_ms", "keys_moved_min")
"""Metrics compared, in table order."""

TARGETS = {"imbalance": 0.15, "dist_cost": 0.15, "p99_ms": 0.30, "keys_moved_min": math.inf}
"""The issue's targets for the relative error (keys moved: reported, no target)."""

ABS_TOLERANCE = {"imbalance": 1.0, "dist_cost": 0.05, "p99_ms": 0.0, "keys_moved_min": 0.0}
"""A figure within this absolute difference also meets its target (imbalance in points:
0.3 % against 0.5 % is a 40 % relative error of nothing)."""

DEFAULT_VERIFY_RATE = 1_500.0
"""The live runs' rate unless ``--verify-rate`` (or a slower stream) says: what the live
pipeline sustains on a busy 2-core machine, so its p99 is latency, not a backlog."""


def rel_error(sim: float, live: float) -> float:
    """``|sim - live| / |live|`` (0 when both are 0, inf when only live is 0)."""
    if live == 0:
        return 0.0 if sim == 0 else math.inf
    return abs(sim - live) / abs(live)


@dataclass
class VerifyRow:
    """One strategy's figures: simulated, live, and which run they came from."""

    label: str
    sim: dict[str, float]
    live: dict[str, float]
    run_id: str
    exact: bool
    notes: list[str] = field(default_factory=list)


@dataclass
class VerifyResult:
    """The two strategies' rows, the events and rate they ran at, and the calibration."""

    events: int
    rate: float
    p99_offset_ms: float
    rows: list[VerifyRow]
    service_us: float = 0.0

    def records(self) -> list[dict[str, Any]]:
        """One record per strategy and metric: sim, live, relative error, target."""
        out = []
        for r in self.rows:
            for m in METRICS:
                s, v = r.sim[m], r.live[m]
                err = rel_error(s, v)
                ok = err <= TARGETS[m] or abs(s - v) <= ABS_TOLERANCE[m]
                out.append({
                    "strategy": r.label, "metric": m, "sim": s, "live": v,
                    "rel_error": err, "abs_error": abs(s - v), "target": TARGETS[m],
                    "within": ok, "run_id": r.run_id,
                })  # fmt: skip
        return out

    def cells(self) -> list[list[str]]:
        """The table's cells, one row per strategy and metric."""
        cells = []
        for rec in self.records():
            err = rec["rel_error"]
            target = rec["target"]
            cells.append([
                rec["strategy"], rec["metric"], f"{rec['sim']:.3g}", f"{rec['live']:.3g}",
                "inf" if math.isinf(err) else f"{100 * err:.1f} %",
                "-" if math.isinf(target) else ("yes" if rec["within"] else "NO")
                + f" (<= {100 * target:.0f} %)",
            ])  # fmt: skip
        return cells

    def table(self) -> str:
        """The simulator-vs-live table with a head line and the calibration."""
        head = (
            f"verify: {self.events:,} events at {self.rate:,.0f} events/s, "
            f"{self.service_us:,.0f} us per event, simulated and live; "
            f"p99 calibrated by the live pipeline's fixed latency {self.p99_offset_ms:,.0f} ms "
            "(measured on the KEY run, so KEY's p99 error is 0 by construction)"
        )
        runs = [f"  {r.label}: live run {r.run_id} ({'exact' if r.exact else 'NOT EXACT'})"
                + "".join(f"; {n}" for n in r.notes) for r in self.rows]  # fmt: skip
        body = format_table(
            ("strategy", "metric", "sim", "live", "rel. error", "within target"),
            self.cells(),
        )
        return "\n".join([head, *runs, "", body])

    def metrics(self) -> dict[str, float]:
        """``verify_<strategy>_<metric>_err`` per row, for MLflow (finite values only)."""
        out = {}
        for rec in self.records():
            name = (
                f"verify_{rec['strategy'].replace(' ', '_').replace('+', '_')}_{rec['metric']}_err"
            )
            name = "".join(c if c.isalnum() or c in "_-./" else "_" for c in name)
            if math.isfinite(rec["rel_error"]):
                out[name] = float(rec["rel_error"])
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return {
            "events": self.events,
            "rate": self.rate,
            "p99_offset_ms": self.p99_offset_ms,
            "service_us": self.service_us,
            "runs": [
                {"strategy": r.label, "run_id": r.run_id, "exact": r.exact} for r in self.rows
            ],
            "records": self.records(),
        }


def live_figures(summary: Any, events: int, rate: float) -> dict[str, float]:
    """A live run's figures as the simulator defines them (per-window imbScore, DIST_COST,
    p99 end-to-end latency, keys moved per minute of the stream)."""
    loads = np.asarray(summary.window_loads, dtype=np.float64)
    minutes = events / rate / 60.0
    return {
        "imbalance": window_imbalance(loads) if loads.size else float("nan"),
        "dist_cost": float(summary.dist_cost),
        "p99_ms": float(summary.p99_ms),
        "keys_moved_min": float(summary.keys_moved) / minutes,
    }


def _experiment(c: Candidate, s: AdviseSettings, workload: str, events: int, rate: float,
                service_us: float, window_s: float, interval_s: float) -> Any:  # fmt: skip
    from skewlab.live.driver.experiment import ExperimentSettings

    extra: dict[str, Any] = {}
    if c.rebalance is not None:
        extra = {
            "rebalance": c.rebalance,
            "rebalance_params": dict(c.rebalance_params),
            "rebalance_interval_s": interval_s,
        }
    return ExperimentSettings(
        strategy=c.grouping,
        strategy_params=dict(c.params),
        workers=s.workers,
        workload=workload,
        events=events,
        rate=rate,
        service_us=service_us,
        window_s=window_s,
        home=str(s.home),
        mlflow=s.mlflow,
        **extra,
    )


def verify(advice: Advice, stream: Stream, s: AdviseSettings, out: Path) -> VerifyResult:
    """Steps 1-4 of the module doc; live runs report progress on stderr."""
    from skewlab.live.driver.run import run_experiment
    from skewlab.live.report.watch import ProgressLine

    n = min(s.verify_events, len(stream))
    native = advice.workload.arrival_rate
    rate = s.verify_rate or min(native, DEFAULT_VERIFY_RATE)
    service_s = advice.settings.service_s * native / rate  # the same offered load
    path = write_trace_csv(stream, out / "verify.csv", n, timestamps=False)
    prefix = Stream(stream.source, stream.ids[:n], stream.vocab, None, stream.sizes[:n])
    workload = StreamWorkload(prefix, rate=rate)
    span = n / rate
    sim_settings = SimSettings(
        workers=advice.settings.workers,
        service_s=service_s,
        window_s=window_of(span),
        interval_s=rebalance_interval(span),
        seed=advice.settings.seed,
    )
    todo = [advice.best]
    if advice.best.label != "key":
        todo.insert(0, Candidate("key"))
    rows: list[VerifyRow] = []
    sojourn: dict[str, float] = {}
    for c in todo:
        sim = evaluate(c, workload, sim_settings, events=n)
        sojourn[c.label] = sim.sojourn_p99_ms
        settings = _experiment(c, s, f"trace:{path}", n, rate, service_s * 1e6,
                               sim_settings.window_s, sim_settings.interval_s)  # fmt: skip
        prog = None if not s.progress else ProgressLine(c.label, sys.stderr)
        try:
            summary = run_experiment(settings, progress=prog)
        finally:
            if prog is not None:
                prog.close()
        notes = []
        if summary.backlog_max > 0.1 * n:
            notes.append(f"the live pipeline fell {summary.backlog_max:,.0f} events behind")
        rows.append(
            VerifyRow(
                c.label,
                {**sim.figures()},
                live_figures(summary, n, rate),
                summary.run_id,
                bool(summary.exact),
                notes,
            )
        )
    key_row = rows[0]
    offset = key_row.live["p99_ms"] - sojourn["key"]
    for r in rows:
        r.sim["p99_ms"] = sojourn[r.label] + offset
    return VerifyResult(n, rate, offset, rows, service_s * 1e6)

"""``skewlab advise --verify``: the recommendation and KEY grouping, simulated and live.

1. the stream's first ``--verify-events`` events are written as a trace (key, size; no
   timestamps: the producer paces it at the verify rate, the service time scaled so the
   offered load is the advice's);
2. each strategy runs live through ``skewlab run``'s machinery (:func:`run_experiment`)
   with ``--workload trace:<that file>``;
3. each is simulated on exactly those events as that live run sent them: the producer's
   bursts (:func:`chunk_arrivals`), its load windows at the run's clock phase;
4. p99 modelled per run (:func:`modelled_latency`): released per that run's measured
   route-job micro-batches, plus the pipeline's fixed delay fitted on KEY's live p50;
5. per metric: the simulator's figure, the live one, the ratio and the relative error.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.advise import Advice
from skewlab.advise.base import Stream
from skewlab.advise.calibrate import (
    TARGETS,
    Calibration,
    Latency,
    chunk_arrivals,
    compare,
    effective_period,
    fit_delay,
    modelled_latency,
    rel_error,
    service_from_flushes,
    stamped_workload,
)
from skewlab.advise.candidates import (
    Candidate,
    Outcome,
    SimSettings,
    evaluate,
    rebalance_interval,
    window_imbalance,
    window_of,
)
from skewlab.advise.readers import write_trace_csv
from skewlab.report.table import format_table
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings

if TYPE_CHECKING:
    from skewlab.commands.advise import AdviseSettings

METRICS = ("imbalance", "dist_cost", "p99_ms", "keys_moved_min")
"""Metrics compared, in table order."""

DEFAULT_VERIFY_RATE = 1_500.0
"""The live runs' rate unless ``--verify-rate`` (or a slower stream) says: what the live
pipeline sustains on a busy 2-core machine, so its p99 is latency, not a backlog."""


@dataclass
class VerifyRow:
    """One strategy's figures: simulated (calibrated), live, which run they came from, and
    the simulator's p99 before calibration (its sojourn p99, events as they arrive)."""

    label: str
    sim: dict[str, float]
    live: dict[str, float]
    run_id: str
    exact: bool
    notes: list[str] = field(default_factory=list)
    sim_uncalibrated_p99_ms: float = math.nan
    service_us: float = math.nan
    """The per-event work measured on the run's workers and simulated (NaN: not measured)."""


@dataclass
class VerifyResult:
    """The strategies' rows, the events and rate they ran at, and the calibration
    (``p99_offset_ms``: the pipeline's fixed delay; ``trigger_s``: its micro-batch)."""

    events: int
    rate: float
    p99_offset_ms: float
    rows: list[VerifyRow]
    service_us: float = 0.0
    trigger_s: float = 0.0
    fitted_on: str = "key"

    def records(self) -> list[dict[str, Any]]:
        """One record per strategy and metric: sim, live, ratio, relative error, target;
        p99 also before calibration (``sim_uncalibrated``, ``rel_error_uncalibrated``)."""
        out = []
        for r in self.rows:
            for m in METRICS:
                c = compare(m, r.sim[m], r.live[m])
                raw = r.sim_uncalibrated_p99_ms if m == "p99_ms" else c.sim
                if not math.isfinite(raw):
                    raw = c.sim
                out.append({
                    "strategy": r.label, "metric": m, "sim": c.sim, "live": c.live,
                    "ratio": c.ratio, "rel_error": c.rel_error, "abs_error": abs(c.sim - c.live),
                    "target": TARGETS[m], "within": c.within, "run_id": r.run_id,
                    "sim_uncalibrated": raw,
                    "rel_error_uncalibrated": rel_error(raw, c.live),
                    "within_uncalibrated": compare(m, raw, c.live).within,
                })  # fmt: skip
        return out

    def cells(self) -> list[list[str]]:
        """The table's cells, one row per strategy and metric."""
        cells = []
        for rec in self.records():
            target = rec["target"]
            cells.append([
                rec["strategy"], rec["metric"], f"{rec['sim']:.3g}", f"{rec['live']:.3g}",
                _ratio(rec["ratio"]), _pct(rec["rel_error"]),
                "-" if math.isinf(target) else ("yes" if rec["within"] else "NO")
                + f" (<= {100 * target:.0f} %)",
                _pct(rec["rel_error_uncalibrated"]) if rec["metric"] == "p99_ms" else "",
            ])  # fmt: skip
        return cells

    def table(self) -> str:
        """The simulator-vs-live table with a head line and the calibration."""
        head = (
            f"verify: {self.events:,} events at {self.rate:,.0f} events/s, "
            f"{self.service_us:,.0f} us per event, simulated as the live producer sent them "
            f"(its bursts) and live; p99 modelled on each run's route-job micro-batches (the "
            f"{self.fitted_on} run's: {self.trigger_s:.2f} s micro-batch, events-weighted) plus "
            f"the pipeline's fixed delay {self.p99_offset_ms:,.0f} ms (the {self.fitted_on} "
            f"run's live p50 minus its modelled one)"
        )
        runs = [f"  {r.label}: live run {r.run_id} ({'exact' if r.exact else 'NOT EXACT'})"
                + "".join(f"; {n}" for n in r.notes) for r in self.rows]  # fmt: skip
        body = format_table(
            ("strategy", "metric", "sim", "live", "sim/live", "rel. error", "within target",
             "uncalibrated error"),
            self.cells(),
        )  # fmt: skip
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
            "trigger_s": self.trigger_s,
            "fitted_on": self.fitted_on,
            "service_us": self.service_us,
            "runs": [
                {
                    "strategy": r.label,
                    "run_id": r.run_id,
                    "exact": r.exact,
                    "notes": r.notes,
                    "service_us_measured": None if math.isnan(r.service_us) else r.service_us,
                }
                for r in self.rows
            ],
            "records": self.records(),
        }


def _pct(err: float) -> str:
    return "inf" if math.isinf(err) else f"{100 * err:.1f} %"


def _ratio(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}"


def live_figures(summary: Any, events: int, rate: float) -> dict[str, float]:
    """A live run's figures as the simulator defines them (per-window imbScore, DIST_COST,
    p99 end-to-end latency, keys moved per minute of the stream)."""
    loads = np.asarray(summary.window_loads, dtype=np.float64)
    minutes = events / rate / 60.0
    return {
        "imbalance": window_imbalance(loads) if loads.size else float("nan"),
        "dist_cost": float(summary.dist_cost),
        "p99_ms": float(summary.p99_ms),
        "p50_ms": float(summary.p50_ms),
        "keys_moved_min": float(summary.keys_moved) / minutes,
    }


def _experiment(c: Candidate, s: AdviseSettings, workload: str, events: int, rate: float,
                service_us: float, window_s: float, interval_s: float) -> Any:  # fmt: skip
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
        quality=False,  # the figures are compared here; the data-quality suites are not
        **extra,
    )


def verify(advice: Advice, stream: Stream, s: AdviseSettings, out: Path) -> VerifyResult:
    """Steps 1-5 of the module doc; live runs report progress on stderr."""
    from skewlab.live.driver.run import run_experiment
    from skewlab.live.driver.settings import produce_settings
    from skewlab.live.report.watch import ProgressLine

    n = min(s.verify_events, len(stream))
    native = advice.workload.arrival_rate
    rate = s.verify_rate or min(native, DEFAULT_VERIFY_RATE)
    service_s = advice.settings.service_s * native / rate  # the same offered load
    path = write_trace_csv(stream, out / "verify.csv", n, timestamps=False)
    prefix = Stream(stream.source, stream.ids[:n], stream.vocab, None, stream.sizes[:n])
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
    modelled: list[Modelled] = []
    trigger_s = 0.0
    for c in todo:
        settings = _experiment(c, s, f"trace:{path}", n, rate, service_s * 1e6,
                               sim_settings.window_s, sim_settings.interval_s)  # fmt: skip
        trigger_s = float(settings.trigger_s)
        chunk = produce_settings(settings.spec, "verify").burst
        prog = None if not s.progress else ProgressLine(c.label, sys.stderr)
        try:
            summary = run_experiment(settings, progress=prog)
        finally:
            if prog is not None:
                prog.close()
        m = model_run(c, prefix, rate, chunk, sim_settings, Path(s.home) / "runs" / summary.run_id,
                      summary.t_first_s, s.measure_service)  # fmt: skip
        notes = []
        if summary.backlog_max > 0.1 * n:
            notes.append(f"the live pipeline fell {summary.backlog_max:,.0f} events behind")
        if not m.latency.batches_matched:
            notes.append("its route job's micro-batches not found: p99 modelled as sent")
        if s.measure_service:
            notes.append(
                "service not measured: the given one simulated" if m.service_s is None
                else f"service measured on its workers: {m.service_s * 1e6:,.0f} us per event"
            )  # fmt: skip
        rows.append(VerifyRow(c.label, {**m.outcome.figures()}, live_figures(summary, n, rate),
                              summary.run_id, bool(summary.exact), notes,
                              sim_uncalibrated_p99_ms=m.outcome.sojourn_p99_ms,
                              service_us=math.nan if m.service_s is None
                              else m.service_s * 1e6))  # fmt: skip
        modelled.append(m)
    cal = calibrate(rows, modelled, trigger_s)
    return VerifyResult(n, rate, cal.delay_ms, rows, service_s * 1e6, cal.trigger_s, cal.fitted_on)


@dataclass
class Modelled:
    """One strategy simulated as its live run was fed: the figures (the producer's bursts,
    the run's window phase), the modelled latency, the route job's batches it used."""

    outcome: Outcome
    latency: Latency
    batches: list[tuple[int, float]]
    service_s: float | None = None
    """The per-event work measured on the run's workers (``None``: the given one used)."""


def model_run(c: Candidate, prefix: Stream, rate: float, chunk: int, sim: SimSettings,
              run_dir: Path, t_first_s: float,
              measure_service: bool = False) -> Modelled:  # fmt: skip
    """Step 3 and 4 of the module doc for one live run (its directory, the wall time of its
    first event, which sets where its load windows cut the stream). ``measure_service``:
    the simulator's service time is the per-event work the run's workers spent
    (:func:`measured_service`) instead of the one given, when it could be measured."""
    n, span = len(prefix), len(prefix) / rate
    measured = measured_service(run_dir) if measure_service else None
    if measured is not None:
        sim = replace(sim, service_s=measured)
    arrivals = chunk_arrivals(n, rate, chunk)
    phase = float(t_first_s) % sim.window_s if math.isfinite(t_first_s) else 0.0
    outcome = evaluate(c, stamped_workload(prefix, arrivals, phase), sim, events=n, span_s=span)
    batches = route_batches(run_dir / "route.log")
    latency = modelled_latency(c, prefix, arrivals, batches, sim, span)
    return Modelled(outcome, latency, batches, measured)


def measured_service(run_dir: Path) -> float | None:
    """Seconds of work per event the live run's workers spent (:func:`service_from_flushes`
    on the time and routed offset of each flush: the files its workers added to the
    ``worker_progress`` Delta table); ``None`` when not measurable."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        handle = json.loads(RunDir.of(run_dir).handle.read_text())
        table = DeltaTable(str(Path(handle["delta_root"]) / "worker_progress"))
    except (OSError, KeyError, ValueError, TableNotFoundError):
        return None
    flushes = []
    for a in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        if a.get("partition.run_id") == run_dir.name and a.get("min.worker") == a.get("max.worker"):
            flushes.append((a["min.worker"], a["modification_time"] / 1e3, a["max.routed_offset"]))
    return service_from_flushes(flushes)


def calibrate(rows: list[VerifyRow], modelled: list[Modelled], trigger_s: float) -> Calibration:
    """The pipeline's fixed delay fitted on the first (KEY) run's live p50; every row's p99
    is its own run's modelled p99 plus that delay. ``trigger_s`` of the result: the KEY
    run's micro-batch time, events-weighted (at least the configured trigger)."""
    fit, m = rows[0], modelled[0]
    cal = Calibration(
        effective_period(m.batches, trigger_s), fit_delay(fit.live["p50_ms"], m.latency.p50_ms),
        fit.label,
    )  # fmt: skip
    for r, mr in zip(rows, modelled, strict=True):
        r.sim["p99_ms"] = cal.p99(mr.latency.p99_ms)
    return cal


PROGRESS = re.compile(r"progress batch (\d+): (\d+) rows, durationMs (\{.*\})")
"""The route job's log line of one micro-batch (skewlab.live.mains.route_job)."""


def route_batches(log: Path) -> list[tuple[int, float]]:
    """``(events, seconds)`` of every micro-batch after the warm-up (batch 0) in a route
    job's log (Spark's ``triggerExecution``); empty without the log."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    out = []
    for m in PROGRESS.finditer(text):
        try:
            ms = json.loads(m.group(3)).get("triggerExecution")
        except json.JSONDecodeError:
            continue
        if int(m.group(1)) > 0 and isinstance(ms, (int, float)):
            out.append((int(m.group(2)), float(ms) / 1e3))
    return out

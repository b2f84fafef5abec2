"""The summary of a live run, computed from its Delta tables.

Loads come from ``key_loads`` (what the route job decided), latency from the
workers' ``latency`` rows. Latency percentiles merge the (window, worker)
reservoir samples weighted by ``n / len(sample)``, so a busy window counts as
much as its events do, over the steady state only: windows ending after the
first produced event after warm-up (``t_first_s``). The consumer backlog is a
separate figure (:func:`backlog`), never folded into latency.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import unquote

import numpy as np

from skewlab.io.delta.store import DeltaStore
from skewlab.live.driver.supervise import hangs
from skewlab.live.report.control import add_rebalance, add_scale_out
from skewlab.live.report.plots import draw
from skewlab.live.report.tracking import (
    LOADS_TABLE,
    REBALANCE_METRICS,
    SCALE_OUT_METRICS,
    SUMMARY_METRICS,
    Logged,
    loads_table,
    window_steps,
)
from skewlab.metrics import dist_cost, imb_score, std_dev_pct
from skewlab.pipeline.exactness import ExactnessReport
from skewlab.rebalance.base import hash_worker
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings
from skewlab.spec import time_scale

if TYPE_CHECKING:
    from skewlab.live.driver.producer import ProduceReport

__all__ = ["RunSummary", "backlog", "startup_seconds", "summarize", "weighted_percentiles"]


@dataclass
class RunSummary:
    """What a live run reports: the table row, the series, the plots, the verdict."""

    run_id: str
    strategy: str
    workers: int
    events: int
    """Valid events the run consumed: its ``events`` topic's records less the quarantined
    ones (the verdict's expected count), foreign ones included."""
    quarantined: int
    produce_rate: float
    throughput: float
    std_dev: float
    dist_cost: float
    imb_score: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    exact: bool
    exactness: str
    wall_s: float
    window_s: float
    foreign: int = 0
    """Of :attr:`events`, those not sent by the run's own producer (written from outside)."""
    hangs: list[str] = field(default_factory=list)
    """Workers found hung (no progress with input waiting) and what was done, one line each."""
    keys_over_2: int = 0
    """Keys routed to more than 2 workers (for DKG: keys whose pool grew past 2)."""
    time_scale: float = 1.0
    """The factor DKG's timings were scaled by to fit the run (1: the seed's timings)."""
    t_first_s: float = float("nan")
    """Wall time (epoch s) of the first produced event after warm-up: where the steady state
    (latency figures) and the MLflow steps (seconds of event time) start."""
    latency_events: int = 0
    """Events the latency percentiles cover (windows ending after ``t_first_s``)."""
    backlog_max: float = float("nan")
    """Most events produced but not yet processed at any moment of the run (:func:`backlog`)."""
    backlog_at_s: float = float("nan")
    """When the backlog peaked, in seconds since ``t_first_s``."""
    startup_s: dict[str, float] = field(default_factory=dict)
    """Start-up time of each component (:func:`startup_seconds`), apart from latency."""
    rebalance: str = ""
    rebalances: int = 0
    keys_moved: int = 0
    handoffs: int = 0
    tuples_migrated: int = 0
    bytes_migrated: int = 0
    order_violations: int = 0
    state_exact: bool = True
    imb_key: float = float("nan")
    imb_after: float = float("nan")
    imb_key_after: float = float("nan")
    window_imb: list[float] = field(default_factory=list)
    window_imb_key: list[float] = field(default_factory=list)
    window_starts_ms: list[int] = field(default_factory=list)
    window_loads: list[list[int]] = field(default_factory=list)
    window_latency_ms: list[tuple[float, float]] = field(default_factory=list)
    latency_values_ms: list[float] = field(default_factory=list)
    latency_frac: list[float] = field(default_factory=list)
    scale_out: str = ""
    scale_events: int = 0
    max_running: int = 0
    instance_seconds: float = float("nan")
    fairness: float = float("nan")
    checkpoints: int = 0
    pause_s: float = float("nan")
    """Longest time moved keys made no progress in a scale event: their state leaving the
    old instance -> applied by the new one (restart: also old instance stopped -> up again)."""
    drain_s: float = float("nan")
    """Longest time an old instance kept working off its backlog after a switch."""
    extra_p99_ms: float = float("nan")
    """p99 latency of the scaled workers' windows during scale events minus before alarming."""
    scale_log: list[dict[str, Any]] = field(default_factory=list)
    instances_t: list[float] = field(default_factory=list)
    instances_running: list[int] = field(default_factory=list)
    instances_active: list[int] = field(default_factory=list)
    input_rate: list[float] = field(default_factory=list)
    """Records/s routed to all instances, per state-manager step (scale-out runs)."""
    processed_rate: list[float] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    mlflow_run_id: str | None = None
    mlflow_url: str | None = None
    """The run's page in the MLflow UI (:attr:`skewlab.live.report.tracking.LiveRun.url`)."""
    quality: str = "skipped"
    """``passed`` / ``failed`` (the data-quality suites) or ``skipped``."""
    quality_failures: list[str] = field(default_factory=list)
    data_docs: str | None = None
    """The Great Expectations Data Docs site holding this run's validations (a file URI)."""

    SERIES: ClassVar[tuple[str, ...]] = (
        "window_starts_ms",
        "window_loads",
        "window_latency_ms",
        "latency_values_ms",
        "latency_frac",
        "instances_t",
        "instances_running",
        "instances_active",
        "input_rate",
        "processed_rate",
    )
    """The per-window / per-step series: plotted and logged as series, not in :meth:`row`."""

    def row(self) -> dict[str, Any]:
        """The scalar metrics (table / JSON / MLflow summary)."""
        d = asdict(self)
        for k in self.SERIES:
            d.pop(k)
        return d

    def logged(self) -> Logged:
        """What its MLflow run logs (:meth:`~skewlab.live.report.tracking.LiveRun.finish`):
        :data:`~skewlab.live.report.tracking.SUMMARY_METRICS` (plus the rebalance or
        scale-out ones and the start-up times), the per-window series stepped by window
        end, the loads table, a scale-out run's instance series and scale events, the row."""
        metrics = {k: float(getattr(self, k)) for k in SUMMARY_METRICS}
        metrics["exact"] = 1.0 if self.exact else 0.0
        if self.rebalance:
            metrics.update({k: float(getattr(self, k)) for k in REBALANCE_METRICS})
            metrics["state_exact"] = 1.0 if self.state_exact else 0.0
        if self.scale_out:
            metrics.update({k: float(getattr(self, k)) for k in SCALE_OUT_METRICS})
            metrics["state_exact"] = 1.0 if self.state_exact else 0.0
        metrics.update({f"startup_{k}_s": v for k, v in self.startup_s.items()})
        out = Logged(metrics, self.row())
        loads = np.asarray(self.window_loads, dtype=np.float64)
        if loads.size:
            at = window_steps(self.window_starts_ms, self.window_s, self.t_first_s)
            out.series += [
                ("window_std_dev", [std_dev_pct(r) for r in loads], at),
                ("window_throughput", (loads.sum(axis=1) / self.window_s).tolist(), at),
                ("window_p50_ms", [a for a, _ in self.window_latency_ms], at),
                ("window_p99_ms", [b for _, b in self.window_latency_ms], at),
            ]
            if self.window_imb:
                out.series += [("window_imb", self.window_imb, at),
                               ("window_imb_key", self.window_imb_key, at)]  # fmt: skip
            out.tables[LOADS_TABLE] = loads_table(self)
        if self.instances_t:
            ticks = [max(0, round(t)) for t in self.instances_t]
            out.series += [
                ("instances_running", self.instances_running, ticks),
                ("instances_active", self.instances_active, ticks),
                ("input_rate", self.input_rate, ticks),
                ("processed_rate", self.processed_rate, ticks),
            ]
            out.docs["scale_events.json"] = {"events": self.scale_log}
        return out


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs: list[float]) -> list[float]:
    """Percentiles ``qs`` (0..100) of a weighted sample (inverted weighted CDF)."""
    if values.size == 0:
        return [float("nan")] * len(qs)
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cdf = np.cumsum(w) / w.sum()
    return [float(v[min(int(np.searchsorted(cdf, q / 100.0)), v.size - 1)]) for q in qs]


def startup_seconds(startup: dict[str, Any] | None) -> dict[str, float]:
    """A handle's ``startup`` record as flat seconds: ``broker``, ``route`` (and its steps
    ``route_process``, ``route_session``, ``route_query``, ``route_warm``), ``workers``
    (the slowest worker: production waits for it)."""
    if not startup:
        return {}
    out: dict[str, float] = {}
    if isinstance(v := startup.get("services"), (int, float)):
        out["broker"] = float(v)
    route = startup.get("route") or {}
    if isinstance(route, dict):
        for k, v in route.items():
            if isinstance(v, (int, float)):
                out["route" if k == "total" else f"route_{k}"] = float(v)
    workers = [float(v) for v in (startup.get("workers") or {}).values()]
    if workers:
        out["workers"] = max(workers)
    return out


def _latency(
    store: DeltaStore, run_id: str, from_ms: float, window_s: float
) -> tuple[dict[int, tuple[float, float]], Any, Any, int]:
    """Per-window (p50, p99), the merged sample and its weights, and the events they
    cover, over the rows of windows ending after ``from_ms`` (the steady state)."""
    t = store.read("latency", run_id=run_id).to_pylist()
    vals, wts = [], []
    per_window: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    covered = 0
    for r in t:
        if not r["sample_ms"] or r["window_start"] + window_s * 1e3 <= from_ms:
            continue
        covered += int(r["n"])
        sample = np.frombuffer(r["sample_ms"], dtype="<f4").astype(np.float64)
        weight = np.full(sample.size, r["n"] / sample.size)
        vals.append(sample)
        wts.append(weight)
        pv, pw = per_window.setdefault(r["window_start"], ([], []))
        pv.append(sample)
        pw.append(weight)
    series = {}
    for w, (pv, pw) in sorted(per_window.items()):
        p50, p99 = weighted_percentiles(np.concatenate(pv), np.concatenate(pw), [50, 99])
        series[w] = (p50, p99)
    v = np.concatenate(vals) if vals else np.zeros(0)
    wt = np.concatenate(wts) if wts else np.zeros(0)
    return series, v, wt, covered


def _flushes(store: DeltaStore, run_id: str) -> tuple[np.ndarray, np.ndarray]:
    """``(wall time s, events)`` of every worker flush of ``run_id``, oldest first.

    A flush's ``latency`` rows count the events the worker processed since its
    last flush; their Delta file's modification time is when it flushed. Empty
    when the Delta root is not a local directory.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    if "://" in store.root and not store.root.startswith("file://"):
        return np.zeros(0), np.zeros(0)
    try:
        dt = DeltaTable(store.path("latency"))
    except TableNotFoundError:  # no worker flushed
        return np.zeros(0), np.zeros(0)
    adds = pa.table(dt.get_add_actions(flatten=True))
    root = Path(unquote(dt.table_uri.removeprefix("file://")))
    times, counts = [], []
    one_row = adds["min.n"].to_pylist() if "min.n" in adds.column_names else [None] * adds.num_rows
    for path, mtime, rid, rows, n_min in zip(
        adds["path"].to_pylist(),
        adds["modification_time"].to_pylist(),
        adds["partition.run_id"].to_pylist(),
        adds["num_records"].to_pylist(),
        one_row,
    ):
        if rid != run_id:
            continue
        if rows == 1 and n_min is not None:  # the file's statistics hold its one row's n
            counts.append(int(n_min))
        else:
            counts.append(sum(pq.read_table(root / unquote(path), columns=["n"])["n"].to_pylist()))
        times.append(mtime / 1e3)
    order = np.argsort(times, kind="stable")
    return np.asarray(times, dtype=np.float64)[order], np.asarray(counts, dtype=np.float64)[order]


def backlog(
    window_starts_ms: list[int],
    window_events: np.ndarray,
    window_s: float,
    t_first: float,
    t_last: float,
    flush_t: np.ndarray,
    flush_n: np.ndarray,
) -> tuple[float, float]:
    """The largest consumer backlog (events produced, not yet processed) and when (s since
    ``t_first``).

    Produced by time ``t``: each window's events spread evenly over the part of
    the window inside ``[t_first, t_last]`` (the producer paces at a constant
    rate). Processed by ``t``: the events of every flush before ``t``. The
    backlog only grows between flushes, so its maximum is at a flush's eve;
    it is exact up to one flush interval of processing (credited at the flush).
    ``(nan, nan)`` without flushes.
    """
    if flush_t.size == 0 or not window_starts_ms:
        return float("nan"), float("nan")
    ws = np.asarray(window_starts_ms, dtype=np.float64) / 1e3
    a = np.clip(ws, t_first, t_last)
    b = np.clip(ws + window_s, t_first, t_last)
    span = np.maximum(b - a, 1e-9)
    frac = np.clip((flush_t[:, None] - a[None, :]) / span[None, :], 0.0, 1.0)
    produced = frac @ np.asarray(window_events, dtype=np.float64)
    processed_before = np.concatenate([[0.0], np.cumsum(flush_n)[:-1]])
    level = produced - processed_before
    i = int(np.argmax(level))
    return float(max(level[i], 0.0)), float(flush_t[i] - t_first)


def summarize(
    store: DeltaStore,
    run_id: str,
    s: ExperimentSettings,
    produced: ProduceReport,
    exactness: ExactnessReport,
    t_produce: float,
    t_done: float,
    run_dir: Path,
    wall_s: float,
    scale: dict[str, Any] | None = None,
    startup: dict[str, Any] | None = None,
) -> RunSummary:
    """Compute the run's summary from Delta (and draw its plots into ``run_dir``).

    ``t_produce``: wall time of the first produced event after warm-up; latency
    counts the windows ending after it, MLflow steps count seconds from it.
    ``startup``: the handle's start-up record (:func:`startup_seconds`).
    """
    kl = store.read("key_loads", run_id=run_id, columns=["window_start", "key", "worker", "count"])
    windows = sorted(set(kl["window_start"].to_pylist()))
    widx = {w: i for i, w in enumerate(windows)}
    n_workers = max([s.workers - 1, *kl["worker"].to_pylist()]) + 1  # spare instances too
    loads = np.zeros((len(windows), n_workers), dtype=np.int64)
    key_counts: dict[str, int] = {}
    home = np.zeros((len(windows), n_workers), dtype=np.int64)
    workers_of: dict[str, set[int]] = {}
    for w, k, wk, c in zip(
        kl["window_start"].to_pylist(),
        kl["key"].to_pylist(),
        kl["worker"].to_pylist(),
        kl["count"].to_pylist(),
    ):
        loads[widx[w], wk] += c
        workers_of.setdefault(k, set()).add(wk)
        if s.rebalance or scale is not None:
            home[widx[w], hash_worker(k, s.workers)] += c
            key_counts[k] = key_counts.get(k, 0) + c
    totals = loads.sum(axis=0)
    quarantined = store.read("quarantine", run_id=run_id, columns=["offset"]).num_rows
    lat_series, lat_v, lat_w, lat_n = _latency(store, run_id, t_produce * 1e3, s.window_s)
    t_last = t_produce + max(produced.seconds, 0.0)
    flush_t, flush_n = _flushes(store, run_id)
    backlog_max, backlog_at = backlog(
        [int(w) for w in windows],
        loads.sum(axis=1),
        s.window_s,
        t_produce,
        t_last,
        flush_t,
        flush_n,
    )
    p50, p90, p99 = weighted_percentiles(lat_v, lat_w, [50, 90, 99])
    order = np.argsort(lat_v, kind="stable")
    frac = np.cumsum(lat_w[order]) / lat_w.sum() if lat_w.size else np.zeros(0)
    summary = RunSummary(
        run_id=run_id,
        strategy=s.strategy,
        workers=s.workers,
        events=exactness.expected_events,  # the one count of what the run consumed
        foreign=exactness.foreign_events or 0,
        quarantined=quarantined,
        produce_rate=produced.rate,
        throughput=exactness.actual_events / max(t_done - t_produce, 1e-9),
        std_dev=std_dev_pct(totals) if totals.sum() else 0.0,
        dist_cost=dist_cost([len(v) for v in workers_of.values()]) if workers_of else 0.0,
        imb_score=imb_score(totals) if totals.sum() else 0.0,
        p50_ms=p50,
        p90_ms=p90,
        p99_ms=p99,
        max_ms=float(lat_v.max()) if lat_v.size else float("nan"),
        exact=exactness.exact,
        exactness=exactness.summary(),
        wall_s=wall_s,
        window_s=s.window_s,
        keys_over_2=sum(1 for v in workers_of.values() if len(v) > 2),
        time_scale=time_scale(s.spec),
        t_first_s=t_produce,
        latency_events=lat_n,
        backlog_max=backlog_max,
        backlog_at_s=backlog_at,
        startup_s=startup_seconds(startup),
        window_starts_ms=[int(w) for w in windows],
        window_loads=loads.tolist(),
        window_latency_ms=[lat_series.get(w, (float("nan"), float("nan"))) for w in windows],
        latency_values_ms=lat_v[order].tolist(),
        latency_frac=frac.tolist(),
        hangs=hangs(RunDir.of(run_dir)),
    )
    if s.rebalance:
        add_rebalance(summary, store, run_id, s.rebalance, loads, home, key_counts)
    if scale is not None and s.scale_out:
        add_scale_out(summary, store, run_id, s.scale_out, scale, key_counts)
    summary.plots = draw(summary, run_dir)
    return summary

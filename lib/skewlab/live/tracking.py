"""Logging a live run to MLflow: one run per experiment configuration.

Params are the experiment settings, tags name the strategy (so the compare
view lines strategies up), metric series are per window (step = window index):
per-worker load, STD_DEV, throughput, p50/p99 latency; the summary metrics and
the plots and summary JSON are artifacts.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from skewlab.io.tracking import Tracker, TrackingSettings
from skewlab.metrics import std_dev_pct

if TYPE_CHECKING:
    from skewlab.live.experiment import ExperimentSettings
    from skewlab.live.summary import RunSummary
    from skewlab.quality import QualityReport

SUMMARY_METRICS = (
    "events",
    "quarantined",
    "produce_rate",
    "throughput",
    "std_dev",
    "dist_cost",
    "imb_score",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "wall_s",
)

REBALANCE_METRICS = (
    "rebalances",
    "keys_moved",
    "handoffs",
    "tuples_migrated",
    "bytes_migrated",
    "order_violations",
    "imb_key",
    "imb_after",
    "imb_key_after",
)
"""Added when the run rebalanced (``skewlab run --rebalance``)."""


SCALE_OUT_METRICS = (
    "scale_events",
    "max_running",
    "instance_seconds",
    "fairness",
    "checkpoints",
    "pause_s",
    "drain_s",
    "extra_p99_ms",
    "handoffs",
    "keys_moved",
    "order_violations",
)
"""Added when the run scaled out (``skewlab run --scale-out``)."""


def experiment_name(s: ExperimentSettings) -> str:
    """One MLflow experiment per workload family (``zipf``, ``country``...)."""
    return s.experiment or f"skewlab-live-{s.workload.split(':', 1)[0]}"


def log_run(
    summary: RunSummary, s: ExperimentSettings, home: Path, quality: QualityReport | None = None
) -> RunSummary:
    """Record ``summary`` and its data-quality report as one MLflow run (sets its run id)."""
    tracker = Tracker(TrackingSettings.for_runs(home))
    params = {k: v for k, v in dataclasses.asdict(s).items() if k not in ("home", "bootstrap")}
    params["run_id"] = summary.run_id
    tags = {"strategy": s.strategy, "mode": "live", "exact": str(summary.exact).lower()}
    if s.rebalance:
        tags["rebalance"] = s.rebalance
    if s.scale_out:
        tags["scale_out"] = s.scale_out
    rid = tracker.start_run(experiment_name(s), summary.run_id, params=params, tags=tags)
    try:
        metrics = {k: float(getattr(summary, k)) for k in SUMMARY_METRICS}
        metrics["exact"] = 1.0 if summary.exact else 0.0
        if s.rebalance:
            metrics.update({k: float(getattr(summary, k)) for k in REBALANCE_METRICS})
            metrics["state_exact"] = 1.0 if summary.state_exact else 0.0
        if s.scale_out:
            metrics.update({k: float(getattr(summary, k)) for k in SCALE_OUT_METRICS})
            metrics["state_exact"] = 1.0 if summary.state_exact else 0.0
        tracker.log_metrics(rid, {k: v for k, v in metrics.items() if math.isfinite(v)})
        loads = np.asarray(summary.window_loads, dtype=np.float64)
        steps = list(range(loads.shape[0]))
        if loads.size:
            for w in range(loads.shape[1]):
                tracker.log_series(rid, f"load_w{w}", loads[:, w].tolist(), steps)
            tracker.log_series(rid, "window_std_dev", [std_dev_pct(r) for r in loads], steps)
            tracker.log_series(
                rid, "window_throughput", (loads.sum(axis=1) / summary.window_s).tolist(), steps
            )
            tracker.log_series(
                rid, "window_p50_ms", [a for a, _ in summary.window_latency_ms], steps
            )
            tracker.log_series(
                rid, "window_p99_ms", [b for _, b in summary.window_latency_ms], steps
            )
        if summary.window_imb:
            tracker.log_series(rid, "window_imb", summary.window_imb, steps)
            tracker.log_series(rid, "window_imb_key", summary.window_imb_key, steps)
        if summary.instances_t:
            ticks = list(range(len(summary.instances_t)))
            tracker.log_series(rid, "instances_running", summary.instances_running, ticks)
            tracker.log_series(rid, "instances_active", summary.instances_active, ticks)
            tracker.log_series(rid, "input_rate", summary.input_rate, ticks)
            tracker.log_series(rid, "processed_rate", summary.processed_rate, ticks)
            tracker.log_dict(rid, {"events": summary.scale_log}, "scale_events.json")
        for p in summary.plots:
            tracker.log_artifact(rid, p, "plots")
        tracker.log_dict(rid, summary.row(), "summary.json")
        if quality is not None:
            from skewlab.quality import log_quality

            log_quality(tracker, rid, quality)
        tracker.end_run(rid, "FINISHED" if summary.exact else "FAILED")
    except BaseException:
        tracker.end_run(rid, "FAILED")
        raise
    summary.mlflow_run_id = rid
    return summary

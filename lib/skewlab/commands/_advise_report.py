"""``skewlab advise``'s report: the printed profile and table, ``advice.json``, the plots, and
the MLflow run (params, the profile's and the recommendation's figures, the ranking table,
the plots). What each holds: docs/advise.md, "Output".
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.advise import Advice
from skewlab.advise.base import Stream
from skewlab.advise.plots import plot_key_distribution, plot_tradeoffs
from skewlab.commands._sim_tracking import quiet_mlflow
from skewlab.io.tracking import Tracker, TrackingSettings
from skewlab.report.table import format_table

if TYPE_CHECKING:
    from skewlab.commands.advise import AdviseSettings

__all__ = ["COLUMNS", "advice_doc", "log_mlflow", "report", "table_rows", "write_files"]


COLUMNS = (
    "rank",
    "strategy",
    "pareto",
    "imbalance %",
    "p99 wait ms",
    "DIST_COST",
    "keys moved/min",
    "state KB/min",
)


def _num(x: float, digits: int = 2) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def table_rows(advice: Advice) -> list[list[str]]:
    """The ranked table's cells (:data:`COLUMNS`)."""
    rows = []
    for r in advice.ranked:
        o = r.outcome
        rows.append([
            str(r.rank),
            r.label,
            "*" if r.pareto else "",
            _num(o.imbalance, 1),
            _num(o.p99_ms),
            f"{o.dist_cost:.2f}",
            _num(o.keys_moved_min, 1),
            _num(o.state_moved_min / 1e3, 1),
        ])  # fmt: skip
    return rows


def report(advice: Advice, stream: Stream, command: str) -> str:
    """The human report: the stream's profile, the table, the recommendation, the command."""
    p = advice.profile
    top = ", ".join(f"{k} {100 * v:.1f}%" for k, v in p.top_keys[:5])
    shares = " / ".join(f"{100 * v:.0f}" for v in p.top_shares.values())
    fit = "a good fit" if p.zipf.good else "not Zipf-like"
    lines = [
        f"stream {stream.source}: {p.events:,} events, {p.keys:,} keys"
        + (f" ({stream.bad_rows:,} bad rows left out)" if stream.bad_rows else ""),
        f"  hottest keys: {top}",
        f"  top-{'/'.join(str(k) for k in p.top_shares)} keys carry {shares} % of the events; "
        f"half the load is on {p.keys_half:,} keys; {p.hot_keys} above the fair share "
        f"1/{p.workers}",
        f"  Zipf fit: s = {p.zipf.s:.2f}, KS distance {p.zipf.ks:.3f} ({fit})",
        f"  hot-set drift over {len(p.windows)} windows: {p.drift:.2f} "
        f"(hot-set overlap with the previous window "
        f"{min((w.jaccard for w in p.windows[1:]), default=1.0):.2f} at worst)",
        f"  rate {p.rate:,.0f} events/s ({p.rate_from}), service {p.service_s * 1e6:,.0f} us, "
        f"{p.workers} workers: offered load {p.offered_load:.2f}; windows of "
        f"{advice.settings.window_s:g} s, rebalancing every {advice.settings.interval_s:g} s",
        "",
        format_table(COLUMNS, table_rows(advice)),
        "",
        f"recommended: {advice.recommendation.choice.label}",
        f"why: {advice.recommendation.reason}",
        f"run it live: {command}",
    ]
    return "\n".join(lines)


def advice_doc(advice: Advice, stream: Stream, s: AdviseSettings, command: str) -> dict[str, Any]:
    """Everything as plain JSON types (``advice.json``, ``--json``)."""
    return {
        "command": "advise",
        "source": s.source,
        "bad_rows": stream.bad_rows,
        "bad": list(stream.bad),
        "settings": {
            "workers": s.workers,
            "service_us": s.service_us,
            "rate": advice.workload.arrival_rate,
            "window_s": advice.settings.window_s,
            "rebalance_interval_s": advice.settings.interval_s,
            "slack": s.slack,
            "seed": s.seed,
        },
        "profile": advice.profile.to_dict(),
        "ranking": [
            {
                "rank": r.rank,
                "strategy": r.label,
                "pareto": r.pareto,
                "acceptable": r.acceptable,
                **r.outcome.figures(),
            }
            for r in advice.ranked
        ],
        "recommended": advice.recommendation.choice.label,
        "reason": advice.recommendation.reason,
        "run": command,
    }


def write_files(
    advice: Advice, stream: Stream, s: AdviseSettings, out: Path, doc: dict[str, Any]
) -> dict[str, Path]:
    """Write ``advice.json`` and (unless ``--no-plots``) the two plots under ``out``;
    return their paths by name."""
    files: dict[str, Path] = {}
    path = out / "advice.json"
    path.write_text(json.dumps(doc, indent=1))
    files["advice"] = path
    if s.plots:
        files["table_plot"] = plot_tradeoffs(advice.ranked, out / "advise_table.png")
        files["keys_plot"] = plot_key_distribution(
            stream, advice.profile, out / "key_distribution.png"
        )
    return files


def log_mlflow(
    advice: Advice, s: AdviseSettings, doc: dict[str, Any], files: dict[str, Path]
) -> tuple[Tracker, str]:
    """One MLflow run: params, the profile's and the recommendation's figures as metrics,
    the ranking as a table, the plots and ``advice.json`` as artifacts (left running for
    ``--verify``'s rows; the caller ends it)."""
    quiet_mlflow()
    tracker = Tracker(TrackingSettings.for_runs(s.home))
    p = advice.profile
    best = advice.recommendation.choice
    run_id = tracker.start_run(
        s.experiment,
        f"advise {os.path.basename(s.source)} W={s.workers}",
        params=s.params(),
        tags={
            "mode": "advise",
            "recommended": best.label,
            "reason": doc["reason"][:5000],
            "run_command": doc["run"][:5000],
        },
    )
    metrics = {
        "events": p.events,
        "keys": p.keys,
        "top1_share": p.top_shares[1],
        "top10_share": p.top_shares[10],
        "zipf_s": p.zipf.s,
        "zipf_ks": p.zipf.ks,
        "drift": p.drift,
        "rate": p.rate,
        "offered_load": p.offered_load,
        **{f"best_{k}": v for k, v in best.outcome.figures().items()},
    }
    tracker.log_metrics(run_id, {k: float(v) for k, v in metrics.items() if math.isfinite(v)})
    tracker.log_table(run_id, doc["ranking"], "ranking.json")
    tracker.log_table(run_id, doc["ranking"], "ranking.csv")
    for path in files.values():
        tracker.log_artifact(run_id, path, "plots" if path.suffix == ".png" else None)
    return tracker, run_id

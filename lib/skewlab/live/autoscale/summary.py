"""What an autoscale run produced: its summary row, plot and what its MLflow run logs."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.io.delta.store import DeltaStore
from skewlab.io.kafka.base import KafkaClient
from skewlab.live.autoscale.protocol import LiveSettings, Processed
from skewlab.live.report.tracking import NOT_PARAMS, Logged, Opening, Series

if TYPE_CHECKING:
    from skewlab.live.autoscale.settings import AutoscaleSettings

__all__ = [
    "AutoscaleSummary",
    "mlflow_opening",
    "plot_run",
    "read_decisions",
    "read_evidence",
]


@dataclass
class AutoscaleSummary:
    """What a run produced: the verdict, the numbers, the series, where to look.

    ``exact`` is the shared exactness check's verdict (every offset of the data
    topic processed once: :func:`skewlab.pipeline.exactness.check`) and no two
    consumers owning one partition at overlapping times; ``exactness`` its line.
    """

    run_id: str
    algorithm: str
    workload: str
    records: int
    exact: bool
    exactness: str
    overlaps: int
    latency: dict[str, float]
    decisions: list[dict[str, Any]]
    samples: list[dict[str, float]]
    downtime: list[dict[str, float]]
    iteration_s: float
    wall_s: float
    run_dir: str
    plots: list[str] = field(default_factory=list)
    mlflow_run_id: str | None = None
    mlflow_url: str | None = None
    lost: int = 0
    doubled: int = 0

    @property
    def avg_consumers(self) -> float:
        """Mean consumer count over the decisions (0 without any)."""
        return float(np.mean([d["consumers"] for d in self.decisions])) if self.decisions else 0.0

    @property
    def avg_rscore(self) -> float:
        """Mean Rscore over the decisions (0 without any)."""
        return float(np.mean([d["rscore"] for d in self.decisions])) if self.decisions else 0.0

    @property
    def moved(self) -> int:
        """Partitions moved, summed over the decisions."""
        return sum(len(d["moved"]) for d in self.decisions)

    @property
    def downtime_ratio(self) -> float:
        """Mean stop-sent -> first-record time over the iteration length."""
        if not self.downtime:
            return math.nan
        return float(np.mean([d["first_record_s"] for d in self.downtime])) / self.iteration_s

    def row(self) -> dict[str, Any]:
        """The summary as one flat row (counts, averages, latency percentiles, MLflow ids)."""
        return {
            "run_id": self.run_id, "algorithm": self.algorithm, "workload": self.workload,
            "records": self.records, "exact": self.exact, "lost": self.lost,
            "doubled": self.doubled, "overlaps": self.overlaps,
            "rebalances": len(self.decisions), "moved": self.moved,
            "avg_consumers": self.avg_consumers, "avg_rscore": self.avg_rscore,
            "downtime_ratio": self.downtime_ratio, **self.latency, "wall_s": self.wall_s,
            "exactness": self.exactness, "mlflow_run_id": self.mlflow_run_id,
            "mlflow_url": self.mlflow_url,
        }  # fmt: skip

    def logged(self) -> Logged:
        """What its MLflow run logs (:meth:`~skewlab.live.report.tracking.LiveRun.finish`):
        the scalars of the row; the series stepped by iteration: per decision consumers,
        Rscore, decision and hand-off time, per sample lag and live consumers;
        ``summary.json`` is the row with the decisions."""
        row = self.row()
        metrics = {k: float(v) for k, v in row.items() if isinstance(v, (int, float))}
        its = [int(d["iteration"]) for d in self.decisions]
        at = [int(x["iteration"]) for x in self.samples]
        series: list[Series] = [
            (name, [float(d[name]) for d in self.decisions], its)
            for name in ("consumers", "rscore", "decide_ms", "manage_s")
        ]
        series += [("lag", [x["lag"] for x in self.samples], at),
                   ("live_consumers", [x["consumers"] for x in self.samples], at)]  # fmt: skip
        return Logged(metrics, {**row, "decisions": self.decisions}, series)


def read_evidence(client: KafkaClient, live: LiveSettings) -> list[Processed]:
    """Every record of the run's ``processed`` topic."""
    topic = live.topics.processed
    out = []
    for p, end in client.end_offsets(topic).items():
        out += [Processed.decode(r.value) for r in client.fetch(topic, p, 0, end, timeout_s=30)]
    return out


def read_decisions(live: LiveSettings) -> list[dict[str, Any]]:
    """The controller's ``decisions`` rows of the run, by iteration."""
    rows = DeltaStore(live.delta_root).read("decisions", run_id=live.run_id).to_pylist()
    out = [{**json.loads(r["detail"]), "reason": r["reason"], "ts": r["ts"]} for r in rows]
    return sorted(out, key=lambda d: d["iteration"])


def plot_run(summary: AutoscaleSummary, out: Path) -> Path:
    """Consumers, Rscore and lag per iteration, one figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    its = [d["iteration"] for d in summary.decisions]
    axes[0].step(its, [d["consumers"] for d in summary.decisions], where="post")
    axes[0].set_ylabel("consumers")
    axes[1].bar(its, [d["rscore"] for d in summary.decisions])
    axes[1].set_ylabel("Rscore")
    axes[2].plot([x["iteration"] for x in summary.samples], [x["lag"] for x in summary.samples])
    axes[2].set_ylabel("lag (records)")
    axes[2].set_xlabel("iteration")
    fig.suptitle(f"{summary.algorithm} on {summary.workload}")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def mlflow_opening(s: AutoscaleSettings) -> Opening:
    """What its MLflow run opens with (:func:`~skewlab.live.report.tracking.open_live_run`,
    as a grouping run's): the run's experiment, the settings that say what the run does
    (not where it logs) as params, its mode and algorithm as tags."""
    params = {k: v for k, v in asdict(s).items() if k not in NOT_PARAMS}
    tags = {"mode": "live-autoscale", "algorithm": s.algorithm}
    return Opening(s.home, s.experiment, params, tags)

"""``skewlab simulate``'s MLflow runs: one per strategy, children of one parent with --compare.

Each strategy's run is opened before it is simulated and holds the simulation settings as
params, the summary metrics, per-window series stepped in seconds of event time, the
per-worker loads as the ``window_loads.json`` table (what ``skewlab compare`` reads) and its
plots. What each run holds in full: docs/cli.md, "simulate's MLflow runs".
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.io.run_links import run_link
from skewlab.io.tracking import Tracker, TrackingSettings
from skewlab.live.report.plots import PLOT_NAMES as LIVE_PLOT_NAMES
from skewlab.metrics import std_dev_pct
from skewlab.report.plots import plot_latency_cdf, plot_worker_loads

if TYPE_CHECKING:
    from skewlab.io.tracking import Tracker
    from skewlab.sim.result import SimResult

LOADS_TABLE = "window_loads.json"
"""The artifact holding the per-worker loads (``t_s``, ``worker``, ``events`` columns)."""

PROGRESS_STEP_PCT = 10
"""``events_done`` is logged into a running strategy's run every this many percent."""

PLOT_NAMES = LIVE_PLOT_NAMES[:2]
"""Every simulate run's plots, under ``plots/`` of the run's artifacts: a live run's first
two names, so MLflow's compare view sets a simulated and a live run's plots side by side."""


def quiet_mlflow() -> None:
    """Import mlflow, then keep its INFO lines (a new store's migration notes) off stderr:
    importing mlflow sets its logger to INFO, and the client migrates a new store at once."""
    import mlflow  # noqa: F401 - imported for its logger set-up, undone below

    logging.getLogger("mlflow").setLevel(logging.WARNING)


def summary_metrics(r: SimResult) -> dict[str, float]:
    """The scalar metrics of one strategy (delays in milliseconds)."""
    metrics = {
        "events": r.events,
        "throughput": r.throughput,
        "makespan_s": r.makespan_s,
        "std_dev": r.std_dev,
        "dist_cost": r.dist_cost,
        "imb_score": r.imb_score,
        "e_lb": r.e_lb,
        "merge_cost": r.merge_cost,
        "distinct_keys": r.distinct_keys,
        "p50_ms": r.queue_delay.p50 * 1e3,
        "p90_ms": r.queue_delay.p90 * 1e3,
        "p99_ms": r.queue_delay.p99 * 1e3,
        "max_ms": r.queue_delay.max * 1e3,
        "sojourn_p99_ms": r.sojourn.p99 * 1e3,
        "wall_s": r.wall_s,
    }
    return {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}


def window_steps(windows: int, window_s: float) -> list[int]:
    """The step of each window: its start in whole seconds of event time."""
    return [round(i * window_s) for i in range(windows)]


def loads_table(r: SimResult) -> dict[str, list[Any]]:
    """The per-worker loads of every window as columns ``t_s``, ``worker``, ``events``."""
    t_s: list[float] = []
    worker: list[int] = []
    events: list[int] = []
    for i, row in enumerate(r.window_loads.tolist()):
        for w, n in enumerate(row):
            t_s.append(i * r.window_s)
            worker.append(w)
            events.append(int(n))
    return {"t_s": t_s, "worker": worker, "events": events}


@dataclass
class SimTracking:
    """The MLflow runs of one ``simulate`` invocation (run ids by strategy)."""

    tracker: Tracker
    experiment: str
    params: dict[str, Any]
    tags: dict[str, str]
    out: Path
    parent: str | None = None
    runs: dict[str, str] = field(default_factory=dict)
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    """Ends every run name of this invocation (``dkg-1f3a9c``): runs of the same strategy
    stay apart in MLflow's run list."""

    @classmethod
    def open(
        cls,
        home: Path,
        experiment: str,
        params: Mapping[str, Any],
        strategies: Sequence[str],
        out: Path,
    ) -> SimTracking:
        """Connect to the store of ``home`` (or ``$MLFLOW_TRACKING_URI``); with several
        strategies, open the parent run now."""

        quiet_mlflow()
        tracker = Tracker(TrackingSettings.for_runs(home))
        tags = {"mode": "simulate", "run_dir": str(out)}
        self = cls(tracker, experiment, dict(params), tags, out)
        if len(strategies) > 1:
            self.parent = tracker.start_run(
                experiment,
                f"compare {','.join(strategies)}-{self.token}",
                params={**self.params, "strategies": ",".join(strategies)},
                tags=tags,
            )
        return self

    def started(self, strategy: str) -> str:
        """Open ``strategy``'s run (RUNNING while it is simulated); its id."""
        rid = self.tracker.start_run(
            self.experiment,
            f"{strategy}-{self.token}",
            params={**self.params, "strategy": strategy},
            tags={**self.tags, "strategy": strategy},
            parent_run_id=self.parent,
        )
        self.runs[strategy] = rid
        return rid

    def progress(self, strategy: str) -> Callable[[int, int], None]:
        """A simulator progress callback that logs ``events_done`` (step = events) into
        ``strategy``'s run every :data:`PROGRESS_STEP_PCT` percent, so the run shows
        how far it is while it runs."""
        rid = self.runs[strategy]
        shown = [-1]

        def log(done: int, total: int) -> None:
            step = 100 * done // total // PROGRESS_STEP_PCT if total else 0
            if step != shown[0]:
                shown[0] = step
                self.tracker.log_metrics(rid, {"events_done": float(done)}, step=done)

        return log

    def failed(self) -> None:
        """End every open run FAILED (the simulation raised or was interrupted)."""
        for rid in [*self.runs.values(), *([self.parent] if self.parent else [])]:
            self.tracker.end_run(rid, "FAILED")

    def finish(self, results: Sequence[SimResult], files: Mapping[str, str]) -> dict[str, Any]:
        """Log every result into its run (``results`` in the order the runs were started)
        and end the runs FINISHED; the run ids."""
        try:
            for (name, rid), r in zip(self.runs.items(), results, strict=True):
                self._log_one(rid, name, r, plots="loads_plot" in files)
            if self.parent is not None:
                for path in files.values():
                    folder = "plots" if path.endswith(".png") else None
                    self.tracker.log_artifact(self.parent, path, folder)
        except BaseException:
            self.failed()
            raise
        for rid in self.runs.values():
            self.tracker.end_run(rid)
        if self.parent is not None:
            self.tracker.end_run(self.parent)
        return {"parent_run_id": self.parent, "run_ids": dict(self.runs)}

    def _log_one(self, rid: str, name: str, r: SimResult, plots: bool) -> None:
        tracker = self.tracker
        tracker.log_metrics(rid, summary_metrics(r))
        loads = r.window_loads
        if loads.size:
            steps = window_steps(loads.shape[0], r.window_s)
            tracker.log_series(rid, "window_std_dev", [std_dev_pct(row) for row in loads], steps)
            tracker.log_series(
                rid, "window_throughput", (loads.sum(axis=1) / r.window_s).tolist(), steps
            )
            tracker.log_table(rid, loads_table(r), LOADS_TABLE)
        if plots:
            folder = self.out / name
            folder.mkdir(parents=True, exist_ok=True)
            loads_png, cdf_png = (folder / name for name in PLOT_NAMES)
            tracker.log_artifact(rid, plot_worker_loads([r], loads_png), "plots")
            tracker.log_artifact(rid, plot_latency_cdf([r], cdf_png), "plots")

    def links(self) -> list[str]:
        """Lines for the user: each run id, and where to see the top run."""

        lines = [f"mlflow run {name}: {rid}" for name, rid in self.runs.items()]
        top = self.parent or next(iter(self.runs.values()), None)
        if self.parent is not None:
            lines.insert(0, f"mlflow parent run: {self.parent}")
        if top is not None:
            lines.append(f"mlflow: {run_link(self.tracker, top)}")
        return lines

"""One live autoscaling run on the embedded (or a real) stack, start to verdict.

``run_autoscale(settings)`` does, in order:

1. make sure the broker runs; create the run's topics (data, monitor,
   consumer.metadata, processed) and write ``settings.json`` under
   ``<home>/runs/<run>/``;
2. start the monitor and the controller processes (the controller starts the
   consumers it decides on);
3. produce the load: iteration ``k`` writes each partition at the speed of
   row ``k`` of the workload's speed plan for ``iteration_s`` seconds; at each
   iteration boundary sample consumers and lag (and call ``hook``, which the
   fault tests use to kill processes);
4. drain: wait until the group's committed offsets reach the true ends;
5. stop: create the stop file (the controller stops its consumers), wait for
   the processes, kill any straggler (consumers adopted from a killed
   controller included);
6. verdict from the evidence: exactly once, no overlapping ownership,
   latency percentiles, hand-off downtime, decisions from Delta; plots and
   one MLflow run; delete the topics.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.autoscale import AutoscalerConfig, Capacity
from skewlab.errors import ConfigError, SkewlabError
from skewlab.io.delta import DeltaStore
from skewlab.io.kafka import KafkaClient, connect
from skewlab.io.tracking import Tracker, TrackingSettings
from skewlab.live.autoscale.controller import ConsumerProc
from skewlab.live.autoscale.protocol import (
    LiveSettings,
    Processed,
    check_exact,
    downtimes,
    overlaps,
    ownerships,
    percentiles,
    speed_plan,
)
from skewlab.rundir import RunDir
from skewlab.services import get_service

__all__ = ["AutoscaleSettings", "AutoscaleSummary", "RunHandle", "run_autoscale"]

log = logging.getLogger(__name__)

TICK_S = 0.1


class AutoscaleRunError(SkewlabError):
    """A process of the run failed or the run did not drain; the message says where."""


@dataclass(frozen=True)
class AutoscaleSettings:
    """The parameters of one live autoscaling run (the CLI builds this).

    ``capacity`` is the consumer capacity ``C_bar`` in bytes/s; the workload's
    speeds are in units of the bin capacity ``C`` (default 5/6 ``C_bar``).
    """

    algorithm: str = "mwf"
    partitions: int = 32
    capacity: float = 120_000.0
    bin_capacity: float | None = None
    workload: str = "stream:delta=5"
    duration_s: float = 300.0
    iteration_s: float = 30.0
    window_s: float = 30.0
    min_span_s: float = 3.0
    sample_s: float = 1.0
    publish_s: float = 5.0
    record_bytes: int = 100
    client: str = "confluent"
    home: str = ".skewlab"
    bootstrap: str | None = None
    drain_timeout_s: float = 120.0
    mlflow: bool = True
    experiment: str = "skewlab-autoscale-live"
    keep_topics: bool = False

    def __post_init__(self) -> None:
        AutoscalerConfig(self.algorithm, self.capacity, self.bin_capacity)
        if not self.duration_s >= self.iteration_s > 0:
            raise ConfigError(f"need duration >= iteration > 0 s, got {self.duration_s}, "
                              f"{self.iteration_s}")  # fmt: skip
        speed_plan(self.workload, self.partitions, 1, 1.0)
        self.live("check", "127.0.0.1:1", ".", ".")

    @property
    def iterations(self) -> int:
        return math.ceil(self.duration_s / self.iteration_s)

    @property
    def c(self) -> float:
        return Capacity(self.capacity, self.bin_capacity).c

    def live(self, run_id: str, bootstrap: str, run_dir: str, delta_root: str) -> LiveSettings:
        max_consumers = self.partitions + 1
        if self.algorithm.startswith("kafka"):
            max_consumers = max(max_consumers, int(self.algorithm.partition(":")[2] or 1))
        return LiveSettings(
            run_id=run_id, bootstrap=bootstrap, run_dir=run_dir, delta_root=delta_root,
            partitions=self.partitions, consumer_capacity=self.capacity,
            algorithm=self.algorithm, capacity=self.bin_capacity, client=self.client,
            iteration_s=self.iteration_s, window_s=self.window_s, min_span_s=self.min_span_s,
            sample_s=self.sample_s, publish_s=self.publish_s, record_bytes=self.record_bytes,
            max_consumers=max_consumers,
        )  # fmt: skip


@dataclass
class AutoscaleSummary:
    """What a run produced: the verdict, the numbers, the series, where to look."""

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

    @property
    def avg_consumers(self) -> float:
        return float(np.mean([d["consumers"] for d in self.decisions])) if self.decisions else 0.0

    @property
    def avg_rscore(self) -> float:
        return float(np.mean([d["rscore"] for d in self.decisions])) if self.decisions else 0.0

    @property
    def moved(self) -> int:
        return sum(len(d["moved"]) for d in self.decisions)

    @property
    def downtime_ratio(self) -> float:
        """Mean stop-sent -> first-record time over the iteration length."""
        if not self.downtime:
            return math.nan
        return float(np.mean([d["first_record_s"] for d in self.downtime])) / self.iteration_s

    def row(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "algorithm": self.algorithm, "workload": self.workload,
            "records": self.records, "exact": self.exact, "overlaps": self.overlaps,
            "rebalances": len(self.decisions), "moved": self.moved,
            "avg_consumers": self.avg_consumers, "avg_rscore": self.avg_rscore,
            "downtime_ratio": self.downtime_ratio, **self.latency, "wall_s": self.wall_s,
            "exactness": self.exactness, "mlflow_run_id": self.mlflow_run_id,
        }  # fmt: skip


@dataclass
class RunHandle:
    """The run's processes, for hooks (fault tests kill and restart them)."""

    live: LiveSettings
    client: KafkaClient
    controller: subprocess.Popen[bytes] | None = None
    monitor: subprocess.Popen[bytes] | None = None

    def spawn(self, role: str) -> subprocess.Popen[bytes]:
        files = RunDir.of(self.live.run_dir)
        out = open(files.log(role), "ab")  # noqa: SIM115 - the child's
        try:
            return subprocess.Popen(
                [sys.executable, "-m", f"skewlab.live.autoscale.{role}",
                 str(files.settings)],
                stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip
        finally:
            out.close()

    def start_controller(self) -> None:
        self.controller = self.spawn("controller")

    def kill_controller(self) -> None:
        if self.controller is not None:
            self.controller.kill()
            self.controller.wait()

    def state(self) -> dict[str, Any]:
        """The controller's persisted state (``{}`` before its first write)."""
        try:
            return dict(json.loads(self.live.state_file.read_text()))
        except (OSError, ValueError):
            return {}

    def consumer_pids(self) -> dict[int, int]:
        return {int(c): int(p) for c, p in self.state().get("pids", {}).items()}

    def lag(self) -> int:
        ends = self.client.end_offsets(self.live.topics.data)
        done = self.client.committed(self.live.group, self.live.topics.data)
        return sum(e - done.get(p, 0) for p, e in ends.items())


Hook = Callable[[int, RunHandle], None]
"""Called with the iteration index at each iteration boundary of the produce phase."""


def new_run_id(algorithm: str) -> str:
    name = algorithm.replace(":", "")
    return f"{name}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"


def run_autoscale(
    s: AutoscaleSettings, hook: Hook | None = None, run_id: str | None = None
) -> AutoscaleSummary:
    """Run steps 1-6 of the module docstring; the summary (MLflow-logged unless disabled)."""
    t_start = time.time()
    run_id = run_id or new_run_id(s.algorithm)
    home = Path(s.home).resolve()
    run_dir = RunDir.create(home, run_id)
    bootstrap = s.bootstrap or _ensure_broker(home)
    live = s.live(run_id, bootstrap, str(run_dir), str(home / "delta"))
    client = connect(live.kafka)
    topics = live.topics
    handle = RunHandle(live, client)
    try:
        for name, n in ((topics.data, s.partitions), (topics.monitor, 1),
                        (topics.metadata, live.max_consumers + 1),
                        (topics.processed, s.partitions)):  # fmt: skip
            client.create_topic(name, n)
        run_dir.settings.write_text(live.to_json())
        handle.monitor = handle.spawn("monitor")
        handle.start_controller()
        samples = _produce(s, live, handle, hook)
        samples += _drain(s, handle)
        live.stop_file.touch()
        _stop(handle)
        summary = _verdict(s, live, client, samples, time.time() - t_start)
        if s.mlflow:
            summary = _log_mlflow(summary, s, home)
        return summary
    finally:
        live.stop_file.touch()
        for p in (handle.controller, handle.monitor):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        for pid in handle.consumer_pids().values():
            ConsumerProc(pid).kill()
        if not s.keep_topics:
            for t in topics.all():
                try:
                    client.delete_topic(t)
                except SkewlabError as exc:
                    log.warning("could not delete topic %s: %s", t, exc)
        client.close()


def _ensure_broker(home: Path) -> str:

    return get_service("broker", home).start().url


def _sample(handle: RunHandle, t0: float, k: int) -> dict[str, float]:
    return {
        "t": time.time() - t0,
        "iteration": k,
        "consumers": len(handle.consumer_pids()),
        "lag": handle.lag(),
    }


def _produce(
    s: AutoscaleSettings, live: LiveSettings, handle: RunHandle, hook: Hook | None
) -> list[dict[str, float]]:
    """Step 3: write speeds row ``k`` during iteration ``k``; sample at boundaries."""
    plan = speed_plan(s.workload, s.partitions, s.iterations, s.c)
    client, value = handle.client, b"x" * s.record_bytes
    credit = np.zeros(s.partitions)
    samples: list[dict[str, float]] = []
    t0 = last = time.time()
    k_seen = -1
    while (now := time.time()) - t0 < s.duration_s:
        k = min(int((now - t0) / s.iteration_s), s.iterations - 1)
        if k != k_seen:
            k_seen = k
            samples.append(_sample(handle, t0, k))
            if hook is not None:
                hook(k, handle)
            _check_running(handle)
        credit += plan[k] * (now - last)
        last = now
        n = np.floor(credit / s.record_bytes).astype(np.int64)
        credit -= n * s.record_bytes
        for p in np.flatnonzero(n):
            for _ in range(int(n[p])):
                client.produce(live.topics.data, value, partition=int(p))
        client.flush()
        time.sleep(max(0.0, TICK_S - (time.time() - now)))
    return samples


def _check_running(handle: RunHandle) -> None:
    for role, p in (("controller", handle.controller), ("monitor", handle.monitor)):
        if p is not None and p.poll() is not None and p.returncode != 0:
            log_path = RunDir.of(handle.live.run_dir).log(role)
            tail = " | ".join(log_path.read_text(errors="replace").splitlines()[-5:])
            raise AutoscaleRunError(f"{role} exited ({p.returncode}); {log_path}: {tail}")


def _drain(s: AutoscaleSettings, handle: RunHandle) -> list[dict[str, float]]:
    """Step 4: wait until every record is committed by the group."""
    deadline = time.time() + s.drain_timeout_s
    while (lag := handle.lag()) > 0:
        _check_running(handle)
        if time.time() > deadline:
            raise AutoscaleRunError(f"run did not drain within {s.drain_timeout_s} s ({lag} left)")
        time.sleep(0.25)
    return []


def _stop(handle: RunHandle) -> None:
    """Step 5: the controller stops its consumers; the monitor sees the stop file."""
    for p in (handle.controller, handle.monitor):
        if p is None:
            continue
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def read_evidence(client: KafkaClient, live: LiveSettings) -> list[Processed]:
    topic = live.topics.processed
    out = []
    for p, end in client.end_offsets(topic).items():
        out += [Processed.decode(r.value) for r in client.fetch(topic, p, 0, end, timeout_s=30)]
    return out


def read_decisions(live: LiveSettings) -> list[dict[str, Any]]:
    rows = DeltaStore(live.delta_root).read("decisions", run_id=live.run_id).to_pylist()
    out = [{**json.loads(r["detail"]), "reason": r["reason"], "ts": r["ts"]} for r in rows]
    return sorted(out, key=lambda d: d["iteration"])


def _verdict(
    s: AutoscaleSettings,
    live: LiveSettings,
    client: KafkaClient,
    samples: list[dict[str, float]],
    wall_s: float,
) -> AutoscaleSummary:
    """Step 6: exactness, overlaps, latency, downtime, decisions."""
    evidence = read_evidence(client, live)
    ends = client.end_offsets(live.topics.data)
    exactness = check_exact(evidence, ends)
    bad = overlaps(ownerships(evidence))
    for a, b in bad[:5]:
        log.error("partition %d read by consumers %d and %d at once", a.partition, a.consumer,
                  b.consumer)  # fmt: skip
    lat = [x for e in evidence if e.kind == "batch" for x in e.latency_ms]
    decisions = read_decisions(live)
    handoffs = [h for d in decisions for h in d["handoffs"] if "stop_sent" in h]
    return AutoscaleSummary(
        run_id=live.run_id, algorithm=s.algorithm, workload=s.workload,
        records=exactness.records, exact=exactness.exact and not bad, exactness=str(exactness),
        overlaps=len(bad), latency=percentiles(lat), decisions=decisions, samples=samples,
        downtime=downtimes(handoffs, evidence), iteration_s=s.iteration_s, wall_s=wall_s,
        run_dir=live.run_dir,
    )  # fmt: skip


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


def _log_mlflow(summary: AutoscaleSummary, s: AutoscaleSettings, home: Path) -> AutoscaleSummary:

    summary.plots.append(str(plot_run(summary, Path(summary.run_dir) / "autoscale.png")))
    tracker = Tracker(TrackingSettings.for_runs(home))
    params = {k: v for k, v in asdict(s).items() if k not in ("home", "bootstrap")}
    tags = {"algorithm": s.algorithm, "mode": "live-autoscale", "exact": str(summary.exact)}
    rid = tracker.start_run(s.experiment, summary.run_id, params=params, tags=tags)
    try:
        row = summary.row()
        metrics = {k: float(v) for k, v in row.items() if isinstance(v, (int, float))}
        tracker.log_metrics(rid, {k: v for k, v in metrics.items() if math.isfinite(v)})
        its = [int(d["iteration"]) for d in summary.decisions]
        for name in ("consumers", "rscore", "decide_ms", "manage_s"):
            tracker.log_series(rid, name, [float(d[name]) for d in summary.decisions], its)
        steps = [int(x["iteration"]) for x in summary.samples]
        tracker.log_series(rid, "lag", [x["lag"] for x in summary.samples], steps)
        tracker.log_series(rid, "live_consumers", [x["consumers"] for x in summary.samples], steps)
        for p in summary.plots:
            tracker.log_artifact(rid, p, "plots")
        tracker.log_dict(rid, {**row, "decisions": summary.decisions}, "summary.json")
        tracker.end_run(rid, "FINISHED" if summary.exact else "FAILED")
    except BaseException:
        tracker.end_run(rid, "FAILED")
        raise
    summary.mlflow_run_id = rid
    return summary

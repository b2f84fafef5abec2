"""A live run as one MLflow run, opened when the run starts and finished with its summary.

:func:`open_live_run` creates the MLflow run (RUNNING) and writes
``<run dir>/mlflow.json`` (:attr:`RunDir.mlflow_run`), so a phase in another
process (the DAG) gets it back with :meth:`LiveRun.attach`. What goes where
(docs/mlflow.md): params are the experiment's settings only; ids (the skewlab
run id, the run dir) are tags; progress and per-window series are stepped in
whole seconds of event time since the run's first produced event; the
per-worker loads are one table (``window_loads.json``); plots keep the same
artifact names in every run, at the root of its artifacts (``worker_loads.png``,
``latency_cdf.png``): MLflow's compare view offers the root's files common to
all runs, one preview per run side by side. A server that stops answering costs each
call a bounded wait (:data:`CALL_BOUNDS`); the run goes on and what it could not log is
listed in ``<run dir>/mlflow-not-logged.json`` (:class:`NotLogged`) and one warning.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from skewlab.io.run_links import run_link, run_url
from skewlab.io.tracking import Tracker, TrackingError, TrackingSettings
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings
from skewlab.workload.spec import parse_workload

if TYPE_CHECKING:
    from skewlab.live.report.summary import RunSummary
    from skewlab.quality.report import QualityReport

log = logging.getLogger(__name__)

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
    "backlog_max",
    "backlog_at_s",
    "wall_s",
)
"""Scalar metrics of every live run (latency: steady state, :mod:`skewlab.live.report.summary`)."""

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

NOT_PARAMS = ("home", "bootstrap", "experiment", "mlflow", "keep_topics")
"""Settings that say where or whether to log, not what the run does: not params."""

LOADS_TABLE = "window_loads.json"
"""The per-worker loads, one row per window x worker (the name ``skewlab simulate`` uses)."""

PROGRESS_METRICS = ("produced", "routed", "processed", "backlog")
"""Logged by :meth:`LiveRun.progress` while the run goes (step = seconds of event time)."""

RUN_ID_TAG = "skewlab.run_id"
RUN_DIR_TAG = "skewlab.run_dir"
FAILURE_TAG = "skewlab.failure"
MAX_TAG_CHARS = 5000


CALL_BOUNDS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": 5,
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": 1,
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": 1,
}
"""MLflow's own settings (``mlflow.environment_variables``) while a run's calls go to a
tracking server: 5 s per request, one retry. MLflow's defaults (120 s, 7 retries with
backoff factor 2) make minutes of silence per call when the server is gone. A variable the
user set wins; the bounds hold only during the run's calls (:func:`bounded_calls`)."""

CALL_BOUND_S = (
    CALL_BOUNDS["MLFLOW_HTTP_REQUEST_TIMEOUT"]
    * (CALL_BOUNDS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] + 1)
    + 2 * CALL_BOUNDS["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"]
)
"""The longest one MLflow call of a run waits under :data:`CALL_BOUNDS` (each try's
timeout, plus the back-off and its jitter before the retry)."""

PROGRESS_RETRY_S = 30.0
"""After a progress point failed, the next ones are not tried for this long (recorded as
not logged), so a gone server costs the run one bounded call per 30 s, not one a second."""


class _Bounds:
    """:data:`CALL_BOUNDS` in ``os.environ`` while at least one run call is under way (MLflow
    reads them at each request); the previous values back when the last one ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: dict[str, str | None] = {}

    def enter(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._saved = {k: os.environ.get(k) for k in CALL_BOUNDS}
                for k, v in CALL_BOUNDS.items():
                    os.environ.setdefault(k, str(v))
            self._depth += 1

    def exit(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                for k, old in self._saved.items():
                    if old is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = old


_BOUNDS = _Bounds()


@contextmanager
def bounded_calls() -> Iterator[None]:
    """The MLflow calls in the block wait at most :data:`CALL_BOUND_S` each."""
    _BOUNDS.enter()
    try:
        yield
    finally:
        _BOUNDS.exit()


def _reason(exc: BaseException) -> str:
    """``exc`` in a few words: its OS error when it has one (``[Errno 111] Connection
    refused``, the usual end of MLflow's long "API request to ... failed" message)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    os_error = re.search(r"\[Errno \d+\][^'\")]*", text)
    return f"{type(exc).__name__}: {os_error.group(0).strip() if os_error else text[:300]}"


@dataclass
class NotLogged:
    """What one run could not log into its MLflow run, by kind, in the order it was missed;
    saved to ``<run dir>/mlflow-not-logged.json`` (:attr:`RunDir.mlflow_not_logged`) at
    each change. ``failures`` are the calls that were tried and failed, each with the
    seconds it waited (at most :data:`CALL_BOUND_S`); the rest were skipped untried."""

    mlflow_run_id: str
    tracking_uri: str
    failures: list[dict[str, Any]] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    series: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    status: str | None = None
    """The end status (FINISHED / FAILED) the run could not be given."""
    progress_steps: list[int] = field(default_factory=list)
    """The progress points (their steps) not logged."""

    def add(self, kind: str, names: Sequence[str]) -> None:
        """Record ``names`` of ``kind`` (``params``, ``metrics``, ``series``, ``artifacts``,
        ``tags``, ``status``) as not logged."""
        if kind == "status":
            self.status = names[0]
            return
        have: list[str] = getattr(self, kind)
        have.extend(n for n in names if n not in have)

    def failed(self, call: str, seconds: float, exc: BaseException) -> None:
        """Record that ``call`` was tried, waited ``seconds`` and failed with ``exc``."""
        self.failures.append({"call": call, "seconds": round(seconds, 3), "error": _reason(exc)})

    def save(self, rd: RunDir) -> None:
        """Write the record to ``rd`` (atomically: a reader sees the old or the new one)."""
        path = rd.mlflow_not_logged
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, rd: RunDir) -> NotLogged | None:
        """The run's record, ``None`` if it logged everything it tried."""
        try:
            return cls(**json.loads(rd.mlflow_not_logged.read_text()))
        except FileNotFoundError:
            return None

    def line(self, rd: RunDir) -> str:
        """The one console line: the server, its first error, what is missing (every
        artifact, tag and param by name; metrics and series by count and their first six),
        and the file that lists it all."""
        parts = []
        for kind in ("params", "metrics", "series", "artifacts", "tags"):
            names: list[str] = getattr(self, kind)
            if names:
                cut = 6 if kind in ("metrics", "series") else len(names)
                shown = ", ".join(names[:cut]) + (", ..." if len(names) > cut else "")
                parts.append(f"{len(names)} {kind} ({shown})")
        if self.progress_steps:
            parts.append(f"{len(self.progress_steps)} progress points")
        if self.status:
            parts.append(f"the end status {self.status}")
        first = self.failures[0]["error"] if self.failures else "unreachable"
        return (
            f"MLflow run {self.mlflow_run_id} at {self.tracking_uri} NOT logged: "
            f"{'; '.join(parts) or 'nothing'} ({first}; list: {rd.mlflow_not_logged})"
        )


@dataclass(frozen=True)
class LogStep:
    """One MLflow call of a run's summary and what it logs (``kind``: a kind of
    :meth:`NotLogged.add`), so a call not made can be named."""

    kind: str
    names: list[str]
    call: Callable[[], Any]

    @classmethod
    def series(
        cls, tracker: Tracker, rid: str, name: str, values: Sequence[float], at: Sequence[int]
    ) -> LogStep:
        """The call logging metric ``name`` as a series of ``values`` at steps ``at``."""
        return cls("series", [name], lambda: tracker.log_series(rid, name, values, at))

    @classmethod
    def verdict(cls, tracker: Tracker, rid: str, exact: bool, exactness: str) -> list[LogStep]:
        """The last two calls: tag ``exact`` (and the failure when not), then the end status
        (FINISHED if exact, else FAILED)."""
        tags = {"exact": str(exact).lower()}
        if not exact:
            tags[FAILURE_TAG] = f"not exact: {exactness}"[:MAX_TAG_CHARS]
        status = "FINISHED" if exact else "FAILED"
        return [
            cls("tags", list(tags), lambda: tracker.set_tags(rid, tags)),
            cls("status", [status], lambda: tracker.end_run(rid, status)),
        ]


Series = tuple[str, Sequence[float], Sequence[int]]
"""One metric series: its name, its values, their steps."""


@dataclass
class Logged:
    """What one kind's summary logs into its MLflow run; :meth:`LiveRun.finish` adds what
    every kind's run logs (the plots at the artifact root, ``summary.json``, the verdict)."""

    metrics: Mapping[str, float]
    """Scalar metrics (a non-finite one is left out)."""
    summary: Mapping[str, Any]
    """``summary.json``: the summary's row (and what the kind adds to it)."""
    series: list[Series] = field(default_factory=list)
    tables: dict[str, Mapping[str, list[Any]]] = field(default_factory=dict)
    """Artifact name -> columns, logged as a table (``window_loads.json``)."""
    docs: dict[str, Any] = field(default_factory=dict)
    """Artifact name -> a JSON document (``scale_events.json``), after the tables."""


class Tracked(Protocol):
    """A kind's summary as :meth:`LiveRun.finish` logs it."""

    run_id: str
    exact: bool
    exactness: str
    plots: list[str]
    mlflow_run_id: str | None
    mlflow_url: str | None

    def logged(self) -> Logged:
        """Its kind's metrics, series, tables and ``summary.json`` (the MLflow ids set)."""
        ...


T = TypeVar("T", bound=Tracked)


def experiment_name(s: ExperimentSettings) -> str:
    """One MLflow experiment per workload family (``zipf``, ``country``...)."""
    return s.experiment or f"skewlab-live-{s.workload.split(':', 1)[0]}"


SWITCHED = {
    "rebalance": ("rebalance_interval_s", "rebalance_lead_s", "rebalance_params"),
    "scale_out": (
        "scale_out_interval_s", "scale_out_lead_s", "max_instances", "scale_out_params",
    ),
}  # fmt: skip
"""A control switch -> the settings that only mean something when it is on."""


def run_params(s: ExperimentSettings) -> dict[str, Any]:
    """The experiment's settings as MLflow params, one comparable form each.

    No ids, paths or logging switches (:data:`NOT_PARAMS`); nothing unset (a ``None``
    would show as the string "None"), nor the settings of a control that is off
    (:data:`SWITCHED`); the workload in its canonical spec (``zipf`` and
    ``zipf:s=1.1,v=2.72`` are one workload, logged as one string); a dict setting as one
    param per key (``strategy_params.warmup``), so runs compare key by key.
    """
    skip = set(NOT_PARAMS)
    for switch, names in SWITCHED.items():
        if getattr(s, switch) is None:
            skip.update(names)
    out: dict[str, Any] = {}
    for k, v in dataclasses.asdict(s).items():
        if k in skip or v is None:
            continue
        if isinstance(v, dict):
            out.update({f"{k}.{sub}": x for sub, x in sorted(v.items()) if x is not None})
        elif k == "workload":
            out[k] = parse_workload(v, seed=s.seed).spec()
        else:
            out[k] = v
    return out


_RUN_ID = re.compile(r"^(?P<label>.+)-(?P<stamp>[0-9]{8}T[0-9]{6})-(?P<hex>[0-9a-f]{6})$")


def run_name(run_id: str, label: str | None = None) -> str:
    """The MLflow run name of skewlab run ``run_id`` (``<label>-<UTC time>-<hex>``): its
    label and hex, ``dkg-c46dad``. MLflow's run list cuts long names, and the run ids of
    one day share their first 18 characters; the start time has a column of its own.
    ``label`` replaces the run id's (a policy on top of the strategy: ``key+smalops``)."""
    m = _RUN_ID.match(run_id)
    if m is None:
        return run_id if label is None else f"{label}-{run_id}"
    return f"{label or m['label']}-{m['hex']}"


def run_label(s: ExperimentSettings) -> str:
    """The strategy, plus the control policy on top of it (``key+smalops``)."""
    policy = s.rebalance or s.scale_out
    return f"{s.strategy}+{policy}" if policy else s.strategy


@dataclass(frozen=True)
class Opening:
    """What one kind's MLflow run opens with; :func:`open_live_run` adds what every kind's
    has (the skewlab run id and dir as tags, the data dir's tracking store,
    ``<run dir>/mlflow.json``)."""

    home: str
    experiment: str
    params: Mapping[str, Any]
    """The settings that say what the run does (:data:`NOT_PARAMS` left out)."""
    tags: Mapping[str, str]
    """The kind's labels (``mode``, its strategy or algorithm...)."""
    label: str | None = None
    """The run name's label (``None``: the run id's, :func:`run_name`)."""


def run_opening(s: ExperimentSettings) -> Opening:
    """A grouping run's: its workload family's experiment, :func:`run_params`, the strategy
    and control policies as tags, :func:`run_label` as the name's label."""
    tags = {"mode": "live", "strategy": s.strategy}
    if s.rebalance:
        tags["rebalance"] = s.rebalance
    if s.scale_out:
        tags["scale_out"] = s.scale_out
    return Opening(s.home, experiment_name(s), run_params(s), tags, run_label(s))


def window_steps(starts_ms: Sequence[int], window_s: float, t_first_s: float) -> list[int]:
    """The step of each window: its end in whole seconds since the first produced event.

    The end, not the start: a window may begin before the first event (windows
    are aligned to multiples of their size), its end never does; so every step
    is >= 0 and runs with different window sizes share one time axis.
    """
    if not math.isfinite(t_first_s):
        t_first_s = starts_ms[0] / 1e3 if starts_ms else 0.0
    return [max(0, round(ws / 1e3 + window_s - t_first_s)) for ws in starts_ms]


def loads_table(summary: RunSummary) -> dict[str, list[Any]]:
    """Columns ``t_s`` (window start, s since the first event; < 0 when the window began
    before it), ``step`` (its MLflow step), ``window_start_ms``, ``worker``, ``events``."""
    loads = summary.window_loads
    t_first = summary.t_first_s
    if not math.isfinite(t_first):
        t_first = summary.window_starts_ms[0] / 1e3 if summary.window_starts_ms else 0.0
    steps = window_steps(summary.window_starts_ms, summary.window_s, summary.t_first_s)
    cols: dict[str, list[Any]] = {
        "t_s": [],
        "step": [],
        "window_start_ms": [],
        "worker": [],
        "events": [],
    }
    for ws, step, row in zip(summary.window_starts_ms, steps, loads):
        for w, n in enumerate(row):
            cols["t_s"].append(round(ws / 1e3 - t_first, 3))
            cols["step"].append(step)
            cols["window_start_ms"].append(int(ws))
            cols["worker"].append(w)
            cols["events"].append(int(n))
    return cols


@dataclass
class LiveRun:
    """One live run's MLflow run, open from the run's start to its summary.

    Invariants: :meth:`finish` or :meth:`fail` ends the run once (later calls
    are no-ops); progress steps only grow (a call within the same second as
    the last logged one is dropped); no call waits longer than :data:`CALL_BOUND_S`,
    none raises because the server is gone: what was not logged goes to :class:`NotLogged`.
    """

    tracker: Tracker
    mlflow_run_id: str
    experiment_id: str
    run_dir: RunDir
    _last_step: int = -1
    _retry_at: float = 0.0
    _missed: NotLogged | None = None

    @property
    def url(self) -> str:
        """The run's page in the MLflow UI (the tracking server's, else ``mlflow ui``'s)."""
        return run_url(self.tracker.settings.tracking_uri, self.experiment_id, self.mlflow_run_id)

    @property
    def link(self) -> str:
        """:attr:`url`, plus how to serve a local store (one log-line fragment)."""
        return run_link(self.tracker, self.mlflow_run_id)

    @property
    def status(self) -> str:
        """MLflow's status of the run (RUNNING, FINISHED, FAILED, KILLED)."""
        return str(self.tracker.client.get_run(self.mlflow_run_id).info.status)

    # ------------------------------------------------------------ open / attach

    def _save(self) -> None:
        ts = self.tracker.settings
        data = {
            "mlflow_run_id": self.mlflow_run_id,
            "experiment_id": self.experiment_id,
            "tracking_uri": ts.tracking_uri,
            "artifact_location": ts.artifact_location,
            "url": self.url,
        }
        path = self.run_dir.mlflow_run
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(path)

    @classmethod
    def open(
        cls,
        tracker: Tracker,
        experiment: str,
        run_dir: str | Path | RunDir,
        params: Mapping[str, Any],
        tags: Mapping[str, Any],
        name: str | None = None,
    ) -> LiveRun:
        """A new RUNNING MLflow run named ``name`` (default :func:`run_name` of the run
        dir's id), recorded in ``<run dir>/mlflow.json`` for :meth:`attach` (any kind of
        live run)."""
        rd = run_dir if isinstance(run_dir, RunDir) else RunDir.of(run_dir)
        rd.path.mkdir(parents=True, exist_ok=True)
        name = name or run_name(rd.run_id)
        with bounded_calls():  # a server that is down fails the run's start in seconds
            rid = tracker.start_run(experiment, name, params=params, tags=tags)
            run = cls(tracker, rid, tracker.experiment_id(experiment), rd)
        run._save()
        log.info("MLflow run of %s: %s", rd.run_id, run.link)
        return run

    @classmethod
    def attach(cls, run_dir: str | Path | RunDir) -> LiveRun:
        """The MLflow run :func:`open_live_run` opened for the run in ``run_dir`` (from
        ``<run dir>/mlflow.json``); :class:`TrackingError` if there is none."""
        rd = run_dir if isinstance(run_dir, RunDir) else RunDir.of(run_dir)
        try:
            data = json.loads(rd.mlflow_run.read_text())
        except FileNotFoundError:
            raise TrackingError(
                f"run {rd.run_id} has no open MLflow run ({rd.mlflow_run})"
            ) from None
        except ValueError as exc:
            raise TrackingError(f"unreadable {rd.mlflow_run}: {exc}") from None
        tracker = Tracker(
            TrackingSettings(
                tracking_uri=data["tracking_uri"], artifact_location=data["artifact_location"]
            )
        )
        return cls(tracker, data["mlflow_run_id"], data["experiment_id"], rd)

    @classmethod
    def find(cls, run_dir: str | Path | RunDir) -> LiveRun | None:
        """:meth:`attach`, or ``None`` when the run has no MLflow run."""
        rd = run_dir if isinstance(run_dir, RunDir) else RunDir.of(run_dir)
        return cls.attach(rd) if rd.mlflow_run.exists() else None

    # ------------------------------------------------------------ while it runs

    def progress(
        self,
        t_event_s: float,
        produced: float,
        routed: float,
        processed: float,
        lag: float | None = None,
    ) -> bool:
        """Log the run's counters at step ``int(t_event_s)``: ``t_event_s`` is seconds of
        event time since the first produced event. ``backlog`` is ``lag`` (events produced
        but not processed), ``produced - processed`` if not given. Whether it was logged
        (one point per second at most)."""
        step = max(0, int(t_event_s))
        if step <= self._last_step:
            return False
        backlog = produced - processed if lag is None else lag
        values = {
            "produced": produced,
            "routed": routed,
            "processed": processed,
            "backlog": backlog,
        }
        self._last_step = step
        if time.monotonic() < self._retry_at:
            missed = self.not_logged()
            missed.progress_steps.append(step)
            missed.save(self.run_dir)
            return False
        t0 = time.monotonic()
        try:
            with bounded_calls():
                self.tracker.log_metrics(self.mlflow_run_id, _finite(values), step=step)
        except Exception as exc:  # a progress point is not worth the run
            missed = self.not_logged()
            first = not missed.failures
            missed.failed(f"progress step {step}", time.monotonic() - t0, exc)
            missed.progress_steps.append(step)
            missed.save(self.run_dir)
            self._retry_at = time.monotonic() + PROGRESS_RETRY_S
            level = logging.WARNING if first else logging.DEBUG
            log.log(
                level,
                "MLflow run %s: progress not logged (%s); next try in %.0f s, list: %s",
                self.mlflow_run_id, _reason(exc), PROGRESS_RETRY_S, self.run_dir.mlflow_not_logged,
            )  # fmt: skip
            return False
        return True

    def not_logged(self) -> NotLogged:
        """What this run could not log so far (the record in the run dir, else a new one)."""
        if self._missed is None:
            self._missed = NotLogged.load(self.run_dir) or NotLogged(
                self.mlflow_run_id, self.tracker.settings.tracking_uri
            )
        return self._missed

    # ------------------------------------------------------------ end

    def _open(self) -> bool:
        return self.status == "RUNNING"

    def fail(self, reason: str) -> bool:
        """End the run FAILED with ``reason`` as tag ``skewlab.failure``; whether it did.

        Made for error paths: never raises (an MLflow error is logged as a
        warning, so the run's own error is the one the caller sees); a no-op
        when the run has ended already.
        """
        text = reason.strip() or "failed"
        t0 = time.monotonic()
        try:
            with bounded_calls():
                if not self._open():
                    log.debug("MLflow run %s already ended; fail() ignored", self.mlflow_run_id)
                    return False
                self.tracker.set_tags(self.mlflow_run_id, {FAILURE_TAG: text[:MAX_TAG_CHARS]})
                self.tracker.end_run(self.mlflow_run_id, "FAILED")
        except Exception as exc:  # see the docstring
            missed = self.not_logged()
            missed.failed("fail", time.monotonic() - t0, exc)
            missed.add("tags", [FAILURE_TAG])
            missed.add("status", ["FAILED"])
            missed.save(self.run_dir)
            log.warning("%s", missed.line(self.run_dir))
            return False
        log.info("MLflow run %s: FAILED (%s)", self.mlflow_run_id, text.splitlines()[0])
        return True

    def finish(self, summary: T, quality: QualityReport | None = None) -> T:
        """Log ``summary`` (its kind's metrics, series and tables, :meth:`Tracked.logged`;
        the plots, ``summary.json``) and ``quality`` into the run and end it: FINISHED if
        the run was exact, else FAILED with the reason. Sets ``summary.mlflow_run_id`` /
        ``mlflow_url``."""
        rid = self.mlflow_run_id
        summary.mlflow_run_id, summary.mlflow_url = rid, self.url
        self.log_steps(_summary_steps(self.tracker, rid, summary, quality))
        return summary

    def log_steps(self, steps: Sequence[LogStep]) -> bool:
        """Make ``steps`` (the calls that log a summary and end the run), each bounded;
        whether all were made. After the first call that fails none is tried: all that is
        left is recorded as not logged (:meth:`not_logged`) and said in one warning. A
        no-op (``False``) when the run has ended already."""
        down = False
        with bounded_calls():
            t0 = time.monotonic()
            try:
                if not self._open():
                    log.warning(
                        "MLflow run %s already ended; summary not logged", self.mlflow_run_id
                    )
                    return False
            except Exception as exc:  # the server is gone: nothing below is tried
                self.not_logged().failed("get_run", time.monotonic() - t0, exc)
                down = True
            for step in steps:
                if not down:
                    t0 = time.monotonic()
                    try:
                        step.call()
                        continue
                    except Exception as exc:  # the run's verdict stands without MLflow
                        self.not_logged().failed(step.kind, time.monotonic() - t0, exc)
                        down = True
                    except BaseException as exc:
                        self.fail(f"logging the summary failed: {type(exc).__name__}: {exc}")
                        raise
                self.not_logged().add(step.kind, step.names)
        if down:
            missed = self.not_logged()
            missed.save(self.run_dir)
            log.warning("%s", missed.line(self.run_dir))
        return not down


def open_live_run(
    s: Opening | ExperimentSettings,
    run_dir: str | Path | RunDir,
    tracking: TrackingSettings | None = None,
) -> LiveRun:
    """Create the run's MLflow run (RUNNING, params and tags set) and record it in
    ``<run dir>/mlflow.json``; call it when the run starts. ``s`` is the kind's
    :class:`Opening` (a grouping run's settings stand for theirs, :func:`run_opening`);
    ``tracking`` defaults to :meth:`TrackingSettings.for_runs` of its home."""
    o = s if isinstance(s, Opening) else run_opening(s)
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir.of(run_dir)
    tracker = Tracker(tracking or TrackingSettings.for_runs(o.home))
    tags = {RUN_ID_TAG: rd.run_id, RUN_DIR_TAG: str(rd.path), **o.tags}
    return LiveRun.open(tracker, o.experiment, rd, o.params, tags, run_name(rd.run_id, o.label))


def fail_run(run_dir: str | Path | RunDir, reason: str) -> bool:
    """End the MLflow run of the run in ``run_dir`` FAILED with ``reason``, if it has an
    open one; whether it did. Never raises (for clean-up paths)."""
    try:
        run = LiveRun.find(run_dir)
    except Exception as exc:  # clean-up path: the caller's error matters
        log.warning("cannot reach the MLflow run of %s: %s", run_dir, exc)
        return False
    return run.fail(reason) if run is not None else False


def log_run(
    summary: T,
    s: Opening | ExperimentSettings,
    home: Path,
    quality: QualityReport | None = None,
) -> T:
    """Record a finished run of either kind as one MLflow run: the run's open one
    (:func:`open_live_run`) if it has one, else a new one opened now. Sets
    ``summary.mlflow_run_id``."""
    rd = RunDir.at(home, summary.run_id)
    run = LiveRun.find(rd)
    if run is None:
        run = open_live_run(s, rd, TrackingSettings.for_runs(home))
    return run.finish(summary, quality)


def _finite(metrics: Mapping[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if math.isfinite(float(v))}


def _summary_steps(
    tracker: Tracker, rid: str, summary: Tracked, quality: QualityReport | None
) -> list[LogStep]:
    """The calls that log ``summary`` (and ``quality``) and end the run, in order, each
    with what it logs (so a call not made can be named): the kind's metrics, series,
    tables and documents (:meth:`Tracked.logged`), then every kind's plots,
    ``summary.json``, quality report and verdict."""
    logged = summary.logged()
    finite = _finite(logged.metrics)
    steps = [LogStep("metrics", list(finite), lambda: tracker.log_metrics(rid, finite))]
    steps += [LogStep.series(tracker, rid, name, v, at) for name, v, at in logged.series]
    for name, table in logged.tables.items():
        steps.append(LogStep("artifacts", [name], partial(tracker.log_table, rid, table, name)))
    for name, doc in logged.docs.items():
        steps.append(LogStep("artifacts", [name], partial(tracker.log_dict, rid, doc, name)))
    for p in summary.plots:  # at the root: the compare view offers only the root's files
        steps.append(LogStep("artifacts", [Path(p).name], partial(tracker.log_artifact, rid, p)))
    row = logged.summary
    steps.append(
        LogStep("artifacts", ["summary.json"], lambda: tracker.log_dict(rid, row, "summary.json"))
    )
    if quality is not None:
        from skewlab.quality.report import DATA_DOCS, REPORT_JSON, REPORT_MD, log_quality

        q = quality
        names = [REPORT_JSON, REPORT_MD, DATA_DOCS + "/"]
        steps.append(LogStep("artifacts", names, lambda: log_quality(tracker, rid, q)))
    steps.extend(LogStep.verdict(tracker, rid, summary.exact, summary.exactness))
    return steps

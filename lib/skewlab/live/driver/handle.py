"""The state of one live run between its phases: a small JSON file in the run directory.

:func:`skewlab.live.driver.run.run_experiment` runs every phase in one process;
the ``skewlab_experiment`` DAG runs each phase as its own task, so each phase
reads the run's :class:`RunHandle` from ``<run dir>/handle.json``, does its
part and saves the handle again. The handle holds only what the next phase
needs and what the clean-up needs when a phase fails: where the run lives,
the broker and topics, the settings, the command and pid of every background
process, the phases done, timestamps, and the small results (produce report,
exactness verdict, scale-out report) that later phases turn into the summary.

Saving is atomic (a temp file renamed over the old one), so a task that dies
mid-save leaves the previous handle intact.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from skewlab.errors import SkewlabError
from skewlab.rundir import RunDir

_SAVE_LOCK = threading.Lock()


class Phase(StrEnum):
    """The phases of a live run, in order (``RunHandle.phases`` lists those done)."""

    SERVICES = "services"
    TOPICS = "topics"
    STARTED = "started"
    PRODUCED = "produced"
    DRAINED = "drained"
    AGGREGATED = "aggregated"
    SUMMARIZED = "summarized"
    STOPPED = "stopped"


class Status(StrEnum):
    """Where a run stands as a whole (``RunHandle.status``)."""

    RUNNING = "running"
    DONE = "done"
    """Summarized (the verdict may still say NOT exact)."""
    FAILED = "failed"
    """A phase failed or the driver was interrupted; ``RunHandle.error`` says why."""
    STOPPED = "stopped"
    """Ended from outside by ``skewlab stop`` / ``skewlab gc``."""


TERMINAL = frozenset({Status.DONE, Status.FAILED, Status.STOPPED})


class HandleError(SkewlabError):
    """The run's handle is missing or unreadable, or a phase came out of order."""


@dataclass
class ProcRecord:
    """One background process of the run, enough to find, poll and kill it later.

    ``create_time`` (psutil's, seconds since the epoch) tells the process from a
    later one that reused its pid; ``rc_file`` is where a detached process's
    wrapper writes its exit code (``None``: a child of the process that started it).
    ``request`` names the request file of a worker run as a Spark task
    (:mod:`skewlab.live.driver.spark_launcher`; ``pid`` is then the workers app's).
    """

    name: str
    pid: int
    create_time: float
    cmd: list[str]
    log: str
    rc_file: str | None = None
    request: str | None = None


@dataclass
class RunHandle:
    """Everything a phase of run ``run_id`` needs from the phases before it (JSON-safe)."""

    run_id: str
    home: str
    run_dir: str
    delta_root: str
    settings: dict[str, Any]
    """``dataclasses.asdict`` of the run's
    :class:`~skewlab.runsettings.ExperimentSettings`."""
    bootstrap: str | None = None
    events_topic: str = ""
    routed_topic: str = ""
    n_routed: int = 0
    """Partitions of ``routed``: W, plus the spare instances of a scale-out run."""
    route_cmd: list[str] = field(default_factory=list)
    procs: dict[str, ProcRecord] = field(default_factory=dict)
    """``route`` and ``worker-<i>`` (the newest process of each name)."""
    running: list[int] | None = None
    """Workers to drain (None: ``0 .. W-1``); a scale-out run's state manager sets it."""
    phases: list[str] = field(default_factory=list)
    t_start: float | None = None
    t_produce: float | None = None
    t_done: float | None = None
    produced: dict[str, Any] | None = None
    """The :class:`~skewlab.live.driver.producer.ProduceReport` as a dict."""
    exactness: dict[str, Any] | None = None
    """The :class:`~skewlab.pipeline.exactness.ExactnessReport` as a dict."""
    scale: dict[str, Any] | None = None
    """The state manager's report (scale-out runs)."""
    mlflow_run_id: str | None = None
    kind: str = "grouping"
    """Which run this is: ``grouping`` (:class:`~skewlab.live.driver.run.Run`) or ``autoscale``
    (:class:`~skewlab.live.autoscale.run.AutoscaleRun`); :func:`skewlab.live.driver.run.open_run`
    resumes it as that class."""
    status: str = Status.RUNNING.value
    """A :class:`Status` value."""
    error: str | None = None
    """One line: why the run failed or was stopped."""
    driver: list[float] | None = None
    """``[pid, create_time]`` of the process driving the run (``skewlab gc`` checks it)."""
    detached: bool = False
    """Driven phase by phase from separate processes (the DAG) rather than one driver."""
    restarts: dict[str, int] = field(default_factory=dict)
    """Automatic restarts per process name (``route``, ``worker-<i>``)."""
    startup: dict[str, Any] = field(default_factory=dict)
    """Start-up times in seconds: ``services``, ``route`` (``process``, ``session``,
    ``query``, ``warm``, ``total``), ``workers`` (name -> seconds to ready)."""
    spark_ui: str | None = None

    @property
    def path(self) -> Path:
        """``<run dir>/handle.json`` (:attr:`RunDir.handle`)."""
        return RunDir.of(self.run_dir).handle

    def done(self, phase: Phase) -> bool:
        """Whether ``phase`` is recorded as done."""
        return phase.value in self.phases

    def mark(self, phase: Phase) -> None:
        """Record ``phase`` as done and save."""
        if phase.value not in self.phases:
            self.phases.append(phase.value)
        self.save()

    def finish(self, status: Status, error: str | None = None) -> None:
        """Record the run's end (``status``, the one-line ``error``) and save; a run
        already ended keeps its first end."""
        if Status(self.status) in TERMINAL:
            return
        self.status = status.value
        self.error = " ".join(error.split()) if error else None
        self.save()

    def require(self, phase: Phase, what: str) -> None:
        """Raise a one-line :class:`HandleError` unless ``phase`` is done."""
        if not self.done(phase):
            raise HandleError(
                f"cannot {what} run {self.run_id}: phase {phase.value!r} not done "
                f"(done: {', '.join(self.phases) or 'none'})"
            )

    def to_json(self) -> str:
        """Every field as indented JSON with sorted keys (:meth:`from_json` reads it back)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunHandle:
        """The handle :meth:`to_json` wrote; a field this version does not know raises
        :class:`HandleError`, bad JSON raises :class:`ValueError` (:meth:`load` words both)."""
        data = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise HandleError(f"unknown handle field(s): {', '.join(unknown)}")
        data["procs"] = {k: ProcRecord(**v) for k, v in data.get("procs", {}).items()}
        return cls(**data)

    def save(self) -> Path:
        """Write ``<run dir>/handle.json`` atomically (thread-safe: the state manager spawns)."""
        with _SAVE_LOCK:
            text = self.to_json()
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(text)
            os.replace(tmp, self.path)
        return self.path

    @classmethod
    def load(cls, run_dir: str | Path) -> RunHandle:
        """Read the handle of the run in ``run_dir``; one-line :class:`HandleError` if absent."""
        path = RunDir.of(run_dir).handle
        try:
            return cls.from_json(path.read_text())
        except FileNotFoundError:
            raise HandleError(f"no run handle at {path}") from None
        except (ValueError, TypeError) as exc:
            raise HandleError(f"unreadable run handle {path}: {exc}") from None

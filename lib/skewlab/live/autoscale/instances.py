"""Where a live autoscale run's consumers run: local processes or tasks of a Spark app.

``LiveSettings.engine`` (the run's :func:`~skewlab.live.driver.spark_launcher.worker_engine`)
picks it. ``local``: a consumer is a child process of the controller, known by its pid
(:class:`ConsumerProc`). ``spark``: a job of the warm ``skewlab-workers (warm)`` app (with
no route host, or on a cluster: of the run's ``skewlab-workers <run id>`` app;
:class:`ConsumerTask`): a start is a new job, a stop a cancel, and a failed attempt is
retried by Spark. A retried attempt says ``ready`` again holding nothing;
:func:`resume_actions` is what the controller sends it so that it takes up what the dead
attempt held. The persisted form of both: :func:`instances_state` / :func:`load_instances`.
More: docs/autoscale.md, "Where the consumers run".
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from skewlab.autoscale.controller import Action, QueryAssignment, StartPartition, StopPartition
from skewlab.live.driver.handle import ProcRecord
from skewlab.live.driver.spark_launcher import EngineDir, SparkLauncher, SparkProc
from skewlab.rundir import RunDir

__all__ = [
    "CONSUMER_MODULE",
    "ConsumerProc",
    "ConsumerTask",
    "Instance",
    "consumer_name",
    "instances_state",
    "load_instances",
    "resume_actions",
    "start_consumer",
]

log = logging.getLogger(__name__)

CONSUMER_MODULE = "skewlab.live.worker.consumer"


def consumer_name(consumer: int) -> str:
    """The process name (and log name) of consumer ``consumer``: ``consumer-<id>``."""
    return f"consumer-{consumer}"


@dataclass
class ConsumerProc:
    """A consumer process: our child (``popen``) or adopted from a previous controller."""

    pid: int
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        """True while the consumer runs: our child not yet exited, or (started by an earlier
        controller) ``/proc/<pid>`` is a live, non-zombie consumer process (a reused pid is not)."""
        if self.popen is not None:
            return self.popen.poll() is None
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        state = stat.rsplit(")", 1)[-1].split()[0]
        return state not in ("Z", "X") and CONSUMER_MODULE.encode() in cmdline

    def kill(self) -> None:
        """SIGKILL the consumer if it is still alive, and reap it if it is our child."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait()


@dataclass
class ConsumerTask:
    """A consumer run as a job of the run's workers app (its request's record).

    Alive while the job runs, also between a failed attempt and Spark's retry of it; gone
    once the job ended (the consumer left on ``exit``, was cancelled, or Spark gave up)."""

    rec: ProcRecord
    proc: SparkProc

    @classmethod
    def of(cls, rec: ProcRecord) -> ConsumerTask:
        """The task of a saved record (another controller started it)."""
        return cls(rec, SparkProc(rec))

    @property
    def pid(self) -> int:
        """The current attempt's process id (-1 before the first attempt started)."""
        started = self.proc.attempts()
        return int(started[-1]["pid"]) if started else -1

    def attempts(self) -> int:
        """How many task attempts started so far."""
        return len(self.proc.attempts())

    def alive(self) -> bool:
        """True until the job ended."""
        return self.proc.poll() is None

    def kill(self) -> None:
        """Cancel the job (no retry follows) and kill its current attempt."""
        if self.alive():
            self.proc.kill()


Instance = ConsumerProc | ConsumerTask


def start_consumer(settings_file: Path, consumer: int, engine: str) -> Instance:
    """Start consumer ``consumer`` of the run whose ``settings.json`` is ``settings_file``:
    a child process (``local``), or a new job of the run's workers app (``spark``; an
    unfinished earlier job of the same id cancelled first: a retry of it would read the new
    one's inbox)."""
    files = RunDir.of(settings_file.parent)
    cmd = [sys.executable, "-m", CONSUMER_MODULE, str(settings_file), str(consumer)]
    log_path = files.log(consumer_name(consumer))
    if engine == "spark":
        d = EngineDir.of_run(files.path)
        for req in d.requests():  # an earlier job of this id (retiring, or untracked: started
            if req.name == consumer_name(consumer) and d.read_rc(req.id) is None:
                d.cancel(req.id).touch()  # by a controller that died) is never retried
        proc, rec = SparkLauncher(files.path).start(consumer_name(consumer), cmd, log_path)
        assert isinstance(proc, SparkProc)
        return ConsumerTask(rec, proc)
    out = open(log_path, "ab")  # noqa: SIM115 - the child's
    popen = subprocess.Popen(
        cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    out.close()
    return ConsumerProc(popen.pid, popen)


def instances_state(
    procs: Mapping[int, Instance], retiring: Sequence[tuple[int, Instance]]
) -> dict[str, Any]:
    """The persisted form of the consumers: ``pids`` / ``retiring`` (local processes) or
    ``tasks`` / ``retiring_tasks`` (Spark jobs, their request records)."""
    out: dict[str, Any] = {"pids": {}, "retiring": []}
    for c, p in procs.items():
        if isinstance(p, ConsumerTask):
            out.setdefault("tasks", {})[str(c)] = asdict(p.rec)
        else:
            out["pids"][str(c)] = p.pid
    for c, p in retiring:
        if isinstance(p, ConsumerTask):
            out.setdefault("retiring_tasks", []).append([c, asdict(p.rec)])
        else:
            out["retiring"].append(p.pid)
    return out


def load_instances(
    state: Mapping[str, Any],
) -> tuple[dict[int, Instance], list[tuple[int, Instance]]]:
    """``{consumer: instance}`` and the retiring ``(consumer, instance)`` of a persisted state
    (:func:`instances_state`); a retiring process's consumer id is not kept (-1)."""
    pids = state.get("pids", {})
    procs: dict[int, Instance] = {int(c): ConsumerProc(int(p)) for c, p in pids.items()}
    for c, rec in state.get("tasks", {}).items():
        procs[int(c)] = ConsumerTask.of(ProcRecord(**rec))
    retiring: list[tuple[int, Instance]] = [
        (-1, ConsumerProc(int(p))) for p in state.get("retiring", [])
    ]
    for c, rec in state.get("retiring_tasks", []):
        retiring.append((int(c), ConsumerTask.of(ProcRecord(**rec))))
    return procs, retiring


def resume_actions(
    consumer: int,
    owner: Sequence[int],
    unacked: Mapping[tuple[int, int], bool],
    queried: bool,
) -> list[Action]:
    """What a new attempt of ``consumer`` (it reads its inbox from its end, holding nothing)
    must be sent again for the controller's view of it to hold.

    ``owner`` is the believed owner per partition, ``unacked`` the ``(consumer, partition)``
    stops (``False``) and starts (``True``) sent and not yet acknowledged, ``queried`` whether
    its assignment was asked and not yet reported. In order:

    1. asked for its assignment (SYNCHRONIZE): only the query again; it reports nothing,
       so what it held becomes unassigned and a reassignment places it;
    2. each unacknowledged stop again: it holds nothing, so it acks at once and the
       hand-off goes on (its old attempt is dead: no overlap);
    3. a start of every partition it owns or was being given (not being stopped): it
       resumes each at ``resume_offset``, where the dead attempt's evidence or commit ended.
    """
    if queried:
        return [QueryAssignment(consumer)]
    mine = {j: started for (c, j), started in unacked.items() if c == consumer}
    stops = sorted(j for j, started in mine.items() if not started)
    starts = {j for j, o in enumerate(owner) if o == consumer} - set(stops)
    starts |= {j for j, started in mine.items() if started}
    return [
        *(StopPartition(consumer, j) for j in stops),
        *(StartPartition(consumer, j) for j in sorted(starts)),
    ]

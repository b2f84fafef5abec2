"""The route host seen from a run: one warm Spark session running many runs' route queries.

A run's route job builds its own Spark session (15-45 s here, most of a small run's start);
with ``$SKEWLAB_ROUTE_HOST`` naming a host's directory, the run's query runs on the host's
session instead, as Spark runs many streaming queries in one application. The files of
:class:`HostDir` are the whole protocol (the host is :mod:`skewlab.live.mains.route_host`):

1. :func:`start_host` starts the host detached (record ``host.json``); ``host.ready`` (JSON:
   ``pid``, ``master``, ``spark_ui``) appears once its session is warm;
2. :class:`HostLauncher` writes ``requests/<id>.json`` (the run's settings file and log);
3. :meth:`HostProc.kill` touches ``<id>.cancel``: the host ends that query at once;
4. the host writes ``<id>.rc`` when the query ended: 0, 1 (failed), -9 (cancelled, or the
   host ended first). A run on another master or by spark-submit, or arming a crash
   point of the route job's (one would end the host), starts its own route job.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skewlab.envsettings import env_settings
from skewlab.faults import parse
from skewlab.live.driver import resident, warm_app
from skewlab.live.driver.handle import ProcRecord
from skewlab.live.driver.launch import (
    Detached,
    Launcher,
    Proc,
    read_code,
    spawn_detached,
    wait_polling,
    write_code,
    write_json,
)
from skewlab.live.driver.spark_launcher import EngineDir, SparkProc

log = logging.getLogger(__name__)

ROUTE_HOST_ENV = "SKEWLAB_ROUTE_HOST"
"""The host's directory; unset or ``off``: the run starts its own route job (``skewlab run``
sets it to :func:`home_host_dir` unless it is ``off``)."""
HOST_MODULE = "skewlab.live.mains.route_host"
ROUTE_MODULE = "skewlab.live.mains.route_job"
ROUTE_POINTS = "route."
"""The prefix of the crash points the route job's process reaches (:func:`route_job_point`)."""
READY_WAIT_S = 600.0
"""How long a run waits for a host that is still starting (it runs, so it is not stuck)."""


@dataclass(frozen=True)
class HostDir:
    """The host's files (the module doc's steps)."""

    path: Path

    @property
    def record(self) -> Path:
        """Step 1: the host process's :class:`ProcRecord` (JSON)."""
        return self.path / "host.json"

    @property
    def ready(self) -> Path:
        """Step 1: written by the host once its session is warm."""
        return self.path / "host.ready"

    @property
    def stop_file(self) -> Path:
        """The host stops (its queries cancelled) once this exists."""
        return self.path / "stop"

    @property
    def log(self) -> Path:
        """The host's own log (Spark's, and lines of no run)."""
        return self.path / "host.log"

    @property
    def requests(self) -> Path:
        """Step 2: the folder of request files."""
        return self.path / "requests"

    def request(self, rid: str) -> Path:
        """Step 2: request ``rid``."""
        return self.requests / f"{rid}.json"

    def cancel(self, rid: str) -> Path:
        """Step 3: the cancel marker of ``rid``."""
        return self.requests / f"{rid}.cancel"

    def rc(self, rid: str) -> Path:
        """Step 4: the exit code of ``rid``."""
        return self.requests / f"{rid}.rc"

    def host_record(self) -> ProcRecord | None:
        """The host process's record, if one was written."""
        return resident.read_record(self.record)

    def alive(self) -> bool:
        """Whether the recorded host process runs."""
        return resident.running(self.record)

    def read_ready(self) -> dict[str, Any] | None:
        """``host.ready`` of a running host, else None."""
        return resident.read_ready(self.ready, self.record)

    def write_rc(self, rid: str, rc: int) -> None:
        """Step 4 (the host): request ``rid`` ended with ``rc``."""
        write_code(self.rc(rid), rc)

    def read_rc(self, rid: str) -> int | None:
        """Step 4: the exit code of ``rid``, or None while it runs."""
        return read_code(self.rc(rid))

    @classmethod
    def of_request(cls, request: str | None) -> HostDir | None:
        """The host a record's request file belongs to (None: not a host's request)."""
        if request is None:
            return None
        d = cls(Path(request).parent.parent)
        return d if Path(request).parent == d.requests and d.record.exists() else None


def launch_host(path: str | Path) -> HostDir:
    """Step 1 without waiting: start a host in ``path`` unless one runs there."""
    d = HostDir(Path(path).resolve())
    d.requests.mkdir(parents=True, exist_ok=True)
    if not d.alive():
        d.ready.unlink(missing_ok=True)
        d.stop_file.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", HOST_MODULE, str(d.path)]
        _, rec = spawn_detached("route-host", cmd, d.log)
        write_json(d.record, rec.__dict__)
    return d


def start_host(path: str | Path, timeout_s: float = READY_WAIT_S) -> dict[str, Any]:
    """Step 1: start a host in ``path`` (or reuse the running one); its ``host.ready``.
    ``ChildProcessError`` if it exits or ``timeout_s`` passes before it is warm."""
    return wait_ready(launch_host(path), timeout_s)


def wait_ready(d: HostDir, timeout_s: float = READY_WAIT_S) -> dict[str, Any]:
    """``host.ready`` once the host is warm; ``ChildProcessError`` if it is not running or
    ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while (ready := d.read_ready()) is None:
        if not d.alive() or time.monotonic() > deadline:
            raise ChildProcessError(f"route host in {d.path} not ready; log: {d.log}")
        time.sleep(0.2)
    return ready


def stop_host(path: str | Path, grace_s: float = 60.0) -> None:
    """Ask the host in ``path`` to stop, and the warm workers app beside it
    (:mod:`skewlab.live.driver.warm_app`); kill each if it has not after ``grace_s``."""
    d = HostDir(Path(path).resolve())
    warm_app.stop(warm_app.beside(d.path), grace_s)
    resident.stop(d.record, d.stop_file, grace_s)


def route_job_point(name: str) -> bool:
    """Whether crash point ``name`` is one the route job's process can reach (the
    ``route.`` points of :mod:`skewlab.spark.route_sink`, see docs/crash-matrix.md,
    "The points"): on a host it would end the host, which other runs share."""
    return name.startswith(ROUTE_POINTS)


def hostable(cmd: list[str]) -> Path | None:
    """The route settings file of ``cmd`` if a host may run it: the route job as a local
    Python process (not spark-submit), no crash point armed that the route job reaches
    (:func:`route_job_point`; the driver's, the workers' and the state manager's points
    are theirs). An unreadable ``$SKEWLAB_CRASH`` keeps the route job its own."""
    if len(cmd) != 4 or cmd[1:3] != ["-m", ROUTE_MODULE]:
        return None
    try:
        armed = parse(env_settings().crash or "")
    except ValueError:
        return None
    if any(route_job_point(p) for p in armed):
        return None
    return Path(cmd[3])


class HostProc:
    """A route query on the host (``Popen``-like), known by its request's files.

    ``pid`` is the host's: signal the query through :meth:`kill`, never the pid."""

    def __init__(self, rec: ProcRecord) -> None:
        d = HostDir.of_request(rec.request)
        if d is None or rec.request is None:
            raise ValueError(f"{rec.name} is not a route host's query (request {rec.request})")
        self.rec, self.dir, self.rid = rec, d, Path(rec.request).stem
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        """The host process's pid."""
        return self.rec.pid

    def alive(self) -> bool:
        """True while the query runs (no exit code, the host alive)."""
        return self.poll() is None

    def poll(self) -> int | None:
        """Step 4's code once the query ended; ``-SIGKILL`` if the host is gone."""
        if self.returncode is not None:
            return self.returncode
        rc = self.dir.read_rc(self.rid)
        if rc is None and Detached(self.rec).alive():
            return None
        if rc is None:
            rc = self.dir.read_rc(self.rid)
        self.returncode = rc if rc is not None else -signal.SIGKILL
        return self.returncode

    def kill(self, grace_s: float = 60.0) -> None:
        """Step 3: end the query at once (the host and other runs' queries go on); returns
        once it ended (a restart must not open its checkpoint beside it), or after ``grace_s``."""
        if self.poll() is None:
            self.dir.cancel(self.rid).touch()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.wait(grace_s)

    def wait(self, timeout: float | None = None) -> int:
        """Poll every 0.1 s until the query ends; ``TimeoutExpired`` after ``timeout`` s."""
        return wait_polling(self, self.rec.cmd, timeout)


def attach_any(rec: ProcRecord) -> Detached | HostProc | SparkProc:
    """The process of any run's record: a :class:`HostProc` for a host's query, a
    :class:`~skewlab.live.driver.spark_launcher.SparkProc` for a job of a warm workers app,
    else a :class:`Detached` (the host and the warm app are shared: stopping a run must
    never kill them)."""
    if HostDir.of_request(rec.request) is not None:
        return HostProc(rec)
    if rec.request is not None and EngineDir(Path(rec.request).parent).warm_app() is not None:
        return SparkProc(rec)
    return Detached(rec)


@dataclass(frozen=True)
class HostLauncher:
    """The route job on the host of ``$SKEWLAB_ROUTE_HOST`` when :func:`hostable`; the rest
    (and every route job if no host runs) through ``inner``."""

    inner: Launcher

    def start(self, name: str, cmd: list[str], log_path: Path) -> tuple[Proc, ProcRecord]:
        """Step 2 for a hostable route job (waiting for a host still starting); else ``inner``."""
        where = env_settings().route_host_dir
        settings = hostable(cmd) if name == "route" and where else None
        if settings is None or where is None:
            return self.inner.start(name, cmd, log_path)
        d = HostDir(Path(where).resolve())
        try:
            ready = wait_ready(d)
        except ChildProcessError as exc:
            log.warning("route job started on its own: %s", exc)
            return self.inner.start(name, cmd, log_path)
        master = json.loads(settings.read_text()).get("spark_master", "local[2]")
        if master != ready.get("master"):
            return self.inner.start(name, cmd, log_path)
        rid = f"{time.time_ns()}-{uuid.uuid4().hex[:6]}"
        write_json(d.request(rid), {"id": rid, "settings": str(settings), "log": str(log_path)})
        host = d.host_record()
        assert host is not None  # wait_ready saw it alive
        rec = ProcRecord(
            name, host.pid, host.create_time, list(cmd), str(log_path), str(d.rc(rid)),
            request=str(d.request(rid)),
        )  # fmt: skip
        return HostProc(rec), rec

    def attach(self, rec: ProcRecord) -> Proc:
        """A :class:`HostProc` for a host's query, else ``inner``'s process."""
        if HostDir.of_request(rec.request) is not None:
            return HostProc(rec)
        return self.inner.attach(rec)


__all__ = [
    "ROUTE_HOST_ENV",
    "HostDir",
    "HostLauncher",
    "HostProc",
    "attach_any",
    "hostable",
    "launch_host",
    "route_job_point",
    "start_host",
    "stop_host",
    "wait_ready",
]

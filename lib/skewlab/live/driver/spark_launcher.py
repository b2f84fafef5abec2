"""The worker tier as long-running tasks of a Spark application (``$SKEWLAB_WORKER_ENGINE=spark``).

:class:`SparkLauncher` runs ``worker-<i>`` (and autoscale ``consumer-<i>``) processes as tasks
of the run's own Spark app (:mod:`skewlab.live.mains.workers_app`); other names start locally.
Files in ``<run dir>/spark-workers/`` (:class:`EngineDir`) are the whole protocol:

1. ``start`` starts the app once (detached; its record in ``app.json``) and writes a request
   ``<id>.json`` (name, command, log); the app submits it as one job in job group ``<id>``;
2. each task attempt removes the request's ``fresh`` files (a worker's ready marker), appends
   ``{attempt, pid, ...}`` to ``<id>.attempts``, runs the command as its child (a worker's
   watched for a hang); a non-zero exit removes them again and fails the task: Spark retries;
3. ``kill`` touches ``<id>.cancel`` (the app cancels the group; a task seeing it does not fail)
   and kills the current attempt's process tree;
4. the app writes the job's end to ``<id>.rc``: 0, the last attempt's exit code, or ``-9`` if
   cancelled. :class:`SparkProc` reads these files; docs/beyond-one-machine.md says more.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError
from skewlab.live.driver.handle import HandleError, ProcRecord, RunHandle
from skewlab.live.driver.launch import (
    Detached,
    LocalLauncher,
    Proc,
    module_command,
    read_code,
    spawn_detached,
    wait_polling,
    write_code,
    write_json,
)
from skewlab.live.driver.supervise import run_stall_s
from skewlab.live.driver.warm_app import APP_MODULE, WarmDir
from skewlab.live.driver.warm_app import home as warm_home
from skewlab.live.driver.warm_app import launch as launch_warm
from skewlab.live.driver.warm_app import read_ready as warm_ready
from skewlab.live.driver.warm_app import register as register_warm
from skewlab.rundir import RunDir

logger = logging.getLogger(__name__)

ENGINE_ENV = "SKEWLAB_WORKER_ENGINE"
"""``spark`` (the default): workers are tasks of a Spark app (:mod:`.warm_app`'s on a local
master beside a route host, else the run's own); ``local``: local processes."""
ENGINES = ("local", "spark")
TASK_NAMES = ("worker-", "consumer-")
"""Name prefixes of the processes run as Spark tasks: grouping workers (and spares), autoscale
consumers (:mod:`skewlab.live.autoscale.instances`)."""
PASSED_ENV = ("SKEWLAB_", "MLFLOW_", "AWS_")
"""Prefixes of the launching process's variables a request carries to its task: an executor
on a cluster has its node's environment, not the run's."""

_APP_LOCK = threading.Lock()


def worker_engine() -> str:
    """The engine ``$SKEWLAB_WORKER_ENGINE`` names; unset, ``spark`` on every master (the
    worker tier goes where the route job goes)."""
    engine = env_settings().worker_engine or "spark"
    if engine not in ENGINES:
        raise ConfigError(f"{ENGINE_ENV}={engine!r}: expected one of {', '.join(ENGINES)}")
    return engine


@dataclass(frozen=True)
class Request:
    """One instance to run as a Spark job (step 1)."""

    id: str
    name: str
    cmd: list[str]
    log: str
    env: dict[str, str] = field(default_factory=dict)
    """Variables set for the command on top of the executor's (:data:`PASSED_ENV`)."""
    fresh: list[str] = field(default_factory=list)
    """Files an attempt's command writes that no later attempt may inherit (step 2): a
    worker's ready marker, so that a retried worker is ready only once it says so again."""
    watch: dict[str, Any] | None = None
    """A worker's hang watch in its task (step 2; :func:`hang_watch`): ``run_dir``,
    ``worker`` (its index), ``stall_s``; None: not watched."""


@dataclass(frozen=True)
class EngineDir:
    """The files of the protocol under ``<run dir>/spark-workers/``."""

    path: Path

    @classmethod
    def of_run(cls, run_dir: str | Path) -> EngineDir:
        """The engine directory of the run in ``run_dir`` (created)."""
        d = cls(RunDir.of(run_dir).spark_workers)
        d.path.mkdir(parents=True, exist_ok=True)
        return d

    @property
    def app(self) -> Path:
        """The app process's :class:`ProcRecord` (JSON)."""
        return self.path / "app.json"

    @property
    def ready(self) -> Path:
        """Written by the app once its Spark context runs (JSON: ``app_id``, ``ui``)."""
        return self.path / "app.ready"

    @property
    def events(self) -> Path:
        """The app's Spark event log directory."""
        return self.path / "events"

    @property
    def warm(self) -> Path:
        """Names the warm app (:mod:`.warm_app`) serving the run, if one does (JSON: ``dir``)."""
        return self.path / "warm.json"

    def warm_app(self) -> WarmDir | None:
        """The warm app serving this run, or None: the run has an app of its own."""
        try:
            return WarmDir(Path(json.loads(self.warm.read_text())["dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def request(self, rid: str) -> Path:
        """Step 1: the request file of ``rid``."""
        return self.path / f"{rid}.json"

    def attempts(self, rid: str) -> Path:
        """Step 2: the attempt lines of ``rid``."""
        return self.path / f"{rid}.attempts"

    def cancel(self, rid: str) -> Path:
        """Step 3: the cancel marker of ``rid``."""
        return self.path / f"{rid}.cancel"

    def rc(self, rid: str) -> Path:
        """Step 4: the job end code of ``rid``."""
        return self.path / f"{rid}.rc"

    def write_request(
        self,
        name: str,
        cmd: list[str],
        log: Path,
        fresh: list[Path] | None = None,
        watch: dict[str, Any] | None = None,
    ) -> Request:
        """Step 1: a new request for ``name`` (written atomically; ids sort by time)."""
        env = {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV)}
        rid = f"{name}-{time.time_ns()}-{uuid.uuid4().hex[:6]}"
        req = Request(rid, name, cmd, str(log), env, [str(p) for p in fresh or []], watch)
        write_json(self.request(req.id), req.__dict__)
        return req

    def requests(self) -> list[Request]:
        """Every request written so far, oldest first."""
        out = []
        for p in sorted(self.path.glob("*.json")):
            if p.name not in (self.app.name, self.warm.name):
                with contextlib.suppress(OSError, ValueError, TypeError):
                    out.append(Request(**json.loads(p.read_text())))
        return out

    def add_attempt(self, rid: str, entry: dict[str, Any]) -> None:
        """Step 2: one line per task attempt (``attempt``, ``pid``, ``create_time``...),
        and again with ``rc`` once it exited."""
        with open(self.attempts(rid), "a") as f:
            f.write(json.dumps(entry) + "\n")

    def read_attempts(self, rid: str) -> list[dict[str, Any]]:
        """The attempt lines of request ``rid`` in order (a torn last line skipped)."""
        try:
            lines = self.attempts(rid).read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def finish(self, rid: str, rc: int) -> None:
        """Step 4: the job of ``rid`` ended with ``rc``."""
        write_code(self.rc(rid), rc)

    def job_rc(self, rid: str, failed: bool) -> int:
        """Step 4: the code of a finished job: 0 if its last attempt exited 0, else ``-9`` if
        cancelled, else the last attempt's exit code if it failed (1 if none recorded one)."""
        codes = [int(a["rc"]) for a in self.read_attempts(rid) if "rc" in a]
        if codes and codes[-1] == 0:
            return 0
        if self.cancel(rid).exists():
            return -signal.SIGKILL
        if failed:
            return codes[-1] if codes else 1
        return 0

    def read_rc(self, rid: str) -> int | None:
        """The job's recorded end, or None while it runs."""
        return read_code(self.rc(rid))

    def cancel_running(self, name: str) -> list[str]:
        """Step 3 for every job of ``name`` neither ended nor cancelled (a driver killed between
        a request and its record in the handle left one no handle names: the next start of
        ``name`` must not run beside it): cancel marker, then the attempts' trees. Their ids."""
        running = [
            r.id
            for r in self.requests()
            if r.name == name and self.read_rc(r.id) is None and not self.cancel(r.id).exists()
        ]
        for rid in running:
            self.cancel_job(rid)
        return running

    def started(self, rid: str) -> list[dict[str, Any]]:
        """The start lines of request ``rid``'s attempts, in order (step 2)."""
        return [a for a in self.read_attempts(rid) if "rc" not in a]

    def cancel_job(self, rid: str) -> None:
        """Step 3 for request ``rid``: its cancel marker (the app cancels the job, Spark
        retries nothing), then the process tree of its latest attempt."""
        self.cancel(rid).touch()
        for a in self.started(rid)[-1:]:
            kill_tree(int(a["pid"]), float(a.get("create_time", 0.0)))


def kill_tree(pid: int, create_time: float) -> None:
    """SIGKILL process ``pid`` and its descendants, unless its number now names a process
    created at another time than ``create_time`` (0: unknown)."""
    import psutil

    try:
        p = psutil.Process(pid)
        if create_time and abs(p.create_time() - create_time) > 0.01:
            return  # the number was reused
        for child in p.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
        p.kill()
    except psutil.Error:
        pass


class SparkProc:
    """A worker running as a Spark job (``Popen``-like), known by its request's files.

    ``poll`` stays ``None`` while Spark retries a failed attempt: only the job's end
    (step 4) is an exit. :attr:`retried_by_engine` tells the supervisor not to restart it."""

    def __init__(self, rec: ProcRecord) -> None:
        if rec.request is None:
            raise ConfigError(f"{rec.name} is not a Spark worker (no request)")
        self.rec = rec
        self.dir = EngineDir(Path(rec.request).parent)
        self.rid = Path(rec.request).stem
        self.returncode: int | None = None
        self.app_lost = False
        """The app ended with no end recorded for this job (``skewlab gc`` / ``stop`` killed
        its group, or it died): Spark retries nothing more, whatever the attempts were."""
        self.inherited_end = False
        """The job had ended when a resuming driver adopted it (:meth:`adopt`)."""

    @property
    def retried_by_engine(self) -> bool:
        """Whether Spark restarted this worker as far as it would (its job ended with a
        recorded end): an exit is then no case for a restart by the supervisor. Not when the
        app is gone (:attr:`app_lost`): the supervisor restarts it, as a new job of a new app.
        Nor when a driver cancelled the job (step 3): Spark never retried it then, and a
        worker still wanted (one a failed driver's stop cancelled, adopted by a resumed
        driver) is restarted as a new job, as the local engine restarts a killed process."""
        cancelled = self.returncode == -signal.SIGKILL and self.dir.cancel(self.rid).exists()
        return not self.app_lost and not cancelled and not self.inherited_end

    def adopt(self) -> None:
        """A driver resuming the run takes this job over: an end already recorded is the
        failed attempt's (a broker loss ended it, say), not Spark's last word on a worker
        the resumed run still wants, so the supervisor restarts it as a new job."""
        self.inherited_end = self.poll() is not None

    @functools.cached_property
    def watches_hangs(self) -> bool:
        """Whether its task watches it for a hang (step 2: its request names a ``watch``):
        then the driver's supervisor does not."""
        with contextlib.suppress(OSError, ValueError, TypeError):
            return json.loads(Path(str(self.rec.request)).read_text()).get("watch") is not None
        return False

    def attempts(self) -> list[dict[str, Any]]:
        """The task attempts started so far (step 2)."""
        return self.dir.started(self.rid)

    @property
    def pid(self) -> int:
        """The pid of the current attempt's process (waits up to 120 s for the first)."""
        deadline = time.monotonic() + 120
        while not (started := self.attempts()):
            if self.poll() is not None or time.monotonic() > deadline:
                raise ChildProcessError(f"{self.rec.name}: no task attempt started")
            time.sleep(0.1)
        return int(started[-1]["pid"])

    def alive(self) -> bool:
        """True while the job runs (``skewlab stop`` / ``gc``: a warm app is not the run's)."""
        return self.poll() is None

    def poll(self) -> int | None:
        """The job's exit code (step 4) once it ended; ``-SIGKILL`` if the app is gone."""
        if self.returncode is not None:
            return self.returncode
        rc = self.dir.read_rc(self.rid)
        if rc is None and Detached(self.rec).alive():
            return None
        if rc is None:
            rc = self.dir.read_rc(self.rid)
        self.app_lost = rc is None
        self.returncode = rc if rc is not None else -signal.SIGKILL
        return self.returncode

    def kill(self) -> None:
        """Step 3: cancel the job (no retry follows) and kill the current attempt's tree."""
        self.dir.cancel_job(self.rid)

    def wait(self, timeout: float | None = None) -> int:
        """Poll every 0.1 s until the job ends; ``subprocess.TimeoutExpired`` after ``timeout``."""
        return wait_polling(self, self.rec.cmd, timeout)


def _worker(name: str) -> int | None:
    """The index of worker ``worker-<i>``; None for another name (a consumer)."""
    kind, _, index = name.partition("-")
    return int(index) if kind == "worker" and index.isdigit() else None


def _fresh(run_dir: Path, name: str) -> list[Path]:
    """What a retry of ``name`` must not inherit from its crashed attempt: a worker's ready
    marker (the local engine's restart removes it too: :func:`~skewlab.live.driver.context.
    bind_spawners`)."""
    i = _worker(name)
    return [] if i is None else [RunDir.of(run_dir).worker_ready(i)]


def hang_watch(run_dir: Path, name: str) -> dict[str, Any] | None:
    """Step 2's hang watch of ``name``: a worker is watched in its task, with the run's
    ``stall_s`` (its handle's settings), as the driver's supervisor watches a local one; a
    consumer is not (nor by the supervisor)."""
    i = _worker(name)
    if i is None:
        return None
    try:
        settings = RunHandle.load(run_dir).settings
    except HandleError:
        settings = {}
    return {"run_dir": str(run_dir), "worker": i, "stall_s": run_stall_s(settings)}


APP_EXIT_S = 30.0
"""How long a run's stop waits for its workers app to leave by itself (Spark's own stop)."""


def await_app_exit(run_dir: Path, timeout_s: float = APP_EXIT_S) -> bool:
    """Once the run is stopped: wait for its workers app (if it has one) to leave, which it
    does on seeing the stop (:func:`skewlab.live.mains.workers_app.ended`), and kill its
    process group after ``timeout_s``. So no process of a stopped run outlives its driver's
    stop (``skewlab gc`` right after must not find one). On a warm app (which other runs
    share) wait instead for the run's jobs to end, and kill what still runs of them after
    ``timeout_s``. True if something had to be killed."""
    d = EngineDir(RunDir.of(run_dir).spark_workers)
    if d.warm_app() is not None:
        return _await_jobs(d, timeout_s)
    try:
        rec = ProcRecord(**json.loads(d.app.read_text()))
    except (OSError, ValueError, TypeError):
        return False  # no workers app: the local engine, or none started
    app = Detached(rec)
    deadline = time.monotonic() + timeout_s
    while app.alive():
        if time.monotonic() > deadline:
            logger.warning(
                "workers app of %s still up %.0f s after the stop: killed", run_dir, timeout_s
            )
            app.kill()
            gone = time.monotonic() + 10.0  # SIGKILL is not death yet
            while app.alive() and time.monotonic() < gone:
                time.sleep(0.05)
            return True
        time.sleep(0.1)
    return False


def _await_jobs(d: EngineDir, timeout_s: float) -> bool:
    """:func:`await_app_exit` on a warm app: every job of the run ended, or its attempts'
    processes killed (the app forgets the run; a job's end code may then be missing)."""
    app = d.warm_app()
    rec = app.app_record() if app is not None else None
    deadline = time.monotonic() + timeout_s
    while rec is not None and Detached(rec).alive():
        running = [r.id for r in d.requests() if d.read_rc(r.id) is None]
        if not running:
            return False
        if time.monotonic() > deadline:
            logger.warning("jobs of %s still running %.0f s after the stop: killed",
                           d.path.parent, timeout_s)  # fmt: skip
            for rid in running:
                d.cancel_job(rid)
            return True
        time.sleep(0.1)
    return False


@dataclass(frozen=True)
class SparkLauncher:
    """``worker-<i>`` and ``consumer-<i>`` (:data:`TASK_NAMES`) as Spark jobs of the run's
    workers app; other names as ``local``."""

    run_dir: Path
    local: LocalLauncher = field(default_factory=LocalLauncher)

    def app(self, share: bool = False) -> ProcRecord:
        """The running workers app's record, started (detached) if none runs: the warm app
        serving the run (:mod:`.warm_app`; with ``share``, a new run's driver asks for it:
        there is one on a local master beside a route host), else the run's own."""
        d = EngineDir.of_run(self.run_dir)
        with _APP_LOCK:
            warm = d.warm_app()
            if warm is None and share and (warm := warm_home()) is not None:
                write_json(d.warm, {"dir": str(warm.path)})
            if warm is not None:
                rec = launch_warm(warm)
                register_warm(warm, self.run_dir)
                return rec
            with contextlib.suppress(OSError, ValueError, TypeError):
                rec = ProcRecord(**json.loads(d.app.read_text()))
                if Detached(rec).alive():
                    return rec
            cmd = module_command(APP_MODULE, str(self.run_dir))
            d.ready.unlink(missing_ok=True)
            _, rec = spawn_detached("workers-app", cmd, self.run_dir / "workers-app.log")
            write_json(d.app, rec.__dict__)
            return rec

    def wait_app(self, timeout_s: float = 300.0, share: bool = False) -> dict[str, Any]:
        """The running app's ready record (``app_id``, ``ui``), waiting for its Spark start
        (the app started if none runs: :meth:`app` with ``share``); ``ChildProcessError`` if
        it exits or ``timeout_s`` passes first."""
        rec = self.app(share=share)
        d = EngineDir.of_run(self.run_dir)
        warm = d.warm_app()
        deadline = time.monotonic() + timeout_s
        while True:
            if warm is not None and (ready := warm_ready(warm)) is not None:
                return ready
            with contextlib.suppress(OSError, ValueError):
                if warm is None:
                    return dict(json.loads(d.ready.read_text()))
            if not Detached(rec).alive() or time.monotonic() > deadline:
                raise ChildProcessError(f"workers app not ready; log: {rec.log}")
            time.sleep(0.1)

    def start(self, name: str, cmd: list[str], log: Path) -> tuple[Proc, ProcRecord]:
        """Steps 1-2 for a :data:`TASK_NAMES` name: request it of the app; the job's
        :class:`SparkProc`."""
        if not name.startswith(TASK_NAMES):
            return self.local.start(name, cmd, log)
        d = EngineDir.of_run(self.run_dir)
        if strays := d.cancel_running(name):
            logger.warning("cancelled %d unrecorded job(s) of %s: %s", len(strays), name, strays)
        app = self.app()
        req = d.write_request(
            name, cmd, log, _fresh(self.run_dir, name), hang_watch(self.run_dir, name)
        )
        rec = ProcRecord(
            name, app.pid, app.create_time, list(cmd), str(log), app.rc_file,
            request=str(d.request(req.id)),
        )  # fmt: skip
        return SparkProc(rec), rec

    def attach(self, rec: ProcRecord) -> Proc:
        """A :class:`SparkProc` for a request's record, else the local launcher's process."""
        return SparkProc(rec) if rec.request is not None else self.local.attach(rec)

"""Starting, polling and killing the background processes of a live run.

Two ways to start a process:

* **attached** (:func:`spawn`, what ``run_experiment`` does): a plain child
  ``subprocess.Popen`` of the calling process, which polls it, reads its exit
  code and kills it in its ``finally``;
* **detached** (:func:`spawn_detached`, what the DAG's tasks do): the process
  runs in a new session (``start_new_session``, so it outlives the task that
  started it and a kill of the task's process group misses it) under a tiny
  ``sh`` wrapper that writes its exit code to a file. A later task rebuilds it
  from its :class:`~skewlab.live.handle.ProcRecord` as a :class:`Detached`,
  which offers the ``poll`` / ``kill`` / ``wait`` / ``returncode`` of a Popen:
  alive while the pid (checked against its create time) runs, exit code from
  the file, and ``kill`` takes the whole process group (Spark's JVM too).

The route job runs as ``python -m skewlab.live.route_job`` unless
``$SKEWLAB_SPARK_SUBMIT`` is ``1`` or ``$SKEWLAB_SPARK_MASTER`` names a cluster:
then as ``spark-submit jobs/route.py`` (:func:`route_command`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skewlab.errors import ConfigError
from skewlab.live.handle import ProcRecord

SPARK_SUBMIT_ENV = "SKEWLAB_SPARK_SUBMIT"
"""``1``: launch the route job with ``spark-submit jobs/route.py`` even on ``local[*]``."""
SPARK_MASTER_ENV = "SKEWLAB_SPARK_MASTER"
"""The route job's Spark master; default ``local[2]``."""

_WRAPPER = 'rc="$1"; shift; "$@"; code=$?; echo "$code" > "$rc.tmp"; mv "$rc.tmp" "$rc"'
"""Runs the command, then writes its exit code to the file named by ``$1``."""


class Proc(Protocol):
    """What the run needs of a process: the part of ``subprocess.Popen`` it uses."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | Any: ...

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclass
class Procs:
    """The run's subprocesses; hooks may kill and restart them (crash tests)."""

    route: Any = None
    """The route job (``subprocess.Popen`` or :class:`Detached`)."""
    workers: dict[int, Any] = field(default_factory=dict)
    restart_route: Callable[[], None] = lambda: None
    restart_worker: Callable[[int], None] = lambda i: None

    def all(self) -> list[Any]:
        return [p for p in [self.route, *list(self.workers.values())] if p is not None]


def spark_submit_path() -> Path:
    """``spark-submit`` of the venv's pyspark (next to the interpreter, else on PATH)."""
    here = Path(sys.executable).with_name("spark-submit")
    if here.is_file():
        return here
    found = shutil.which("spark-submit")
    if found:
        return Path(found)
    import pyspark

    bundled = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if bundled.is_file():
        return bundled
    raise ConfigError("spark-submit not found next to the interpreter, on PATH or in pyspark")


def use_spark_submit() -> bool:
    """Launch by ``spark-submit``: forced by ``$SKEWLAB_SPARK_SUBMIT=1``, or a cluster master."""
    if os.environ.get(SPARK_SUBMIT_ENV, "") == "1":
        return True
    master = os.environ.get(SPARK_MASTER_ENV, "")
    return bool(master) and not master.startswith("local")


def route_command(route_json: Path, master: str) -> list[str]:
    """The command that starts the route job on ``route_json`` (see the module doc)."""
    if not use_spark_submit():
        return [sys.executable, "-m", "skewlab.live.route_job", str(route_json)]
    entry = Path(__file__).resolve().parents[3] / "jobs" / "route.py"
    if not entry.is_file():
        raise ConfigError(f"spark-submit needs the route job entry point {entry}; not found")
    return [
        str(spark_submit_path()),
        "--master",
        master,
        "--name",
        f"skewlab-route-{route_json.parent.name}",
        str(entry),
        str(route_json),
    ]


def module_command(module: str, arg: str) -> list[str]:
    return [sys.executable, "-m", module, arg]


def _env(cmd: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if Path(cmd[0]).name == "spark-submit":  # the driver and Spark's workers: this venv
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


class _GroupPopen(subprocess.Popen[bytes]):
    """A child in its own session whose ``kill`` takes its whole group (spark-submit's JVM
    starts the Python driver as its own child)."""

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)


def spawn(cmd: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` attached: a child of this process, output appended to ``log_path``."""
    out = open(log_path, "ab")  # noqa: SIM115 - owned by the child for its life
    if Path(cmd[0]).name == "spark-submit":
        return _GroupPopen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(cmd), start_new_session=True
        )
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(cmd))


def spawn_detached(name: str, cmd: list[str], log_path: Path) -> tuple[Detached, ProcRecord]:
    """Start ``cmd`` detached (new session, exit code to ``<log>.rc``); see the module doc."""
    import psutil

    rc_file = log_path.with_suffix(".rc")
    rc_file.unlink(missing_ok=True)
    with open(log_path, "ab") as out:
        p = subprocess.Popen(
            ["sh", "-c", _WRAPPER, "skewlab-proc", str(rc_file), *cmd],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(cmd),
            start_new_session=True,
        )
    try:
        created = psutil.Process(p.pid).create_time()
    except psutil.NoSuchProcess:
        created = 0.0
    rec = ProcRecord(name, p.pid, created, list(cmd), str(log_path), str(rc_file))
    return Detached(rec, p), rec


class Launcher(Protocol):
    """Where a run's processes run: start one (and record it), or find one again.

    ``start(name, cmd, log)`` starts ``cmd`` with its output appended to ``log``
    and returns the process and its :class:`~skewlab.live.handle.ProcRecord`;
    ``attach(rec)`` is the process of a record saved by another process. Local
    processes (:class:`LocalLauncher`) are the one backend; a cluster backend
    implements the same two methods.
    """

    def start(self, name: str, cmd: list[str], log: Path) -> tuple[Proc, ProcRecord]: ...

    def attach(self, rec: ProcRecord) -> Proc: ...


@dataclass(frozen=True)
class LocalLauncher:
    """Processes on this machine: children of this process (``detached=False``, what
    ``run_experiment`` does) or in their own session (``detached=True``, the DAG's tasks)."""

    detached: bool = False

    def start(self, name: str, cmd: list[str], log: Path) -> tuple[Proc, ProcRecord]:
        if self.detached:
            return spawn_detached(name, cmd, log)
        proc = spawn(cmd, log)
        return proc, ProcRecord(name, proc.pid, _create_time(proc.pid), cmd, str(log))

    def attach(self, rec: ProcRecord) -> Proc:
        return Detached(rec)


def _create_time(pid: int) -> float:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return 0.0


class Detached:
    """A background process known by its :class:`ProcRecord` (``Popen``-like, see module doc).

    ``child`` is the ``Popen`` when this process started it (it reaps the wrapper,
    so no zombie lingers); from another process it is ``None``.
    """

    def __init__(self, rec: ProcRecord, child: subprocess.Popen[bytes] | None = None) -> None:
        self.rec = rec
        self.child = child
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        return self.rec.pid

    def _rc_from_file(self) -> int | None:
        if self.rec.rc_file is None:
            return None
        try:
            return int(Path(self.rec.rc_file).read_text().strip())
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        """True while the process (this pid, this create time) runs; a zombie has exited."""
        import psutil

        if self.child is not None and self.child.poll() is not None:
            return False
        try:
            p = psutil.Process(self.rec.pid)
            if self.rec.create_time and abs(p.create_time() - self.rec.create_time) > 0.01:
                return False
            return p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        rc = self._rc_from_file()
        if rc is None and self.alive():
            return None
        if rc is None:
            rc = self._rc_from_file()  # written just before the wrapper exited
        self.returncode = rc if rc is not None else -signal.SIGKILL
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the process group (the wrapper, the job and anything it started).

        Once the wrapper is gone, members of its group still running (started no
        earlier than it: not a later group that reused the number) are killed one by one.
        """
        import psutil

        if self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.rec.pid, signal.SIGKILL)
            return
        for p in psutil.process_iter(["pid", "create_time"]):
            try:
                if (
                    os.getpgid(p.info["pid"]) == self.rec.pid
                    and p.info["create_time"] >= self.rec.create_time - 0.01
                ):
                    p.kill()
            except (ProcessLookupError, psutil.Error):
                continue

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (rc := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.rec.cmd, timeout or 0.0)
            time.sleep(0.1)
        if self.child is not None:
            self.child.wait()
        return rc


def tail(path: Path, lines: int = 5) -> str:
    """The last ``lines`` lines of a log, joined into one line."""
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"

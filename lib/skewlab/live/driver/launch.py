"""Starting, polling and killing the background processes of a live run.

Attached (:func:`spawn`) or detached (:func:`spawn_detached`, rebuilt later as a
:class:`Detached`); the route job runs under ``spark-submit`` when :func:`use_spark_submit`.
Why two ways, and how a detached one is found again: docs/live-run.md, "skewlab.live.driver.launch".
"""

from __future__ import annotations

import contextlib
import importlib.abc
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError
from skewlab.live.driver.handle import ProcRecord
from skewlab.services.process import log_tail
from skewlab.services.process import spawn_detached as start_detached

log = logging.getLogger(__name__)

SPARK_SUBMIT_ENV = "SKEWLAB_SPARK_SUBMIT"
"""``1``: launch the route job with ``spark-submit jobs/route.py`` even on ``local[*]``."""
SPARK_MASTER_ENV = "SKEWLAB_SPARK_MASTER"
"""The route job's Spark master; default ``local[2]``."""

_WRAPPER = 'rc="$1"; shift; "$@"; code=$?; echo "$code" > "$rc.tmp"; mv "$rc.tmp" "$rc"'
"""Runs the command, then writes its exit code to the file named by ``$1``."""


class Proc(Protocol):
    """What the run needs of a process: the part of ``subprocess.Popen`` it uses."""

    @property
    def pid(self) -> int:
        """The process id."""
        ...

    @property
    def returncode(self) -> int | Any:
        """The exit code once known (negative: killed by that signal), else ``None``."""
        ...

    def poll(self) -> int | None:
        """The exit code if the process has ended, else ``None``; never blocks."""
        ...

    def kill(self) -> None:
        """SIGKILL the process (and what it started)."""
        ...

    def wait(self, timeout: float | None = None) -> int:
        """Block until the process ends; its exit code (``subprocess.TimeoutExpired``
        after ``timeout`` s)."""
        ...


@dataclass
class Procs:
    """The run's subprocesses; hooks may kill and restart them (crash tests)."""

    route: Any = None
    """The route job (``subprocess.Popen`` or :class:`Detached`)."""
    workers: dict[int, Any] = field(default_factory=dict)
    restart_route: Callable[[], None] = lambda: None
    restart_worker: Callable[[int], None] = lambda i: None
    prewarm_worker: Callable[[int], None] = lambda i: None
    """Start instance ``i``'s process ahead, waiting (``skewlab.live.worker.warm``): the next
    ``restart_worker(i)`` releases it instead of starting a process."""

    def all(self) -> list[Any]:
        """The route job and the workers that exist (``None`` entries left out)."""
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
    env = env_settings()
    if env.spark_submit:
        return True
    master = env.spark_master or ""
    return bool(master) and not master.startswith("local")


def route_command(route_json: Path, master: str) -> list[str]:
    """The command that starts the route job on ``route_json`` (see :func:`use_spark_submit`)."""
    if not use_spark_submit():
        return [sys.executable, "-m", "skewlab.live.mains.route_job", str(route_json)]
    entry = Path(__file__).resolve().parents[4] / "jobs" / "route.py"
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
    """The command running ``python -m module arg`` with this interpreter."""
    return [sys.executable, "-m", module, arg]


PROC_ENV = "SKEWLAB_PROC"
"""Environment variable set in every child to its log path: it names one process of one
run (a run's log paths are unique per process name), and the child's own children (the
route job's JVM and Python workers) inherit it."""


def _env(cmd: list[str], log_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env[PROC_ENV] = str(log_path)
    if Path(cmd[0]).name == "spark-submit":  # the driver and Spark's workers: this venv
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


class _GroupPopen(subprocess.Popen[bytes]):
    """A child in its own session whose ``kill`` / ``terminate`` take its whole group
    (the route job's JVM, or spark-submit's Python driver, is its child)."""

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
            return
        kill_group_members(self.pid, _create_time(self.pid) or 0.0, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def spawn(cmd: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` attached: a child of this process in its own session (its pid is its
    process group), output appended to ``log_path``; ``kill`` takes the group."""
    with open(log_path, "ab") as out:
        return _GroupPopen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(cmd, log_path),
            start_new_session=True,
        )


def kill_strays(log_path: Path) -> list[int]:
    """SIGKILL every live process tagged (:data:`PROC_ENV`) with ``log_path``, and
    return their pids.

    A driver killed between starting a child and recording it in the handle leaves a
    process no handle names; the next start of that process name (a resumed driver's
    restart) must not run beside it. Processes of other users or gone meanwhile are
    skipped; this process is never signalled.
    """
    import psutil

    tag, me, hit = str(log_path), os.getpid(), []
    for p in psutil.process_iter(["pid"]):
        if p.info["pid"] == me:
            continue
        try:
            if env_settings(p.environ()).proc == tag:
                p.kill()
                hit.append(p.info["pid"])
        except psutil.Error:
            continue
    return hit


def _clear_strays(name: str, log_path: Path) -> None:
    strays = kill_strays(log_path)
    if strays:
        log.warning("killed %d unrecorded process(es) of %s: %s", len(strays), name, strays)


def kill_group_members(pgid: int, since: float, sig: int = signal.SIGKILL) -> list[int]:
    """Signal every process of group ``pgid`` started at or after ``since`` (epoch s; a
    later group that reused the number started later than its members). Returns the pids."""
    import psutil

    hit = []
    for p in psutil.process_iter(["pid", "create_time"]):
        try:
            if os.getpgid(p.info["pid"]) == pgid and p.info["create_time"] >= since - 0.01:
                os.kill(p.info["pid"], sig)
                hit.append(p.info["pid"])
        except (ProcessLookupError, psutil.Error):
            continue
        except PermissionError as exc:
            log.warning("cannot signal pid %d of group %d: %s", p.info["pid"], pgid, exc)
    return hit


def spawn_detached(name: str, cmd: list[str], log_path: Path) -> tuple[Detached, ProcRecord]:
    """Start ``cmd`` detached (new session, exit code to ``<log>.rc``); see docs/live-run.md."""
    import psutil

    rc_file = log_path.with_suffix(".rc")
    rc_file.unlink(missing_ok=True)
    wrapped = ["sh", "-c", _WRAPPER, "skewlab-proc", str(rc_file), *cmd]
    p = start_detached(wrapped, log_path, env=_env(cmd, log_path))
    try:
        created = psutil.Process(p.pid).create_time()
    except psutil.NoSuchProcess:
        created = 0.0
    rec = ProcRecord(name, p.pid, created, list(cmd), str(log_path), str(rc_file))
    return Detached(rec, p), rec


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` as JSON, whole (a reader never sees half of it)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def write_code(path: Path, rc: int) -> None:
    """Write exit code ``rc`` to ``path``, whole."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(str(rc))
    os.replace(tmp, path)


def read_code(path: Path | str | None) -> int | None:
    """The exit code written to ``path``, or None while there is none."""
    if path is None:
        return None
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def wait_polling(proc: Proc, cmd: list[str], timeout: float | None) -> int:
    """Poll ``proc`` every 0.1 s until it ends; its code (``subprocess.TimeoutExpired`` once
    ``timeout`` s, if given, have passed)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while (rc := proc.poll()) is None:
        if deadline is not None and time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(cmd, timeout or 0.0)
        time.sleep(0.1)
    return rc


class Launcher(Protocol):
    """Where a run's processes run: start one (and record it), or find one again.

    ``start(name, cmd, log)`` starts ``cmd`` with its output appended to ``log``
    and returns the process and its :class:`~skewlab.live.driver.handle.ProcRecord`;
    ``attach(rec)`` is the process of a record saved by another process. Local
    processes (:class:`LocalLauncher`) are the one backend; a cluster backend
    implements the same two methods.
    """

    def start(self, name: str, cmd: list[str], log: Path) -> tuple[Proc, ProcRecord]:
        """Start ``cmd`` as ``name``, output appended to ``log``; the process and its record."""
        ...

    def attach(self, rec: ProcRecord) -> Proc:
        """The process ``rec`` describes (saved by another process)."""
        ...


@dataclass(frozen=True)
class LocalLauncher:
    """Processes on this machine: children of this process (``detached=False``, what
    ``run_experiment`` does) or in their own session (``detached=True``, the DAG's tasks)."""

    detached: bool = False

    def start(self, name: str, cmd: list[str], log: Path) -> tuple[Proc, ProcRecord]:
        """Start ``cmd`` (:func:`spawn_detached` if ``detached``, else :func:`spawn`); the
        process and its :class:`~skewlab.live.driver.handle.ProcRecord`. A process of the same
        name that no handle recorded (:func:`kill_strays`) is killed first."""
        _clear_strays(name, log)
        if self.detached:
            return spawn_detached(name, cmd, log)
        proc = spawn(cmd, log)
        return proc, ProcRecord(name, proc.pid, _create_time(proc.pid), cmd, str(log))

    def attach(self, rec: ProcRecord) -> Proc:
        """The process of ``rec`` as a :class:`Detached` (no child handle: not reaped here)."""
        return Detached(rec)


def process_args(argv: list[str] | None, usage: str) -> list[str] | None:
    """The arguments of a process entry point (``sys.argv[1:]`` unless ``argv``), with
    logging set up; ``None`` (after printing ``usage``) unless there are as many as
    ``usage`` names after the program's name."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != len(usage.split()) - 1:
        print(f"usage: {usage}", file=sys.stderr)
        return None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    return args


class _NoPandas(importlib.abc.MetaPathFinder):
    """A finder that answers ``import pandas`` with ModuleNotFoundError (:func:`without_pandas`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"{name}: not imported in a worker-tier process", name=name)
        return None


def without_pandas() -> None:
    """Make ``import pandas`` fail in this process: for the ``__main__`` of a worker-tier
    process (worker, warm spare, autoscale consumer), never for a library caller.

    No worker code uses pandas, but pyarrow imports it on a process's first conversion
    (``pa.array``, ``pa.table``: it asks whether the value is a pandas object). That
    import was two thirds of a worker's start (1.0 of 1.5 s of CPU, quiet machine), paid
    by every worker of every run on the cores the run's other starts need. When the import
    fails, pyarrow takes pandas for absent and converts as before. (A ``None`` in
    ``sys.modules`` does not do: pyarrow's compiled import returns the ``None``.)
    """
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


def process_age_s() -> float:
    """Seconds since this process was created, to the clock tick (Linux ``/proc``:
    ``psutil``'s create time rounds the boot time to the second); else from psutil."""
    try:
        start = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - start / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        import psutil

        return time.time() - psutil.Process().create_time()


def _create_time(pid: int) -> float:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return 0.0


class Detached:
    """A background process known by its :class:`ProcRecord` (``Popen``-like, docs/live-run.md).

    ``child`` is the ``Popen`` when this process started it (it reaps the wrapper,
    so no zombie lingers); from another process it is ``None``.
    """

    def __init__(self, rec: ProcRecord, child: subprocess.Popen[bytes] | None = None) -> None:
        self.rec = rec
        self.child = child
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        """The recorded pid."""
        return self.rec.pid

    def _rc_from_file(self) -> int | None:
        return read_code(self.rec.rc_file)

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
        """The exit code once the process has ended, else ``None``; never blocks.

        The code comes from the wrapper's rc file; a process gone without writing it
        (killed with its wrapper) reads as ``-SIGKILL``. The result is kept in ``returncode``.
        """
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
        """SIGKILL the process and everything it started, never a recycled pid.

        A process that leads its group (every process a run starts does) is killed
        with its group; one that does not (an older run's child) with its
        descendants. Once it is gone, members of its group still running (started no
        earlier than it: not a later group that reused the number) are killed one by one.
        """
        import psutil

        if self.alive():
            try:
                if os.getpgid(self.rec.pid) == self.rec.pid:
                    os.killpg(self.rec.pid, signal.SIGKILL)
                    return
                proc = psutil.Process(self.rec.pid)
                for child in proc.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        child.kill()
                proc.kill()
            except (ProcessLookupError, psutil.NoSuchProcess):
                pass
            except (PermissionError, psutil.AccessDenied) as exc:
                log.warning("cannot kill %s (pid %d): %s", self.rec.name, self.rec.pid, exc)
            return
        kill_group_members(self.rec.pid, self.rec.create_time)

    def wait(self, timeout: float | None = None) -> int:
        """Poll every 0.1 s until the process ends; its exit code. Raises
        ``subprocess.TimeoutExpired`` once ``timeout`` s (if given) have passed."""
        rc = wait_polling(self, self.rec.cmd, timeout)
        if self.child is not None:
            self.child.wait()
        return rc


_EXC_LINE = re.compile(
    r"^(?:Caused by: )?([A-Za-z_][\w.$]*(?:Error|Exception|Exit|Interrupt|Iteration)\b)(:.*)?$"
)
"""``ValueError: ...``, ``pyspark.errors...StreamingQueryException: ...``, ``java.lang.X: ...``."""
_TRACEBACK = "Traceback (most recent call last)"


def first_error(path: Path, max_len: int = 300) -> str | None:
    """The first error in the log at ``path`` as one line, or None if it shows none.

    The first exception line in the log's order: a Python traceback's exception line
    (``ValueError: ...``, also a Spark task's traceback inside a Java
    ``PythonException``), a Java exception line (``org.apache.spark.SparkException:
    ...``, ``Caused by: ...``); later errors are consequences, and the last lines of
    a failed Spark job are plan lines. Else the first line saying ``Error:`` /
    ``Exception:`` (a log record's message part).
    """
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    in_traceback = False
    for line in lines:
        if _TRACEBACK in line:
            in_traceback = True
            continue
        if line[:1] in (" ", "\t", "") or line.startswith(("^", "~")):
            continue  # frames, source lines, carets
        m = _EXC_LINE.match(line.strip())
        if m and (m.group(2) or in_traceback):
            return _clip(line.strip().removeprefix("Caused by: "), max_len)
    for line in lines:
        for word in ("Error:", "Exception:"):
            at = line.find(word)
            if at >= 0:
                begin = line.rfind(" ", 0, at) + 1
                return _clip(line[begin:].strip(), max_len)
    return None


def _clip(text: str, max_len: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= max_len else text[: max_len - 3] + "..."


def exit_cause(rc: int | None, path: Path) -> str:
    """Why a child with exit code ``rc`` ended, one line naming its log: its first error
    (:func:`first_error`), else its signal or exit code and its last log line."""
    if rc is not None and rc < 0:
        try:
            how = f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            how = f"killed by signal {-rc}"
    else:
        how = f"exit {rc}"
    err = first_error(path)
    if err is None:
        last = tail(path, 1)
        err = f"no error in its log (last line: {_clip(last, 200)})" if last else "empty log"
    return f"{how}: {err}; log: {path}"


def tail(path: Path, lines: int = 5) -> str:
    """The last ``lines`` non-empty lines of a log, joined into one line."""
    return " | ".join(log_tail(path, lines)) or "(no log)"

"""The processes of one ``airflow standalone``: its process group, its pid file, and stopping.

``skewlab airflow --run`` runs the standalone as one process group recorded in
``$AIRFLOW_HOME/skewlab-airflow.pid``; :func:`stop_airflow` stops that group in steps
(:data:`STOP_SEQUENCE`) and then every Airflow process of this home that left it. Why (Airflow
does not stop its own components) and what is never signalled: docs/airflow.md, "Start and stop".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = [
    "PID_FILE",
    "STOP_SEQUENCE",
    "AirflowGroup",
    "airflow_pids",
    "is_airflow_cmdline",
    "stop_airflow",
    "stop_group",
]

PID_FILE = "skewlab-airflow.pid"
"""Under ``$AIRFLOW_HOME``: the running standalone's process group and supervisor."""

STOP_SEQUENCE: tuple[tuple[int, float], ...] = (
    (signal.SIGINT, 20.0),
    (signal.SIGTERM, 10.0),
    (signal.SIGKILL, 5.0),
)
"""Signal to the process group, then seconds of grace before the next signal (standalone
stops its components on SIGINT; the scheduler can wait for its workers forever)."""


def is_airflow_cmdline(cmdline: Sequence[str]) -> bool:
    """Whether a command line is an Airflow process.

    ``airflow ...`` (its console script, or ``python .../airflow ...``) and the
    titles Airflow gives its processes (``airflow worker -- LocalExecutor``,
    ``airflow task supervisor: ...``, ``[airflow] <defunct>``). ``skewlab
    airflow`` and shells are not.
    """
    if not cmdline:
        return False
    first = cmdline[0]
    if first.startswith(("airflow ", "[airflow]")) or Path(first).name == "airflow":
        return True
    return (
        len(cmdline) > 1
        and Path(first).name.startswith("python")
        and Path(cmdline[1]).name == "airflow"
    )


def airflow_pids(airflow_home: Path, exclude: Iterable[int] = ()) -> list[int]:
    """Pids of the live Airflow processes whose ``AIRFLOW_HOME`` is ``airflow_home``."""
    import psutil

    want = str(Path(airflow_home).resolve())
    skip = {os.getpid(), *exclude}
    out = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.pid in skip or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if not is_airflow_cmdline(proc.info["cmdline"] or []):
                continue
            home = proc.environ().get("AIRFLOW_HOME")
        except (psutil.Error, OSError):
            continue
        if home is not None and str(Path(home).resolve()) == want:
            out.append(proc.pid)
    return sorted(out)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(
    pgid: int,
    sequence: Sequence[tuple[int, float]] = STOP_SEQUENCE,
    reap: Callable[[], object] = lambda: None,
) -> bool:
    """Signal process group ``pgid`` with each step of ``sequence`` until it is empty.

    ``reap`` is called while waiting (``Popen.poll`` of the leader, so it does
    not linger as our zombie). True if the group is gone.
    """
    for sig, grace_s in sequence:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            reap()
            if not _group_alive(pgid):
                return True
            time.sleep(0.2)
    return not _group_alive(pgid)


def _stop_pids(pids: Sequence[int], grace_s: float = 10.0) -> None:
    """SIGTERM ``pids``, then SIGKILL those still alive after ``grace_s``."""
    import psutil

    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            p.terminate()
            procs.append(p)
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=5.0)


@dataclass(frozen=True)
class AirflowGroup:
    """A running standalone as its pid file records it."""

    pgid: int
    """The standalone's pid, leader of its process group."""
    supervisor: int | None = None
    """The ``skewlab airflow --run`` process waiting on it (None: none)."""

    def save(self, airflow_home: Path) -> Path:
        """Write the pid file (mode 600); its path."""
        path = Path(airflow_home) / PID_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump({"pgid": self.pgid, "supervisor": self.supervisor}, out)
        return path

    @classmethod
    def load(cls, airflow_home: Path) -> AirflowGroup | None:
        """The recorded group, or None (no file, or not readable as one)."""
        try:
            data = json.loads((Path(airflow_home) / PID_FILE).read_text())
            return cls(int(data["pgid"]), data.get("supervisor"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @staticmethod
    def forget(airflow_home: Path) -> None:
        """Remove the pid file (missing is fine)."""
        with contextlib.suppress(FileNotFoundError):
            (Path(airflow_home) / PID_FILE).unlink()


def stop_airflow(
    airflow_home: Path, sequence: Sequence[tuple[int, float]] = STOP_SEQUENCE
) -> list[int]:
    """Stop every Airflow process of ``airflow_home``; the pids that were running.

    1. The recorded process group (pid file), if one of its members is an
       Airflow process of this home (a stale file never signals a stranger),
       through ``sequence``; its supervisor gets SIGTERM first, so that it exits
       instead of waiting on a standalone that is gone.
    2. Every Airflow process of this home still alive (left the group, or
       started without ``--run``): SIGTERM, then SIGKILL after 10 s.
    3. The pid file is removed.
    """
    found = airflow_pids(airflow_home)
    group = AirflowGroup.load(airflow_home)
    if group is not None and any(_pgid(pid) == group.pgid for pid in found):
        if group.supervisor and group.supervisor != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(group.supervisor, signal.SIGTERM)
        stop_group(group.pgid, sequence)
    left = airflow_pids(airflow_home)
    if left:
        log.info("stopping %d Airflow process(es) outside the group: %s", len(left), left)
        _stop_pids(left)
    AirflowGroup.forget(airflow_home)
    return found


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None

"""The warm workers app: one Spark app on a local master serving many runs' workers.

Beside a warm route host (``$SKEWLAB_ROUTE_HOST``), in ``<host dir>/workers-app``, so a run
does not pay a workers app's JVM and Spark start (:mod:`.spark_launcher`). The files of
:class:`WarmDir`, the app being ``python -m skewlab.live.mains.workers_app --warm DIR``:

1. :func:`launch` starts it detached unless it runs (``app.json``); ``app.ready`` once warm;
2. :func:`register`: a run names its run dir in ``runs/<run id>.json``; its requests,
   attempts, cancel markers and end codes stay in its own ``spark-workers/``; the app runs
   its jobs in job group ``<run id>``, each tagged with its request's id;
3. once the run is over (:func:`skewlab.live.mains.workers_app.ended`) the app writes the
   cancel marker of each of its running jobs, cancels its group and forgets the run;
4. :func:`stop` (``stop`` file, then a kill) ends the app; the route host's stop does too, and
   the app leaves by itself once the host has been gone a minute (a killed test session).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skewlab.envsettings import EnvSettings, env_settings
from skewlab.live.driver import resident
from skewlab.live.driver.handle import ProcRecord
from skewlab.live.driver.launch import Detached, spawn_detached, write_json

APP_MODULE = "skewlab.live.mains.workers_app"
WARM_FLAG = "--warm"
FOLDER = "workers-app"
"""The app's folder in its route host's directory."""
_LOCK = threading.Lock()


def on_cluster(master: str | None) -> bool:
    """Whether a Spark master URL names a cluster (anything but ``local...``)."""
    return bool(master) and not str(master).strip().startswith("local")


@dataclass(frozen=True)
class WarmDir:
    """The warm app's files (the module doc's steps)."""

    path: Path

    @property
    def record(self) -> Path:
        """Step 1: the app process's :class:`ProcRecord` (JSON)."""
        return self.path / "app.json"

    @property
    def ready(self) -> Path:
        """Step 1: written once the app's Spark context ran a first Python task."""
        return self.path / "app.ready"

    @property
    def log(self) -> Path:
        """The app's own log (Spark's, and the requests it submitted)."""
        return self.path / "app.log"

    @property
    def events(self) -> Path:
        """The app's Spark event log directory."""
        return self.path / "events"

    @property
    def runs(self) -> Path:
        """Step 2: the folder of registered runs."""
        return self.path / "runs"

    @property
    def stop_file(self) -> Path:
        """Step 4: the app leaves once this exists."""
        return self.path / "stop"

    def host_gone(self) -> bool:
        """Whether the route host beside the app (its directory's parent) is not running."""
        return not resident.running(self.path.parent / "host.json")

    def registration(self, run_id: str) -> Path:
        """Step 2: the file naming run ``run_id``'s run dir."""
        return self.runs / f"{run_id}.json"

    def app_record(self) -> ProcRecord | None:
        """The app process's record, if one was written."""
        return resident.read_record(self.record)

    def alive(self) -> bool:
        """Whether the recorded app process runs."""
        return resident.running(self.record)

    def registered(self) -> dict[Path, float]:
        """Step 2: each registered run dir with its registration's modification time."""
        out = {}
        for p in sorted(self.runs.glob("*.json")):
            with contextlib.suppress(OSError, ValueError, KeyError):
                out[Path(json.loads(p.read_text())["run_dir"])] = p.stat().st_mtime
        return out


def beside(host_dir: Path) -> WarmDir:
    """The warm app's directory beside the route host in ``host_dir``."""
    return WarmDir(Path(host_dir).resolve() / FOLDER)


def home(env: EnvSettings | None = None) -> WarmDir | None:
    """The warm app a run on this machine uses: the one beside the route host that
    ``$SKEWLAB_ROUTE_HOST`` names, on a local master; None: the run starts its own app."""
    env = env or env_settings()
    where = env.route_host_dir
    if where is None or on_cluster(env.spark_master):
        return None
    return beside(Path(where))


def launch(d: WarmDir) -> ProcRecord:
    """Step 1 without waiting: the running app's record, started if none runs."""
    with _LOCK:
        rec = d.app_record()
        if rec is not None and Detached(rec).alive():
            return rec
        d.runs.mkdir(parents=True, exist_ok=True)
        d.ready.unlink(missing_ok=True)
        d.stop_file.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", APP_MODULE, WARM_FLAG, str(d.path)]
        _, rec = spawn_detached("workers-app", cmd, d.log)
        write_json(d.record, rec.__dict__)
        return rec


def register(d: WarmDir, run_dir: Path) -> None:
    """Step 2: the app serves the run in ``run_dir`` (again, once forgotten: a resumed run)."""
    d.runs.mkdir(parents=True, exist_ok=True)
    write_json(d.registration(run_dir.name), {"run_dir": str(run_dir.resolve())})


def forget(d: WarmDir, run_dir: Path, seen_mtime: float) -> None:
    """Step 3 (the app): drop the run's registration unless it was written again after
    ``seen_mtime`` (a resumed run registered meanwhile)."""
    p = d.registration(run_dir.name)
    with contextlib.suppress(OSError):
        if p.stat().st_mtime <= seen_mtime:
            p.unlink()


def read_ready(d: WarmDir) -> dict[str, Any] | None:
    """``app.ready`` of a running app, else None."""
    return resident.read_ready(d.ready, d.record)


def stop(d: WarmDir, grace_s: float = 60.0) -> None:
    """Step 4: ask the app to leave; kill it if it has not after ``grace_s``."""
    resident.stop(d.record, d.stop_file, grace_s)

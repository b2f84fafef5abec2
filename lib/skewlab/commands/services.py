"""``skewlab up`` / ``down`` / ``status``: the local services under one data dir.

``status`` prints one row per thing that can run for the data dir, with how to
start or stop it:

* every registered service (:data:`skewlab.services.SERVICES`, the Kafka
  broker today): ``skewlab up`` starts it, ``skewlab down`` stops it;
* the route host ``skewlab run`` starts (:func:`start_route_host`, a Spark session kept
  warm for the next run's route query), and the warm workers app beside it (the Spark
  application whose tasks run the runs' workers); ``skewlab down`` stops both;
* Airflow standalone started by ``skewlab airflow --run`` for this data dir
  (found by its ``AIRFLOW_HOME``); ``skewlab down`` stops it too;
* an MLflow UI / server reading this data dir's store, if one was started by
  hand (``mlflow ui --backend-store-uri ...``); skewlab does not start one, so
  the row says how to.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skewlab.envsettings import EnvSettings, env_settings
from skewlab.live.driver.lifecycle import run_states
from skewlab.live.driver.route_host import ROUTE_HOST_ENV, HostDir, launch_host, stop_host
from skewlab.live.driver.warm_app import beside as warm_app_beside
from skewlab.live.driver.warm_app import read_ready as warm_app_ready
from skewlab.live.driver.warm_app import stop as stop_warm_app
from skewlab.report.table import format_table
from skewlab.services import SERVICES, get_service
from skewlab.services.datadir import DataDir, resolve_home

HELP = "start (up), stop (down) or show (status) the local services of a data dir"

ACTIONS = ("up", "down", "status")

AIRFLOW_STOP = ((signal.SIGINT, 20.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0))
"""How ``down`` stops Airflow standalone: signal to its process group, then seconds of grace."""

MLFLOW_DEFAULT_PORT = 5000

ROUTE_HOST = "route-host"
"""The route host's folder under the data dir (and its row in ``status``)."""
WORKERS_APP = "workers-app"
"""The ``status`` row of the warm workers app beside the route host."""


def route_host_dir(home: str | os.PathLike[str] | None) -> Path:
    """``<data dir>/route-host``: where ``skewlab run`` keeps its route host."""
    return DataDir(home).service_dir(ROUTE_HOST)


def wants_route_host(env: EnvSettings) -> bool:
    """Whether ``skewlab run`` starts (or reuses) the data dir's route host: not when
    ``$SKEWLAB_ROUTE_HOST`` names one or is ``off``, on a cluster master or spark-submit
    (the route job is the master's application), or with a crash point armed."""
    local = env.spark_master is None or env.spark_master.startswith("local")
    return env.route_host is None and local and not env.spark_submit and env.crash is None


def start_route_host(home: str | os.PathLike[str] | None) -> tuple[HostDir, bool] | None:
    """The data dir's route host, launched without waiting unless it runs (a run waits for
    it to be warm), and ``$SKEWLAB_ROUTE_HOST`` set to it for this process and its children;
    with whether this call started it. None when :func:`wants_route_host` is false."""
    if not wants_route_host(env_settings()):
        return None
    path = route_host_dir(home)
    with DataDir(home).lock(ROUTE_HOST):
        started = not HostDir(path).alive()
        d = launch_host(path)
    os.environ[ROUTE_HOST_ENV] = str(d.path)
    return d, started


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the options ``up``, ``down`` and ``status`` share: ``--home`` and ``--port``."""
    parser.add_argument(
        "--home", default=None, help="data directory (default: $SKEWLAB_HOME, else ./.skewlab)"
    )
    parser.add_argument("--port", type=int, help="broker port (up only; default: a free one)")


@dataclass(frozen=True, slots=True)
class Found:
    """A process found for the data dir: its pid, where to reach it, its command line."""

    pid: int
    url: str
    cmdline: tuple[str, ...]


def _processes() -> Iterator[tuple[Any, list[str]]]:
    """``(psutil.Process, cmdline)`` of every process of this user we may inspect."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if cmdline:
            yield proc, list(cmdline)


def _is_program(cmdline: Sequence[str], program: str, *words: str) -> bool:
    names = [Path(c).name for c in cmdline]
    return any(n == program or n.startswith(f"{program}-") for n in names) and all(
        w in cmdline for w in words
    )


def find_airflow(airflow_home: Path) -> list[Found]:
    """``airflow standalone`` processes whose ``AIRFLOW_HOME`` is ``airflow_home``."""
    import psutil

    found = []
    for proc, cmdline in _processes():
        if not _is_program(cmdline, "airflow", "standalone"):
            continue
        try:
            env = proc.environ()
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        home = env.get("AIRFLOW_HOME")
        if home and Path(home).resolve() == airflow_home.resolve():
            url = env.get("AIRFLOW__API__BASE_URL", "http://localhost:8080")
            found.append(Found(proc.pid, url, tuple(cmdline)))
    return found


def find_mlflow_ui(store: Path) -> list[Found]:
    """``mlflow ui`` / ``mlflow server`` processes whose backend store is ``store``."""
    found = []
    for proc, cmdline in _processes():
        if not (_is_program(cmdline, "mlflow") and ("ui" in cmdline or "server" in cmdline)):
            continue
        if not any(str(store) in c for c in cmdline):
            continue
        host, port = "127.0.0.1", MLFLOW_DEFAULT_PORT
        for flag, value in itertools.pairwise(cmdline):
            if flag in ("--port", "-p") and value.isdigit():
                port = int(value)
            elif flag in ("--host", "-h"):
                host = value
        found.append(Found(proc.pid, f"http://{host}:{port}", tuple(cmdline)))
    return found


def stop_group(pid: int) -> bool:
    """Stop ``pid`` (:data:`AIRFLOW_STOP`); True once it is gone.

    ``skewlab airflow --run`` starts standalone as the leader of its own process
    group, so the signal goes to the group (every component and worker); a
    process that leads no group gets the signal alone.
    """
    try:
        group = os.getpgid(pid) == pid and pid != os.getpgrp()
    except ProcessLookupError:
        return True
    for sig, grace_s in AIRFLOW_STOP:
        try:
            if group:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.1)
    return not _alive(pid)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def status_rows(home: str | None) -> list[list[str]]:
    """``[service, state, url, pid, how to start / stop]`` for everything of data dir ``home``."""

    root = resolve_home(home)
    flag = f" --home {root}" if home is not None else ""
    rows = []
    for name in SERVICES:
        st = get_service(name, home).status()
        if st.running and st.state is not None:
            health = "running" if st.healthy else "running, NOT healthy"
            rows.append([name, health, st.state.url, str(st.state.pid), f"skewlab down{flag}"])
        else:
            rows.append([name, "stopped", "-", "-", f"skewlab up{flag}"])
    rows.append(route_host_row(root / ROUTE_HOST, flag))
    rows.append(workers_app_row(root / ROUTE_HOST, flag))
    airflow = find_airflow(root / "airflow")
    if airflow:
        rows.extend(
            ["airflow", "running", a.url, str(a.pid), f"skewlab down{flag}"] for a in airflow
        )
    else:
        rows.append(["airflow", "stopped", "-", "-", f"skewlab airflow --run{flag}"])
    store = root / "mlflow.db"
    uis = find_mlflow_ui(store)
    if uis:
        rows.extend(["mlflow-ui", "running", u.url, str(u.pid), f"kill {u.pid}"] for u in uis)
    else:
        how = f"mlflow ui --backend-store-uri sqlite:///{store}" if store.exists() else "-"
        rows.append(["mlflow-ui", "stopped", "-", "-", how])
    return rows


def route_host_row(path: Path, flag: str) -> list[str]:
    """The ``status`` row of the route host in ``path``: starting or running (its Spark UI)."""
    d = HostDir(path)
    rec = d.host_record()
    if rec is None or not d.alive():
        return [ROUTE_HOST, "stopped", "-", "-", "started by skewlab run"]
    ready = d.read_ready()
    state, url = ("starting", "-") if ready is None else ("running", ready.get("spark_ui") or "-")
    return [ROUTE_HOST, state, str(url), str(rec.pid), f"skewlab down{flag}"]


def workers_app_row(host_dir: Path, flag: str) -> list[str]:
    """The ``status`` row of the warm workers app beside the route host in ``host_dir``
    (:mod:`skewlab.live.driver.warm_app`): starting or running (its Spark UI), or stopped."""
    d = warm_app_beside(host_dir)
    rec = d.app_record()
    if rec is None or not d.alive():
        return [WORKERS_APP, "stopped", "-", "-", "started by skewlab run"]
    ready = warm_app_ready(d)
    state, url = ("starting", "-") if ready is None else ("running", ready.get("ui") or "-")
    return [WORKERS_APP, state, str(url), str(rec.pid), f"skewlab down{flag}"]


def _act(action: str, args: argparse.Namespace) -> int:

    if action == "status":
        home = resolve_home(args.home)
        print(f"data dir: {home}")
        headers = ["service", "state", "url", "pid", "start / stop with"]
        print(format_table(headers, status_rows(args.home), align="left"))
        runs = run_states(home)
        if runs:
            print()
            rows = [[r.run_id, r.state, r.detail, r.action] for r in runs]
            print(format_table(["run", "state", "detail", "what to do"], rows, align="left"))
        return 0
    for name in SERVICES:
        svc = get_service(name, args.home)
        if action == "up":
            st = svc.start(port=args.port)
            print(f"{name}: running at {st.url} (pid {st.pid})")
        else:
            stopped = svc.stop()
            print(f"{name}: {'stopped' if stopped else 'was not running'}")
    if action == "down":
        host = HostDir(resolve_home(args.home) / ROUTE_HOST)
        app = warm_app_beside(host.path)
        app_up = app.alive()
        if host.alive():
            stop_host(host.path)  # and the workers app beside it
            print(f"{ROUTE_HOST}: {'could not be stopped' if host.alive() else 'stopped'}")
        if app.alive():  # its host gone already: it would leave by itself within a minute
            stop_warm_app(app)
        if app_up:
            print(f"{WORKERS_APP}: {'could not be stopped' if app.alive() else 'stopped'}")
        for a in find_airflow(resolve_home(args.home) / "airflow"):
            gone = stop_group(a.pid)
            print(f"airflow: {'stopped' if gone else 'could not be stopped'} (pid {a.pid})")
    return 0


def up(args: argparse.Namespace) -> int:
    """``skewlab up``: start every registered service of the data dir (a running, healthy one
    is reused), print each one's URL and pid; returns 0."""
    return _act("up", args)


def down(args: argparse.Namespace) -> int:
    """``skewlab down``: stop every registered service, the data dir's route host, the warm
    workers app beside it and its Airflow standalone (:func:`stop_group`), one line each;
    returns 0."""
    return _act("down", args)


def status(args: argparse.Namespace) -> int:
    """``skewlab status``: print the data dir and the :func:`status_rows` table; returns 0."""
    return _act("status", args)

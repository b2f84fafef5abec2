"""A real cluster on one machine, on loopback: what ``skewlab cluster up|down|status`` runs.

The same code a multi-host deployment runs, with only settings changed: a Spark standalone
master and two workers (:mod:`~skewlab.services.spark_standalone`), the Kafka broker
(:class:`~skewlab.services.broker.Broker`, as ``skewlab up`` runs it), an MLflow server
(:mod:`~skewlab.services.mlflow_server`), PostgreSQL (:mod:`~skewlab.services.postgres`) and
Airflow with the LocalExecutor on it. ``up`` in order:

1. read ``HOME/cluster/ports.json``; each port is the recorded one, else the standard one
   (:data:`PREFERRED`) when free, else a free one; record the choice;
2. write ``HOME/cluster/spark-conf/spark-defaults.conf`` (the project's Spark jars);
   start (or reuse) postgres, broker, spark-master, the workers, mlflow-server, each polled
   for readiness, and time each start (``HOME/cluster/startup.json``);
3. start Airflow from an :class:`AirflowLaunch` the caller builds from the endpoints.
``down`` stops them in reverse order; ``status`` probes each one.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skewlab.jars import jar_files
from skewlab.services.airflow import AirflowGroup, airflow_pids, stop_airflow
from skewlab.services.broker import Broker
from skewlab.services.datadir import DataDir
from skewlab.services.mlflow_server import MlflowServer
from skewlab.services.postgres import Postgres
from skewlab.services.process import (
    LOOPBACK,
    Service,
    ServiceStartError,
    free_port,
    log_tail,
    port_is_free,
    wait_until,
)
from skewlab.services.spark_standalone import (
    NODE_CORES,
    NODE_MEMORY,
    SparkMaster,
    SparkWorker,
    spark_defaults,
)

log = logging.getLogger(__name__)

CLUSTER_DIR = "cluster"
PORTS_FILE = "ports.json"
STARTUP_FILE = "startup.json"
SPARK_CONF = "spark-conf"
WORKERS = 2
WORKER_CORES = NODE_CORES
WORKER_MEMORY = NODE_MEMORY
AIRFLOW_START_TIMEOUT_S = 600.0
"""Only a bound: readiness is polled (its first start migrates the metadata DB)."""

PREFERRED: dict[str, int] = {
    "postgres": 5432,
    "broker": 9092,
    "spark-master": 7077,
    "spark-master-ui": 8080,
    "spark-worker-1-ui": 8081,
    "spark-worker-2-ui": 8082,
    "mlflow-server": 5000,
    "airflow": 8090,
}
"""The standard ports, used when free (Airflow's own 8080 is the Spark master UI's)."""


def choose_port(
    recorded: int | None,
    preferred: int | None,
    is_free: Callable[[int], bool],
    fallback: Callable[[], int],
) -> int:
    """The recorded port if free, else the preferred one if free, else ``fallback()``."""
    for port in (recorded, preferred):
        if port is not None and is_free(port):
            return port
    return fallback()


def environment(endpoints: Mapping[str, str], home: Path) -> dict[str, str]:
    """The settings a user exports to point ``skewlab run`` and the DAGs at the cluster
    (``SPARK_CONF_DIR``: the ``spark-defaults.conf`` that :meth:`Cluster.up` writes)."""
    return {
        "SPARK_CONF_DIR": str(home / CLUSTER_DIR / SPARK_CONF),
        "SKEWLAB_SPARK_MASTER": endpoints["spark-master"],
        "SKEWLAB_KAFKA_BOOTSTRAP": endpoints["broker"],
        "MLFLOW_TRACKING_URI": endpoints["mlflow-server"],
        "SPARK_LOCAL_IP": LOOPBACK,
        "SKEWLAB_HOME": str(home),
    }


@dataclass(frozen=True)
class AirflowLaunch:
    """How to run Airflow on the cluster: its command, environment and home."""

    argv: list[str]
    env: dict[str, str]
    airflow_home: Path
    port: int


@dataclass(frozen=True)
class Component:
    """One component as ``status`` reports it."""

    name: str
    up: bool
    url: str = "-"
    pid: int | None = None
    detail: str = ""


@dataclass
class Started:
    """What ``up`` started: endpoint per component and the seconds each start took."""

    endpoints: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    """Seconds to ready of each component this ``up`` started (not the reused ones)."""
    reused: list[str] = field(default_factory=list)
    """Components that were already running and healthy."""


def airflow_health(port: int, host: str = LOOPBACK) -> dict[str, Any] | None:
    """Airflow's ``/api/v2/monitor/health`` (no login needed), or None."""
    try:
        url = f"http://{host}:{port}/api/v2/monitor/health"
        with urllib.request.urlopen(url, timeout=3.0) as resp:
            data = json.loads(resp.read().decode())
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return data if isinstance(data, dict) else None


def airflow_healthy(health: Mapping[str, Any] | None) -> bool:
    """The metadata DB and the scheduler both report healthy."""
    if not health:
        return False
    parts = ("metadatabase", "scheduler")
    return all((health.get(p) or {}).get("status") == "healthy" for p in parts)


class Cluster:
    """The cluster components of data dir ``home`` (all files under ``HOME/``)."""

    def __init__(
        self, home: DataDir | str | os.PathLike[str] | None = None, workers: int = WORKERS
    ) -> None:
        self.datadir = home if isinstance(home, DataDir) else DataDir(home)
        self.workers = workers
        self.directory = self.datadir.root / CLUSTER_DIR
        self.directory.mkdir(parents=True, exist_ok=True)

    # -- records

    def ports(self) -> dict[str, int]:
        """The recorded ports (``ports.json``), empty if none."""
        try:
            data = json.loads((self.directory / PORTS_FILE).read_text())
            return {str(k): int(v) for k, v in data.items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return {}

    def _record(self, name: str, data: Mapping[str, Any]) -> None:
        (self.directory / name).write_text(json.dumps(dict(data), indent=2) + "\n")

    def _port(self, key: str, ports: dict[str, int]) -> int:
        port = choose_port(
            ports.get(key), PREFERRED.get(key), lambda p: port_is_free(LOOPBACK, p), free_port
        )
        ports[key] = port
        self._record(PORTS_FILE, ports)
        return port

    # -- components

    @property
    def airflow_home(self) -> Path:
        """``HOME/cluster/airflow``: the cluster Airflow's own home (not standalone's)."""
        return self.directory / "airflow"

    def services(self) -> list[Service]:
        """The process services in start order (workers know the master from ``ports``)."""
        ports = self.ports()
        master = f"spark://{LOOPBACK}:{ports.get('spark-master', PREFERRED['spark-master'])}"
        master_ui = ports.get("spark-master-ui", PREFERRED["spark-master-ui"])
        found: list[Service] = [
            Postgres(self.datadir),
            Broker(self.datadir),
            SparkMaster(self.datadir, ui_port=master_ui),
        ]
        for i in range(1, self.workers + 1):
            ui = ports.get(f"spark-worker-{i}-ui")
            found.append(
                SparkWorker(
                    self.datadir, i, master, master_ui, ui, cores=WORKER_CORES, memory=WORKER_MEMORY
                )
            )
        found.append(MlflowServer(self.datadir))
        return found

    def up(self, clock: Callable[[], float] = time.monotonic) -> Started:
        """Steps 1-2 of the module docstring: every process service, timed."""
        ports = self.ports()
        for key in ("spark-master-ui", *(f"spark-worker-{i}-ui" for i in range(1, 3))):
            if not self._running(key.removesuffix("-ui")):
                self._port(key, ports)
        conf = self.directory / SPARK_CONF
        conf.mkdir(exist_ok=True)
        (conf / "spark-defaults.conf").write_text(spark_defaults(jar_files("spark")))
        started = Started()
        timings = self.startup()
        for svc in self.services():
            running = svc.status().running
            port = None if running else self._port(svc.name, ports)
            t0 = clock()
            st = svc.start(port=port)
            started.endpoints[svc.name] = st.url
            if running:
                started.reused.append(svc.name)
            else:
                timings[svc.name] = started.seconds[svc.name] = round(clock() - t0, 2)
                log.info("%s up in %.1f s at %s", svc.name, timings[svc.name], st.url)
        self._record(PORTS_FILE, ports)
        self._record(STARTUP_FILE, timings)
        return started

    def _running(self, name: str) -> bool:
        for svc in self.services():
            if svc.name == name:
                return svc.status().running
        return False

    def airflow_port(self) -> int:
        """The port Airflow's API server gets (recorded, else 8090 if free, else free)."""
        ports = self.ports()
        if airflow_pids(self.airflow_home) and "airflow" in ports:
            return ports["airflow"]
        return self._port("airflow", ports)

    def start_airflow(
        self, launch: AirflowLaunch, clock: Callable[[], float] = time.monotonic
    ) -> float | None:
        """Step 3: spawn Airflow (its own process group, recorded), poll its health; the
        seconds it took, None if it was already running and healthy."""
        if airflow_pids(launch.airflow_home) and airflow_healthy(airflow_health(launch.port)):
            return None
        t0 = clock()
        launch.airflow_home.mkdir(parents=True, exist_ok=True)
        log_path = self.directory / "airflow.log"
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                launch.argv,
                env=launch.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        AirflowGroup(proc.pid).save(launch.airflow_home)
        ready = wait_until(
            lambda: proc.poll() is not None or airflow_healthy(airflow_health(launch.port)),
            AIRFLOW_START_TIMEOUT_S,
            0.5,
        )
        if proc.poll() is not None or not ready:
            tail = log_tail(log_path)
            stop_airflow(launch.airflow_home)
            raise ServiceStartError(
                f"Airflow did not become healthy on port {launch.port}: "
                f"{tail[-1] if tail else 'no output'} (log: {log_path})"
            )
        seconds = round(clock() - t0, 2)
        timings = {**self.startup(), "airflow": seconds}
        self._record(STARTUP_FILE, timings)
        return seconds

    def startup(self) -> dict[str, float]:
        """The start-up seconds of the last ``up`` (``startup.json``)."""
        try:
            return {
                k: float(v)
                for k, v in json.loads((self.directory / STARTUP_FILE).read_text()).items()
            }
        except (OSError, ValueError, TypeError, AttributeError):
            return {}

    def status(self) -> list[Component]:
        """Each component up or down, with its URL and pid."""
        rows = []
        for svc in self.services():
            st = svc.status()
            if st.running and st.state is not None:
                detail = "" if st.healthy else "running, NOT answering"
                rows.append(Component(svc.name, st.healthy, st.state.url, st.state.pid, detail))
            else:
                rows.append(Component(svc.name, False))
        pids = airflow_pids(self.airflow_home)
        port = self.ports().get("airflow")
        if pids and port:
            healthy = airflow_healthy(airflow_health(port))
            detail = "" if healthy else "running, NOT healthy"
            rows.append(Component("airflow", healthy, f"http://{LOOPBACK}:{port}", pids[0], detail))
        else:
            rows.append(Component("airflow", False))
        return rows

    def down(self) -> list[tuple[str, bool]]:
        """Stop Airflow, then every service in reverse start order; ``(name, was running)``."""
        gone = [("airflow", bool(stop_airflow(self.airflow_home)))]
        for svc in reversed(self.services()):
            gone.append((svc.name, svc.stop()))
        return gone

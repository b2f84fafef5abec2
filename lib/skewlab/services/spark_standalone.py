"""A Spark standalone master and its workers, run from the installed pyspark's own jars.

Nothing is downloaded: ``java -cp <pyspark>/jars/* org.apache.spark.deploy.master.Master``
and ``...deploy.worker.Worker`` are the classes ``sbin/start-master.sh`` runs. Start steps
(:class:`~skewlab.services.process.Service`'s lifecycle):

1. pick the web UI port (given, else a free one) and write nothing else: state lives in
   ``HOME/<name>/`` (the worker's ``work/`` dir holds its executors' files);
2. spawn ``env SPARK_HOME=<pyspark> SPARK_LOCAL_IP=127.0.0.1 java ... Master|Worker``;
3. poll the master's ``http://HOST:UI/json``: ALIVE for the master, this worker listed
   ALIVE for a worker (readiness is the event, never a sleep).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, ClassVar

from skewlab.services.broker_config import java_executable
from skewlab.services.datadir import DataDir
from skewlab.services.process import (
    LOOPBACK,
    BinaryNotFoundError,
    Service,
    free_port,
    require_free_port,
)

log = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DAEMON_HEAP = "512m"
"""Heap of each daemon JVM (the executors get their own JVMs and memory)."""

ROUTE_CORES = 2
"""``spark.cores.max`` of an app that sets none (the route job), in 1-core executors."""
WORKERS_APP_CORES = 16
"""``spark.cores.max`` of a run's workers app: task slots for its worker instances and spares."""
WORKERS_APP_EXECUTOR_CORES = 8
"""Cores of each workers app executor: 2 executors, spread over the nodes, hold its slots."""
WORKERS_APP_EXECUTOR_MEMORY = "512m"
"""Heap of a workers app executor: its tasks only wait on their worker processes."""
NODE_CORES = ROUTE_CORES + WORKERS_APP_CORES
"""Cores a worker node declares: one node alone holds the route job and every worker task,
so when the other node dies, all of both fit on the survivor. They count task slots; a
waiting worker task uses no CPU."""
NODE_MEMORY = "4g"
"""Executor memory a node declares: the route job's 1g executors plus the workers app's."""


def spark_home() -> Path:
    """The installed pyspark package: it carries ``jars/`` and ``bin/`` like a Spark dist."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise BinaryNotFoundError("pyspark is not installed: run `bash infra/setup.sh`")
    home = Path(spec.origin).resolve().parent
    if not any((home / "jars").glob("spark-core_*.jar")):
        raise BinaryNotFoundError(f"no Spark jars in {home / 'jars'}: reinstall pyspark")
    return home


def scala_version(home: Path) -> str:
    """The Scala binary version of the jars (``spark-core_2.13-...jar`` -> ``2.13``)."""
    for jar in (home / "jars").glob("spark-core_*.jar"):
        return jar.name.removeprefix("spark-core_").split("-", 1)[0]
    raise BinaryNotFoundError(f"no spark-core jar in {home / 'jars'}")


def daemon_command(
    java: Path, home: Path, main_class: str, args: list[str], marker: str
) -> list[str]:
    """``env SPARK_HOME=.. SPARK_LOCAL_IP=127.0.0.1 java -cp home/jars/* ... main_class args``.

    ``env`` execs java (the pid is the JVM's); ``-Dskewlab.spark=marker`` tells this
    cluster's daemons from any other in a process listing. A worker builds its executors'
    command lines from ``SPARK_HOME`` and ``SPARK_SCALA_VERSION`` (``bin/load-spark-env.sh``
    sets the latter; without it: "Cannot find any build directories").
    """
    return [
        "env",
        f"SPARK_HOME={home}",
        f"SPARK_LOCAL_IP={LOOPBACK}",
        f"SPARK_SCALA_VERSION={scala_version(home)}",
        str(java),
        "-cp",
        f"{home / 'jars'}/*",
        f"-Xmx{DAEMON_HEAP}",
        f"-Dskewlab.spark={marker}",
        main_class,
        *args,
    ]


def spark_defaults(jars: list[Path]) -> str:
    """``spark-defaults.conf`` putting ``jars`` on the driver's and executors' class path,
    and capping what an app that sets no cap takes (the route job: :data:`ROUTE_CORES` in
    1-core executors, so the workers app gets executors too and a lost one is replaced on
    the other node, where an app may run several executors).

    ``spark.jars`` set by a session reaches the executors but not the class loader of a
    driver that ``spark-submit`` already started, so ``spark.sql.extensions`` (delta) and
    ``format("kafka")`` fail there; a class path given at launch does not. Every daemon
    runs on this host, so local paths serve the executors too.
    """
    path = ":".join(str(j) for j in jars)
    lines = [
        "# written by `skewlab cluster up`: the project's Spark jars (Kafka connector, delta)",
        f"spark.driver.extraClassPath {path}",
        f"spark.executor.extraClassPath {path}",
        "# an app without its own caps (the route job); the workers app sets its own",
        f"spark.cores.max {ROUTE_CORES}",
        "spark.executor.cores 1",
    ]
    return "\n".join(lines) + "\n"


def master_json(host: str, ui_port: int, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The master's ``/json`` status page, or None if it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{host}:{ui_port}/json/", timeout=timeout_s) as r:
            data = json.loads(r.read().decode())
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return data if isinstance(data, dict) else None


def alive_workers(status: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The ALIVE workers of a ``/json`` page (dead ones stay listed for a while)."""
    if not status:
        return []
    return [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]


class _SparkDaemon(Service):
    """What the master and a worker share: java from the pyspark jars, a web UI port."""

    start_timeout_s: ClassVar[float] = 120.0
    """Only a bound: readiness is polled (the master answers in a few seconds)."""

    def __init__(
        self, home: DataDir | str | os.PathLike[str] | None = None, ui_port: int | None = None
    ) -> None:
        super().__init__(home)
        self.ui_port = ui_port
        self._chosen_ui: int | None = None

    @property
    def directory(self) -> Path:
        """``HOME/<service name>``."""
        return self.datadir.service_dir(self.name)

    def executable(self) -> Path:
        """``java`` (and the pyspark jars are checked before any spawn)."""
        spark_home()
        return java_executable()

    def prepare(self, executable: Path, host: str, port: int) -> None:
        """Step 1: the web UI port (``ui_port`` must be free; else a free one)."""
        if self.ui_port is not None:
            require_free_port(host, self.ui_port)
            self._chosen_ui = self.ui_port
        else:
            ui = free_port(host)
            while ui == port:
                ui = free_port(host)
            self._chosen_ui = ui

    def state_extra(self) -> dict[str, Any]:
        """The web UI port."""
        return {"ui_port": self._chosen_ui}

    def recorded_ui_port(self) -> int | None:
        """The web UI port of the running (or last) start, from its state file."""
        st = self.state()
        port = st.extra.get("ui_port") if st is not None else None
        return int(port) if port else None


class SparkMaster(_SparkDaemon):
    """The standalone master on ``spark://HOST:PORT``, its web UI and ``/json`` on ``ui_port``."""

    name: ClassVar[str] = "spark-master"
    program: ClassVar[str] = MASTER_CLASS

    def command(self, executable: Path, host: str, port: int) -> list[str]:
        """Step 2: ``... Master --host HOST --port PORT --webui-port UI``."""
        args = ["--host", host, "--port", str(port), "--webui-port", str(self._chosen_ui)]
        return daemon_command(executable, spark_home(), MASTER_CLASS, args, str(self.datadir.root))

    def url(self, host: str, port: int) -> str:
        """The master URL applications are submitted to."""
        return f"spark://{host}:{port}"

    def probe(self, host: str, port: int) -> bool:
        """Step 3: the ``/json`` page answers with status ALIVE."""
        ui = self._chosen_ui or self.recorded_ui_port()
        status = master_json(host, ui) if ui else None
        return bool(status and status.get("status") == "ALIVE")


class SparkWorker(_SparkDaemon):
    """One standalone worker (``cores`` cores, ``memory`` for executors) of a master.

    ``index`` names it (``spark-worker-1``, ...); its probe asks the master, so a worker
    is ready only once the master lists it ALIVE.
    """

    program: ClassVar[str] = WORKER_CLASS

    def __init__(
        self,
        home: DataDir | str | os.PathLike[str] | None,
        index: int,
        master: str,
        master_ui_port: int,
        ui_port: int | None = None,
        cores: int = NODE_CORES,
        memory: str = NODE_MEMORY,
    ) -> None:
        self.name = f"spark-worker-{index}"  # type: ignore[misc]
        super().__init__(home, ui_port)
        self.master = master
        self.master_ui_port = master_ui_port
        self.cores = cores
        self.memory = memory

    @property
    def work_dir(self) -> Path:
        """Where the worker puts its executors' directories and logs."""
        return self.directory / "work"

    def command(self, executable: Path, host: str, port: int) -> list[str]:
        """Step 2: ``... Worker MASTER --host HOST --port PORT --webui-port UI``, cores, memory."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        args = [
            self.master,
            "--host",
            host,
            "--port",
            str(port),
            "--webui-port",
            str(self._chosen_ui),
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--work-dir",
            str(self.work_dir),
        ]
        return daemon_command(executable, spark_home(), WORKER_CLASS, args, str(self.datadir.root))

    def url(self, host: str, port: int) -> str:
        """The worker's web UI (its logs and executors)."""
        return f"http://{host}:{self._chosen_ui or self.recorded_ui_port()}"

    def probe(self, host: str, port: int) -> bool:
        """Step 3: the master lists a worker at ``host:port`` ALIVE."""
        workers = alive_workers(master_json(host, self.master_ui_port))
        return any(w.get("host") == host and w.get("port") == port for w in workers)

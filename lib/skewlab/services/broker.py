"""The embedded Kafka broker: Apache Kafka in KRaft combined mode on 127.0.0.1.

Clients get a bootstrap string and talk Kafka; the JVM runs the jars ``infra/setup.sh``
fetched (:func:`skewlab.jars.jar_dir`), keeping everything under ``HOME/broker/``
(files: docs/real-stack.md, "The embedded broker"). Start steps (:meth:`Broker.prepare`,
then :class:`~skewlab.services.process.Service`'s lifecycle):

1. the ports ``listeners.json`` recorded (a restart keeps the bootstrap string), else
   free ones; a taken port is a one-line :class:`PortInUseError`;
2. write ``server.properties`` and ``log4j2.properties``;
3. format the log dir once (``StorageTool format``, the cluster id of :data:`CLUSTER_ID_FILE`);
4. spawn ``java ... kafka.Kafka`` in its own session (class-data archive: :data:`CLASS_ARCHIVE`);
5. poll :meth:`Broker.probe` (ApiVersions, then Metadata listing this broker);
6. record the ports and the state file. Stop: SIGTERM, SIGKILL after the timeout.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any, ClassVar

from skewlab.services.broker_config import (
    CLASS_ARCHIVE,
    FORMAT_CLASS,
    LOG4J2,
    MAIN_CLASS,
    archive_usable,
    class_archive_options,
    java_command,
    java_executable,
    kafka_jars,
    new_cluster_id,
    render_properties,
    server_properties,
)
from skewlab.services.datadir import DataDir, ServiceState
from skewlab.services.kafka_probe import kafka_api_versions_ok, kafka_metadata_brokers
from skewlab.services.process import (
    LOOPBACK,
    BinaryNotFoundError,
    PortInUseError,
    Service,
    ServiceError,
    ServiceStartError,
    free_port,
    require_free_port,
)

log = logging.getLogger(__name__)

CLUSTER_ID_FILE = "cluster.id"
LISTENERS_FILE = "listeners.json"
LOG_DIR = "kraft"


# ------------------------------------------------------------------------ service


class Broker(Service):
    """Apache Kafka (KRaft, one node) on loopback ports, its data under the data directory.

    ``start()`` returns the running state (``state.url`` is the bootstrap string); a second
    ``start()`` reuses a healthy broker; a start after a stop reuses the first start's ports
    and log dir (the module docstring has the steps). ``jars`` overrides the jar folder.
    """

    name: ClassVar[str] = "broker"
    program: ClassVar[str] = MAIN_CLASS
    start_timeout_s: ClassVar[float] = 120.0
    """Only a bound: start-up is polled (about 4-8 s on two busy cores)."""

    def __init__(
        self,
        home: DataDir | str | os.PathLike[str] | None = None,
        jars: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(home)
        self._jars = Path(jars) if jars is not None else None
        self._controller_port: int | None = None
        self._dump: Path | None = None

    # -- files

    @property
    def directory(self) -> Path:
        """``HOME/broker``."""
        return self.datadir.service_dir(self.name)

    @property
    def log_dir(self) -> Path:
        """The Kafka log dir (topics, offsets, the metadata log)."""
        return self.directory / LOG_DIR

    def jar_folder(self) -> Path:
        """The jars to run (``jars`` if given, else :func:`kafka_jars`)."""
        if self._jars is None:
            return kafka_jars()
        if not any(self._jars.glob("kafka_2.13-*.jar")):
            raise BinaryNotFoundError(
                f"no Apache Kafka jar (kafka_2.13-*.jar) in {self._jars}: run `bash infra/setup.sh`"
            )
        return self._jars

    def recorded_listeners(self) -> dict[str, Any] | None:
        """``listeners.json`` (host, port, controller_port) of an earlier start, or None."""
        path = self.directory / LISTENERS_FILE
        try:
            data = json.loads(path.read_text())
            return {
                "host": str(data["host"]),
                "port": int(data["port"]),
                "controller_port": int(data["controller_port"]),
            }
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring %s: %s", path, exc)
            return None

    def cluster_id(self) -> str:
        """The cluster id of this data dir, made once and kept in :data:`CLUSTER_ID_FILE`."""
        path = self.directory / CLUSTER_ID_FILE
        if path.exists():
            return path.read_text().strip()
        cid = new_cluster_id()
        path.write_text(cid + "\n")
        return cid

    # -- lifecycle

    def start(
        self, port: int | None = None, host: str = LOOPBACK, timeout_s: float | None = None
    ) -> ServiceState:
        """Start (or reuse) the broker; without ``port``, on the port of the first start."""
        recorded = self.recorded_listeners()
        if port is None and recorded is not None and recorded["host"] == host:
            port = recorded["port"]
        state = super().start(port=port, host=host, timeout_s=timeout_s)
        controller = state.extra.get("controller_port")
        if controller is not None:
            listeners = {"host": state.host, "port": state.port, "controller_port": controller}
            (self.directory / LISTENERS_FILE).write_text(json.dumps(listeners) + "\n")
        return state

    def executable(self) -> Path:
        """``java`` (the jars are checked here too: a missing set fails before any spawn)."""
        self.jar_folder()
        return java_executable()

    def prepare(self, executable: Path, host: str, port: int) -> None:
        """Steps 1-3 of the module docstring: controller port, config files, format once."""
        recorded = self.recorded_listeners()
        if recorded is not None and recorded["host"] == host and recorded["port"] == port:
            controller = recorded["controller_port"]
            require_free_port(host, controller)
        else:
            controller = free_port(host)
            while controller == port:
                controller = free_port(host)
        self._controller_port = controller
        props = server_properties(host, port, controller, self.log_dir)
        (self.directory / "server.properties").write_text(render_properties(props))
        (self.directory / "log4j2.properties").write_text(LOG4J2)
        if not (self.log_dir / "meta.properties").exists():
            self._format(executable)

    def _format(self, java: Path) -> None:
        """``StorageTool format`` of the log dir with this data dir's cluster id."""
        argv = java_command(
            java,
            self.jar_folder(),
            FORMAT_CLASS,
            "format",
            "--cluster-id",
            self.cluster_id(),
            "--config",
            str(self.directory / "server.properties"),
            log4j2_configurationFile=str(self.directory / "log4j2.properties"),
        )
        log.info("formatting the broker's log dir %s", self.log_dir)
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            raise ServiceStartError(
                f"formatting the broker's log dir {self.log_dir} failed: "
                f"{lines[-1] if lines else f'exit code {done.returncode}'}"
            )

    def command(self, executable: Path, host: str, port: int) -> list[str]:
        """Step 4: ``java ... kafka.Kafka HOME/broker/server.properties`` (after :meth:`prepare`).

        ``-Dskewlab.broker=host:port`` puts the address on the command line, so a process
        listing tells this broker from another one.
        """
        jars = self.jar_folder()
        self._dump = None
        if not (jars / CLASS_ARCHIVE).is_file() and os.access(jars, os.W_OK):
            self._dump = jars / f".{CLASS_ARCHIVE}.{uuid.uuid4().hex}.tmp"
        return java_command(
            executable,
            jars,
            MAIN_CLASS,
            str(self.directory / "server.properties"),
            options=class_archive_options(jars, self._dump),
            log4j2_configurationFile=str(self.directory / "log4j2.properties"),
            skewlab_broker=f"{host}:{port}",
        )

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stop the broker (SIGTERM, SIGKILL after ``timeout_s``) and forget its state.

        A broker that writes the class-data archive at exit gets 60 s at least (writing it
        takes a few seconds); the archive moves into place only if a JVM can map it.
        """
        st = self.state()
        dump = (
            Path(st.extra["class_archive_dump"])
            if st and st.extra.get("class_archive_dump")
            else None
        )
        stopped = super().stop(timeout_s=max(timeout_s, 60.0) if dump else timeout_s)
        if dump is not None and dump.is_file():
            target = dump.parent / CLASS_ARCHIVE
            if not target.exists() and archive_usable(java_executable(), dump.parent, dump):
                os.replace(dump, target)
                log.info("broker class-data archive written: %s", target)
            dump.unlink(missing_ok=True)
        return stopped

    def url(self, host: str, port: int) -> str:
        """The bootstrap string ``host:port``."""
        return f"{host}:{port}"

    def probe(self, host: str, port: int) -> bool:
        """Step 5: ApiVersions answers and Metadata lists a broker (it serves metadata)."""
        return kafka_api_versions_ok(host, port) and kafka_metadata_brokers(host, port) > 0

    def state_extra(self) -> dict[str, Any]:
        """Step 6: record the controller port, the log dir, the cluster id and where the JVM
        writes its class-data archive at exit (if it does)."""
        return {
            "controller_port": self._controller_port,
            "log_dir": str(self.log_dir),
            "cluster_id": self.cluster_id(),
            "class_archive_dump": str(self._dump) if self._dump else None,
        }

    def startup_failure(self, tail: list[str], host: str, port: int) -> ServiceError:
        """A bind failure in the log becomes :class:`PortInUseError`; else the last error."""
        if any("Address already in use" in line for line in tail):
            return PortInUseError(f"port {host}:{port} is already in use by another process")
        errors = [ln for ln in tail if re.search(r"\b(ERROR|FATAL|Exception)\b", ln)]
        last = (errors or tail or ["no output"])[-1].strip()
        return ServiceStartError(f"broker exited during start on {host}:{port}: {last}")

    def bootstrap(self) -> str:
        """The bootstrap string of the running broker; :class:`ServiceError` if it is down."""
        st = self.status()
        if not st.running or st.state is None:
            raise ServiceError("broker is not running (start it with `skewlab up`)")
        return st.state.url


def start_broker(
    home: DataDir | str | os.PathLike[str] | None = None,
    port: int | None = None,
    host: str = LOOPBACK,
    timeout_s: float | None = None,
) -> str:
    """Start (or reuse) the embedded broker under ``home`` and return its bootstrap string."""
    return Broker(home).start(port=port, host=host, timeout_s=timeout_s).url

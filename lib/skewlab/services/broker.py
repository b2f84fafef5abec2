"""The embedded Kafka broker: Apache Kafka in KRaft combined mode on the loopback interface.

Nothing outside :mod:`skewlab.services` knows which Kafka it is: clients get a bootstrap
string ``127.0.0.1:PORT`` and talk Kafka. The broker runs from the jars ``infra/setup.sh``
fetched (:func:`skewlab.jars.jar_dir` ``("broker")``) with the ``java`` on the PATH (or
``$JAVA_HOME/bin/java``). Everything it keeps lives in its service directory::

    HOME/broker/
      server.properties   generated at every start (ports, log dir, one-node settings)
      log4j2.properties   its logging, to stdout, which the service log collects
      listeners.json      the ports of the first start, reused by every later one
      kraft/              the log dir: topics, offsets, the cluster metadata log

Start steps (:meth:`Broker.prepare`, then the :class:`~skewlab.services.process.Service`
lifecycle):

1. the ports: the ones ``listeners.json`` recorded (a restart keeps the bootstrap string
   clients and Spark checkpoints know), else the requested or a free broker port and a free
   controller port; a taken port is a one-line :class:`PortInUseError`;
2. write ``server.properties`` and ``log4j2.properties``;
3. format the log dir once (``kafka.tools.StorageTool format`` with the cluster id of
   :data:`CLUSTER_ID_FILE`); an existing ``meta.properties`` means it was formatted;
4. spawn ``java ... kafka.Kafka server.properties`` in its own session;
5. poll :meth:`Broker.probe` (ApiVersions, then a Metadata request listing this broker:
   it serves metadata and creates topics) until it answers, the JVM dies or the timeout;
6. record the ports in ``listeners.json`` and the state file.

Durable: ``skewlab down`` (SIGTERM: a clean shutdown) then ``skewlab up`` keeps every
topic, record and committed offset. Kafka's default retention (7 days) still applies.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import socket
import struct
import subprocess
import uuid
from base64 import urlsafe_b64encode
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from skewlab.errors import ConfigError
from skewlab.jars import jar_dir
from skewlab.services.datadir import DataDir, ServiceState
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

MAIN_CLASS = "kafka.Kafka"
"""The broker's main class: also what identifies its process (against pid reuse)."""
FORMAT_CLASS = "kafka.tools.StorageTool"
JVM_OPTIONS: tuple[str, ...] = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
)
"""A small one-node JVM. C1 only (``TieredStopAtLevel=1``) halves the start-up on two
busy cores (docs/real-stack.md, "The embedded broker"); ``$SKEWLAB_BROKER_JVM_OPTS``
is appended (a later flag wins)."""
JVM_OPTS_ENV = "SKEWLAB_BROKER_JVM_OPTS"

ONE_NODE_SETTINGS: dict[str, str] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "4",
}
"""Settings a single node needs (internal topics of replication factor 1, no wait for a
group's first members) plus ``auto.create.topics.enable=false``: topics are made only by
``KafkaClient.create_topic`` with their partition count, so a misspelt or deleted topic
is an error, never a new one-partition topic."""

CLASS_ARCHIVE = "kafka-classes.jsa"
"""The broker's class-data archive (AppCDS), in the jar folder beside the jars it was made
from: the classes a broker loads at start, mapped instead of read from 46 jars. About
2 s of a 6 s start on two busy cores (docs/real-stack.md). The first broker started
without one writes it when it stops; a folder that is not writable just has none."""

CLUSTER_ID_FILE = "cluster.id"
LISTENERS_FILE = "listeners.json"
LOG_DIR = "kraft"

LOG4J2 = """\
status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = info
logger.state.name = state.change.logger
logger.state.level = warn
"""
"""Warnings and errors only, plus the one "Kafka Server started" line of each start."""

_API_VERSIONS = 18
_METADATA = 3
_METADATA_VERSION = 4
"""Metadata v4: the oldest version Kafka 4 still serves; not a flexible version."""


# ---------------------------------------------------------------------- discovery


def java_executable() -> Path:
    """``$JAVA_HOME/bin/java`` if it exists, else ``java`` on the PATH."""
    home = os.environ.get("JAVA_HOME", "").strip()
    if home and (Path(home) / "bin" / "java").is_file():
        return Path(home) / "bin" / "java"
    found = shutil.which("java")
    if found is None:
        raise BinaryNotFoundError("java not found on the PATH (the broker needs Java 17+)")
    return Path(found)


def kafka_jars() -> Path:
    """The folder of the broker's jars; :class:`BinaryNotFoundError` (one line) if missing.

    The folder is :func:`skewlab.jars.jar_dir` ``("broker")``; it must hold Kafka itself
    (``kafka_2.13-*.jar``), not just any jar.
    """
    try:
        folder = jar_dir("broker")
    except ConfigError as exc:
        raise BinaryNotFoundError(str(exc)) from exc
    if not any(folder.glob("kafka_2.13-*.jar")):
        raise BinaryNotFoundError(
            f"no Apache Kafka jar (kafka_2.13-*.jar) in {folder}: run `bash infra/setup.sh`"
        )
    return folder


# ------------------------------------------------------------------------- config


def server_properties(
    host: str, port: int, controller_port: int, log_dir: Path, node_id: int = 1
) -> dict[str, str]:
    """The broker's settings: one KRaft node acting as broker and controller.

    Clients use ``PLAINTEXT://host:port``; the controller quorum (this node alone) listens on
    ``CONTROLLER://host:controller_port``. Then :data:`ONE_NODE_SETTINGS`.
    """
    if port == controller_port:
        raise ConfigError(f"broker and controller ports must differ, both are {port}")
    return {
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "controller.quorum.voters": f"{node_id}@{host}:{controller_port}",
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        **ONE_NODE_SETTINGS,
    }


def render_properties(settings: dict[str, str]) -> str:
    """``key=value`` lines in a Java properties file (backslashes and ``:`` escaped)."""
    lines = ["# written by skewlab at every broker start; edits are overwritten"]
    for key, value in settings.items():
        escaped = value.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"{key}={escaped}")
    return "\n".join(lines) + "\n"


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (22 chars)."""
    return urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def java_command(
    java: Path,
    jars: Path,
    main: str,
    *args: str,
    options: Sequence[str] = (),
    **props: str,
) -> list[str]:
    """``java <JVM_OPTIONS> <options> [$SKEWLAB_BROKER_JVM_OPTS] -Dkey=value... -cp 'jars/*'
    main args``.

    ``props`` become system properties (``log4j2_configurationFile`` is
    ``-Dlog4j2.configurationFile``: underscores become dots).
    """
    extra = os.environ.get(JVM_OPTS_ENV, "").split()
    defs = [f"-D{key.replace('_', '.')}={value}" for key, value in props.items()]
    return [str(java), *JVM_OPTIONS, *options, *extra, *defs, "-cp", f"{jars}/*", main, *args]


def class_archive_options(jars: Path, dump: Path | None) -> list[str]:
    """The JVM options of the broker's class-data archive (:data:`CLASS_ARCHIVE`).

    Use the archive when the jar folder has one; else, with ``dump``, write one there
    when the JVM exits (:meth:`Broker.stop` checks it and moves it into place); else none.
    """
    archive = jars / CLASS_ARCHIVE
    if archive.is_file():
        return [f"-XX:SharedArchiveFile={archive}"]
    if dump is not None:
        return [f"-XX:ArchiveClassesAtExit={dump}"]
    return []


def archive_usable(java: Path, jars: Path, archive: Path) -> bool:
    """True if a JVM with ``jars`` on its class path maps ``archive`` (``-Xshare:on`` makes
    one that cannot fail; a dump cut short by a kill cannot be mapped)."""
    argv = [
        str(java),
        f"-XX:SharedArchiveFile={archive}",
        "-Xshare:on",
        "-cp",
        f"{jars}/*",
        "-version",
    ]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


# ------------------------------------------------------------------------- probes


def _request(host: str, port: int, api: int, version: int, body: bytes, timeout_s: float) -> bytes:
    """One request (header v1) and the response after its size and correlation id."""
    client_id = b"skewlab-health"
    correlation = 0x5E3A
    header = struct.pack(">hhih", api, version, correlation, len(client_id)) + client_id
    payload = header + body
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        head = _recv_exact(sock, 8)
        size, got = struct.unpack(">ii", head)
        if got != correlation or not 4 <= size <= 1 << 24:
            raise OSError("not a Kafka response")
        return _recv_exact(sock, size - 4)


def kafka_api_versions_ok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True if ``host:port`` answers a Kafka ApiVersions v0 request without error.

    Request: int32 size, int16 api_key=18, int16 api_version=0, int32 correlation id,
    int16-length client id. Response: int32 size, int32 correlation id, int16 error code, ...
    """
    try:
        rest = _request(host, port, _API_VERSIONS, 0, b"", timeout_s)
    except OSError:
        return False
    return len(rest) >= 2 and struct.unpack(">h", rest[:2])[0] == 0


def kafka_metadata_brokers(host: str, port: int, timeout_s: float = 1.0) -> int:
    """How many brokers a Metadata v4 request (no topics) lists; 0 if none or no answer.

    A KRaft broker lists itself only once it is registered and unfenced, that is, once
    it can serve metadata and create topics. Response v4: int32 throttle, then the
    brokers array (int32 count, ...).
    """
    body = struct.pack(">i?", 0, False)
    try:
        rest = _request(host, port, _METADATA, _METADATA_VERSION, body, timeout_s)
    except OSError:
        return 0
    if len(rest) < 8:
        return 0
    return max(0, int(struct.unpack(">i", rest[4:8])[0]))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed mid-response")
        buf += chunk
    return buf


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
        """``java ... kafka.Kafka HOME/broker/server.properties`` (after :meth:`prepare`).

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
        """ApiVersions answers and Metadata lists a broker (it serves metadata)."""
        return kafka_api_versions_ok(host, port) and kafka_metadata_brokers(host, port) > 0

    def state_extra(self) -> dict[str, Any]:
        """Record the controller port, the log dir, the cluster id and where the JVM writes
        its class-data archive at exit (if it does)."""
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

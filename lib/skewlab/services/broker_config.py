"""What the embedded broker runs: its JVM command, its jars, its settings and its
class-data archive (:mod:`skewlab.services.broker` starts it).

Pure functions and constants: nothing here starts a process except
:func:`archive_usable`, which asks a JVM whether it can map an archive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from base64 import urlsafe_b64encode
from collections.abc import Sequence
from pathlib import Path
from uuid import uuid4

from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError
from skewlab.jars import jar_dir
from skewlab.services.process import BinaryNotFoundError

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
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (22 chars),
    never starting with ``-`` (``kafka-storage format --cluster-id -x...`` reads that as a
    flag; Kafka's own ``Uuid.randomUuid`` draws again in that case, so do we)."""
    while True:
        cid = urlsafe_b64encode(uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


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
    extra = (env_settings().broker_jvm_opts or "").split()
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

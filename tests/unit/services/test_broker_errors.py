"""The broker's files and start errors that need no running broker: jars, config, ports, probes."""

from __future__ import annotations

import base64
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from skewlab.errors import ConfigError, SkewlabError
from skewlab.jars import JARS_ENV
from skewlab.services import (
    BinaryNotFoundError,
    Broker,
    PortInUseError,
    ServiceStartError,
    kafka_api_versions_ok,
    kafka_jars,
    kafka_metadata_brokers,
)
from skewlab.services.broker_config import (
    CLASS_ARCHIVE,
    JVM_OPTS_ENV,
    MAIN_CLASS,
    ONE_NODE_SETTINGS,
    archive_usable,
    class_archive_options,
    java_command,
    java_executable,
    new_cluster_id,
    render_properties,
    server_properties,
)
from skewlab.services.process import free_port, port_is_free, require_free_port

pytestmark = pytest.mark.unit


@pytest.fixture
def listening() -> Iterator[int]:
    """A loopback port some other socket is listening on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


@pytest.fixture
def fake_jars(tmp_path: Path) -> Path:
    """A jar folder that looks like setup's (the jars are empty files)."""
    folder = tmp_path / "jars" / "broker"
    folder.mkdir(parents=True)
    (folder / "kafka_2.13-4.1.1.jar").write_bytes(b"")
    return folder


def test_port_taken_is_a_one_line_error(listening: int, tmp_path: Path, fake_jars: Path) -> None:
    assert not port_is_free("127.0.0.1", listening)
    with pytest.raises(PortInUseError) as info:
        Broker(tmp_path, jars=fake_jars).start(port=listening, timeout_s=2)
    message = str(info.value)
    assert f"127.0.0.1:{listening}" in message and "\n" not in message
    assert isinstance(info.value, SkewlabError)
    assert Broker(tmp_path).state() is None  # nothing was started or recorded


def test_free_port_is_free() -> None:
    port = free_port()
    assert port_is_free("127.0.0.1", port)
    require_free_port("127.0.0.1", port)


def test_missing_jars_name_the_setup_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JARS_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(BinaryNotFoundError, match=r"infra/setup\.sh") as info:
        kafka_jars()
    assert "\n" not in str(info.value)
    with pytest.raises(BinaryNotFoundError, match=r"infra/setup\.sh"):
        Broker(tmp_path / "home").start(timeout_s=2)
    assert Broker(tmp_path / "home").state() is None


def test_a_jar_folder_without_kafka_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broker").mkdir()
    (tmp_path / "broker" / "slf4j-api-1.7.36.jar").write_bytes(b"")
    monkeypatch.setenv(JARS_ENV, str(tmp_path))
    with pytest.raises(BinaryNotFoundError, match=r"kafka_2\.13"):
        kafka_jars()
    with pytest.raises(BinaryNotFoundError, match=r"kafka_2\.13"):
        Broker(tmp_path / "home", jars=tmp_path / "broker").start(timeout_s=2)


def test_jars_are_found_from_the_env_var(fake_jars: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JARS_ENV, str(fake_jars.parent))
    assert kafka_jars() == fake_jars


def test_setup_jars_of_this_checkout_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the env var: ``<repo>/.jars/broker`` (infra/setup.sh has run)."""
    monkeypatch.delenv(JARS_ENV, raising=False)
    folder = kafka_jars()
    assert folder.parts[-2:] == (".jars", "broker")
    assert (folder.parent.parent / "infra" / "maven" / "broker" / "pom.xml").is_file()


def test_server_properties_make_one_kraft_node(tmp_path: Path) -> None:
    props = server_properties("127.0.0.1", 9092, 9093, tmp_path / "kraft")
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert props["log.dirs"] == str(tmp_path / "kraft")
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
    ):
        assert props[key] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["auto.create.topics.enable"] == "false"
    assert ONE_NODE_SETTINGS.items() <= props.items()
    with pytest.raises(ConfigError, match="differ"):
        server_properties("127.0.0.1", 9092, 9092, tmp_path)


def test_properties_render_as_key_value_lines(tmp_path: Path) -> None:
    text = render_properties({"a.b": "1", "log.dirs": "C:\\x"})
    lines = text.splitlines()
    assert lines[0].startswith("#") and lines[1:] == ["a.b=1", "log.dirs=C:\\\\x"]


def test_cluster_ids_look_like_kafkas() -> None:
    ids = {new_cluster_id() for _ in range(20)}
    assert len(ids) == 20
    assert all(len(i) == 22 and "=" not in i for i in ids)


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kafka-storage format --cluster-id -abc`` reads the id as a flag (1 in 64 draws)."""
    import skewlab.services.broker_config as bc

    first = uuid.UUID(bytes=b"\xf8" + bytes(15))  # base64url of 0xf8... starts with "-"
    draws = iter([first, uuid.UUID(int=1)])
    monkeypatch.setattr(bc, "uuid4", lambda: next(draws))
    assert base64.urlsafe_b64encode(first.bytes).decode().startswith("-")
    cid = bc.new_cluster_id()
    assert not cid.startswith("-") and len(cid) == 22


def test_java_command_names_the_main_class_and_takes_extra_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(JVM_OPTS_ENV, "-Xmx1g -XX:+UseG1GC")
    argv = java_command(Path("/j/java"), Path("/jars"), MAIN_CLASS, "s.properties", a_b="x")
    assert argv[0] == "/j/java" and argv[-2:] == [MAIN_CLASS, "s.properties"]
    assert argv[argv.index("-cp") + 1] == "/jars/*"
    assert "-Da.b=x" in argv
    assert argv.index("-Xmx1g") > argv.index("-Xmx512m")  # the later flag wins


def test_cluster_id_and_listeners_are_kept_in_the_data_dir(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    cid = broker.cluster_id()
    assert Broker(tmp_path).cluster_id() == cid
    assert broker.recorded_listeners() is None
    (broker.directory / "listeners.json").write_text("{broken")
    assert broker.recorded_listeners() is None


def test_a_recorded_port_that_is_taken_is_a_one_line_error(
    tmp_path: Path, listening: int, fake_jars: Path
) -> None:
    """A restart uses the first start's ports; one taken meanwhile is said in one line."""
    broker = Broker(tmp_path, jars=fake_jars)
    (broker.directory / "listeners.json").write_text(
        f'{{"host": "127.0.0.1", "port": {listening}, "controller_port": {free_port()}}}'
    )
    with pytest.raises(PortInUseError, match=f"127.0.0.1:{listening}") as info:
        broker.start(timeout_s=2)
    assert "\n" not in str(info.value)


def test_a_log_tail_becomes_the_right_error(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    bind = [
        "[2026-11-28 06:22:29,128] ERROR [KafkaRaftServer nodeId=1] Fatal error",
        "org.apache.kafka.common.KafkaException: Socket server failed to bind to "
        "127.0.0.1:9092: Address already in use.",
    ]
    assert isinstance(broker.startup_failure(bind, "127.0.0.1", 9092), PortInUseError)
    other = ["starting", "[x] ERROR Exiting Kafka due to fatal exception (kafka.Kafka$)", "bye"]
    err = broker.startup_failure(other, "127.0.0.1", 9092)
    assert isinstance(err, ServiceStartError) and "Exiting Kafka" in str(err)


def test_health_probes_reject_a_non_kafka_listener(listening: int) -> None:
    # the socket accepts but never answers: not a Kafka broker
    assert not kafka_api_versions_ok("127.0.0.1", listening, timeout_s=0.2)
    assert not kafka_api_versions_ok("127.0.0.1", free_port(), timeout_s=0.2)
    assert kafka_metadata_brokers("127.0.0.1", listening, timeout_s=0.2) == 0
    assert kafka_metadata_brokers("127.0.0.1", free_port(), timeout_s=0.2) == 0


def test_class_archive_is_used_when_there_and_written_otherwise(fake_jars: Path) -> None:
    dump = fake_jars / ".dump.tmp"
    assert class_archive_options(fake_jars, None) == []
    assert class_archive_options(fake_jars, dump) == [f"-XX:ArchiveClassesAtExit={dump}"]
    (fake_jars / CLASS_ARCHIVE).write_bytes(b"")
    archive = fake_jars / CLASS_ARCHIVE
    assert class_archive_options(fake_jars, dump) == [f"-XX:SharedArchiveFile={archive}"]


def test_a_broken_class_archive_is_not_usable(fake_jars: Path) -> None:
    """What a dump cut short by a kill leaves is never moved into place."""
    broken = fake_jars / "broken.jsa"
    broken.write_bytes(b"\0" * 4096)
    assert not archive_usable(java_executable(), fake_jars, broken)

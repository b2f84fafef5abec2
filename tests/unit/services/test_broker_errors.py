"""Broker start errors that need no running broker: port taken, binary missing, log parsing."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from skewlab.errors import SkewlabError
from skewlab.services import (
    BinaryNotFoundError,
    Broker,
    PortInUseError,
    ServiceStartError,
    find_tansu_binary,
    kafka_api_versions_ok,
)
from skewlab.services.broker import TANSU_BIN_ENV
from skewlab.services.process import free_port, port_is_free, require_free_port

pytestmark = pytest.mark.unit


@pytest.fixture
def listening() -> Iterator[int]:
    """A loopback port some other socket is listening on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


def test_port_taken_is_a_one_line_error(listening: int, tmp_path: Path) -> None:
    assert not port_is_free("127.0.0.1", listening)
    with pytest.raises(PortInUseError) as info:
        Broker(tmp_path).start(port=listening, timeout_s=2)
    message = str(info.value)
    assert f"127.0.0.1:{listening}" in message and "\n" not in message
    assert isinstance(info.value, SkewlabError)
    # nothing was started or recorded
    assert Broker(tmp_path).state() is None


def test_free_port_is_free() -> None:
    port = free_port()
    assert port_is_free("127.0.0.1", port)
    require_free_port("127.0.0.1", port)


def test_missing_binary_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(BinaryNotFoundError, match="not found") as info:
        Broker(tmp_path, binary=tmp_path / "no-such-tansu").start(timeout_s=2)
    assert "\n" not in str(info.value)
    assert Broker(tmp_path).state() is None


def test_non_executable_binary_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with pytest.raises(BinaryNotFoundError, match="not executable"):
        Broker(tmp_path, binary=fake).start(timeout_s=2)


def test_env_override_and_missing_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TANSU_BIN_ENV, str(tmp_path / "gone"))
    with pytest.raises(BinaryNotFoundError, match="gone"):
        find_tansu_binary()
    monkeypatch.delenv(TANSU_BIN_ENV)
    with pytest.raises(BinaryNotFoundError, match="not installed"):
        find_tansu_binary(package="skewlab_no_such_package")


def test_installed_binary_is_found_and_executable() -> None:
    path = find_tansu_binary()
    assert path.name == "tansu" and path.parent.name == "bin"
    assert os.access(path, os.X_OK)


def test_process_that_dies_at_start_is_reported(tmp_path: Path) -> None:
    """A 'broker' that prints tansu's bind panic and exits 0 becomes PortInUseError."""
    fake = tmp_path / "tansu"
    fake.write_text(
        "#!/bin/sh\n"
        "echo 'tansu broker 0.6.0'\n"
        "printf '\\033[31mERROR\\033[0m err=Io(Os { code: 98, kind: AddrInUse })\\n'\n"
        "exit 0\n"
    )
    fake.chmod(0o755)
    with pytest.raises(PortInUseError):
        Broker(tmp_path, binary=fake).start(timeout_s=5)

    fake.write_text("#!/bin/sh\necho 'storage engine refused' >&2\nexit 3\n")
    with pytest.raises(ServiceStartError, match="storage engine refused"):
        Broker(tmp_path, binary=fake).start(timeout_s=5)
    assert Broker(tmp_path).state() is None


def test_health_probe_rejects_a_non_kafka_listener(listening: int) -> None:
    # the socket accepts but never answers: not a Kafka broker
    assert not kafka_api_versions_ok("127.0.0.1", listening, timeout_s=0.2)
    assert not kafka_api_versions_ok("127.0.0.1", free_port(), timeout_s=0.2)

"""The Service base and data directory, driven with a tiny TCP echo service (no broker)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from filelock import FileLock, Timeout

from skewlab.errors import ConfigError, UnknownNameError
from skewlab.services import (
    HOME_ENV,
    SERVICES,
    DataDir,
    Service,
    ServiceError,
    ServiceState,
    get_service,
    resolve_home,
)
from skewlab.services.process import pid_alive, tcp_connectable

pytestmark = pytest.mark.unit

SERVER = (
    "import socket,sys,time\n"
    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8)\n"
    "print('skewlab-echo listening', flush=True)\n"
    "while True:\n"
    "    c,_=s.accept(); c.close()\n"
)


class EchoService(Service):
    """A Python one-liner that accepts TCP connections: enough to drive the lifecycle."""

    name: ClassVar[str] = "echo"
    program: ClassVar[str] = "skewlab-echo"
    start_timeout_s: ClassVar[float] = 10.0

    def executable(self) -> Path:
        return Path(sys.executable)

    def command(self, executable: Path, host: str, port: int) -> list[str]:
        return [str(executable), "-c", SERVER, host, str(port), "skewlab-echo"]

    def url(self, host: str, port: int) -> str:
        return f"tcp://{host}:{port}"

    def probe(self, host: str, port: int) -> bool:
        return tcp_connectable(host, port, 0.2)


@pytest.fixture
def echo(tmp_path: Path):
    service = EchoService(tmp_path)
    yield service
    service.stop()


def test_start_is_idempotent_and_stop_cleans_up(echo: EchoService) -> None:
    first = echo.start()
    assert echo.health()
    assert os.getsid(first.pid) == first.pid  # own session: outlives its starter
    again = echo.start()
    assert again == first
    assert echo.datadir.pid_file("echo").read_text().strip() == str(first.pid)
    assert "listening" in Path(first.log).read_text()
    status = echo.status()
    assert status.running and status.healthy and str(first.pid) in status.describe()

    assert echo.stop() is True
    assert not pid_alive(first.pid)
    assert echo.state() is None and not echo.health()
    assert echo.status().describe() == "echo: stopped"
    assert echo.stop() is False


def test_start_on_another_port_while_running_is_refused(echo: EchoService) -> None:
    state = echo.start()
    with pytest.raises(ServiceError, match=f"already runs on port {state.port}"):
        echo.start(port=state.port + 1 if state.port < 65535 else state.port - 1)


def test_stale_state_is_forgotten_and_a_stranger_is_never_signalled(
    echo: EchoService, tmp_path: Path
) -> None:
    # a state file whose pid is this test process (alive, but not our program)
    stale = ServiceState("echo", os.getpid(), "127.0.0.1", 1, "tcp://127.0.0.1:1", "x.log")
    echo.datadir.write_state(stale)
    assert not echo.status().running
    fresh = echo.start()
    assert fresh.pid != os.getpid() and echo.health()
    echo.datadir.write_state(stale)
    assert echo.stop() is False  # pid not ours: left alone
    assert pid_alive(os.getpid())
    echo.datadir.write_state(fresh)  # hand the real one back to the fixture's stop()


def test_home_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "from-env"))
    assert resolve_home() == (tmp_path / "from-env").resolve()
    assert resolve_home(tmp_path / "arg") == (tmp_path / "arg").resolve()
    monkeypatch.delenv(HOME_ENV)
    monkeypatch.chdir(tmp_path)
    assert resolve_home() == (tmp_path / ".skewlab").resolve()
    with pytest.raises(ConfigError):
        resolve_home("")


def test_state_round_trip_and_malformed_file(tmp_path: Path) -> None:
    dd = DataDir(tmp_path)
    state = ServiceState(
        "broker", 42, "127.0.0.1", 9092, "127.0.0.1:9092", "l", ("a", "b"), {"k": 1}
    )
    dd.write_state(state)
    assert dd.read_state("broker") == state
    dd.state_file("broker").write_text("{not json")
    assert dd.read_state("broker") is None
    dd.clear_state("broker")
    assert not dd.pid_file("broker").exists() and not dd.state_file("broker").exists()
    with pytest.raises(ConfigError):
        ServiceState("broker", 0, "h", 1, "u", "l")
    with pytest.raises(ConfigError):
        dd.service_dir("../escape")


def test_registry_lists_valid_services(tmp_path: Path) -> None:
    assert get_service("BROKER", tmp_path).name == "broker"
    with pytest.raises(UnknownNameError, match=", ".join(sorted(SERVICES))):
        get_service("zookeeper", tmp_path)


def test_the_service_lock_excludes_another_holder_until_released(tmp_path: Path) -> None:
    datadir = DataDir(tmp_path)
    path = datadir.service_dir("echo") / "lock"
    with datadir.lock("echo"), pytest.raises(Timeout):
        FileLock(path, timeout=0).acquire()
    with FileLock(path, timeout=0):
        pass
    assert path.exists()

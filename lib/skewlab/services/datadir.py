"""The one data directory of the embedded services.

Layout (``HOME`` is the argument, else ``$SKEWLAB_HOME``, else ``./.skewlab``)::

    HOME/
      broker/            one directory per service
        service.pid      the pid of the running process (plain text)
        state.json       what a client needs: pid, host, port, url, log, command
        service.log      stdout + stderr of the process (appended across runs)
        lock             filelock's lock file that serialises start/stop
      mlflow/ ...        later services get the same shape (and keep their own files here)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError

log = logging.getLogger(__name__)

HOME_ENV = "SKEWLAB_HOME"
DEFAULT_HOME = ".skewlab"


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The data directory: ``home`` if given, else ``$SKEWLAB_HOME``, else ``./.skewlab``."""
    if home is not None and str(home).strip() == "":
        raise ConfigError("data directory must not be an empty path")
    raw = home if home is not None else env_settings().home or DEFAULT_HOME
    return Path(raw).expanduser().resolve()


@dataclass(frozen=True, slots=True)
class ServiceState:
    """What a running service left behind for its clients (the ``state.json`` file).

    Invariant: ``pid`` > 0 and ``0 < port < 65536``; ``url`` is how clients reach it
    (for the broker the bootstrap string ``host:port``).
    """

    service: str
    pid: int
    host: str
    port: int
    url: str
    log: str
    command: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pid <= 0:
            raise ConfigError(f"pid must be positive, got {self.pid}")
        if not 0 < self.port < 65536:
            raise ConfigError(f"port must be in 1..65535, got {self.port}")

    def to_json(self) -> str:
        """Serialise (the inverse of :meth:`from_json`)."""
        data = asdict(self)
        data["command"] = list(self.command)
        data["extra"] = dict(self.extra)
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ServiceState:
        """Parse a ``state.json``; :class:`ConfigError` if it is not one."""
        try:
            data = json.loads(text)
            return cls(
                service=str(data["service"]),
                pid=int(data["pid"]),
                host=str(data["host"]),
                port=int(data["port"]),
                url=str(data["url"]),
                log=str(data["log"]),
                command=tuple(str(c) for c in data.get("command", ())),
                extra=dict(data.get("extra", {})),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"malformed service state file: {exc}") from exc


class DataDir:
    """Paths and small atomic files of the services under one home directory."""

    def __init__(self, home: str | os.PathLike[str] | None = None) -> None:
        self.root = resolve_home(home)

    def __repr__(self) -> str:
        return f"DataDir({str(self.root)!r})"

    def service_dir(self, service: str) -> Path:
        """``HOME/<service>/``, created on demand."""
        if not service or "/" in service or service.startswith("."):
            raise ConfigError(f"service name must be a plain name, got {service!r}")
        path = self.root / service
        path.mkdir(parents=True, exist_ok=True)
        return path

    def pid_file(self, service: str) -> Path:
        """The pid file of ``service``."""
        return self.service_dir(service) / "service.pid"

    def state_file(self, service: str) -> Path:
        """The JSON state file of ``service``."""
        return self.service_dir(service) / "state.json"

    def log_file(self, service: str) -> Path:
        """The log (stdout and stderr) of ``service``."""
        return self.service_dir(service) / "service.log"

    @contextlib.contextmanager
    def lock(self, service: str) -> Iterator[None]:
        """Hold an exclusive lock on ``service`` (start and stop never interleave)."""
        with FileLock(self.service_dir(service) / "lock", preserve_lock_file=True):
            yield

    def read_state(self, service: str) -> ServiceState | None:
        """The recorded state of ``service`` or None (no file, or an unreadable one)."""
        path = self.state_file(service)
        try:
            return ServiceState.from_json(path.read_text())
        except FileNotFoundError:
            return None
        except ConfigError as exc:
            log.warning("ignoring %s: %s", path, exc)
            return None

    def write_state(self, state: ServiceState) -> None:
        """Write the state and pid files atomically (write to a temp file, then rename)."""
        _atomic_write(self.state_file(state.service), state.to_json() + "\n")
        _atomic_write(self.pid_file(state.service), f"{state.pid}\n")

    def clear_state(self, service: str) -> None:
        """Forget ``service`` (remove its state and pid files; keep its log)."""
        for path in (self.state_file(service), self.pid_file(service)):
            path.unlink(missing_ok=True)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)

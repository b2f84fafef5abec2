"""An MLflow tracking server on loopback, its store and artifacts under the data directory.

``mlflow server`` (the executable next to this Python) with a SQLite backend store
(``HOME/mlflow-server/mlflow.db``) and proxied artifacts (``HOME/mlflow-server/artifacts``):
clients need only ``MLFLOW_TRACKING_URI=http://HOST:PORT``. Start steps
(:class:`~skewlab.services.process.Service`'s lifecycle): spawn the server in its own
session, poll ``GET /health`` until it says OK, record the state; stop signals the whole
process group (the server and its web workers).
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, ClassVar

from skewlab.services.process import BinaryNotFoundError, Service

SERVER_WORKERS = 1
"""Web workers of the server: one is plenty for one machine's runs (2 shared cores)."""


def mlflow_executable() -> Path:
    """The ``mlflow`` console script of this Python's environment."""
    exe = Path(sys.executable).with_name("mlflow")
    if not os.access(exe, os.X_OK):
        raise BinaryNotFoundError(f"no mlflow executable at {exe}: run `bash infra/setup.sh`")
    return exe


def http_ok(url: str, timeout_s: float = 2.0) -> bool:
    """True if ``GET url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError, ValueError):
        return False


class MlflowServer(Service):
    """``mlflow server`` on ``http://HOST:PORT`` (SQLite store, proxied artifact dir)."""

    name: ClassVar[str] = "mlflow-server"
    program: ClassVar[str] = "mlflow"
    start_timeout_s: ClassVar[float] = 180.0
    """Only a bound: readiness is polled (its first start migrates the SQLite store)."""

    @property
    def directory(self) -> Path:
        """``HOME/mlflow-server``."""
        return self.datadir.service_dir(self.name)

    @property
    def store_uri(self) -> str:
        """The backend store: ``sqlite:///HOME/mlflow-server/mlflow.db``."""
        return f"sqlite:///{self.directory / 'mlflow.db'}"

    @property
    def artifacts(self) -> Path:
        """Where the server keeps the artifacts clients upload through it."""
        return self.directory / "artifacts"

    def executable(self) -> Path:
        """The ``mlflow`` console script."""
        return mlflow_executable()

    def command(self, executable: Path, host: str, port: int) -> list[str]:
        """``mlflow server --backend-store-uri .. --artifacts-destination .. --host --port``."""
        self.artifacts.mkdir(parents=True, exist_ok=True)
        return [
            str(executable),
            "server",
            "--backend-store-uri",
            self.store_uri,
            "--artifacts-destination",
            str(self.artifacts),
            "--host",
            host,
            "--port",
            str(port),
            "--workers",
            str(SERVER_WORKERS),
        ]

    def url(self, host: str, port: int) -> str:
        """The tracking URI."""
        return f"http://{host}:{port}"

    def probe(self, host: str, port: int) -> bool:
        """``GET /health`` answers 200."""
        return http_ok(f"http://{host}:{port}/health")

    def state_extra(self) -> dict[str, Any]:
        """The store URI and the artifact dir."""
        return {"store": self.store_uri, "artifacts": str(self.artifacts)}

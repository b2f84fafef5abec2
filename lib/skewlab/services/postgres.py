"""PostgreSQL from Debian's package, on loopback, its cluster under the data directory.

Airflow's metadata DB on a real cluster is PostgreSQL, not SQLite. PostgreSQL refuses to
run as root, so as root every server command runs as the ``postgres`` user (``runuser``).
Start steps (:meth:`Postgres.prepare`, then :class:`~skewlab.services.process.Service`'s
lifecycle, then :meth:`Postgres.start`):

1. find the newest ``/usr/lib/postgresql/*/bin`` (missing: ``bash infra/postgres.sh``);
2. ``HOME/postgres/data`` and ``run/`` (socket dir) owned by ``postgres``, reachable by it;
3. ``initdb`` once (local socket: trust; TCP: scram-sha-256 passwords);
4. spawn ``postgres -D data -h 127.0.0.1 -p PORT -k run``; poll ``pg_isready``;
5. create the ``skewlab`` role (password in ``HOME/postgres/skewlab.password``, mode 600)
   and its databases (:data:`DATABASES`) once. Stop: ``pg_ctl stop -m fast``.
"""

from __future__ import annotations

import logging
import os
import pwd
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from skewlab.services.datadir import ServiceState
from skewlab.services.process import LOOPBACK, BinaryNotFoundError, Service, ServiceStartError

log = logging.getLogger(__name__)

OS_USER = "postgres"
ROLE = "skewlab"
DATABASES = ("airflow",)
INSTALL_HINT = "run `bash infra/postgres.sh` (it apt-gets Debian's postgresql)"


def pg_bin_dir(root: Path = Path("/usr/lib/postgresql")) -> Path:
    """The ``bin`` dir of the newest installed PostgreSQL major version."""
    found = sorted(
        (p for p in root.glob("*/bin") if (p / "postgres").is_file()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not found:
        raise BinaryNotFoundError(
            f"PostgreSQL is not installed (no {root}/*/bin/postgres): {INSTALL_HINT}"
        )
    return found[-1]


def as_os_user(argv: list[str], root: bool | None = None) -> list[str]:
    """``argv`` as the ``postgres`` user (``runuser``) when we are root, else unchanged."""
    if root is None:
        root = os.geteuid() == 0
    return ["runuser", "-u", OS_USER, "--", *argv] if root else list(argv)


def sql_literal(text: str) -> str:
    """``text`` as a quoted SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


class Postgres(Service):
    """A PostgreSQL cluster at ``postgresql://HOST:PORT`` with role ``skewlab``."""

    name: ClassVar[str] = "postgres"
    program: ClassVar[str] = "postgres"
    start_timeout_s: ClassVar[float] = 60.0

    @property
    def directory(self) -> Path:
        """``HOME/postgres``."""
        return self.datadir.service_dir(self.name)

    @property
    def data(self) -> Path:
        """The database cluster (``initdb``'s directory)."""
        return self.directory / "data"

    @property
    def socket_dir(self) -> Path:
        """The Unix socket dir (the ``postgres`` superuser connects through it)."""
        return self.directory / "run"

    def password(self) -> str:
        """The ``skewlab`` role's password, made once (mode 600)."""
        path = self.directory / f"{ROLE}.password"
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(18) + "\n")
        return path.read_text().strip()

    def sqlalchemy_url(self, database: str, driver: str = "psycopg2") -> str:
        """``postgresql+DRIVER://skewlab:...@HOST:PORT/database`` of the running server."""
        st = self.state()
        if st is None:
            raise ServiceStartError("postgres is not running")
        return f"postgresql+{driver}://{ROLE}:{self.password()}@{st.host}:{st.port}/{database}"

    def executable(self) -> Path:
        """Step 1: ``postgres`` of the newest installed version."""
        return pg_bin_dir() / "postgres"

    def _run(self, argv: list[str], what: str) -> str:
        done = subprocess.run(as_os_user(argv), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            raise ServiceStartError(f"{what} failed: {lines[-1] if lines else done.returncode}")
        return done.stdout

    def prepare(self, executable: Path, host: str, port: int) -> None:
        """Steps 2-3: the directories (owned by ``postgres``) and ``initdb`` once."""
        for path in (self.data, self.socket_dir):
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o700)
        if os.geteuid() == 0:
            user = pwd.getpwnam(OS_USER)
            for path in (self.data, self.socket_dir):
                os.chown(path, user.pw_uid, user.pw_gid)
            reach = subprocess.run(as_os_user(["test", "-w", str(self.data)]), check=False)
            if reach.returncode != 0:
                raise ServiceStartError(
                    f"the {OS_USER} user cannot reach {self.data}: give its parent "
                    f"directories o+x (chmod o+x DIR) or use a data dir under one it can reach"
                )
        if not (self.data / "PG_VERSION").exists():
            self._run(
                [
                    str(executable.with_name("initdb")),
                    "-D",
                    str(self.data),
                    "-U",
                    OS_USER,
                    "-E",
                    "UTF8",
                    "--auth-local=trust",
                    "--auth-host=scram-sha-256",
                ],
                f"initdb of {self.data}",
            )

    def command(self, executable: Path, host: str, port: int) -> list[str]:
        """``postgres -D data -h HOST -p PORT -k run`` (as ``postgres`` when root)."""
        return as_os_user(
            [
                str(executable),
                "-D",
                str(self.data),
                "-h",
                host,
                "-p",
                str(port),
                "-k",
                str(self.socket_dir),
            ]
        )

    def url(self, host: str, port: int) -> str:
        """``postgresql://HOST:PORT``."""
        return f"postgresql://{host}:{port}"

    def probe(self, host: str, port: int) -> bool:
        """``pg_isready`` says the server accepts connections."""
        isready = pg_bin_dir() / "pg_isready"
        argv = [str(isready), "-q", "-h", host, "-p", str(port), "-t", "2"]
        return subprocess.run(argv, check=False).returncode == 0

    def psql(self, sql: str, port: int, database: str = "postgres") -> str:
        """Run ``sql`` as the superuser over the Unix socket; its unaligned output."""
        psql = shutil.which("psql") or str(pg_bin_dir() / "psql")
        argv = [psql, "-h", str(self.socket_dir), "-p", str(port), "-U", OS_USER]
        argv += ["-d", database, "-v", "ON_ERROR_STOP=1", "-tAc", sql]
        return self._run(argv, f"psql {sql.split()[0]}").strip()

    def start(
        self, port: int | None = None, host: str = LOOPBACK, timeout_s: float | None = None
    ) -> ServiceState:
        """Steps 4-5: start (or reuse) the server, then the role and databases once."""
        st = super().start(port=port, host=host, timeout_s=timeout_s)
        password = sql_literal(self.password())
        if not self.psql(f"SELECT 1 FROM pg_roles WHERE rolname = {sql_literal(ROLE)}", st.port):
            self.psql(f"CREATE ROLE {ROLE} LOGIN PASSWORD {password}", st.port)
        for db in DATABASES:
            if not self.psql(
                f"SELECT 1 FROM pg_database WHERE datname = {sql_literal(db)}", st.port
            ):
                self.psql(f"CREATE DATABASE {db} OWNER {ROLE}", st.port)
        return st

    def stop(self, timeout_s: float = 30.0) -> bool:
        """``pg_ctl stop -m fast`` (sessions end, data is flushed), then forget the state."""
        running = self.status().running
        if running:
            pg_ctl = str(pg_bin_dir() / "pg_ctl")
            argv = [pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "-t", str(int(timeout_s))]
            done = subprocess.run(as_os_user([*argv, "stop"]), capture_output=True, check=False)
            if done.returncode != 0:
                log.warning("pg_ctl stop failed (%s); signalling the server", done.returncode)
        return super().stop(timeout_s=timeout_s) or running

    def state_extra(self) -> dict[str, Any]:
        """The data and socket dirs."""
        return {"data": str(self.data), "socket_dir": str(self.socket_dir)}

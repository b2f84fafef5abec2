"""Process-backed services: spawn detached, poll readiness, stop, and the :class:`Service` base.

A service is one long-running local process (the Kafka broker's JVM) that outlives the Python
process that started it, so ``skewlab up`` can return. Subclasses say only *what* to run and
*how to tell it is healthy*; the base does the lifecycle: :meth:`Service.start` (its steps are
in its docstring) and :meth:`Service.stop`.
"""

from __future__ import annotations

import abc
import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from skewlab.errors import ConfigError, SkewlabError
from skewlab.services.datadir import DataDir, ServiceState

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


class ServiceError(SkewlabError):
    """A local service could not be started, probed or stopped."""


class PortInUseError(ServiceError):
    """The requested port is already bound by another process."""


class BinaryNotFoundError(ServiceError):
    """The program a service runs is missing or not executable."""


class ServiceStartError(ServiceError):
    """The process started but died or never became healthy."""


SPAWN_ATTEMPTS = 3
"""Spawns of a service on a free port of its choosing before a lost port race is an error."""


def spawn_retrying(name: str, attempts: int) -> Retrying:
    """The retry policy of a spawn: again at once on :class:`PortInUseError` (another process
    took the chosen free port meanwhile), at most ``attempts`` times, then that error itself."""

    def _note(state: Any) -> None:
        log.info(
            "%s: the port was taken meanwhile; retrying (attempt %d)", name, state.attempt_number
        )

    return Retrying(
        retry=retry_if_exception_type(PortInUseError),
        stop=stop_after_attempt(attempts),
        before_sleep=_note,
        reraise=True,
    )


# --------------------------------------------------------------------------- ports


def port_is_free(host: str, port: int) -> bool:
    """True if a listening socket could bind ``host:port`` right now.

    SO_REUSEADDR is set (as servers do) so sockets in TIME_WAIT do not count as taken.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_port(host: str = LOOPBACK) -> int:
    """A port the OS considers free on ``host`` (it may be taken again before use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def require_free_port(host: str, port: int) -> None:
    """Raise :class:`PortInUseError` (one line) if ``host:port`` is taken."""
    if not 0 < port < 65536:
        raise ConfigError(f"port must be in 1..65535, got {port}")
    if not port_is_free(host, port):
        raise PortInUseError(
            f"port {host}:{port} is already in use by another process; "
            "pick another port or stop that process"
        )


def tcp_connectable(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True if a TCP connection to ``host:port`` succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


# ----------------------------------------------------------------------- processes


def pid_alive(pid: int) -> bool:
    """True if ``pid`` is a live process: not a zombie, or a zombie main thread whose other
    threads still run (their sockets still open); reaps it if it is our dead child."""
    if pid <= 0:
        return False
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    if stat.rsplit(")", 1)[-1].split()[0] != "Z":
        return True
    try:  # a zombie main thread whose other threads still exit (a killed JVM) holds its ports
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def pid_runs(pid: int, program: str) -> bool:
    """True if ``pid`` is alive and its command line mentions ``program``.

    Guards against pid reuse: a stale pid file must never make us signal a stranger.
    Where ``/proc`` is missing the liveness check alone decides.
    """
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return program.encode() in cmdline


def spawn_detached(
    argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session (it survives us) with output appended to ``log_path``."""
    with open(log_path, "ab") as out:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=env,
        )


def terminate(pid: int, timeout_s: float = 10.0) -> bool:
    """SIGTERM the process (its whole group when it leads one), wait, then SIGKILL.

    Returns True if the process is gone afterwards.
    """
    if not pid_alive(pid):
        return True
    _signal(pid, signal.SIGTERM)
    if wait_until(lambda: not pid_alive(pid), timeout_s):
        return True
    log.warning("pid %d ignored SIGTERM for %.1f s; sending SIGKILL", pid, timeout_s)
    _signal(pid, signal.SIGKILL)
    return wait_until(lambda: not pid_alive(pid), 5.0)


def _signal(pid: int, sig: int) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def log_tail(path: Path, lines: int = 20, offset: int = 0) -> list[str]:
    """The last non-empty ``lines`` of a log file from byte ``offset`` on (empty if none)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


# ------------------------------------------------------------------------- service


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    """What :meth:`Service.status` reports: running, healthy, and the recorded state."""

    service: str
    running: bool
    healthy: bool
    state: ServiceState | None

    def describe(self) -> str:
        """One line for the CLI."""
        if self.state is None or not self.running:
            return f"{self.service}: stopped"
        health = "healthy" if self.healthy else "NOT healthy"
        return f"{self.service}: running pid={self.state.pid} url={self.state.url} ({health})"


class Service(abc.ABC):
    """A local process-backed service with idempotent ``start``, ``health``, ``stop``, ``status``.

    Subclasses set :attr:`name` (registry and directory name) and :attr:`program`
    (a string in the command line that identifies our process, against pid reuse)
    and implement :meth:`executable`, :meth:`command`, :meth:`url` and :meth:`probe`.
    The lifecycle is in the module docstring.
    """

    name: ClassVar[str]
    program: ClassVar[str]
    start_timeout_s: ClassVar[float] = 15.0

    def __init__(self, home: DataDir | str | os.PathLike[str] | None = None) -> None:
        self.datadir = home if isinstance(home, DataDir) else DataDir(home)

    # -- what subclasses provide

    @abc.abstractmethod
    def executable(self) -> Path:
        """The program to run; :class:`BinaryNotFoundError` if missing or not executable."""

    @abc.abstractmethod
    def command(self, executable: Path, host: str, port: int) -> list[str]:
        """The argv that runs the service on ``host:port``."""

    @abc.abstractmethod
    def url(self, host: str, port: int) -> str:
        """How clients reach the service (recorded in the state file)."""

    @abc.abstractmethod
    def probe(self, host: str, port: int) -> bool:
        """True if the service on ``host:port`` answers like it should."""

    def prepare(self, executable: Path, host: str, port: int) -> None:
        """Get ready to run on ``host:port`` (write config files, ...); nothing by default."""
        return None

    def startup_failure(self, tail: list[str], host: str, port: int) -> ServiceError:
        """Turn the log tail of a process that died at start into an error (override to refine)."""
        last = tail[-1] if tail else "no output"
        return ServiceStartError(f"{self.name} exited during start on {host}:{port}: {last}")

    # -- lifecycle

    def state(self) -> ServiceState | None:
        """The recorded state, whether or not the process still runs."""
        return self.datadir.read_state(self.name)

    def status(self) -> ServiceStatus:
        """Running (pid alive and ours) and healthy (answers the probe)."""
        st = self.state()
        running = st is not None and pid_runs(st.pid, self.program)
        healthy = bool(running and st is not None and self.probe(st.host, st.port))
        return ServiceStatus(self.name, running, healthy, st)

    def health(self) -> bool:
        """True if the recorded process runs and answers the probe."""
        return self.status().healthy

    def start(
        self, port: int | None = None, host: str = LOOPBACK, timeout_s: float | None = None
    ) -> ServiceState:
        """Start the service (or reuse the running healthy one) and return its state.

        In order, under the service's lock:

        1. read ``state.json``; if its pid runs our program, return it once it answers the
           health probe within the timeout (idempotent start); raise :class:`ServiceError` if
           it does not answer or if ``port`` differs from the port it runs on;
        2. otherwise forget the stale state, pick the port (``port``, which must be free, or
           a free port on ``host``, retried up to 3 times if taken meanwhile), run
           :meth:`prepare` and spawn the command in a new session with stdout/stderr
           appended to the service log;
        3. poll the health probe until it answers, the process dies (raise
           :meth:`startup_failure` of the log tail) or ``timeout_s`` passes (stop the process,
           raise :class:`ServiceStartError`);
        4. write ``state.json`` and the pid file.
        """
        timeout = self.start_timeout_s if timeout_s is None else timeout_s
        with self.datadir.lock(self.name):
            current = self.status()
            if current.running and current.state is not None:
                st = current.state
                if port is not None and port != st.port:
                    raise ServiceError(
                        f"{self.name} already runs on port {st.port} (pid {st.pid}); "
                        f"stop it before starting it on port {port}"
                    )
                if current.healthy or wait_until(lambda: self.probe(st.host, st.port), timeout):
                    log.info("%s already running: pid=%d url=%s", self.name, st.pid, st.url)
                    return st
                raise ServiceError(
                    f"{self.name} pid {st.pid} runs but does not answer on {st.url}; "
                    "stop it and start again"
                )
            if current.state is not None:
                log.info("%s: forgetting stale state (pid %d gone)", self.name, current.state.pid)
                self.datadir.clear_state(self.name)
            return self._spawn(port, host, timeout)

    def _spawn(self, port: int | None, host: str, timeout_s: float) -> ServiceState:
        exe = self.executable()
        for attempt in spawn_retrying(self.name, 1 if port is not None else SPAWN_ATTEMPTS):
            with attempt:
                chosen = port if port is not None else free_port(host)
                require_free_port(host, chosen)
                return self._spawn_once(exe, host, chosen, timeout_s)
        raise AssertionError("unreachable")

    def _spawn_once(self, exe: Path, host: str, port: int, timeout_s: float) -> ServiceState:
        self.prepare(exe, host, port)
        argv = self.command(exe, host, port)
        log_path = self.datadir.log_file(self.name)
        log_start = log_path.stat().st_size if log_path.exists() else 0
        log.info("starting %s: %s", self.name, " ".join(argv))
        proc = spawn_detached(argv, log_path)
        ready = wait_until(
            lambda: proc.poll() is not None or self.probe(host, port), timeout_s, 0.01
        )
        if proc.poll() is not None:
            raise self.startup_failure(log_tail(log_path, offset=log_start), host, port)
        if not ready:
            terminate(proc.pid)
            raise ServiceStartError(
                f"{self.name} did not answer on {host}:{port} within {timeout_s:.1f} s "
                f"(log: {log_path})"
            )
        state = ServiceState(
            service=self.name,
            pid=proc.pid,
            host=host,
            port=port,
            url=self.url(host, port),
            log=str(log_path),
            command=tuple(argv),
            extra=self.state_extra(),
        )
        self.datadir.write_state(state)
        log.info("%s ready: pid=%d url=%s", self.name, state.pid, state.url)
        return state

    def state_extra(self) -> dict[str, Any]:
        """Extra facts recorded in ``state.json`` (override to add some)."""
        return {}

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stop the recorded process if it runs; forget the state. True if it was running."""
        with self.datadir.lock(self.name):
            st = self.state()
            if st is None:
                return False
            was_running = pid_runs(st.pid, self.program)
            if was_running and not terminate(st.pid, timeout_s):
                raise ServiceError(f"{self.name} pid {st.pid} did not exit after SIGKILL")
            self.datadir.clear_state(self.name)
            log.info("%s stopped (was running: %s)", self.name, was_running)
            return was_running

"""``skewlab airflow``: Airflow standalone for this project, on SQLite, in the data dir.

Prints the commands (default), runs them in the foreground (``--run``: Ctrl-C stops the whole
process group) or stops every Airflow process of the data dir (``--stop``). :func:`plan` builds
the environment (``AIRFLOW_HOME=<data dir>/airflow``, this project's ``dags/``, loopback-only
servers, ``SKEWLAB_HOME``); :meth:`Plan.prepare` makes the secrets private. ``--run`` also
starts the data dir's route host, as ``skewlab run`` does, so each DAG run's route query
starts on its warm Spark session. What each setting is for: docs/cli.md, "skewlab airflow";
the stop: docs/airflow.md, "Start and stop".
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from skewlab.commands.services import start_route_host
from skewlab.errors import ConfigError
from skewlab.services.airflow import STOP_SEQUENCE, AirflowGroup, stop_airflow, stop_group
from skewlab.services.datadir import resolve_home

HELP = "print (or --run) the commands that start Airflow standalone with skewlab's DAGs"

DEFAULT_DAGS = Path(__file__).resolve().parents[3] / "dags"
"""``dags/`` of the checkout this package is installed from (editable install)."""

PARALLELISM = 4
"""LocalExecutor worker processes (Airflow's default, 32, is many idle processes on 2 cores;
the experiment DAG runs one experiment at a time)."""

PARSE_TIMEOUT_S = 120
"""``[core] dagbag_import_timeout`` (Airflow: 30 s). On a busy 2-core machine a DAG file's
import took 35 s; past the timeout the DAG vanishes from the UI until a parse succeeds."""
PARSE_INTERVAL_S = 60
"""``[dag_processor] min_file_process_interval`` (Airflow: 30 s): each re-parse costs CPU."""

PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"
USER = "admin"

LOOPBACK = "127.0.0.1"
REAL_AIRFLOW_ENV = "SKEWLAB_AIRFLOW"
"""The wrapper's target: the real ``airflow`` executable."""
NO_SERVE_LOGS = ("scheduler", "triggerer")
"""Components that start a log server on all interfaces unless told ``--skip-serve-logs``."""

_WRAPPER = """#!/bin/sh
# skewlab: Airflow components serve no logs over the network (see skewlab airflow --help)
real="${SKEWLAB_AIRFLOW:?SKEWLAB_AIRFLOW names the real airflow}"
case "$1" in
  scheduler|triggerer) exec "$real" "$@" --skip-serve-logs ;;
esac
exec "$real" "$@"
"""

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that make ``--run`` stop Airflow and exit (128 + the signal), like Ctrl-C."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``airflow``'s options to its subparser."""
    parser.add_argument(
        "--home", default=None, help="data directory (default $SKEWLAB_HOME or .skewlab)"
    )
    parser.add_argument("--dags", default=None, help=f"dags folder (default {DEFAULT_DAGS})")
    parser.add_argument("--host", default="127.0.0.1", help="API server address (default local)")
    parser.add_argument("--port", type=int, default=8080, help="API server port (default 8080)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--run", action="store_true", help="start Airflow instead of printing")
    mode.add_argument(
        "--stop",
        action="store_true",
        help="stop every Airflow process of the data dir (from any shell) instead of printing",
    )
    parser.add_argument(
        "--airflow",
        default=None,
        metavar="PATH",
        help="the airflow executable (default: the one next to this Python)",
    )
    parser.add_argument(
        "--serve-logs",
        action="store_true",
        help="keep Airflow's task log servers (all interfaces, ports 8793/8794); default off",
    )


@dataclass(frozen=True)
class Plan:
    """What to run: environment additions, the command, and where to log in."""

    env: dict[str, str]
    argv: list[str]
    url: str
    airflow_home: Path
    bin_dir: str
    """Prepended to ``PATH``: standalone starts its components as ``airflow <component>``
    (the wrapper directory first, unless ``serve_logs``)."""
    serve_logs: bool = False

    @property
    def wrapper_dir(self) -> Path:
        """Where :meth:`prepare` writes the ``airflow`` wrapper."""
        return self.airflow_home / "bin"

    def prepare(self) -> None:
        """Make ``$AIRFLOW_HOME`` private (700), the password file 600, and the wrapper.

        Idempotent; an existing password file keeps its content.
        """
        home = self.airflow_home
        home.mkdir(parents=True, exist_ok=True)
        home.chmod(0o700)
        fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
        self.password_file.chmod(0o600)
        cfg = home / "airflow.cfg"
        if cfg.exists():
            cfg.chmod(0o600)
        if not self.serve_logs:
            self.wrapper_dir.mkdir(mode=0o700, exist_ok=True)
            wrapper = self.wrapper_dir / "airflow"
            wrapper.write_text(_WRAPPER)
            wrapper.chmod(0o700)

    def child_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` (the current environment) with the plan applied."""
        path = base.get("PATH", "")
        return {**base, **self.env, "PATH": self.bin_dir + (os.pathsep + path if path else "")}

    @property
    def password_file(self) -> Path:
        """Where Airflow keeps the generated ``admin`` password (JSON; mode 600 after
        :meth:`prepare`)."""
        return self.airflow_home / PASSWORD_FILE

    def shell(self) -> str:
        """The plan as shell lines (``export ...`` then the command)."""
        lines = [f'export PATH={shlex.quote(self.bin_dir)}:"$PATH"']
        lines += [f"export {k}={shlex.quote(v)}" for k, v in self.env.items()]
        lines.append(shlex.join(self.argv))
        return "\n".join(lines)

    def password(self) -> str | None:
        """The ``admin`` password Airflow generated, once it has written it (else None)."""
        try:
            found = json.loads(self.password_file.read_text()).get(USER)
        except (OSError, ValueError, AttributeError):
            return None
        return str(found) if found else None

    def login(self) -> str:
        """``user: admin, password: ...`` (or where the password will be)."""
        password = self.password()
        if password:
            return f"user {USER}, password {password} (from {self.password_file})"
        return (
            f"user {USER}, password generated by Airflow on its first start (it does not "
            f"print it): skewlab airflow --run prints it once Airflow has written it to "
            f"{self.password_file}"
        )


def wait_for_password(
    p: Plan,
    timeout_s: float = 300.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    alive: Callable[[], bool] = lambda: True,
) -> str | None:
    """The login line with the password, as soon as Airflow has written it (it writes the
    file on its first start and prints only "Not echoing it here"); None if it did not
    within ``timeout_s`` or ``alive`` turned false."""
    deadline = clock() + timeout_s
    while clock() < deadline and alive():
        if p.password():
            return p.login()
        sleep(0.5)
    return None


def plan(
    home: str | None = None,
    dags: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    airflow_bin: str | None = None,
    serve_logs: bool = False,
) -> Plan:
    """The environment and command of ``airflow standalone`` for data dir ``home``.

    Pure: nothing is written until :meth:`Plan.prepare`. ``serve_logs`` keeps
    Airflow's log servers (bound to every interface) instead of the wrapper.
    """

    if not 0 < port < 65536:
        raise ConfigError(f"--port must be in 1..65535, got {port}")
    data_dir = resolve_home(home)
    dags_dir = Path(dags).expanduser().resolve() if dags else DEFAULT_DAGS
    if not dags_dir.is_dir():
        raise ConfigError(f"dags folder {dags_dir} does not exist; pass --dags DIR")
    airflow_home = data_dir / "airflow"
    base_url = f"http://{'localhost' if host in ('127.0.0.1', '0.0.0.0') else host}:{port}"
    env = {
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_dir),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
        "AIRFLOW__CORE__PARALLELISM": str(PARALLELISM),
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": str(PARSE_TIMEOUT_S),
        "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": str(PARSE_TIMEOUT_S + 30),
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": str(PARSE_INTERVAL_S),
        "AIRFLOW__API__HOST": host,
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__BASE_URL": base_url,
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": LOOPBACK,
        "SKEWLAB_HOME": str(data_dir),
    }
    airflow = Path(airflow_bin) if airflow_bin else Path(sys.executable).with_name("airflow")
    bin_dir = str(airflow.parent)
    if not serve_logs:
        env[REAL_AIRFLOW_ENV] = str(airflow)
        bin_dir = str(airflow_home / "bin") + os.pathsep + bin_dir
    return Plan(
        env=env,
        argv=[str(airflow), "standalone"],
        url=base_url,
        airflow_home=airflow_home,
        bin_dir=bin_dir,
        serve_logs=serve_logs,
    )


def run(args: argparse.Namespace) -> int:
    """Print the plan (default), or run ``airflow standalone`` with it (``--run``)."""
    p = plan(
        args.home, args.dags, args.host, args.port, airflow_bin=args.airflow,
        serve_logs=args.serve_logs,
    )  # fmt: skip
    if args.stop:
        return _stop(p)
    p.prepare()
    if not args.run:
        print(f"# Airflow standalone for skewlab (SQLite in {p.airflow_home})")
        print(p.shell())
        print(f"# then open {p.url}  ({p.login()})")
        return 0
    print(f"skewlab airflow: starting Airflow standalone at {p.url}", file=sys.stderr)
    print(f"skewlab airflow: login: {p.login()}", file=sys.stderr)
    print(f"skewlab airflow: AIRFLOW_HOME={p.airflow_home}; Ctrl-C stops it", file=sys.stderr)
    host = start_route_host(p.airflow_home.parent)  # in the environment Airflow inherits
    if host is not None:
        print(f"skewlab airflow: DAG runs start their route query on the route host in "
              f"{host[0].path} (skewlab down stops it)", file=sys.stderr)  # fmt: skip
    sys.stdout.flush()
    sys.stderr.flush()
    return _supervise(p)


class _Signalled(Exception):
    """A stop signal arrived while ``--run`` waited on Airflow."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_signalled(signum: int, frame: FrameType | None) -> None:
    raise _Signalled(signum)


def _supervise(p: Plan) -> int:
    """Run the standalone in its own process group until it exits or we are told to stop;
    then stop whatever of the group is left. Ctrl-C is re-raised after the stop (the CLI
    exits 130); SIGTERM / SIGHUP return 128 + the signal. These work even if our parent gave
    us SIGINT ignored (a script's background job) or blocked, and the standalone's components
    start with them deliverable too, so the stop's first step (SIGINT) reaches them."""
    handlers = {sig: signal.signal(sig, _raise_signalled) for sig in STOP_SIGNALS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, *STOP_SIGNALS})
    child = None
    try:
        # its own session: the terminal's Ctrl-C reaches only us, and one killpg reaches
        # every component, worker and task process
        child = subprocess.Popen(
            p.argv, env=p.child_env(os.environ), start_new_session=True, umask=0o077
        )
        AirflowGroup(child.pid, os.getpid()).save(p.airflow_home)
        if p.password() is None:  # a first start: say the password once Airflow made it
            started = child

            def say() -> None:
                line = wait_for_password(p, alive=lambda: started.poll() is None)
                if line:
                    print(f"skewlab airflow: login: {line}", file=sys.stderr, flush=True)

            threading.Thread(target=say, name="airflow-password", daemon=True).start()
        code = child.wait()
        print(f"skewlab airflow: Airflow exited ({code})", file=sys.stderr)
        return code
    except _Signalled as exc:
        print(f"skewlab airflow: {exc}: stopping Airflow...", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("skewlab airflow: stopping Airflow...", file=sys.stderr)
        raise
    finally:
        for sig in (*STOP_SIGNALS, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut the stop short
        try:
            if child is not None:
                _stop_group(child)
                left = stop_airflow(p.airflow_home)  # any that left the group
                if left:
                    print(f"skewlab airflow: stopped strays {left}", file=sys.stderr)
        finally:
            for sig, old in handlers.items():
                signal.signal(sig, old)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _stop(p: Plan) -> int:
    """``--stop``: stop every Airflow process of the plan's ``AIRFLOW_HOME``."""
    if not p.airflow_home.is_dir():
        print(f"skewlab airflow: no Airflow home at {p.airflow_home}: nothing to stop")
        return 0
    stopped = stop_airflow(p.airflow_home)
    if stopped:
        print(f"skewlab airflow: stopped {len(stopped)} Airflow process(es) of {p.airflow_home}")
    else:
        print(f"skewlab airflow: no Airflow process of {p.airflow_home} was running")
    return 0


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    """Stop the standalone's process group (``child`` leads it): SIGINT, SIGTERM, SIGKILL."""
    stop_group(child.pid, STOP_SEQUENCE, reap=child.poll)

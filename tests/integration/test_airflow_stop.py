"""``skewlab airflow --run`` / ``--stop`` leave no Airflow process behind (real processes).

The fast tests run the real ``skewlab`` command with ``--airflow`` pointing at a
stand-in ``airflow`` executable that behaves as ``airflow standalone`` does where
it matters: it starts components that start their own children, one process
leaves the group (``setsid``) as a task process may, and the standalone exits on
SIGTERM without stopping its components. Every pid of that tree must be gone
after SIGTERM, SIGINT or SIGHUP to ``skewlab airflow --run``, after ``skewlab
airflow --stop`` from another process, and after the standalone dies by itself;
a shell that only exported ``AIRFLOW_HOME`` is left alone.

The slow test does the same with the real ``airflow standalone``: started by
``skewlab airflow --run``, healthy, then SIGTERM; no process with this
``AIRFLOW_HOME`` in its environment and an Airflow command line may remain.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skewlab.services.airflow import PID_FILE, airflow_pids
from skewlab.services.process import free_port, pid_alive

pytestmark = pytest.mark.integration

SKEWLAB = [sys.executable, "-c", "import sys; from skewlab.cli import main; sys.exit(main())"]
NO_HOST = {**os.environ, "SKEWLAB_ROUTE_HOST": "off"}
"""``skewlab airflow --run`` starts the data dir's route host (a Spark JVM), which stays up
after the command by design: these tests are about Airflow's processes, so they start none
(tests/unit/commands covers the host's start by ``--run``)."""

FAKE_AIRFLOW = """#!{python}
import json, os, signal, subprocess, sys, time

SLEEP = "/bin/sleep"
home = os.environ["AIRFLOW_HOME"]
if sys.argv[1:] == ["standalone"]:
    component = subprocess.Popen([sys.argv[0], "component"])
    worker = subprocess.Popen(["airflow worker -- LocalExecutor: <idle>", "600"], executable=SLEEP)
    escaped = subprocess.Popen(
        ["airflow task runner: escaped", "600"], executable=SLEEP, start_new_session=True
    )
    while not os.path.exists(os.path.join(home, "grandchild.pid")):
        time.sleep(0.05)
    grandchild = int(open(os.path.join(home, "grandchild.pid")).read())
    pids = [os.getpid(), component.pid, worker.pid, escaped.pid, grandchild]
    with open(os.path.join(home, "tree.json.tmp"), "w") as out:
        json.dump(pids, out)
    os.rename(os.path.join(home, "tree.json.tmp"), os.path.join(home, "tree.json"))
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))  # leaves its components running
    time.sleep(600)
elif sys.argv[1:] == ["component"]:
    child = subprocess.Popen(["airflow scheduler grandchild", "600"], executable=SLEEP)
    with open(os.path.join(home, "grandchild.pid"), "w") as out:
        out.write(str(child.pid))
    time.sleep(600)
"""


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if pid_alive(p)]


class Supervised:
    """``skewlab airflow --run`` over a fake airflow, with the pids of its tree."""

    def __init__(
        self, home: Path, airflow: Path, preexec_fn: Callable[[], None] | None = None
    ) -> None:
        self.home = home
        self.airflow_home = home / "airflow"
        home.mkdir(parents=True, exist_ok=True)
        self.log = home / "supervisor.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*SKEWLAB, "airflow", "--run", "--home", str(home), "--airflow", str(airflow),
                 "--port", str(free_port())],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=NO_HOST,
                preexec_fn=preexec_fn,
            )  # fmt: skip
        self.tree = self._wait_tree()

    def _wait_tree(self) -> list[int]:
        path = self.airflow_home / "tree.json"
        deadline = time.monotonic() + 60
        while not path.exists():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "the fake standalone did not start"
            time.sleep(0.1)
        pids: list[int] = json.loads(path.read_text())
        return pids

    def wait(self, timeout_s: float = 60.0) -> int:
        return self.proc.wait(timeout=timeout_s)

    def kill_all(self) -> None:
        for pid in [self.proc.pid, *self.tree]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def fake_airflow(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "airflow"
    path.parent.mkdir()
    path.write_text(FAKE_AIRFLOW.format(python=sys.executable))
    path.chmod(0o755)
    return path


@pytest.fixture
def supervised(tmp_path: Path, fake_airflow: Path) -> Iterator[Supervised]:
    run = Supervised(tmp_path / "home", fake_airflow)
    try:
        yield run
    finally:
        run.kill_all()


def test_the_tree_is_one_group_but_the_escaped_process(supervised: Supervised) -> None:
    assert _alive(supervised.tree) == supervised.tree
    standalone, component, worker, escaped, grandchild = supervised.tree
    group = {os.getpgid(p) for p in (standalone, component, worker, grandchild)}
    assert group == {standalone} and os.getpgid(escaped) != standalone
    assert os.getpgid(supervised.proc.pid) != standalone  # the terminal's Ctrl-C is ours
    recorded = json.loads((supervised.airflow_home / PID_FILE).read_text())
    assert recorded == {"pgid": standalone, "supervisor": supervised.proc.pid}
    assert (supervised.airflow_home / PID_FILE).stat().st_mode & 0o777 == 0o600
    assert airflow_pids(supervised.airflow_home) == sorted(supervised.tree)


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_a_signal_to_the_supervisor_stops_every_process(
    supervised: Supervised, sig: int, code: int
) -> None:
    os.kill(supervised.proc.pid, sig)
    assert supervised.wait() == code, supervised.log.read_text()
    assert _alive(supervised.tree) == []
    assert not (supervised.airflow_home / PID_FILE).exists()


def _sigint_ignored_and_blocked() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def test_sigint_stops_every_process_when_the_parent_ignored_and_blocked_it(
    tmp_path: Path, fake_airflow: Path
) -> None:
    """A parent may hand ``--run`` SIGINT ignored (a script's background job) or blocked
    (both are inherited through exec): Ctrl-C still stops it and the whole tree."""
    run = Supervised(tmp_path / "home", fake_airflow, preexec_fn=_sigint_ignored_and_blocked)
    try:
        os.kill(run.proc.pid, signal.SIGINT)
        assert run.wait() == 130, run.log.read_text()
        assert _alive(run.tree) == []
        assert not (run.airflow_home / PID_FILE).exists()
    finally:
        run.kill_all()


def test_stop_from_another_shell_stops_the_tree_and_its_supervisor(
    supervised: Supervised,
) -> None:
    out = subprocess.run(
        [*SKEWLAB, "airflow", "--stop", "--home", str(supervised.home)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert _alive(supervised.tree) == []
    assert supervised.wait() in (0, 143)
    assert not (supervised.airflow_home / PID_FILE).exists()
    again = subprocess.run(
        [*SKEWLAB, "airflow", "--stop", "--home", str(supervised.home)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert again.returncode == 0 and airflow_pids(supervised.airflow_home) == []


def test_when_the_standalone_dies_its_components_are_stopped(supervised: Supervised) -> None:
    os.kill(supervised.tree[0], signal.SIGTERM)  # standalone exits, components stay
    assert supervised.wait() == 0, supervised.log.read_text()
    assert _alive(supervised.tree) == []


def test_stop_leaves_a_shell_that_only_exported_airflow_home(
    supervised: Supervised,
) -> None:
    env = {**os.environ, "AIRFLOW_HOME": str(supervised.airflow_home)}
    shell = subprocess.Popen(["bash", "-c", "sleep 600"], env=env, start_new_session=True)
    try:
        subprocess.run(
            [*SKEWLAB, "airflow", "--stop", "--home", str(supervised.home)],
            capture_output=True, timeout=120, check=True, env=env,
        )  # fmt: skip
        assert _alive(supervised.tree) == []
        assert shell.poll() is None
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()


@pytest.mark.slow
def test_sigterm_to_skewlab_airflow_run_leaves_no_real_airflow_process(tmp_path: Path) -> None:
    import httpx

    home = tmp_path / "home"
    port = free_port()
    log = tmp_path / "airflow.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*SKEWLAB, "airflow", "--run", "--home", str(home), "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=NO_HOST,
        )  # fmt: skip
    airflow_home = home / "airflow"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/monitor/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "Airflow did not answer in 240 s"
            time.sleep(1)
        running = airflow_pids(airflow_home)
        assert len(running) >= 5, running  # standalone, scheduler, workers, dag processor, ...
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=90) == 143, log.read_text()[-2000:]
        assert airflow_pids(airflow_home) == [] and _alive(running) == []
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        for pid in airflow_pids(airflow_home):
            os.kill(pid, signal.SIGKILL)

"""The route host protocol seen from a run, with a plain process standing in for the host.

The host's Spark side runs in tests/integration/live/test_route_host.py; here the files of
:mod:`skewlab.live.driver.route_host` are written by hand and a ``sleep`` process is the
"host", so each rule is checked on its own: which route jobs go to the host, what a run
waits for, what its record's process answers, and that stopping a run never kills the host.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from skewlab.live.driver.handle import ProcRecord
from skewlab.live.driver.launch import Detached, spawn_detached
from skewlab.live.driver.route_host import (
    ROUTE_HOST_ENV,
    HostDir,
    HostLauncher,
    HostProc,
    attach_any,
    hostable,
    route_job_point,
    stop_host,
    wait_ready,
)

ROUTE = [sys.executable, "-m", "skewlab.live.mains.route_job"]


class Recording:
    """A launcher that records what it was asked to start (the run's own route job)."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, name: str, cmd: list[str], log: Path) -> tuple[object, ProcRecord]:
        self.started.append(name)
        return object(), ProcRecord(name, 1, 0.0, cmd, str(log))

    def attach(self, rec: ProcRecord) -> object:
        return ("inner", rec.name)


@pytest.fixture
def host(tmp_path: Path):
    """A "host": a sleeping process recorded in ``host.json``, ready for ``local[2]``."""
    d = HostDir(tmp_path / "host")
    d.requests.mkdir(parents=True)
    _, rec = spawn_detached("route-host", ["sleep", "600"], d.log)
    d.record.write_text(json.dumps(rec.__dict__))
    d.ready.write_text(json.dumps({"pid": rec.pid, "master": "local[2]", "spark_ui": None}))
    yield d
    Detached(rec).kill()


@pytest.fixture
def hosted(host: HostDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The command of a hostable route job, with ``$SKEWLAB_ROUTE_HOST`` naming ``host``."""
    monkeypatch.setenv(ROUTE_HOST_ENV, str(host.path))
    monkeypatch.delenv("SKEWLAB_CRASH", raising=False)
    return [*ROUTE, str(settings_file(tmp_path))]


def settings_file(tmp_path: Path, master: str = "local[2]") -> Path:
    p = tmp_path / "route.json"
    p.write_text(json.dumps({"spark_master": master}))
    return p


def test_only_a_local_python_route_job_without_route_crash_points_is_hostable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SKEWLAB_CRASH", raising=False)
    path = settings_file(tmp_path)
    assert hostable([*ROUTE, str(path)]) == path
    assert hostable(["spark-submit", "--master", "local[2]", "jobs/route.py", str(path)]) is None
    assert hostable([sys.executable, "-m", "skewlab.live.worker.process", str(path)]) is None
    # points of the driver, the workers and the state manager: the host runs the query
    monkeypatch.setenv(
        "SKEWLAB_CRASH",
        "driver.mid_produce@2,worker.before_commit,worker.restoring@2,"
        "scaleout.between_checkpoint_and_switch,scaleout.after_cut,rebalance.mid_reassignment",
    )
    assert hostable([*ROUTE, str(path)]) == path
    for route_point in ("route.in_batch@1", "route.after_produce@2"):  # would end the host
        monkeypatch.setenv("SKEWLAB_CRASH", f"worker.before_commit,{route_point}")
        assert hostable([*ROUTE, str(path)]) is None
    monkeypatch.setenv("SKEWLAB_CRASH", "worker.before_commit@0")  # unreadable: its own
    assert hostable([*ROUTE, str(path)]) is None


HOST_POINTS = """
import ast, importlib, json, sys
for m in ("skewlab.live.mains.route_host", "skewlab.spark.route_sink", "skewlab.spark.warmup"):
    importlib.import_module(m)
points = []
for name, mod in sorted(sys.modules.items()):
    path = getattr(mod, "__file__", None)
    if not name.startswith("skewlab") or not path:
        continue
    for node in ast.walk(ast.parse(open(path).read())):
        f = getattr(node, "func", None)
        if isinstance(node, ast.Call) and getattr(f, "id", getattr(f, "attr", "")) == "crash_point":
            arg = node.args[0]
            value = arg.value if isinstance(arg, ast.Constant) else getattr(mod, arg.id)
            points.append([name, value])
print(json.dumps(points))
"""


def test_every_crash_point_the_host_process_can_reach_keeps_a_run_off_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``crash_point`` calls in every skewlab module the host's process loads (its
    main, the route sink, the warm-up): each of them, armed, gives the run its own route job."""
    out = subprocess.run(
        [sys.executable, "-c", HOST_POINTS], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    points = {p for _, p in json.loads(out)}
    assert {"route.in_batch", "route.after_produce"} <= points
    path = settings_file(tmp_path)
    for p in sorted(points):
        monkeypatch.setenv("SKEWLAB_CRASH", p)
        assert route_job_point(p) and hostable([*ROUTE, str(path)]) is None, p


def test_a_hostable_route_job_becomes_a_request_and_the_rest_start_as_before(
    host: HostDir, hosted: list[str], tmp_path: Path
) -> None:
    inner = Recording()
    launcher = HostLauncher(inner)  # type: ignore[arg-type]
    cmd = hosted
    proc, rec = launcher.start("route", cmd, tmp_path / "route.log")
    assert inner.started == [] and isinstance(proc, HostProc)
    (req,) = host.requests.glob("*.json")
    assert json.loads(req.read_text())["settings"] == cmd[3] and rec.request == str(req)
    assert rec.pid == host.host_record().pid  # type: ignore[union-attr]
    assert isinstance(launcher.attach(rec), HostProc)
    launcher.start("worker-0", ["true"], tmp_path / "worker-0.log")
    (tmp_path / "o").mkdir()
    other = [*ROUTE, str(settings_file(tmp_path / "o", "local[4]"))]
    launcher.start("route", other, tmp_path / "route2.log")  # another master: its own
    assert inner.started == ["worker-0", "route"]
    assert launcher.attach(ProcRecord("worker-0", 1, 0.0, [], "x")) == ("inner", "worker-0")


def test_without_a_running_host_the_run_starts_its_own_route_job(
    host: HostDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SKEWLAB_CRASH", raising=False)
    cmd = [*ROUTE, str(settings_file(tmp_path))]
    inner = Recording()
    monkeypatch.delenv(ROUTE_HOST_ENV, raising=False)
    HostLauncher(inner).start("route", cmd, tmp_path / "route.log")  # type: ignore[arg-type]
    Detached(host.host_record()).kill()  # type: ignore[arg-type]
    Detached(host.host_record()).wait(timeout=30)  # type: ignore[arg-type]
    monkeypatch.setenv(ROUTE_HOST_ENV, str(host.path))
    HostLauncher(inner).start("route", cmd, tmp_path / "route.log")  # type: ignore[arg-type]
    assert inner.started == ["route", "route"]
    assert list(host.requests.glob("*.json")) == []


def test_a_run_waits_for_a_host_still_starting(host: HostDir) -> None:
    ready = host.ready.read_text()
    host.ready.unlink()
    later = threading.Timer(0.5, lambda: host.ready.write_text(ready))
    later.start()
    assert wait_ready(host, timeout_s=60)["master"] == "local[2]"
    later.join()


def test_a_hosted_query_ends_by_its_exit_code_or_with_its_host(
    host: HostDir, hosted: list[str], tmp_path: Path
) -> None:
    cmd = hosted
    launcher = HostLauncher(Recording())  # type: ignore[arg-type]
    first, rec = launcher.start("route", cmd, tmp_path / "a.log")
    second, _ = launcher.start("route", cmd, tmp_path / "b.log")
    assert first.poll() is None and attach_any(rec).alive()
    host.write_rc(Path(rec.request).stem, 0)  # type: ignore[arg-type]
    assert first.wait(timeout=5) == 0 and not attach_any(rec).alive()
    assert second.poll() is None
    Detached(host.host_record()).kill()  # type: ignore[arg-type]
    assert second.wait(timeout=30) == -signal.SIGKILL  # the host went: its queries ended


def test_killing_a_hosted_query_cancels_it_and_never_signals_the_host(
    host: HostDir, hosted: list[str], tmp_path: Path
) -> None:
    cmd = hosted
    proc, rec = HostLauncher(Recording()).start("route", cmd, tmp_path / "a.log")  # type: ignore[arg-type]
    rid = Path(rec.request).stem  # type: ignore[arg-type]

    def host_side() -> None:  # what the host does on a cancel marker (step 3 -> 4)
        while not host.cancel(rid).exists():
            threading.Event().wait(0.05)
        host.write_rc(rid, -9)

    t = threading.Thread(target=host_side)
    t.start()
    attach_any(rec).kill()  # what `skewlab stop` and gc do to each record
    t.join(timeout=30)
    assert proc.wait(timeout=5) == -9
    assert host.alive(), "stopping a run killed the shared host"


def test_stop_host_asks_first_then_kills(host: HostDir) -> None:
    rec = host.host_record()
    assert rec is not None
    stop_host(host.path, grace_s=0.5)  # `sleep` ignores the stop file
    assert host.stop_file.exists() and not Detached(rec).alive()
    with pytest.raises(ChildProcessError):
        wait_ready(host, timeout_s=5)

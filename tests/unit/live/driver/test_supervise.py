"""Supervisor: restarts with bounded backoff on an injected clock; BrokerProbe: fails fast."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from skewlab.errors import ConfigError, SettingError
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.launch import Procs
from skewlab.live.driver.supervise import (
    STALL_S,
    BrokerLost,
    BrokerProbe,
    ChildFailed,
    RestartPolicy,
    Roles,
    Supervisor,
    hangs,
)
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings
from skewlab.spec import DEFAULTS

pytestmark = pytest.mark.unit


class FakeProc:
    def __init__(self) -> None:
        self.returncode: int | None = None
        self.killed = 0

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        self.killed += 1


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _run(tmp_path: Path, workers: int = 2) -> tuple[Procs, RunHandle, RunDir, list[str]]:
    files = RunDir.create(tmp_path, "key-sup")
    handle = RunHandle("key-sup", str(tmp_path), str(files), str(tmp_path / "delta"), {})
    started: list[str] = []
    procs = Procs(route=FakeProc(), workers={i: FakeProc() for i in range(workers)})

    def restart_route() -> None:
        started.append("route")
        procs.route = FakeProc()

    def restart_worker(i: int) -> None:
        started.append(f"worker-{i}")
        procs.workers[i] = FakeProc()

    procs.restart_route, procs.restart_worker = restart_route, restart_worker
    return procs, handle, files, started


def _roles(tmp_path: Path) -> tuple[dict[str, FakeProc], RunHandle, RunDir, Roles, list[str]]:
    """An autoscale run's monitor and controller, supervised by role."""
    files = RunDir.create(tmp_path, "mwf-sup")
    handle = RunHandle("mwf-sup", str(tmp_path), str(files), str(tmp_path / "delta"), {})
    procs = {"monitor": FakeProc(), "controller": FakeProc()}
    started: list[str] = []

    def start(name: str) -> None:
        started.append(name)
        procs[name] = FakeProc()

    return procs, handle, files, Roles(lambda: procs, start, files.stop), started


def test_a_role_that_exits_unasked_is_restarted_after_its_backoff_within_the_budget(
    tmp_path: Path,
) -> None:
    procs, handle, files, roles, started = _roles(tmp_path)
    clock = Clock()
    sup = Supervisor(Procs(), handle, files, list, RestartPolicy(1, 1.0, 2.0, 10.0), clock,
                     roles=roles)  # fmt: skip
    dead = procs["controller"]
    dead.returncode = 0  # no stop file: an exit nobody asked for, even with 0
    sup.check()
    assert started == [] and dead.killed == 1 and sup.pending == {"controller": 101.0}
    clock.t = 100.5
    sup.check()
    assert started == []  # its backoff is not over
    clock.t = 101.0
    sup.check()
    assert started == ["controller"] and handle.restarts == {"controller": 1}
    procs["controller"].returncode = -9
    with pytest.raises(ChildFailed, match="controller failed after 1 restart"):
        sup.check()  # its budget is used
    assert procs["monitor"].killed == 0


def test_a_role_that_exits_cleanly_after_the_stop_file_has_finished(tmp_path: Path) -> None:
    procs, handle, files, roles, started = _roles(tmp_path)
    sup = Supervisor(Procs(), handle, files, list, RestartPolicy(), Clock(), roles=roles)
    files.stop.touch()
    procs["monitor"].returncode = procs["controller"].returncode = 0
    sup.check()
    assert started == [] and sup.pending == {} and handle.restarts == {}
    procs["monitor"].returncode = 1  # a failure is one, stop file or not
    sup.check()
    assert "monitor" in sup.pending


def test_backoff_grows_and_is_capped() -> None:
    p = RestartPolicy(max_restarts=5, backoff_s=0.5, factor=2.0, max_backoff_s=3.0)
    assert [p.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    with pytest.raises(ConfigError):
        RestartPolicy(factor=0.5)
    with pytest.raises(ConfigError):
        RestartPolicy(max_restarts=-1)


def test_a_dead_worker_is_restarted_after_its_backoff_and_counted(tmp_path: Path) -> None:
    procs, handle, files, started = _run(tmp_path)
    clock = Clock()
    sup = Supervisor(procs, handle, files, lambda: [0, 1], RestartPolicy(3, 1.0, 2.0, 10.0), clock)
    sup.check()
    assert started == []
    dead = procs.workers[1]
    dead.returncode = -9
    sup.check()  # seen: its group killed, restart scheduled in 1 s
    assert dead.killed == 1 and started == [] and sup.pending == {"worker-1": 101.0}
    clock.t = 100.9
    sup.check()
    assert started == []
    clock.t = 101.0
    sup.check()
    assert started == ["worker-1"] and handle.restarts == {"worker-1": 1}
    assert procs.workers[1] is not dead
    procs.workers[1].returncode = 1  # dies again: the next backoff is 2 s
    clock.t = 105.0
    sup.check()
    assert sup.pending == {"worker-1": 107.0}


def test_when_restarts_run_out_the_run_fails_with_the_cause(tmp_path: Path) -> None:
    procs, handle, files, started = _run(tmp_path)
    files.log("route").write_text(
        "Traceback (most recent call last):\n  File 'x', line 1\nValueError: bad record\n"
    )
    clock = Clock()
    sup = Supervisor(procs, handle, files, lambda: [0, 1], RestartPolicy(1, 0.0, 1.0, 0.0), clock)
    procs.route.returncode = 1
    sup.check()
    sup.check()
    assert started == ["route"] and handle.restarts == {"route": 1}
    procs.route.returncode = 1
    with pytest.raises(ChildFailed) as info:
        sup.check()
    msg = str(info.value)
    assert "route job failed after 1 restart(s)" in msg and "ValueError: bad record" in msg
    assert str(files.log("route")) in msg and "\n" not in msg


def test_children_that_finished_after_their_stop_marker_are_left_alone(tmp_path: Path) -> None:
    procs, handle, files, started = _run(tmp_path)
    sup = Supervisor(procs, handle, files, lambda: [0, 1], RestartPolicy(), Clock())
    files.route_stop.touch()
    procs.route.returncode = 0
    files.workers_stop.touch()
    procs.workers[0].returncode = 0
    sup.check()
    assert started == [] and sup.pending == {}
    procs.workers[1].returncode = -9  # a crash during the drain is still a crash
    sup.check()
    assert "worker-1" in sup.pending


def test_unsupervised_workers_are_not_restarted(tmp_path: Path) -> None:
    procs, handle, files, started = _run(tmp_path)
    sup = Supervisor(procs, handle, files, lambda: [], RestartPolicy(), Clock())
    procs.workers[0].returncode = -9  # a scale-out manager stopped it
    sup.check()
    assert started == [] and sup.pending == {}


def test_broker_probe_fails_after_its_grace_with_one_line() -> None:
    clock = Clock()
    up = [True]

    def connect(host: str, port: int, timeout: float) -> None:
        assert (host, port) == ("127.0.0.1", 9092) and timeout == 1.0
        if not up[0]:
            raise ConnectionRefusedError(111, "Connection refused")

    probe = BrokerProbe("127.0.0.1:9092", grace_s=3.0, clock=clock, connect=connect)
    probe.check()
    up[0] = False
    for t in (101.0, 102.0, 103.0):
        clock.t = t
        probe.check()  # down for < 3 s
    clock.t = 103.5
    probe.check()  # throttled: one probe a second
    clock.t = 104.0
    with pytest.raises(BrokerLost) as info:
        probe.check()
    assert probe.lost
    assert "unreachable for 3 s" in str(info.value) and "Connection refused" in str(info.value)


def test_broker_probe_recovers_when_the_broker_answers_again() -> None:
    clock = Clock()
    up = [False]

    def connect(host: str, port: int, timeout: float) -> None:
        if not up[0]:
            raise OSError("down")

    probe = BrokerProbe("a:1,b:2", grace_s=2.0, clock=clock, connect=connect)
    probe.check()
    clock.t += 1.5
    up[0] = True
    probe.check()
    up[0] = False
    clock.t += 1.5
    probe.check()  # down again, but only just
    assert not probe.lost


def test_broker_probe_on_a_real_closed_port_fails_fast() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    clock = Clock()
    probe = BrokerProbe(f"127.0.0.1:{port}", grace_s=1.0, clock=clock)
    probe.check()
    clock.t += 1.0
    with pytest.raises(BrokerLost):
        probe.check()


def _broker_watched(tmp_path: Path) -> tuple[Procs, RunHandle, list[str], Supervisor, Clock, dict]:
    """A supervisor with a broker probe whose broker is up while ``up["broker"]``."""
    procs, handle, files, started = _run(tmp_path)
    up = {"broker": True}

    def connect(host: str, port: int, timeout_s: float) -> None:
        if not up["broker"]:
            raise ConnectionRefusedError(111, "Connection refused")

    probe = BrokerProbe("127.0.0.1:9092", connect=connect)
    clock = Clock()
    sup = Supervisor(procs, handle, files, lambda: [0, 1], RestartPolicy(), clock, broker=probe)
    return procs, handle, started, sup, clock, up


def test_a_child_that_dies_with_the_broker_is_not_restarted(tmp_path: Path) -> None:
    procs, handle, started, sup, clock, up = _broker_watched(tmp_path)
    procs.workers[0].returncode = 1  # the broker answers: an ordinary restart
    sup.check()
    clock.t += 10
    sup.check()
    assert started == ["worker-0"]
    up["broker"] = False
    procs.workers[1].returncode = 1
    with pytest.raises(BrokerLost, match=r"broker 127\.0\.0\.1:9092 unreachable") as info:
        sup.check()
    assert "worker 1" in str(info.value) and "\n" not in str(info.value)
    assert sup.broker is not None and sup.broker.lost
    assert started == ["worker-0"] and handle.restarts == {"worker-0": 1}


def test_a_due_restart_waits_for_no_dead_broker(tmp_path: Path) -> None:
    procs, handle, started, sup, clock, up = _broker_watched(tmp_path)
    procs.route.returncode = -9
    sup.check()  # scheduled while the broker still answered
    assert sup.pending
    up["broker"] = False
    clock.t += 10
    with pytest.raises(BrokerLost, match="route job not restarted"):
        sup.check()
    assert started == [] and handle.restarts == {}


class Offsets:
    """A fake progress source: worker -> (committed, end), None while unknown."""

    def __init__(self, **at: tuple[int, int]) -> None:
        self.at: dict[int, tuple[int, int] | None] = {int(k[1:]): v for k, v in at.items()}

    def __call__(self, worker: int) -> tuple[int, int] | None:
        return self.at.get(worker)


def _progress_watched(
    tmp_path: Path, offsets: Offsets, max_restarts: int = 3
) -> tuple[Procs, RunHandle, RunDir, list[str], Supervisor, Clock]:
    """Two ready workers watched for hangs with ``stall_s`` 15 and no backoff."""
    procs, handle, files, started = _run(tmp_path)
    for i in (0, 1):
        files.worker_ready(i).touch()
    clock = Clock()
    policy = RestartPolicy(max_restarts, 0.0, 1.0, 0.0)
    sup = Supervisor(
        procs, handle, files, lambda: [0, 1], policy, clock, progress=offsets, stall_s=15.0
    )
    return procs, handle, files, started, sup, clock


def test_a_stalled_worker_with_records_waiting_is_killed_and_restarted_after_stall_s(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    offsets = Offsets(w0=(500, 500), w1=(100, 1304))
    procs, handle, _, started, sup, clock = _progress_watched(tmp_path, offsets)
    hung = procs.workers[1]
    for t in (100.0, 105.0, 114.9):
        clock.t = t
        sup.check()
    assert started == [] and hung.killed == 0 and sup.pending == {}
    clock.t = 115.3
    with caplog.at_level("WARNING"):
        sup.check()
    assert hung.killed == 1 and sup.pending == {"worker-1": 115.3}
    assert "worker-1 made no progress for 15.3 s with 1,204 records waiting; restarting it" in (
        caplog.text
    )
    sup.check()  # the restart is due at once (no backoff)
    assert started == ["worker-1"] and handle.restarts == {"worker-1": 1}
    assert procs.workers[1] is not hung and procs.workers[0].killed == 0
    # the new process gets its own stall_s from when it is seen (its ready marker anew)
    clock.t = 120.0
    sup.check()
    clock.t = 134.9
    sup.check()
    assert started == ["worker-1"]
    clock.t = 135.0
    sup.check()
    sup.check()
    assert started == ["worker-1", "worker-1"] and handle.restarts == {"worker-1": 2}


def test_a_worker_without_records_waiting_is_never_killed(tmp_path: Path) -> None:
    offsets = Offsets(w0=(700, 700), w1=(0, 0))
    procs, _, _, started, sup, clock = _progress_watched(tmp_path, offsets)
    for t in range(100, 400, 5):
        clock.t = float(t)
        sup.check()
    assert started == [] and procs.workers[0].killed == procs.workers[1].killed == 0
    # records arrive: the count starts at the last look that saw none waiting (395 s),
    # not at the last advance long ago
    offsets.at[0] = (700, 750)
    clock.t = 400.0
    sup.check()
    clock.t = 409.9
    sup.check()
    assert started == [] and procs.workers[0].killed == 0
    clock.t = 410.0
    sup.check()
    assert procs.workers[0].killed == 1 and "worker-0" in sup.pending


def test_a_slow_worker_that_advances_is_never_killed(tmp_path: Path) -> None:
    offsets = Offsets(w0=(0, 100_000), w1=(0, 100_000))
    procs, _, _, started, sup, clock = _progress_watched(tmp_path, offsets)
    for step in range(60):  # 10 records every 14 s, always far behind
        clock.t = 100.0 + 14 * step
        offsets.at[0] = (10 * step, 100_000)
        offsets.at[1] = (10 * step, 100_000)
        sup.check()
    assert started == [] and procs.workers[0].killed == procs.workers[1].killed == 0


def test_unknown_progress_and_a_missing_ready_marker_judge_nothing(tmp_path: Path) -> None:
    offsets = Offsets(w0=(10, 90), w1=(10, 90))
    procs, _, files, started, sup, clock = _progress_watched(tmp_path, offsets)
    files.worker_ready(1).unlink()  # starting: restoring its state, or a warm instance
    sup.check()
    offsets.at[0] = None  # the look failed: neither starts nor stops the count
    clock.t = 200.0
    sup.check()
    assert started == [] and procs.workers[0].killed == procs.workers[1].killed == 0
    offsets.at[0] = (10, 90)
    sup.check()  # 100 s since the count started: hung
    assert procs.workers[0].killed == 1 and procs.workers[1].killed == 0
    files.worker_ready(1).touch()  # ready now: its count starts here
    clock.t = 214.0
    sup.check()
    assert procs.workers[1].killed == 0


def test_hung_restarts_count_against_the_same_budget_as_exits(tmp_path: Path) -> None:
    offsets = Offsets(w0=(5, 5), w1=(40, 60))
    procs, handle, _, started, sup, clock = _progress_watched(tmp_path, offsets, 2)
    procs.workers[1].returncode = -9  # an exit first: restart 1 of 2
    sup.check()
    sup.check()
    assert handle.restarts == {"worker-1": 1}
    sup.check()  # the new process seen: its count starts
    clock.t = 120.0
    sup.check()  # no progress since 100 s with records waiting: restart 2 of 2
    sup.check()
    assert handle.restarts == {"worker-1": 2} and started == ["worker-1", "worker-1"]
    last = procs.workers[1]
    sup.check()
    clock.t = 140.0
    with pytest.raises(ChildFailed, match=r"worker-1 made no progress for 20\.0 s") as info:
        sup.check()
    msg = str(info.value)
    assert "20 records waiting" in msg and "no restart left (2 used)" in msg
    assert last.killed == 1 and started == ["worker-1", "worker-1"]


def test_stall_s_must_be_positive(tmp_path: Path) -> None:
    procs, handle, files, _ = _run(tmp_path)
    with pytest.raises(ConfigError, match="stall_s"):
        Supervisor(procs, handle, files, lambda: [0], stall_s=0.0)


def test_a_hang_is_written_to_the_run_dir_for_the_summary(tmp_path: Path) -> None:
    offsets = Offsets(w0=(500, 500), w1=(100, 1304))
    _, _, files, started, sup, clock = _progress_watched(tmp_path, offsets, max_restarts=1)
    assert hangs(files) == []
    for t in (100.0, 115.3):
        clock.t = t
        sup.check()
    sup.check()
    assert started == ["worker-1"]
    assert hangs(files) == ["worker-1 hung 15 s with 1,204 records waiting: killed and restarted"]
    clock.t = 120.0  # the new process is seen; hung again, no restart left: recorded
    sup.check()
    clock.t = 136.0
    with pytest.raises(ChildFailed):
        sup.check()
    assert (
        hangs(files)[1] == "worker-1 hung 16 s with 1,204 records waiting: killed, no restart left"
    )


def test_stall_s_comes_from_the_runs_setting_unless_given(tmp_path: Path) -> None:
    procs, handle, files, _ = _run(tmp_path)
    assert Supervisor(procs, handle, files, lambda: [0]).stall_s == STALL_S == DEFAULTS["stall_s"]
    handle.settings["stall_s"] = 4.5
    assert Supervisor(procs, handle, files, lambda: [0]).stall_s == 4.5
    assert Supervisor(procs, handle, files, lambda: [0], stall_s=2.0).stall_s == 2.0
    with pytest.raises(ConfigError):
        Supervisor(procs, handle, files, lambda: [0], stall_s=0.0)


@pytest.mark.parametrize("value", [0.0, -3.0, float("nan"), 7200.0])
def test_a_bad_stall_s_setting_is_one_line_naming_the_flag(value: float) -> None:
    with pytest.raises(SettingError) as err:
        ExperimentSettings(stall_s=value)
    assert str(err.value).count("\n") == 0 and err.value.flag == "--stall-s"
    assert ExperimentSettings(stall_s=3.0).stall_s == 3.0


def test_skewlab_run_refuses_a_bad_stall_s_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from skewlab.cli import main

    assert main(["run", "--stall-s", "0", "--home", str(tmp_path), "--no-mlflow"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("skewlab run: error: argument --stall-s: ") and "\n" not in err
    assert "0" in err.split("--stall-s: ", 1)[1]
    assert not (tmp_path / "runs").exists()  # refused before anything started


def test_a_worker_its_engine_watches_is_not_judged_by_the_supervisor(tmp_path: Path) -> None:
    """A Spark task watches its worker by the same rule (``watches_hangs``) and fails the
    attempt: the supervisor kills nothing, restarts nothing, records nothing."""
    offsets = Offsets(w0=(500, 500), w1=(100, 1304))
    procs, handle, files, started, sup, clock = _progress_watched(tmp_path, offsets)
    procs.workers[1].watches_hangs = True  # type: ignore[attr-defined]
    for t in (100.0, 115.3, 200.0):
        clock.t = t
        sup.check()
    assert started == [] and procs.workers[1].killed == 0 and sup.pending == {}
    assert hangs(files) == [] and handle.restarts == {}

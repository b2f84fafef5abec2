"""Warm start: ready markers read tolerantly, start-up split per component, one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skewlab.errors import SkewlabError
from skewlab.live.driver.launch import Procs
from skewlab.live.driver.startup import (
    RouteReady,
    preload,
    preload_modules,
    read_route_ready,
    read_worker_ready,
    route_startup,
    startup_line,
    wait_ready,
)
from skewlab.rundir import RunDir

pytestmark = pytest.mark.unit


def test_route_ready_json_number_empty_and_torn(tmp_path: Path) -> None:
    f = tmp_path / "route.ready"
    assert read_route_ready(f) is None
    f.write_text("")
    assert read_route_ready(f) == RouteReady({})
    f.write_text("1700000000.5")
    assert read_route_ready(f) == RouteReady({"t_query": 1700000000.5})
    doc = {"t_process": 10.0, "t_session": 16.0, "t_query": 18.0, "t_warm": 23.5,
           "spark_ui": "http://127.0.0.1:4040"}  # fmt: skip
    f.write_text(json.dumps(doc))
    ready = read_route_ready(f)
    assert ready is not None and ready.spark_ui == "http://127.0.0.1:4040"
    assert ready.times == {k: v for k, v in doc.items() if k.startswith("t_")}
    f.write_text(json.dumps(doc)[:20])  # caught mid-write
    assert read_route_ready(f) is None
    f.write_text(json.dumps({"t_warm": "soon", "spark_ui": ""}))
    assert read_route_ready(f) == RouteReady({})


def test_route_steps_are_differences_of_the_marker_times() -> None:
    ready = RouteReady({"t_process": 10.0, "t_session": 16.0, "t_query": 18.0, "t_warm": 23.5})
    steps = route_startup(9.0, ready, 24.0)
    assert steps == {"total": 15.0, "process": 1.0, "session": 6.0, "query": 2.0, "warm": 5.5}
    assert route_startup(9.0, RouteReady({}), 20.0) == {"total": 11.0}
    # the route job warms up before it starts the query: steps in the order they happened
    warm_first = RouteReady({"t_process": 10.0, "t_session": 16.0, "t_warm": 20.0, "t_query": 21.0})
    steps = route_startup(9.0, warm_first, 21.5)
    assert list(steps) == ["total", "process", "session", "warm", "query"]
    assert steps["warm"] == 4.0 and steps["query"] == 1.0
    assert startup_line({"route": steps}) == (
        "start-up: route job 12.5 s (process 1.0, session 6.0, warm 4.0, query 1.0)"
    )


def test_a_query_on_the_route_host_counts_its_wait_for_the_host() -> None:
    # written by the host: t_host (it took the query), then the query and its (skipped) warm-up
    ready = RouteReady({"t_host": 30.0, "t_query": 31.25, "t_warm": 31.5})
    steps = route_startup(5.0, ready, 32.0)
    assert steps == {"total": 27.0, "host": 25.0, "query": 1.25, "warm": 0.25}
    assert startup_line({"route": steps}) == (
        "start-up: route job 27.0 s (host 25.0, query 1.2, warm 0.2)"
    )


def test_wait_ready_needs_the_route_job_and_every_worker(tmp_path: Path) -> None:
    files = RunDir.create(tmp_path, "key-w")

    class Alive:
        def poll(self) -> None:
            return None

    procs = Procs(route=Alive(), workers={0: Alive(), 1: Alive()})
    now = [100.0]
    script = {
        100.3: lambda: files.route_ready.write_text(json.dumps({"t_warm": 100.2})),
        100.5: lambda: files.worker_ready(0).write_text("100.4"),
        100.8: lambda: files.worker_ready(1).write_text("100.7"),
    }

    def sleep(dt: float) -> None:
        now[0] = round(now[0] + dt, 3)
        if now[0] in script:
            script.pop(now[0])()

    spawned = {"route": 99.0, "worker-0": 99.5, "worker-1": 99.6}
    up = wait_ready(files, procs, [0, 1], spawned, clock=lambda: now[0], sleep=sleep)
    assert not script, "returned before every component was ready"
    assert up["workers"] == {"worker-0": 0.9, "worker-1": 1.1}
    assert up["route"]["total"] == pytest.approx(1.3)
    line = startup_line({"services": 0.4, **up}, "http://127.0.0.1:4041")
    assert line == (
        "start-up: broker 0.4 s; route job 1.3 s (warm 1.2); workers 0.9-1.1 s; "
        "Spark UI http://127.0.0.1:4041"
    )


def test_a_child_dying_during_start_up_fails_with_its_first_error(tmp_path: Path) -> None:
    files = RunDir.create(tmp_path, "key-d")

    class Dead:
        def poll(self) -> int:
            return 1

    class Alive:
        def poll(self) -> None:
            return None

    files.log("worker-0").write_text("Traceback (most recent call last):\nKafkaError: no broker\n")
    procs = Procs(route=Alive(), workers={0: Dead()})
    with pytest.raises(SkewlabError) as info:
        wait_ready(files, procs, [0], {}, clock=lambda: 0.0, sleep=lambda dt: None)
    msg = str(info.value)
    assert "worker 0 exited before it was ready" in msg and "KafkaError: no broker" in msg


def test_worker_ready_marker_mid_write_is_not_ready(tmp_path: Path) -> None:
    f = tmp_path / "worker-0.ready"
    assert read_worker_ready(f) is None
    f.write_text("")
    assert read_worker_ready(f) is None
    f.write_text("12.5")
    assert read_worker_ready(f) == 12.5
    assert startup_line({}) is None


def test_with_a_guard_a_child_that_dies_while_starting_is_restarted(tmp_path: Path) -> None:
    files = RunDir.create(tmp_path, "key-g")

    class Proc:
        def __init__(self, rc: int | None) -> None:
            self.rc = rc

        def poll(self) -> int | None:
            return self.rc

    procs = Procs(route=Proc(1), workers={0: Proc(None)})
    files.worker_ready(0).write_text("5.0")
    restarts: list[str] = []

    def guard() -> None:  # the supervisor: restarts the dead route job, which gets warm
        if procs.route.poll() is not None:
            restarts.append("route")
            procs.route = Proc(None)
            files.route_ready.write_text(json.dumps({"t_warm": 6.0}))

    up = wait_ready(files, procs, [0], {}, clock=lambda: 0.0, sleep=lambda dt: None,
                    guard=guard, guarded={"route", "worker-0"})  # fmt: skip
    assert restarts == ["route"] and up["workers"] == {"worker-0": 0.0}
    procs.workers[0] = Proc(1)  # not guarded: fails at once
    files.route_ready.unlink()
    with pytest.raises(SkewlabError, match="worker 0 exited before it was ready"):
        wait_ready(files, procs, [0], {}, clock=lambda: 0.0, sleep=lambda dt: None,
                   guard=lambda: None, guarded={"route"})  # fmt: skip


def test_the_end_s_heavy_modules_are_preloaded_only_when_used() -> None:
    assert preload_modules(quality=False, mlflow=False) == []
    assert preload_modules(quality=True, mlflow=False)[0] == "great_expectations"
    assert preload_modules(quality=False, mlflow=True) == ["mlflow"]
    assert preload([]) is None


def test_preload_imports_in_a_thread_and_survives_a_missing_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    thread = preload(["no_such_module_for_skewlab", "colorsys"])
    assert thread is not None and thread.daemon
    thread.join(timeout=60)
    assert not thread.is_alive() and "colorsys" in sys.modules


def test_a_slow_start_that_writes_waits_and_a_silent_one_fails(tmp_path: Path) -> None:
    files = RunDir.create(tmp_path, "key-s")

    class Alive:
        def poll(self) -> None:
            return None

    procs = Procs(route=Alive(), workers={0: Alive()})
    files.worker_ready(0).write_text("1.0")
    now = [0.0]
    log = files.log("route")

    def slow(dt: float) -> None:  # the route job logs a line every 100 s, warm at 900 s
        now[0] = round(now[0] + dt, 3)
        if now[0] % 100 == 0:
            with log.open("a") as f:
                f.write(f"{now[0]} still warming up\n")
        if now[0] == 900.0:
            files.route_ready.write_text(json.dumps({"t_warm": 900.0}))

    up = wait_ready(files, procs, [0], {}, clock=lambda: now[0], sleep=slow)
    assert now[0] >= 900.0 and up["workers"] == {"worker-0": 0.0}

    files.route_ready.unlink()
    now[0] = 0.0

    def silent(dt: float) -> None:  # one line, then nothing
        now[0] = round(now[0] + dt, 3)
        if now[0] == 50.0:
            with log.open("a") as f:
                f.write("stuck\n")

    with pytest.raises(SkewlabError) as info:
        wait_ready(files, procs, [0], {}, clock=lambda: now[0], sleep=silent)
    assert 350.0 <= now[0] <= 351.0  # 300 s after the last line, not 300 s after the start
    assert "not ready: route job (nothing new in their logs for 300 s" in str(info.value)

    def chatty(dt: float) -> None:  # writes forever, never ready: the overall limit
        now[0] = round(now[0] + dt, 3)
        if now[0] % 10 == 0:
            with log.open("a") as f:
                f.write("WARN connection refused\n")

    now[0] = 0.0
    with pytest.raises(SkewlabError, match="still starting after 1800 s"):
        wait_ready(files, procs, [0], {}, clock=lambda: now[0], sleep=chatty)
    assert 1800.0 <= now[0] <= 1801.0

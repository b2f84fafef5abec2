"""The driver owns its children: real runs interrupted, crashed, restarted, resumed.

* ``skewlab run`` SIGTERMed mid-produce: exits 143, no process of the run is left
  (route job, its JVM, workers), the handle says failed;
* a worker SIGKILLed mid-produce is restarted by the driver (counted in the
  handle; on the Spark worker engine by Spark's task retry, counted in its attempts)
  and the run ends exact; one SIGSTOPped (hung, alive) is named, killed and restarted
  once it made no progress with records waiting: by the driver, or on the Spark worker
  engine by its task (the attempt failed) and Spark's task retry;
* the driver crashes mid-produce (crash point ``driver.mid_produce``): its
  children run on; ``skewlab gc`` stops them and records the run as stopped;
  ``Run.resume`` finishes the run (children restarted, the missing events
  produced once) and it ends exact with every event counted once;
* the broker goes away mid-run: the run fails with one line, well before the
  Kafka clients' own retries would give up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from tests.integration.fixtures.engine import (
    engine,
    event_log,
    kill_worker,
    pid_now,
    task_retries,
    tasks_by_group,
)
from tests.integration.fixtures.live import LIVE_DEFAULTS, RunRefs, wait_for

from skewlab.faults import CRASH_EXIT, crash_env
from skewlab.live.driver.handle import Phase, ProcRecord, RunHandle, Status
from skewlab.live.driver.launch import Detached
from skewlab.live.driver.lifecycle import gc
from skewlab.live.driver.route_host import attach_any
from skewlab.live.driver.spark_launcher import SparkProc

pytestmark = pytest.mark.integration

SMALL = ["--workers", "2", "--partitions", "2", "--workload", "country:R80", "--window", "1",
         "--trigger", "0.5", "--no-mlflow", "--no-quality", "--no-progress",
         "--seed", "7"]  # fmt: skip


def skewlab(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "skewlab.cli", *args, "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def only_run(home: Path) -> Path:
    runs = list((home / "runs").iterdir()) if (home / "runs").is_dir() else []
    return runs[0] if len(runs) == 1 else Path("/nonexistent")


def handle_of(home: Path) -> RunHandle | None:
    d = only_run(home)
    try:
        return RunHandle.load(d)
    except Exception:
        return None


def producing(home: Path, client: Any) -> bool:
    h = handle_of(home)
    if h is None or h.t_produce is None:
        return False
    return sum(client.end_offsets(h.events_topic).values()) > 0


def group_members(rec: ProcRecord) -> list[int]:
    """Live processes of the group ``rec`` leads (started no earlier than it)."""
    out = []
    for p in psutil.process_iter(["pid", "create_time", "status"]):
        try:
            if (
                os.getpgid(p.info["pid"]) == rec.pid
                and p.info["create_time"] >= rec.create_time - 0.01
                and p.info["status"] != psutil.STATUS_ZOMBIE
            ):
                out.append(p.info["pid"])
        except (ProcessLookupError, psutil.Error):
            continue
    return out


def nothing_left(h: RunHandle) -> bool:
    """No process of the run runs (a query on the shared route host, a job of the shared warm
    workers app: that query or job ended; a process of the run's own: its group is gone)."""
    return not any(
        (p := attach_any(r)).alive() or (isinstance(p, Detached) and group_members(r))
        for r in h.procs.values()
    )


def test_sigterm_mid_produce_leaves_no_process_and_records_failed(
    broker: Any, tmp_path: Path
) -> None:
    from skewlab.io.kafka import KafkaSettings, connect

    client = connect(KafkaSettings(broker.bootstrap))
    run = skewlab(tmp_path, "run", "--bootstrap", broker.bootstrap, "--events", "60000",
                  "--rate", "1000", *SMALL)  # fmt: skip
    try:
        wait_for(
            "the run to produce", lambda: producing(tmp_path, client), timeout_s=900, watch=run
        )
        h = handle_of(tmp_path)
        assert h is not None and {"route", "worker-0", "worker-1"} <= set(h.procs)
        assert all(attach_any(r).alive() for r in h.procs.values())
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
        client.close()
        gc(tmp_path)  # whatever a failed test left running
    assert run.returncode == 128 + signal.SIGTERM, err
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    h = RunHandle.load(only_run(tmp_path))
    assert h.status == Status.FAILED.value and h.error == "interrupted by SIGTERM"
    assert Phase.PRODUCED.value not in h.phases and Phase.STOPPED.value in h.phases
    wait_for("every process of the run to be gone", lambda: nothing_left(h), timeout_s=30)


def test_a_worker_killed_mid_produce_is_restarted_and_the_run_stays_exact(run_live: Any) -> None:
    n = LIVE_DEFAULTS["events"]
    killed: list[int] = []

    def kill_worker_1(sent: int, procs: Any, refs: RunRefs) -> None:
        if killed or sent < 0.4 * n:
            return
        pid, _ = kill_worker(procs.workers[1])  # not restarted here: the driver (or Spark)
        killed.append(pid)

    run = run_live("pkg", hook=kill_worker_1)
    assert killed
    s = run.summary
    assert s is not None and s.exact, s.exactness
    assert s.events == n
    h = RunHandle.load(run.run_dir)
    if engine(run.run_dir) == "spark":  # Spark's task retry restarted it, the driver nothing
        assert task_retries(run.run_dir) == {"worker-1": 1} and "worker-1" not in h.restarts
    else:
        assert h.restarts["worker-1"] == 1
    # an overloaded machine may also fail a Spark start ("Python worker failed to connect
    # back"): the route job is restarted then too, and the run must stay exact all the same
    assert set(h.restarts) <= {"worker-1", "route"}
    assert pid_now(run.run_dir, "worker-1") != killed[0]
    assert run.log("worker-1.log").count("worker 1 resumes at routed offset") == 2
    assert h.status == Status.DONE.value


def test_a_worker_stopped_mid_produce_is_named_killed_restarted_and_the_run_stays_exact(
    run_live: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 37 point 5: a SIGSTOPped worker is alive, so only its progress shows it hung:
    the supervisor names it, kills its group and restarts it; the run ends EXACT. On the
    Spark worker engine its task does (issue 34): it kills the attempt's process for the
    hang and fails the attempt, and Spark's task retry is the restart."""
    n = LIVE_DEFAULTS["events"]
    stopped: list[tuple[int, float]] = []

    def stop_worker_1(sent: int, procs: Any, refs: RunRefs) -> None:
        if stopped or sent < 0.4 * n:
            return
        p = procs.workers[1]
        os.kill(p.pid, signal.SIGSTOP)  # hung, not dead: only its progress can show it
        stopped.append((p.pid, psutil.Process(p.pid).create_time()))

    try:
        with caplog.at_level(logging.WARNING, logger="skewlab.live.driver.supervise"):
            # drains only once worker 1 runs again; the hang time is the run's setting
            run = run_live("pkg", hook=stop_worker_1, stall_s=8.0)
    finally:
        for pid, created in stopped:  # a failed run may leave the stopped process behind
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).create_time() == created:
                    os.kill(pid, signal.SIGKILL)
    assert stopped
    named = [r.getMessage() for r in caplog.records if "made no progress" in r.getMessage()]
    s = run.summary
    assert s is not None and s.exact, s.exactness
    assert s.events == n
    # the cause is in the run's summary: which worker, how long, what was done
    (hang,) = s.hangs
    found = re.fullmatch(
        r"worker-1 hung (\d+) s with ([\d,]+) records waiting: killed and restarted", hang
    )
    assert found is not None, hang
    assert int(found[1]) >= 8 and int(found[2].replace(",", "")) > 0
    h = RunHandle.load(run.run_dir)
    assert h.settings["stall_s"] == 8.0
    assert set(h.restarts) <= {"worker-1", "route"}  # a Spark start may fail on a busy machine
    if engine(run.run_dir) == "spark":  # its task judged it, not the driver; Spark retried it
        assert named == [] and "worker-1" not in h.restarts
        proc = SparkProc(h.procs["worker-1"])  # the one job of worker 1: no new request
        ends = [(a["attempt"], a["pid"], a["rc"]) for a in proc.dir.read_attempts(proc.rid)
                if "rc" in a]  # fmt: skip
        assert len(ends) == 2, ends
        assert ends[0] == (0, stopped[0][0], -signal.SIGKILL), ends  # killed: it was stopped
        assert ends[1][0] == 1 and ends[1][2] == 0 and proc.poll() == 0, ends  # finished
        tasks = tasks_by_group(event_log(run.run_dir))[proc.rid]
        assert tasks == [(0, "ExceptionFailure"), (1, "Success")], tasks
        assert task_retries(run.run_dir) == {"worker-1": 1}
    else:
        assert len(named) == 1, named
        assert named[0].startswith("worker-1 made no progress for ")
        assert named[0].endswith(" records waiting; restarting it")
        assert h.restarts["worker-1"] == 1  # the driver killed and restarted it
        assert not task_retries(run.run_dir)
    assert pid_now(run.run_dir, "worker-1") != stopped[0][0]
    assert run.log("worker-1.log").count("worker 1 resumes at routed offset") == 2
    assert h.status == Status.DONE.value


def status_row(home: Path, run_id: str) -> list[str]:
    """The cells of ``run_id``'s row in ``skewlab status``'s runs table."""
    out, err = (p := skewlab(home, "status")).communicate(timeout=120)
    assert p.returncode == 0, err
    rows = [line.split(None, 2) for line in out.splitlines() if line.startswith(run_id)]
    assert len(rows) == 1, out
    return rows[0]


def test_driver_crash_mid_produce_then_status_gc_and_resume_end_exact(
    broker: Any, tmp_path: Path
) -> None:
    """Issue 37 point 4: a kill -9'd driver's run is listed as orphaned by `skewlab status`,
    `skewlab gc` stops its processes, and `skewlab resume RUN_ID` finishes it EXACT."""
    from skewlab.io.kafka import KafkaSettings, connect

    n = 8192
    home = tmp_path / "home"
    env = crash_env(["driver.mid_produce"], tmp_path / "crash")
    run = skewlab(home, "run", "--bootstrap", broker.bootstrap, "--events", str(n), "--rate",
                  "2000", "--max-events-per-trigger", "4000", "--strategy", "pkg", *SMALL,
                  env=env)  # fmt: skip
    try:
        _, err = run.communicate(timeout=1200)
    finally:
        if run.poll() is None:
            run.kill()
            gc(home)
    assert run.returncode == CRASH_EXIT, err
    h = RunHandle.load(only_run(home))
    assert h.status == Status.RUNNING.value and h.t_produce is not None
    assert all(attach_any(r).alive() for r in h.procs.values()), "the children died with the driver"
    assert status_row(home, h.run_id)[1] == "orphaned"

    cleaner = skewlab(home, "gc")
    out, err = cleaner.communicate(timeout=120)
    assert cleaner.returncode == 0, err
    assert h.run_id in out
    h = RunHandle.load(only_run(home))
    assert h.status == Status.STOPPED.value and "driver is gone" in (h.error or "")
    wait_for("every process of the run to be gone", lambda: nothing_left(h), timeout_s=30)

    client = connect(KafkaSettings(broker.bootstrap))
    try:
        before = sum(client.end_offsets(h.events_topic).values())
        assert 0 < before < n
        assert status_row(home, h.run_id)[1] == "stopped"
        resumed = skewlab(home, "resume", h.run_id, "--no-progress")
        out, err = resumed.communicate(timeout=1200)
        assert resumed.returncode == 0, err
        assert f"{h.run_id}: EXACT: expected {n} events" in out
        h = RunHandle.load(only_run(home))
        assert h.exactness is not None and h.exactness["lost"] == h.exactness["doubled"] == 0
        assert status_row(home, h.run_id)[1] == "finished"
        assert h.status == Status.DONE.value
        assert h.restarts.get("route", 0) >= 1 and h.restarts.get("worker-0") == 1
    finally:
        client.close()


def test_broker_loss_fails_the_run_within_seconds_and_a_restarted_broker_resumes_it(
    tmp_path: Path,
) -> None:
    """Issue 31 part 4 on Apache Kafka: SIGKILL the broker mid-run -> the run fails with
    one line naming the broker; start the broker again on its data dir -> every topic and
    record is still there, and resuming the run ends EXACT with every event."""
    from skewlab.errors import SkewlabError
    from skewlab.io.kafka import KafkaSettings, connect
    from skewlab.live.driver.run import Run
    from skewlab.runsettings import ExperimentSettings
    from skewlab.services import Broker

    n = 10_240  # the broker dies after the first chunk of 2,048: four fifths still to send
    service = Broker(tmp_path / "broker-home")
    state = service.start(timeout_s=60)
    lost: dict[str, float] = {}

    def kill_broker(sent: int, procs: Any) -> None:
        if not lost:
            os.kill(state.pid, signal.SIGKILL)
            lost["t"] = time.monotonic()

    params = {k: v for k, v in LIVE_DEFAULTS.items() if k != "events"}
    params["rate"] = 2_500.0  # the resumed run sends the rest in ~3 s (40,000 at 1,000/s: 38 s)
    s = ExperimentSettings(
        strategy="key", home=str(tmp_path / "home"), bootstrap=state.url, events=n, **params
    )
    try:
        run = Run.new(s, hook=kill_broker)
        with pytest.raises(SkewlabError) as info:
            run.run_all()
        took = time.monotonic() - lost["t"]
        msg = str(info.value)
        assert "broker" in msg and state.url in msg and "\n" not in msg
        assert took < 30, f"the run took {took:.0f} s to fail after the broker died"
        h = RunHandle.load(run.files.path)
        assert h.status == Status.FAILED.value and state.url in (h.error or "")
        assert not h.restarts, "a process was restarted against a dead broker"
        wait_for("every process of the run to be gone", lambda: nothing_left(h), timeout_s=30)

        again = service.start(timeout_s=60)
        assert again.url == state.url  # the same bootstrap string: the checkpoints know it
        client = connect(KafkaSettings(again.url))
        try:
            produced = sum(client.end_offsets(h.events_topic).values())
            assert 0 < produced < n  # the log kept what was produced before the loss
            assert h.routed_topic in client.list_topics()
        finally:
            client.close()
        summary = Run.resume(run.files.path).run_all()
        assert summary.exact, summary.exactness
        assert summary.events == n
        assert RunHandle.load(run.files.path).status == Status.DONE.value
    finally:
        service.stop()

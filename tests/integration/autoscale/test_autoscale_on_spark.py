"""The live autoscaler's consumers as Spark tasks (``SKEWLAB_WORKER_ENGINE=spark``, issue 34).

Real broker, Delta and Spark (the session's warm workers app beside its route host, on
``local[32,4]``, as a grouping run's), the load step of test_live_autoscale.py held longer:

* the run scales out and back in and ends exact, and each consumer instance the controller
  started is one job of the warm app ``skewlab-workers (warm)``, in the run's job group
  ``<run id>`` described ``skewlab-workers <run id>: consumer-<c>``: its request, one
  attempt that exited 0, one successful task in the app's event log; the app stays up;
* a consumer SIGKILLed while it owns partitions is retried by Spark (attempt 1 of the same
  job), which resumes its partitions (its evidence): no loss noticed, no reassignment, exact.
  It prints the seconds from the kill to the new attempt's start and first batch;
* a consumer ended at the crash point between its evidence and its commit: the same;
* a controller killed mid-reassignment and restarted adopts the running consumer jobs.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from skewlab.faults import CRASH_EXIT, crash_env, fired
from skewlab.io.kafka import connect
from skewlab.live.autoscale.protocol import LiveSettings
from skewlab.live.autoscale.run import AutoscaleRun, run_autoscale
from skewlab.live.autoscale.summary import read_evidence
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.spark_launcher import ENGINE_ENV, EngineDir, Request
from skewlab.rundir import RunDir
from tests.integration.autoscale.test_live_autoscale import (
    _assert_exact,
    _settings,
    _wait_phase,
)
from tests.integration.fixtures.engine import event_log, job_groups, tasks_by_group

pytestmark = pytest.mark.integration

SPARK_LOAD = dict(workload="step:lo=0.1,hi=0.45,up=3,down=15", duration_s=34.0,
                  drain_timeout_s=120.0)  # fmt: skip
"""The local tests' step, held high for 24 s: a consumer task's start (the app's Python daemon
up) took 7-20 s on the loaded machine, and group management waits for it."""


def _consumer_requests(run_dir: Path) -> list[Request]:
    reqs = EngineDir(run_dir / "spark-workers").requests()
    return [r for r in reqs if r.name.startswith("consumer-")]


def test_consumers_are_tasks_of_the_workers_app_and_the_run_scales_exactly(
    broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENGINE_ENV, "spark")
    r = run_autoscale(_settings(broker, tmp_path, **SPARK_LOAD))
    _assert_exact(r)
    consumers = [d["consumers"] for d in r.decisions]
    peak = consumers.index(max(consumers))
    assert max(consumers) >= 3, consumers
    assert min(consumers[peak:]) < max(consumers), consumers
    run_dir = Path(r.run_dir)
    h = RunHandle.load(run_dir)
    assert h.startup["workers_app"] > 0
    d = EngineDir(run_dir / "spark-workers")
    warm = d.warm_app()
    assert warm is not None and not d.app.exists()  # the shared app, none of the run's own
    log = event_log(run_dir)
    (app,) = [e for e in log if e["Event"] == "SparkListenerApplicationStart"]
    assert app["App Name"] == "skewlab-workers (warm)"
    assert warm.alive()  # shared: the run's end does not end it
    tasks, groups = tasks_by_group(log), job_groups(log)
    reqs = _consumer_requests(run_dir)
    assert len(reqs) >= max(consumers), [q.name for q in reqs]  # every instance a new job
    stopped = RunDir.of(run_dir).stop.stat().st_mtime
    assert any(d.rc(q.id).stat().st_mtime < stopped for q in reqs)  # scaled in: a job ended
    for q in reqs:
        assert groups[q.id] == (r.run_id, f"skewlab-workers {r.run_id}: {q.name}"), q.name
        assert tasks[q.id] == [(0, "Success")], (q.name, tasks[q.id])
        assert [a["rc"] for a in d.read_attempts(q.id) if "rc" in a] == [0], q.name
        assert d.read_rc(q.id) == 0
    assert all(x["reason"] != "unassigned" for x in r.decisions[1:]), r.decisions  # none lost


def test_a_killed_consumer_is_retried_by_spark_and_resumes_its_partitions(
    broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENGINE_ENV, "spark")
    victim: dict[str, Any] = {}

    def hook(k: int, run: AutoscaleRun) -> None:
        # from iteration 5 on, the first time a consumer task owns partitions
        if k < 5 or victim:
            return
        owner = run.state().get("owner") or []
        tasks = run.consumer_tasks()
        owning = [c for c in set(owner) & set(tasks) if tasks[c].pid > 0]
        if not owning:
            return
        c = max(owning, key=owner.count)
        pid = tasks[c].pid
        os.kill(pid, signal.SIGKILL)  # not restarted by the controller: Spark retries the task
        owned = [j for j, o in enumerate(owner) if o == c]
        victim.update(consumer=c, pid=pid, rid=tasks[c].proc.rid, t=time.time(), owned=owned)

    r = run_autoscale(_settings(broker, tmp_path, keep_topics=True, **SPARK_LOAD), hook=hook)
    assert victim, "no consumer task owned partitions"
    _assert_exact(r)
    run_dir = Path(r.run_dir)
    d = EngineDir(run_dir / "spark-workers")
    ends = [(a["attempt"], a["pid"], a["rc"]) for a in d.read_attempts(victim["rid"]) if "rc" in a]
    assert ends[0] == (0, victim["pid"], -signal.SIGKILL), ends
    assert ends[1][0] == 1, ends
    tasks = tasks_by_group(event_log(run_dir))
    assert [a for a, _ in tasks[victim["rid"]]] == [0, 1]
    assert tasks[victim["rid"]][0][1] != "Success" and tasks[victim["rid"]][1][1] == "Success"
    # no loss seen by the controller: no reassignment of unassigned partitions after the first
    assert all(x["reason"] != "unassigned" for x in r.decisions[1:]), r.decisions
    # the evidence: the new attempt (same consumer id) started partitions again after the
    # kill and read them (moves away from it went on by its acks: no overlap, checked above)
    live = LiveSettings.from_file(RunDir.of(run_dir).settings)
    client = connect(live.kafka)
    try:
        evidence = read_evidence(client, live)
        for t in live.topics.all():
            client.delete_topic(t)
    finally:
        client.close()
    c, t_kill = victim["consumer"], victim["t"]
    restarted = {e.partition: e.t0 for e in evidence
                 if e.kind == "start" and e.consumer == c and e.t0 > t_kill}  # fmt: skip
    assert restarted, "the new attempt started no partition"
    first = min(e.t1 for e in evidence if e.kind == "batch" and e.consumer == c
                and e.t0 > t_kill and e.end > e.start)  # fmt: skip
    attempt1 = next(a for a in d.read_attempts(victim["rid"]) if a["attempt"] == 1 and "t" in a)
    print(
        f"consumer {c} (owned {victim['owned']}): kill -> attempt 1 started "
        f"{attempt1['t'] - t_kill:.1f} s, "
        f"-> partitions {sorted(restarted)} started {min(restarted.values()) - t_kill:.1f} s, "
        f"-> first batch done {first - t_kill:.1f} s"
    )


def test_a_consumer_crash_between_evidence_and_commit_is_retried_and_ends_exact(
    broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the crash point of test_live_autoscale.py, once in the run: the crashed attempt wrote a
    # batch's evidence and did not commit it; its retry resumes at that evidence
    monkeypatch.setenv(ENGINE_ENV, "spark")
    point = "autoscale.consumer.before_commit"
    for key, value in crash_env([point], tmp_path / "crash").items():
        monkeypatch.setenv(key, value)
    r = run_autoscale(_settings(broker, tmp_path / "home", **SPARK_LOAD))
    assert fired(tmp_path / "crash", point)
    _assert_exact(r)
    run_dir = Path(r.run_dir)
    d = EngineDir(run_dir / "spark-workers")
    attempts = {q.id: d.read_attempts(q.id) for q in _consumer_requests(run_dir)}
    (rid,) = [q for q, a in attempts.items() if any(x["attempt"] == 1 for x in a)]
    ends = [(a["attempt"], a["rc"]) for a in attempts[rid] if "rc" in a]
    assert ends[0] == (0, CRASH_EXIT) and [a for a, _ in ends] == [0, 1], ends
    # the retry ran on, then left as every instance leaves: by its exit message (0), or
    # cancelled by the controller (-9, its cancel marker written) when a scale-in took that
    # consumer and the next iteration scaled out again before it had exited (seen when the
    # crash comes in the first iterations, while the load is still low)
    assert ends[1][1] == 0 or (ends[1][1] == -signal.SIGKILL and d.cancel(rid).exists()), ends
    assert all(x["reason"] != "unassigned" for x in r.decisions[1:]), r.decisions


def test_a_restarted_controller_adopts_the_running_consumer_tasks(
    broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the controller killed in group management and started again: it finds its consumers'
    # jobs in its state file (request records, no pids) and synchronizes with them
    monkeypatch.setenv(ENGINE_ENV, "spark")
    killed: dict[str, Any] = {}

    def hook(k: int, run: AutoscaleRun) -> None:
        if k >= 2 and not killed and _wait_phase(run, "group-management", 1.5):
            run.kill_controller()
            killed.update(state=run.state(), tasks=run.consumer_tasks())
            run.start_controller()

    r = run_autoscale(_settings(broker, tmp_path, **SPARK_LOAD), hook=hook)
    assert killed, "the controller was never caught in group management"
    _assert_exact(r)
    assert "pids" not in killed["state"] or not killed["state"]["pids"]
    assert killed["tasks"], "no consumer task when the controller was killed"
    d = EngineDir(Path(r.run_dir) / "spark-workers")
    for c, task in killed["tasks"].items():  # adopted: the same job ran on, ended by exit
        ends = [(a["attempt"], a["rc"]) for a in d.read_attempts(task.proc.rid) if "rc" in a]
        assert ends == [(0, 0)], (c, ends)
    assert max(x["consumers"] for x in r.decisions) >= 3

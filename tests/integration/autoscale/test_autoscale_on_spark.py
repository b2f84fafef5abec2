"""The live autoscaler's consumers as Spark tasks (``SKEWLAB_WORKER_ENGINE=spark``, issue 34).

Real broker, Delta and Spark (the run's workers app on ``local[32,4]``), the load step of
test_live_autoscale.py:

* the run scales out and back in and ends exact, and each consumer instance the controller
  started is one job (its own job group) of the app ``skewlab-workers <run id>``: its
  request, one attempt that exited 0, one successful task in the app's event log;
* a consumer SIGKILLed while it owns partitions is retried by Spark (attempt 1 of the same
  job), which resumes its partitions: no loss noticed, no reassignment for it, exact.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from skewlab.live.autoscale.run import AutoscaleRun, run_autoscale
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.spark_launcher import ENGINE_ENV, EngineDir, Request
from skewlab.rundir import RunDir
from tests.integration.autoscale.test_live_autoscale import STEP, _assert_exact, _settings
from tests.integration.fixtures.live import wait_for

pytestmark = pytest.mark.integration

SPARK_LOAD = dict(workload=STEP, duration_s=26.0, drain_timeout_s=120.0)


def _event_log(run_dir: Path) -> list[dict[str, Any]]:
    """The workers app's finished Spark event log (waits for the app to stop)."""
    events = EngineDir(run_dir / "spark-workers").events

    def finished() -> list[Path]:
        return [p for p in events.glob("*") if p.is_file() and "inprogress" not in p.name]

    wait_for("the workers app's event log to be complete", lambda: bool(finished()))
    (path,) = finished()
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _tasks_by_group(log: list[dict[str, Any]]) -> dict[str, list[tuple[int, str]]]:
    """Job group -> ``(attempt, end reason)`` of every task of its jobs."""
    group_of: dict[int, str] = {}
    for e in log:
        if e["Event"] == "SparkListenerJobStart":
            for stage in e["Stage IDs"]:
                group_of[stage] = e["Properties"]["spark.jobGroup.id"]
    out: dict[str, list[tuple[int, str]]] = {}
    for e in log:
        if e["Event"] == "SparkListenerTaskEnd":
            reason = e["Task End Reason"]["Reason"]
            out.setdefault(group_of[e["Stage ID"]], []).append((e["Task Info"]["Attempt"], reason))
    return out


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
    log = _event_log(run_dir)
    (app,) = [e for e in log if e["Event"] == "SparkListenerApplicationStart"]
    assert app["App Name"] == f"skewlab-workers {r.run_id}"
    tasks = _tasks_by_group(log)
    reqs = _consumer_requests(run_dir)
    assert len(reqs) >= max(consumers), [q.name for q in reqs]  # every instance a new job
    d = EngineDir(run_dir / "spark-workers")
    stopped = RunDir.of(run_dir).stop.stat().st_mtime
    assert any(d.rc(q.id).stat().st_mtime < stopped for q in reqs)  # scaled in: a job ended
    for q in reqs:
        assert tasks[q.id] == [(0, "Success")], (q.name, tasks[q.id])
        assert [a["rc"] for a in d.read_attempts(q.id) if "rc" in a] == [0], q.name
        assert d.read_rc(q.id) == 0
    controller_log = (run_dir / "controller.log").read_text()
    assert controller_log.count("(Spark job group") == len(reqs)
    assert "is gone" not in controller_log


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
        victim.update(consumer=c, pid=pid, rid=tasks[c].proc.rid, partitions=owner.count(c))

    r = run_autoscale(_settings(broker, tmp_path, **SPARK_LOAD), hook=hook)
    assert victim, "no consumer task owned partitions"
    _assert_exact(r)
    run_dir = Path(r.run_dir)
    d = EngineDir(run_dir / "spark-workers")
    ends = [(a["attempt"], a["pid"], a["rc"]) for a in d.read_attempts(victim["rid"]) if "rc" in a]
    assert ends[0] == (0, victim["pid"], -signal.SIGKILL), ends
    assert ends[1][0] == 1, ends
    controller_log = (run_dir / "controller.log").read_text()
    assert f"consumer {victim['consumer']} is back as Spark task attempt 1" in controller_log
    assert "is gone" not in controller_log  # the controller lost no consumer
    # the new attempt took up the partitions the dead one held (start evidence, then batches)
    consumer_log = (run_dir / f"consumer-{victim['consumer']}.log").read_text()
    after = consumer_log.split("attempt 1", 1)[1]
    assert "start partition" in after, after[-2000:]
    tasks = _tasks_by_group(_event_log(run_dir))
    assert [a for a, _ in tasks[victim["rid"]]] == [0, 1]
    assert tasks[victim["rid"]][0][1] != "Success" and tasks[victim["rid"]][1][1] == "Success"

"""The live autoscaler on the real broker, Delta and processes (issue 6, "Live").

Each test runs one scaled-down run (6 partitions, C_bar = 6 kB/s, 2 s
iterations) whose load steps up (every partition 0.1 C -> 0.45 C) and back
down, and checks the run's own evidence: every record processed exactly once,
no partition read by two consumers at overlapping times, and what the
controller decided. The fault tests kill the controller in the middle of a
reassignment, or a consumer while it owns partitions; the crash-point tests
(issue 18) end the controller or a consumer at a named point and check the run
still ends exact. One test runs each phase from a fresh :class:`AutoscaleRun`
resumed from the run's handle, as the ``skewlab_experiment`` DAG's tasks do.
Its consumers are local processes (``SKEWLAB_WORKER_ENGINE=local``), so a killed one stays
dead for the controller to notice; test_autoscale_on_spark.py runs them as Spark tasks.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from skewlab.errors import SkewlabError
from skewlab.faults import crash_env, fired
from skewlab.io.tracking import Tracker, TrackingSettings
from skewlab.live.autoscale.run import AutoscaleRun, run_autoscale
from skewlab.live.autoscale.settings import AutoscaleSettings
from skewlab.live.autoscale.summary import AutoscaleSummary
from skewlab.live.driver.handle import Phase, RunHandle, Status
from skewlab.live.driver.lifecycle import gc
from skewlab.live.driver.run import open_run
from skewlab.live.driver.spark_launcher import ENGINE_ENV

pytestmark = pytest.mark.integration

STEP = "step:lo=0.1,hi=0.45,up=2,down=7"


@pytest.fixture(autouse=True)
def _local_consumers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consumers as local processes (the module doc)."""
    monkeypatch.setenv(ENGINE_ENV, "local")


def _settings(broker, home: Path, **over) -> AutoscaleSettings:
    base = dict(
        algorithm="mwf", partitions=6, capacity=6000.0, workload=STEP, duration_s=18.0,
        iteration_s=2.0, window_s=2.0, min_span_s=0.5, sample_s=0.25, publish_s=0.5,
        home=str(home), bootstrap=broker.bootstrap, mlflow=False, drain_timeout_s=40.0,
    )  # fmt: skip
    base.update(over)
    return AutoscaleSettings(**base)


def _assert_exact(r: AutoscaleSummary) -> None:
    assert r.records > 500, r.exactness
    assert (r.lost, r.doubled, r.overlaps) == (0, 0, 0), r.exactness
    assert r.exact


def test_load_step_scales_out_then_in_exactly_once(broker, tmp_path: Path) -> None:
    # the step ends at iteration 7 (14 s): leave the monitor's window and two iterations
    # after it to see the lower load, also on a busy machine
    r = run_autoscale(_settings(broker, tmp_path, duration_s=26.0))
    _assert_exact(r)
    consumers = [d["consumers"] for d in r.decisions]
    peak = consumers.index(max(consumers))
    assert max(consumers) >= 3, consumers  # 6 x 0.45 C needs three bins
    assert min(consumers[peak:]) < max(consumers), consumers  # and back in after the step
    assert all(d["handoffs"] or not d["moved"] for d in r.decisions)
    assert r.downtime and all(0 < d["first_record_s"] < r.iteration_s for d in r.downtime)


def _wait_phase(handle: AutoscaleRun, phase: str, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if handle.state().get("phase") == phase:
            return True
        time.sleep(0.02)
    return False


def test_controller_killed_mid_reassignment_resynchronizes(broker, tmp_path: Path) -> None:
    killed: dict[str, int] = {}

    def hook(k: int, handle: AutoscaleRun) -> None:
        # from the load step on, kill the controller the first time it is caught moving
        # partitions (the monitor may need a few iterations to see the step on a busy machine)
        if k >= 2 and not killed and _wait_phase(handle, "group-management", 1.5):
            handle.kill_controller()
            killed["iteration"] = handle.state()["iteration"]
            handle.start_controller()

    r = run_autoscale(_settings(broker, tmp_path), hook=hook)
    assert killed, "the controller was never caught in group management"
    _assert_exact(r)
    log = (Path(r.run_dir) / "controller.log").read_text()
    assert log.count("synchronizing") == 2
    assert any(d["iteration"] > killed["iteration"] for d in r.decisions)
    assert max(d["consumers"] for d in r.decisions) >= 3


def test_killed_consumer_is_noticed_and_its_partitions_reassigned(broker, tmp_path: Path) -> None:
    victim: dict[str, int] = {}

    def hook(k: int, handle: AutoscaleRun) -> None:
        # from iteration 5 on, the first time a running consumer owns partitions (on a
        # busy machine the first consumers may still be starting at iteration 5)
        if k >= 5 and not victim:
            owner = handle.state().get("owner") or []
            pids = handle.consumer_pids()
            owning = set(owner) & set(pids)
            if not owning:
                return
            c = max(owning, key=owner.count)
            os.kill(pids[c], signal.SIGKILL)
            victim.update(consumer=c, partitions=owner.count(c))

    r = run_autoscale(_settings(broker, tmp_path), hook=hook)
    _assert_exact(r)
    assert victim.get("partitions", 0) >= 1, "no running consumer owned partitions"
    log = (Path(r.run_dir) / "controller.log").read_text()
    assert f"consumer {victim['consumer']} (pid" in log
    assert any(d["reason"] == "unassigned" for d in r.decisions[1:]), r.decisions


def test_each_phase_from_its_own_resumed_run(broker, tmp_path: Path) -> None:
    # the DAG's way: every phase in a new AutoscaleRun rebuilt from <run dir>/handle.json,
    # the monitor and controller detached (they outlive the object that started them)
    s = _settings(broker, tmp_path, duration_s=10.0, mlflow=True)
    first = AutoscaleRun.new(s, detached=True)
    run_dir = first.files.path
    try:
        first.services()
        first.topics()
        first.start()
        with pytest.raises(SkewlabError, match="phase 'drained' not done"):
            AutoscaleRun.resume(run_dir).aggregate()
        assert AutoscaleRun.resume(run_dir).produce() > 500
        while not AutoscaleRun.resume(run_dir).poke_drain(wait_s=0.5):  # the DAG's sensor
            pass
        assert isinstance(open_run(run_dir), AutoscaleRun)  # the handle's kind picks it
        assert AutoscaleRun.resume(run_dir).phase is Phase.DRAINED
        aggregated = AutoscaleRun.resume(run_dir)
        report = aggregated.aggregate()
        assert report.exact and (report.lost, report.doubled) == (0, 0) and aggregated.exact
        r = AutoscaleRun.resume(run_dir).summarize()
    finally:
        last = AutoscaleRun.resume(run_dir)
        last.stop()
    assert r.exact and r.records == report.expected_events
    assert r.decisions and len(r.samples) == 5  # one per 2 s iteration of the 10 s load
    assert last.phase is Phase.STOPPED and last.handle.status == Status.DONE
    assert set(last.handle.procs) == {"monitor", "controller"}
    assert all(last.procs[n].poll() is not None for n in last.procs)
    # one MLflow run from start to summary, across the objects (<run dir>/mlflow.json)
    tracker = Tracker(TrackingSettings.for_runs(s.home))
    logged = tracker.get_run_summary(r.mlflow_run_id)
    assert logged.status == "FINISHED" and logged.tags["skewlab.run_id"] == r.run_id
    assert logged.params["algorithm"] == "mwf" and "home" not in logged.params
    assert logged.metrics["records"] == r.records and logged.metrics["lost"] == 0
    produced = tracker.metric_history(r.mlflow_run_id, "produced")
    assert len(produced) >= 4 and produced[-1][1] == r.records  # progress while it ran
    assert "autoscale.png" in tracker.list_artifacts(r.mlflow_run_id)


@pytest.mark.parametrize(
    "point", ["autoscale.controller.mid_reassign", "autoscale.consumer.before_commit"]
)
def test_crash_point_ends_exact(
    broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    # the env reaches every process of the run; the marker dir makes the point fire once
    for key, value in crash_env([point], tmp_path / "crash").items():
        monkeypatch.setenv(key, value)
    r = run_autoscale(_settings(broker, tmp_path / "home"))
    assert fired(tmp_path / "crash", point)
    _assert_exact(r)
    log = (Path(r.run_dir) / "controller.log").read_text()
    if point.startswith("autoscale.controller"):
        assert log.count("synchronizing") == 2  # restarted once, resumed from its state
    else:  # the controller noticed and reassigned the dead consumer's partitions
        assert "is gone" in log
        assert any(d["reason"] == "unassigned" for d in r.decisions[1:]), r.decisions


def test_an_interrupted_run_is_recorded_failed_and_leaves_no_process(
    broker, tmp_path: Path
) -> None:
    seen: dict[str, object] = {}

    def hook(k: int, run: AutoscaleRun) -> None:
        # interrupted at the first boundary from iteration 2 on where consumers run (on a
        # busy machine the first ones may still be starting)
        if k >= 2 and (consumers := run.consumer_pids()):
            seen.update(run_dir=run.files.path, consumers=consumers)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_autoscale(_settings(broker, tmp_path), hook=hook)
    assert seen, "no consumer ran before the load ended"
    h = RunHandle.load(seen["run_dir"])
    assert (h.status, h.error) == (Status.FAILED, "interrupted by SIGINT")
    pids = [rec.pid for rec in h.procs.values()] + list(seen["consumers"].values())
    assert not [p for p in pids if _alive(p)]
    assert gc(tmp_path) == []  # ended: nothing left for skewlab gc


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")

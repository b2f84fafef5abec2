"""The live autoscaler on the real broker, Delta and processes (issue 6, "Live").

Each test runs one scaled-down run (6 partitions, C_bar = 6 kB/s, 2 s
iterations) whose load steps up (every partition 0.1 C -> 0.45 C) and back
down, and checks the run's own evidence: every record processed exactly once,
no partition read by two consumers at overlapping times, and what the
controller decided. The fault tests kill the controller in the middle of a
reassignment, or a consumer while it owns partitions.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from skewlab.live.autoscale.run import AutoscaleSettings, AutoscaleSummary, RunHandle, run_autoscale

pytestmark = pytest.mark.integration

STEP = "step:lo=0.1,hi=0.45,up=2,down=7"


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
    assert r.exactness.startswith("exact"), r.exactness
    assert r.overlaps == 0
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


def _wait_phase(handle: RunHandle, phase: str, timeout_s: float) -> bool:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if handle.state().get("phase") == phase:
            return True
        time.sleep(0.02)
    return False


def test_controller_killed_mid_reassignment_resynchronizes(broker, tmp_path: Path) -> None:
    killed: dict[str, int] = {}

    def hook(k: int, handle: RunHandle) -> None:
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

    def hook(k: int, handle: RunHandle) -> None:
        if k == 5 and not victim:
            owner = handle.state()["owner"]
            pids = handle.consumer_pids()
            c = max(set(owner) & set(pids), key=owner.count)
            os.kill(pids[c], signal.SIGKILL)
            victim.update(consumer=c, partitions=owner.count(c))

    r = run_autoscale(_settings(broker, tmp_path), hook=hook)
    _assert_exact(r)
    assert victim["partitions"] >= 1
    log = (Path(r.run_dir) / "controller.log").read_text()
    assert f"consumer {victim['consumer']} (pid" in log
    assert any(d["reason"] == "unassigned" for d in r.decisions[1:]), r.decisions

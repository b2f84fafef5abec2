"""``skewlab status``'s runs: each handle classified, with the command that deals with it."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from skewlab.live.driver.handle import ProcRecord, RunHandle, Status
from skewlab.live.driver.lifecycle import run_state, run_states, this_process
from skewlab.pipeline.exactness import check
from skewlab.rundir import RunDir

pytestmark = pytest.mark.unit

COUNTS = {(0.0, "a"): (3, 3), (0.0, "b"): (1, 2)}
"""Per (window, key): (count, sum), as :func:`skewlab.pipeline.exactness.check` takes them."""

GONE = [999_999_999.0, 1.0]
"""A driver record of no process (no such pid)."""


def handle(tmp_path: Path, run_id: str, **kw: object) -> RunHandle:
    files = RunDir.create(tmp_path, run_id)
    h = RunHandle(run_id, str(tmp_path), str(files), str(tmp_path / "delta"), {})
    for k, v in kw.items():
        setattr(h, k, v)
    h.save()
    return h


def me(name: str) -> ProcRecord:
    pid, created = this_process()
    return ProcRecord(name, int(pid), created, ["python"], "/dev/null")


def test_each_state_and_its_command(tmp_path: Path) -> None:
    cases = {
        "a-live": dict(driver=this_process()),
        "b-orphan": dict(driver=GONE, procs={"worker-0": me("worker-0")}),
        "c-interrupted": dict(driver=GONE),
        "d-failed": dict(driver=GONE, status=Status.FAILED.value, error="broker lost"),
        "e-done": dict(status=Status.DONE.value, exactness=asdict(check(COUNTS, COUNTS))),
        "f-airflow": dict(detached=True, procs={"route": me("route")}),
        "g-stopped": dict(status=Status.STOPPED.value, error="stopped by skewlab gc"),
    }
    for run_id, kw in cases.items():
        handle(tmp_path, run_id, **kw)
    got = {r.run_id: (r.state, r.action) for r in run_states(tmp_path)}
    assert got == {
        "a-live": ("live", "skewlab stop a-live"),
        "b-orphan": ("orphaned", "skewlab resume b-orphan (or skewlab gc)"),
        "c-interrupted": ("interrupted", "skewlab resume c-interrupted"),
        "d-failed": ("failed", "skewlab resume d-failed"),
        "e-done": ("finished", "-"),
        "f-airflow": ("airflow", "-"),
        "g-stopped": ("stopped", "skewlab resume g-stopped"),
    }
    details = {r.run_id: r.detail for r in run_states(tmp_path)}
    assert details["d-failed"] == "broker lost" and details["e-done"] == "EXACT"
    assert "worker-0" in details["b-orphan"]


def test_a_finished_run_that_was_not_exact_says_so(tmp_path: Path) -> None:
    lost_one = {k: v for k, v in COUNTS.items() if k != (0.0, "b")}
    report = check(COUNTS, lost_one)
    assert not report.exact
    h = handle(tmp_path, "x", status=Status.DONE.value, exactness=asdict(report))
    assert run_state(h).detail == "NOT exact"


def test_no_runs_dir_lists_nothing(tmp_path: Path) -> None:
    assert run_states(tmp_path / "nowhere") == []

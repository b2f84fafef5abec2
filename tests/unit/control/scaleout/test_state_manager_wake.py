"""The state manager steps as soon as a group's pending instances are ready (issue 15).

Between steps it waits ``interval_s`` on its injected clock, or less once every
instance a group waits for is ready, so the checkpointing switch (``on_ready``)
comes when the replacements are up, not up to one interval later.
"""

from __future__ import annotations

import threading
from pathlib import Path

from skewlab.control.scaleout.pacing import READY_POLL_S
from skewlab.control.scaleout.settings import Processes
from tests.unit.control.scaleout.test_state_manager_policy import Operator


class Readiness:
    """Instances become ready at ``at`` (clock time; None: never)."""

    def __init__(self, op: Operator) -> None:
        self.op = op
        self.at: float | None = None

    def __call__(self, j: int) -> float | None:
        now = self.op.clock.now()
        return self.at if self.at is not None and now >= self.at else None


def _on_clock(op: Operator) -> None:
    """The manager's waits advance the fake clock (no wall time passes)."""

    def wait(ev: threading.Event, seconds: float) -> bool:
        op.clock.advance(seconds)
        return ev.is_set()

    op.mgr.wait = wait


def _overloaded_until_started(op: Operator) -> None:
    for _ in range(60):
        op.run(3_000.0, 1.0)
        if op.mgr.groups[0].policy.pending:
            return
    raise AssertionError("no scale-out decision at 3x capacity")


def test_checkpoint_switch_comes_when_the_replacements_are_ready(tmp_path: Path) -> None:
    op = Operator(tmp_path, "checkpoint", {})
    ready = Readiness(op)
    op.mgr.procs = Processes(start=op.started.append, stop=lambda j: None, ready=ready)
    _on_clock(op)
    _overloaded_until_started(op)
    assert op.started and "SwitchRouting" not in op.actions()
    stop = threading.Event()

    # nothing ready: the wait lasts the whole interval
    t0 = op.clock.now()
    assert op.mgr.wait_step(stop) is False
    assert abs(op.clock.now() - t0 - op.mgr.s.interval_s) < 1e-9
    op.mgr.step()
    assert "SwitchRouting" not in op.actions()

    # ready 0.3 s into the next wait: the step comes within one poll of it
    t0 = op.clock.now()
    ready.at = t0 + 0.3
    assert op.mgr.wait_step(stop) is False
    waited = op.clock.now() - t0
    assert 0.3 <= waited < 0.3 + READY_POLL_S + 1e-9 < op.mgr.s.interval_s
    op.mgr.step()
    assert "SwitchRouting" in op.actions()

    # no group waits for instances any more: back to whole intervals, stop still ends it
    t0 = op.clock.now()
    assert op.mgr.wait_step(stop) is False
    assert abs(op.clock.now() - t0 - op.mgr.s.interval_s) < 1e-9
    stop.set()
    assert op.mgr.wait_step(stop) is True


def test_a_readiness_wake_switches_without_reading_signals(tmp_path: Path) -> None:
    """After a readiness wake the loop runs only the switch path (``step_ready``): no
    end offsets, no ``worker_progress`` read, no new timeline row; the next full step
    is back to reading signals."""
    op = Operator(tmp_path, "checkpoint", {})
    ready = Readiness(op)
    op.mgr.procs = Processes(start=op.started.append, stop=lambda j: None, ready=ready)
    _on_clock(op)
    _overloaded_until_started(op)
    reads: list[str] = []
    ends = op.kafka.end_offsets
    op.kafka.end_offsets = lambda topic: reads.append("ends") or ends(topic)  # type: ignore[method-assign]
    done = op.mgr._done
    op.mgr._done = lambda: reads.append("done") or done()  # type: ignore[method-assign]
    rows = len(op.mgr.timeline)

    ready.at = op.clock.now() + 0.2
    assert op.mgr.wait_step(threading.Event()) is False and op.mgr.woke_ready
    op.mgr._safe_step()
    assert "SwitchRouting" in op.actions() and "StopInstances" in op.actions()
    assert reads == [] and len(op.mgr.timeline) == rows
    ev = op.mgr.events[-1]
    assert ev["t_ready"] == ready.at and ev["t_switch"] >= ev["t_ready"]

    # no group waits any more: a whole interval, then a full step with its reads
    assert op.mgr.wait_step(threading.Event()) is False and not op.mgr.woke_ready
    op.mgr._safe_step()
    assert "ends" in reads and "done" in reads and len(op.mgr.timeline) == rows + 1

"""The state manager's start-up gate, on a real Delta store and an injected clock.

The route job's first micro-batch delivers the seconds of input that queued
while Spark started: one burst that scores like overload. The manager must not
scale an operator for it, yet must still react to a real overload afterwards,
and must not wait forever when the first backlog is never worked off.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.control.scaleout.manager import StateManager
from skewlab.control.scaleout.settings import Processes
from skewlab.errors import ConfigError
from skewlab.io.delta import DeltaStore
from skewlab.runsettings import StateManagerSettings
from skewlab.testing import FakeClock

RUN = "startup-run"
SVC_US = 1_000.0  # capacity 1,000 records/s per instance
THRESHOLDS = {"alarming": 35.0, "scale_out": 55.0}


class Offsets:
    """The manager's view of the routed topic: end offsets per partition."""

    def __init__(self) -> None:
        self.ends: dict[int, int] = {}

    def end_offsets(self, topic: str) -> dict[int, int]:
        assert topic == "routed"
        return dict(self.ends)


class Pipeline:
    """Instance 0 of one operator: input arrives at ``rate``, it commits at its capacity."""

    def __init__(self, tmp_path: Path, startup_s: float = 20.0) -> None:
        self.clock = FakeClock(1_000.0)
        self.store = DeltaStore(str(tmp_path / "delta"))
        self.kafka = Offsets()
        self.started: list[int] = []
        self.end = self.done = 0
        s = StateManagerSettings(
            RUN,
            str(tmp_path / "delta"),
            "active-backup",
            workers=1,
            service_us=SVC_US,
            params={**THRESHOLDS, "startup_s": startup_s},
        )
        procs = Processes(start=self.started.append, stop=lambda j: None, ready=lambda j: None)
        self.mgr = StateManager(
            s, self.kafka, "routed", procs, clock=self.clock, store=self.store, wall=self.clock.now
        )

    def second(self, arrived: int) -> None:
        """One second: ``arrived`` records routed, up to 1,000 committed, one manager step."""
        self.clock.advance(1.0)
        self.end += arrived
        done = min(self.end, self.done + 1_000)
        if done > self.done:
            self.done = done
            self.store.append(
                "worker_progress",
                [{"worker": 0, "routed_offset": done, "watermarks": "{}"}],
                app_id=f"work-0:{RUN}",
                version=done,
                run_id=RUN,
            )
        self.kafka.ends = {0: self.end}
        self.mgr.step()

    def decisions(self) -> int:
        return self.store.read("decisions", run_id=RUN).num_rows


def test_start_up_burst_does_not_scale_but_a_later_overload_does(tmp_path: Path) -> None:
    p = Pipeline(tmp_path)
    p.second(0)
    p.second(8_000)  # the first micro-batch: 8 s of input at once
    assert p.mgr.scores(p.clock.now())[0][0] >= THRESHOLDS["scale_out"]  # looks like overload
    for _ in range(10):  # then 300 records/s: the backlog drains in 10 s
        p.second(300)
    assert p.done == p.end and p.mgr.groups[0].caught_up_at == p.clock.now()
    for _ in range(5):  # the policy observes one signal window (5 s) later
        assert not p.mgr.groups[0].started
        p.second(300)
    assert p.mgr.groups[0].started
    assert p.started == [] and p.decisions() == 0
    for _ in range(6):  # a real overload: twice the capacity
        p.second(2_000)
    assert p.started == [1]  # the secondary of active backup, on the spare partition
    assert p.decisions() >= 1


def test_start_up_ends_after_startup_s_when_the_backlog_never_drains(tmp_path: Path) -> None:
    p = Pipeline(tmp_path, startup_s=5.0)
    p.second(0)
    for _ in range(3):
        p.second(3_000)  # overloaded from the start: 4 s after the manager started
    assert p.started == [] and not p.mgr.groups[0].started
    for _ in range(6):
        p.second(3_000)
    assert p.mgr.groups[0].started
    assert p.started == [1]


def test_startup_s_is_checked() -> None:
    with pytest.raises(ConfigError, match="startup_s must be >= 0"):
        StateManagerSettings(RUN, "/d", "checkpoint", 1, SVC_US, params={"startup_s": -1})
    with pytest.raises(ConfigError, match="startup_s must be a number"):
        StateManagerSettings(RUN, "/d", "checkpoint", 1, SVC_US, params={"startup_s": "x"})

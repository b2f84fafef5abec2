"""A new state manager rebuilt from the run's tables continues the dead one (issue 18).

One operator (instance 0) overloaded on an injected clock; decisions, checkpoints and
routing go to a real Delta store. After every step of the original manager, a new
manager built on the same store and :func:`recover`-ed must hold the same logged state
(instances, partitions, routing version and key map, policy ids). And when the
original dies between checkpoint and switch (the crash point raises here), the
recovered manager finishes the scale event exactly once and reports the keys it moved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skewlab.control.scaleout import manager as scaleout_loop
from skewlab.control.scaleout.manager import StateManager
from skewlab.control.scaleout.recovery import recover
from skewlab.control.scaleout.settings import Processes
from skewlab.io.delta import DeltaStore
from skewlab.runsettings import StateManagerSettings
from skewlab.testing import FakeClock

RUN = "recover-run"
CAP = 1_000.0  # records/s per instance
KEYS = [f"k{i}" for i in range(24)]
POLICIES = ["checkpoint", "active-backup", "restart"]


class Offsets:
    def __init__(self) -> None:
        self.ends: dict[int, int] = {}
        self.produced: list[Any] = []

    def end_offsets(self, topic: str) -> dict[int, int]:
        return dict(self.ends) if topic == "routed" else {}

    def produce(self, *args: Any, **kw: Any) -> None:
        self.produced.append((args, kw))

    def flush(self) -> None:
        pass


class Operator:
    """Input at ``rate`` routed to instance 0, committed at capacity; a step a second."""

    def __init__(self, tmp_path: Path, policy: str) -> None:
        self.clock = FakeClock(1_000.0)
        self.store = DeltaStore(str(tmp_path / "delta"))
        self.kafka = Offsets()
        self.started: list[int] = []
        self.stopped: list[int] = []
        self.routed = self.processed = 0.0
        self.s = StateManagerSettings(
            RUN,
            str(tmp_path / "delta"),
            policy,
            workers=1,
            service_us=1e6 / CAP,
            max_instances=2,
            params={"alarming": 35.0, "scale_out": 55.0, "startup_s": 0.0, "cooldown_s": 600.0},
        )
        self.store.append(
            "key_loads",
            [{"window_start": 0, "key": k, "worker": 0, "count": 1, "bytes": 1} for k in KEYS],
            app_id=f"loads:{RUN}",
            version=1,
            run_id=RUN,
        )
        self.mgr = self.manager()

    def manager(self) -> StateManager:
        procs = Processes(
            start=self.started.append, stop=self.stopped.append, ready=lambda j: self.clock.now()
        )
        mgr = StateManager(
            self.s, self.kafka, "routed", procs, clock=self.clock, store=self.store,
            wall=self.clock.now,
        )  # fmt: skip
        mgr._done = lambda: {0: int(self.processed)}  # type: ignore[method-assign]
        return mgr

    def second(self, rate: float) -> None:
        self.clock.advance(1.0)
        self.routed += rate
        self.processed = min(self.routed, self.processed + CAP)
        self.kafka.ends = {0: int(self.routed)}
        self.mgr.step()
        for f in list(self.mgr._writing.values()):
            f.result()  # checkpoints written before the next look

    def decisions(self) -> list[dict[str, Any]]:
        t = self.store.read("decisions", run_id=RUN, columns=["detail"])
        return [json.loads(d) for d in t["detail"].to_pylist()]


def logged_view(m: StateManager) -> dict[str, Any]:
    """What the tables record of a manager (unlogged phase changes left out)."""
    out: dict[str, Any] = {
        "running": sorted(m.running),
        "version": m.version,
        "map": dict(m.map),
        "n_decisions": m.n_decisions,
    }
    for g in m.groups:
        snap = g.policy.snapshot()
        out[f"g{g.g}"] = {
            "phys": dict(g.phys),
            "active": list(g.active),
            "spare": list(g.spare),
            "policy_active": snap.active,
            "next_instance": snap.next_instance,
            "next_checkpoint": snap.next_checkpoint,
            "last_checkpoint": snap.last_checkpoint,
        }
    return out


@pytest.mark.parametrize("policy", POLICIES)
def test_a_recovered_manager_holds_what_the_dead_one_logged(tmp_path: Path, policy: str) -> None:
    op = Operator(tmp_path, policy)
    seen_switch = False
    for t in range(30):
        op.second(600.0 if t < 3 else 3_000.0)  # then 3x capacity: alarm, scale out
        fresh = recover(op.manager())
        assert logged_view(fresh) == logged_view(op.mgr), f"after step {t + 1}"
        if op.mgr.events:
            seen_switch = True
            assert [e["to"] for e in fresh.events] == [e["to"] for e in op.mgr.events]
        fresh._pool.shutdown()
    assert seen_switch, [d["action"] for d in op.decisions()]


class Died(Exception):
    """The driver's process ended at the crash point (``os._exit`` in a real run)."""


@pytest.mark.parametrize("policy", POLICIES)
def test_a_manager_that_died_between_checkpoint_and_switch_is_finished_by_the_next(
    tmp_path: Path, policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(name: str) -> None:
        if name == "scaleout.between_checkpoint_and_switch":
            raise Died(name)

    monkeypatch.setattr(scaleout_loop, "crash_point", crash)
    op = Operator(tmp_path, policy)
    with pytest.raises(Died):
        for t in range(40):
            op.second(600.0 if t < 3 else 3_000.0)
    started = list(op.started)
    assert started and op.mgr.version == 0  # instances started, no switch written
    monkeypatch.undo()
    op.mgr._pool.shutdown()
    op.mgr = recover(op.manager())  # the resumed driver's manager
    assert op.mgr.running >= set(started)
    for _ in range(40):
        op.second(3_000.0)
    acts = [d["action"] for d in op.decisions()]
    assert acts.count("SwitchRouting") == 1, acts
    assert acts.count("StartInstances") == 1 and op.started == started  # none started twice
    assert op.mgr.version == 1  # the one switch's version, written once
    rows = op.store.read("assignments", run_id=RUN).to_pylist()
    assert {r["version"] for r in rows} == {1}
    moved = {r["key"] for r in rows if r["reason"] == "scale-out"}
    assert moved  # keys moved
    # the switch the resumed manager made reports the keys it moved (it read the keys
    # seen before it switched), in its decision and in its scale event
    (switch,) = [d for d in op.decisions() if d["action"] == "SwitchRouting"]
    assert switch["version"] == 1 and switch["keys_moved"] == len(moved), switch
    (ev,) = op.mgr.events
    assert ev["keys_moved"] == len(moved)
    assert {k for k, _ in ev["pending"]} == moved  # its pause waits for these keys
    (g,) = op.mgr.groups
    assert len(g.active) == 2 and g.active[1] in started
    assert set(g.active) <= op.mgr.running
    if policy == "restart":
        assert any(d.get("recovered") for d in op.decisions())

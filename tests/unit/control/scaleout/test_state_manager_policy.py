"""The state manager's decisions on an injected clock: cool-down, changed keys, a busy machine.

One operator (instance 0) whose routed input arrives at ``rate`` and which commits
at its capacity (1,000 records/s); the manager's view of committed offsets is
stubbed, the rest (decisions, checkpoints, routing) goes to a real Delta store.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from skewlab.control.scaleout.manager import StateManager
from skewlab.control.scaleout.settings import Processes
from skewlab.io.delta import DeltaStore
from skewlab.io.progress import encode_watermarks
from skewlab.io.state_store import CheckpointStore
from skewlab.pipeline import events
from skewlab.rundir import RunDir
from skewlab.runsettings import StateManagerSettings
from skewlab.state import owner, split_hash
from skewlab.testing import FakeClock

RUN = "policy-run"
CAP = 1_000.0  # records/s per instance (service_us = 1,000)


class Offsets:
    """End offsets of ``routed`` (``ends``) and ``events`` (``events``, when set); the
    records the manager produces (``produced``: topic, partition, key, headers)."""

    def __init__(self) -> None:
        self.ends: dict[int, int] = {}
        self.events: dict[int, int] | None = None
        self.produced: list[tuple[str, int, bytes, dict[str, str]]] = []
        self.flushed = 0

    def end_offsets(self, topic: str) -> dict[int, int]:
        if topic == RunDir.of(RUN).events_topic and self.events is not None:
            return dict(self.events)
        return dict(self.ends)

    def partitions(self, topic: str) -> int:
        assert topic == RunDir.of(RUN).events_topic
        return 2

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        assert partition is not None and key is not None
        hdrs = {n: v.decode() for n, v in headers or []}
        self.produced.append((topic, partition, key, hdrs))

    def flush(self) -> None:
        self.flushed = len(self.produced)


class Operator:
    """Input produced at ``rate``; the route job delivers it every ``burst_s``; the
    instance works at capacity and commits every ``commit_s``; the manager steps
    every ``step_s`` (a busy machine: late micro-batches, late commits, late steps)."""

    def __init__(
        self,
        tmp_path: Path,
        policy: str,
        params: dict[str, Any],
        *,
        step_s: float = 1.0,
        burst_s: float = 0.5,
        commit_s: float = 0.5,
        workers: int = 1,
        max_instances: int = 2,
    ) -> None:
        self.clock = FakeClock(1_000.0)
        self.store = DeltaStore(str(tmp_path / "delta"))
        self.kafka = Offsets()
        self.started: list[int] = []
        self.step_s, self.burst_s, self.commit_s = step_s, burst_s, commit_s
        self.produced = self.routed = self.processed = 0.0
        self.committed = 0
        self.t = 0.0
        s = StateManagerSettings(
            RUN,
            str(tmp_path / "delta"),
            policy,
            workers=workers,
            service_us=1e6 / CAP,
            max_instances=max_instances,
            params={"alarming": 35.0, "scale_out": 55.0, "startup_s": 0.0, **params},
        )
        procs = Processes(
            start=self.started.append, stop=lambda j: None, ready=lambda j: self.clock.now()
        )
        self.mgr = StateManager(
            s, self.kafka, "routed", procs, clock=self.clock, store=self.store, wall=self.clock.now
        )
        self.mgr._done = lambda: {0: self.committed}  # type: ignore[method-assign]

    def run(self, rate: float, seconds: float) -> None:
        """``seconds`` of operation in ticks of 0.1 s."""
        for _ in range(round(seconds * 10)):
            self.t = round(self.t + 0.1, 1)
            self.clock.advance(0.1)
            self.produced += rate * 0.1
            if _due(self.t, self.burst_s):
                self.routed = self.produced
            self.processed = min(self.routed, self.processed + CAP * 0.1)
            if _due(self.t, self.commit_s):
                self.committed = int(self.processed)
            if _due(self.t, self.step_s):
                self.kafka.ends = {0: int(self.routed)}
                self.mgr.step()

    def actions(self) -> list[str]:
        t = self.store.read("decisions", run_id=RUN, columns=["detail"])
        return [json.loads(d)["action"] for d in t["detail"].to_pylist()]


def _due(t: float, every: float) -> bool:
    return abs(t / every - round(t / every)) < 1e-6


def _scale_actions(actions: list[str]) -> list[str]:
    """The scale actions taken, sorted (Delta returns rows in no particular order)."""
    return sorted(a for a in actions if a in ("StartInstances", "SwitchRouting", "StopInstances"))


def test_active_backup_take_over_waits_for_the_cool_down(tmp_path: Path) -> None:
    """cooldown 60 s, dwell 1: a second take-over waits 60 s after the first (issue 15)."""
    op = Operator(tmp_path, "active-backup", {"cooldown_s": 60.0, "dwell": 1}, max_instances=4)
    op.run(3_000.0, 10.0)  # 3x capacity: alarming, secondaries, take-over
    first = [e["t_rel"] for e in op.mgr.events]
    assert len(first) == 1
    op.run(3_000.0, 40.0)  # still overloaded: a second take-over would be due at once
    assert len(op.mgr.events) == 1
    assert op.mgr.groups[0].policy.phase.value in ("alarmed", "scaling")
    op.run(3_000.0, 30.0)  # past the cool-down
    assert len(op.mgr.events) == 2
    assert op.mgr.events[1]["t_rel"] - first[0] >= 60.0 - 1e-6


def test_checkpoint_on_changed_keys_before_the_interval(tmp_path: Path) -> None:
    """change_fraction 0.5: a checkpoint as soon as half the keys changed since the last."""
    op = Operator(
        tmp_path,
        "checkpoint",
        {"interval_s": 1_000.0, "change_fraction": 0.5, "scale_out": 95.0},
    )
    keys = [f"k{i}" for i in range(4)]
    op.store.append(
        "key_loads",
        [{"window_start": 0, "key": k, "worker": 0, "count": 1, "bytes": 1} for k in keys],
        app_id=f"loads:{RUN}",
        version=1,
        run_id=RUN,
    )
    op.run(900.0, 8.0)  # 90 % of capacity: alarming (first checkpoint), not scale_out
    assert op.actions().count("TakeCheckpoint") == 1
    op.mgr._writing[0].result()
    tau = op.mgr._cp_taus[0][0]

    def change(ks: list[str], version: int) -> None:
        rows = [
            {"checkpoint": version, "instance": 0, "key": k, "value": b"{}", "tau": 0} for k in ks
        ]
        op.store.append("operator_state", rows, app_id=f"w:{RUN}", version=version, run_id=RUN)

    change(keys[:1], tau + 1)  # 1 of 4 keys: below the fraction
    op.run(900.0, 3.0)
    assert op.actions().count("TakeCheckpoint") == 1
    change(keys[1:3], tau + 2)  # 3 of 4
    op.run(900.0, 1.0)
    assert op.actions().count("TakeCheckpoint") == 2


def test_a_busy_machine_makes_the_same_decisions_for_the_same_backlog(tmp_path: Path) -> None:
    """Quiet: input routed every 0.5 s, commits every 0.5 s, a step a second. Busy: input
    in 3 s bursts, commits every 2 s, a step every 1.7 s. Same load, same decisions."""
    quiet = {"step_s": 1.0, "burst_s": 0.5, "commit_s": 0.5}
    busy = {"step_s": 1.7, "burst_s": 3.0, "commit_s": 2.0}
    outcomes = {}
    for name, timing in (("quiet", quiet), ("busy", busy)):
        under = Operator(tmp_path / f"{name}-under", "active-backup", {}, **timing)
        under.run(500.0, 40.0)  # 50 % of capacity: nothing to do
        over = Operator(tmp_path / f"{name}-over", "active-backup", {}, **timing)
        over.run(600.0, 10.0)
        over.run(1_800.0, 30.0)  # 180 %: secondaries, then the take-over
        outcomes[name] = (_scale_actions(under.actions()), _scale_actions(over.actions()))
    assert outcomes["quiet"] == outcomes["busy"]
    assert outcomes["quiet"][0] == []
    assert outcomes["quiet"][1] == ["StartInstances", "StopInstances", "SwitchRouting"]


def test_a_switch_after_the_input_ended_is_ended_by_the_manager(tmp_path: Path) -> None:
    """A take-over decided after the last event: no splitter ever applies it, so once
    the input is produced and routed the manager sends every moved set's end-of-set
    marker itself, one per splitter, to the old instance's partition (issue 15)."""
    op = Operator(tmp_path, "active-backup", {})
    keys = [f"k{i}" for i in range(40)]
    behind = round(op.clock.now() * 1000) - 10_000  # the route job routes 10 s behind
    op.store.append(
        "key_loads",
        [{"window_start": behind, "key": k, "worker": 0, "count": 1, "bytes": 1} for k in keys],
        app_id=f"loads:{RUN}",
        version=1,
        run_id=RUN,
    )
    op.run(3_000.0, 10.0)  # 3x capacity: secondaries, then the take-over
    assert len(op.mgr.events) == 1
    ev = op.mgr.events[0]
    assert ev["from"] == [0] and ev["keys_moved"] >= 1
    new = ev["to"][1]
    # the switch takes effect at the route job's frontier, not lead_s after the decision
    eff = op.store.read("assignments", run_id=RUN, columns=["effective_ms"])["effective_ms"]
    assert set(eff.to_pylist()) == {behind}
    assert op.kafka.produced == []  # input still coming: the splitters end the sets
    op.mgr.input_ended = True
    op.kafka.events = {0: 30, 1: 11}  # 41 produced, 40 routed: a splitter may still route
    op.mgr.step()
    assert op.kafka.produced == [] and not op.mgr.settled()
    op.kafka.events = {0: 30, 1: 10}  # every event routed
    op.mgr.step()
    got = op.kafka.produced
    assert op.kafka.flushed == len(got) == 2 * ev["keys_moved"]
    moved = {k for k in keys if owner(k, 2, split_hash) == 1}  # the new instance's hash part
    assert len(moved) == ev["keys_moved"]
    ends = set()
    for topic, part, key, hdrs in got:
        assert topic == "routed" and part == 0
        sid, nxt, sp = (int(x) for x in hdrs[events.EOS_HEADER].split(":"))
        assert sid == 0 and nxt == new
        ends.add((key.decode(), sp))
    assert ends == {(k, sp) for k in moved for sp in (0, 1)}
    op.mgr.step()
    assert len(op.kafka.produced) == len(got)  # each set ended once
    assert "EndSets" in op.actions()


@pytest.mark.parametrize("policy", ["active-backup", "checkpoint"])
def test_the_switch_version_moves_the_swept_keys_and_the_next_sweep_the_new_ones(
    tmp_path: Path, policy: str
) -> None:
    """The switch writes its version from the keys the last step's sweep saw (no read of
    ``key_loads`` on the switch's path): every such key held or moved, the new
    instance's hash part moved with set 1, the rest kept. A key routed for the first
    time after that sweep is moved by the next step's sweep, to the same place.
    Checkpointing's switch writes the version built at its decision, while its
    replacements started (``_prepare_switch``): the same rows."""
    op = Operator(tmp_path, policy, {})
    built: list[int] = []
    real_rows = op.mgr._version_rows

    def count_builds(seen: list[str], sig: Any) -> Any:
        built.append(len(seen))
        return real_rows(seen, sig)

    op.mgr._version_rows = count_builds  # type: ignore[method-assign]
    keys = [f"k{i}" for i in range(40)]
    late = "k-late"

    def loads(ks: list[str], version: int) -> None:
        op.store.append(
            "key_loads",
            [{"window_start": 1, "key": k, "worker": 0, "count": 1, "bytes": 1} for k in ks],
            app_id=f"loads:{RUN}",
            version=version,
            run_id=RUN,
        )

    loads(keys, 1)
    real_switch = op.mgr._switch

    during: list[int] = []

    def switch_after_a_new_key(grp: Any, logical: tuple[int, ...]) -> dict[str, Any]:
        loads([late], 2)  # routed between the last step's sweep and the switch
        before = len(built)
        out = real_switch(grp, logical)
        during.append(len(built) - before)  # versions built by the switch itself
        return out

    op.mgr._switch = switch_after_a_new_key  # type: ignore[method-assign]
    op.run(3_000.0, 10.0)  # 3x capacity: secondaries, then the take-over
    (ev,) = op.mgr.events
    new = ev["to"][1]
    t = op.store.read("assignments", run_id=RUN, columns=["version", "key", "worker", "set_id"])
    rows = t.to_pylist()
    first = {r["key"]: (r["worker"], r["set_id"]) for r in rows if r["version"] == 1}
    want = {k: (new, 1) if owner(k, 2, split_hash) == 1 else (0, 0) for k in keys}
    assert first == {k: v for k, v in want.items() if v[0] == new}  # moved keys; none held yet
    assert late not in first  # not seen by the sweep the switch used
    assert owner(late, 2, split_hash) == 1  # in the moved part
    later = [(r["worker"], r["set_id"]) for r in rows if r["key"] == late]
    assert later and set(later) == {(new, 1)}  # moved by a later step's sweep, like any key
    assert ev["keys_moved"] == sum(1 for v in want.values() if v[0] == new)
    # checkpointing: built at the decision, only written at the switch
    assert during[0] == (0 if policy == "checkpoint" else 1)


def test_a_restart_from_a_skipped_checkpoint_writes_it(tmp_path: Path) -> None:
    """Restart's plan names the policy's last checkpoint; the manager skips a request
    while the previous checkpoint is still writing. The restart must not name a
    checkpoint never written (its instances would wait CHECKPOINT_WAIT_S for it, then
    restore an older one): the manager writes it when it starts them."""
    op = Operator(tmp_path, "restart", {"interval_s": 3.0})
    release = threading.Event()
    real = op.mgr._checkpoint

    def slow(*args: Any) -> dict[str, Any]:
        release.wait(timeout=60)  # the first write holds the writer: later requests skip
        return real(*args)

    op.mgr._checkpoint = slow  # type: ignore[method-assign]
    op.run(500.0, 13.0)  # half capacity: a checkpoint every 3 s, all but the first skipped
    op.run(3_000.0, 10.0)  # 3x capacity: the restart
    release.set()
    assert op.mgr.checkpoints_skipped >= 1 and len(op.mgr.events) == 1
    op.mgr._writing[0].result(timeout=60)
    t = op.store.read("decisions", run_id=RUN, columns=["detail"])
    details = [json.loads(d) for d in t["detail"].to_pylist()]
    (named,) = {d["checkpoint"] for d in details if d["action"] == "SplitState"}
    skipped = {d["checkpoint"] for d in details if d.get("skipped")}
    assert named in skipped  # the restart came while its checkpoint was skipped
    stored = CheckpointStore(op.store, f"{RUN}#g0", "g0").checkpoints()
    assert named in stored


def test_a_replacements_plan_names_what_its_checkpoint_holds(tmp_path: Path) -> None:
    """The checkpoint at the scale-out decision holds the instance's committed state at
    the commit version seen at the request; the replacement's plan names that version
    and the routed end (``refs``), so it restores from those rows without waiting for
    the copy, and the copy, once written, has the same tau."""
    op = Operator(tmp_path, "checkpoint", {"interval_s": 1_000.0})
    app = RunDir.worker_app(0, RUN)
    row = {"window_start": 0, "key": "k", "worker": 0, "count": 1, "sum": 1.0}
    progress = {
        "worker": 0,
        "routed_offset": 4_321,
        "watermarks": encode_watermarks({}, 4_321, 4_321),
    }
    op.store.append("worker_progress", [progress], app_id=app, version=4_321, run_id=RUN)
    op.store.append("partials", [row], app_id=app, version=4_321, run_id=RUN)
    op.run(600.0, 10.0)
    op.run(1_800.0, 10.0)  # 180 % of capacity: the decision
    t = op.store.read("decisions", run_id=RUN, columns=["detail"])
    details = [json.loads(d) for d in t["detail"].to_pylist()]
    (start,) = [d for d in details if d["action"] == "StartInstances"]
    (plan,) = start["plans"].values()
    ref = plan["refs"]["0"]
    assert ref["version"] == 4_321 and ref["end"] is not None and ref["end"] > 0
    op.mgr._writing[0].result(timeout=60)  # one writer thread: every earlier write is done
    copy = op.store.read(
        "operator_state",
        run_id=f"{RUN}#g0",
        columns=["tau"],
        filters=[("checkpoint", "=", plan["checkpoint_id"]), ("instance", "=", 0)],
    )
    assert set(copy["tau"].to_pylist()) == {4_321}


def test_the_restored_checkpoints_copy_is_written_after_the_scale_event(tmp_path: Path) -> None:
    """The replacements restore the decision's checkpoint by reference, so its copy is
    not written on the decision's path (where it competed with the restore and the
    switch) but once the group's moved keys are live; every copy is written."""
    op = Operator(tmp_path, "checkpoint", {"interval_s": 1_000.0})
    op.run(600.0, 10.0)
    stored = CheckpointStore(op.store, f"{RUN}#g0", "g0")
    named = None
    for _ in range(200):  # 180 % of capacity, a step at a time until the decision
        op.run(1_800.0, 1.0)
        t = op.store.read("decisions", run_id=RUN, columns=["detail"])
        starts = [json.loads(d) for d in t["detail"].to_pylist() if "StartInstances" in d]
        if starts:
            (plan,) = starts[0]["plans"].values()
            named = plan["checkpoint_id"]
            break
    assert named is not None and "refs" in plan
    if op.mgr._writing.get(0) is not None:
        op.mgr._writing[0].result(timeout=60)
    assert named not in stored.checkpoints()  # deferred: the event is under way
    assert op.mgr.groups[0].event is not None  # the scale event is open
    for _ in range(200):
        op.run(1_800.0, 1.0)
        if op.mgr.events and "t_done" in op.mgr.events[0]:
            break
    op.run(1_800.0, 1.0)  # the next step writes it
    op.mgr._writing[0].result(timeout=60)
    assert named in stored.checkpoints()

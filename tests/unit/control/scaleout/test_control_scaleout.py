"""The scale-out control step against real Delta tables in a tmp dir (no services, no mocks).

Each test writes what a live run writes for one-minute data intervals: the route
job's ``key_loads`` and each worker's flush (``operator_state`` at its offset,
``worker_progress``, ``partials``, under app id ``work-<j>:<run>``), runs
:func:`scaleout_step` and reads ``decisions`` and ``operator_state`` back:

* a loaded interval alarms the checkpoint policy, which checkpoints the
  worker's committed state; an overloaded one records the scale-out;
* the same interval again writes nothing; a crash and a retry leave the rows
  of one clean run;
* the policy's state carries over between calls (dwell needs two intervals);
* a light interval decides nothing; bad params fail with one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skewlab.control import STEPS, StepStatus, run_step, scaleout_step
from skewlab.control.scaleout.step import (
    POLICIES,
    snapshot_from_dict,
    snapshot_to_dict,
    state_run_id,
)
from skewlab.errors import ConfigError
from skewlab.io.delta import DeltaStore
from skewlab.io.state_store import CheckpointStore
from skewlab.rebalance.base import hash_worker
from skewlab.runsettings import POLICIES as LIVE_POLICIES
from skewlab.runsettings import StateManagerSettings
from skewlab.state import Level, Phase
from skewlab.testing import FakeClock

pytestmark = pytest.mark.unit

RUN = "key-scaleout-1"
W = 4
MIN = 60_000
T0 = 1_772_366_640_000  # 2026-03-01T12:04:00Z, a minute boundary
IV = [(T0 + i * MIN, T0 + (i + 1) * MIN) for i in range(4)]
SVC = 1000.0  # capacity 1000 events/s per instance
BASE = {"workers": W, "service_us": SVC}


def key_of(worker: int) -> str:
    """A key whose KEY-grouping worker (of W) is ``worker``."""
    i = 0
    while hash_worker(f"k{i}", W) != worker:
        i += 1
    return f"k{i}"


LIGHT = {j: 6_000 for j in range(W)}  # 100 events/s: score 5.5
LOADED = {**LIGHT, 0: 54_000}  # worker 0 at 90 %, no backlog: score 49.5 (alarming)
OVER = {**LIGHT, 0: 180_000}  # worker 0 offered 3x its capacity


class Run:
    """Writes a live run's tables the way the route job and the workers do."""

    def __init__(self, store: DeltaStore) -> None:
        self.store = store
        self.batch = 0
        self.offset = dict.fromkeys(range(W), 0)

    def interval(self, iv: tuple[int, int], offered: dict[int, int], done: dict[int, int]) -> None:
        """Two 30 s windows of ``offered`` events per worker; each worker flushes ``done``."""
        rows = [
            {"window_start": w0, "key": key_of(j), "worker": j, "count": n // 2, "bytes": n}
            for w0 in (iv[0], iv[0] + 30_000)
            for j, n in offered.items()
        ]
        self.store.append("key_loads", rows, app_id=f"route:{RUN}", version=self.batch, run_id=RUN)
        self.batch += 1
        for j, n in done.items():
            self.flush(j, iv[0], n)

    def flush(self, j: int, window: int, count: int) -> int:
        """One worker flush (worker.py's order): operator_state, worker_progress, partials."""
        o = self.offset[j] = self.offset[j] + count
        app = f"work-{j}:{RUN}"
        k = key_of(j)
        state = [
            {"checkpoint": o, "instance": j, "key": k, "tau": o, "buffered": None,
             "value": json.dumps({"received": o, "completed": -1, "sets": []}).encode()},
            {"checkpoint": o, "instance": j, "key": "hot", "tau": o,
             "value": json.dumps({"received": 1, "completed": 0, "sets": []}).encode(),
             "buffered": json.dumps({"1": [[window, 0, 10, 0]]}).encode()},
        ]  # fmt: skip
        self.store.append("operator_state", state, app_id=app, version=o, run_id=RUN)
        progress = [{"worker": j, "routed_offset": o, "watermarks": "{}"}]
        self.store.append("worker_progress", progress, app_id=app, version=o, run_id=RUN)
        partials = [{"window_start": window, "key": k, "worker": j, "count": count, "sum": 1.0}]
        self.store.append("partials", partials, app_id=app, version=o, run_id=RUN)
        return o


@pytest.fixture
def store(tmp_path: Path) -> DeltaStore:
    return DeltaStore(tmp_path / "delta")


def decisions(store: DeltaStore) -> list[dict[str, Any]]:
    rows = store.read("decisions", run_id=RUN).to_pylist()
    for r in rows:
        r["detail"] = json.loads(r["detail"])
    return sorted(rows, key=lambda r: (r["detail"]["interval_ms"], r["detail"]["action"]))


def step(store: DeltaStore, policy: str, iv: tuple[int, int], **params: Any) -> Any:
    return scaleout_step(
        store, RUN, policy, {**BASE, **params}, *iv, clock=FakeClock(iv[1] / 1000 + 2)
    )


def test_registered_with_the_live_loop_names() -> None:
    assert list(STEPS) == ["rebalance", "autoscale", "scale-out"]
    assert tuple(LIVE_POLICIES) == POLICIES and STEPS["scale-out"].switch == "scale_out"


def test_checkpoint_policy_alarms_checkpoints_then_scales_out(store: DeltaStore) -> None:
    run = Run(store)
    run.interval(IV[0], LOADED, LOADED)
    r1 = step(store, "checkpoint", IV[0], dwell=1)

    assert r1.status is StepStatus.DECIDED and r1.reason == "g0: TakeCheckpoint"
    assert set(r1.written) == {"operator_state", "decisions"}
    assert (r1.numbers["checkpoints"], r1.numbers["alarmed"]) == (1, 1)
    assert r1.numbers["max_score"] == pytest.approx(49.5)
    (cp_row,) = decisions(store)
    d = cp_row["detail"]
    assert (cp_row["loop"], cp_row["policy"], cp_row["reason"]) == (
        "scale-out", "checkpoint", "score 49.5",
    )  # fmt: skip
    assert (d["action"], d["group"], d["checkpoint"], d["instances"], d["workers"]) == (
        "TakeCheckpoint", 0, 0, [0], [0],
    )  # fmt: skip
    assert d["carried_out"] is True and d["level"] == "ALARMING" and d["keys"] == 2
    assert d["signals"]["0"]["input_rate"] == 900.0 and d["signals"]["0"]["busy"] == 0.9
    assert d["signals"]["0"]["queue_len"] == 0.0 and d["interval_ms"] == list(IV[0])
    # The worker's committed state (operator_state at its partials version) is the checkpoint.
    (part,) = CheckpointStore(store, f"{RUN}#g0", "g0").read(0).values()
    assert part.tau == run.offset[0] == 54_000
    assert part.theta[key_of(0)]["received"] == 54_000
    assert part.theta["hot"]["buffered"] == {"1": [[IV[0][0], 0, 10, 0]]}  # kept inside theta

    # Overloaded: backlog grows, the policy takes checkpoint 1 at the decision and
    # scales out from it (checkpoint_at_scale_out, the default).
    run.interval(IV[1], OVER, {**LIGHT, 0: 60_000})
    r2 = step(store, "checkpoint", IV[1], dwell=1)
    assert r2.status is StepStatus.DECIDED and set(r2.written) == {"decisions", "operator_state"}
    assert r2.numbers["scaling"] == 1 and r2.numbers["checkpoints"] == 1
    rows = [r for r in decisions(store) if r["detail"]["interval_ms"] == list(IV[1])]
    by_action = {r["detail"]["action"]: r["detail"] for r in rows}
    assert set(by_action) == {
        "TakeCheckpoint",
        "StartInstances",
        "SplitState",
        "Replay",
        "FeedInput",
    }
    (part,) = CheckpointStore(store, f"{RUN}#g0", "g0").read(1).values()
    assert part.tau == run.offset[0] > 54_000  # the worker's commit at the decision
    start = by_action["StartInstances"]
    assert (start["instances"], start["role"], start["carried_out"]) == (
        [1, 2], "replacement", False,
    )  # fmt: skip
    assert by_action["Replay"]["checkpoint"] == 1
    sig = start["signals"]["0"]
    assert sig["input_rate"] == 3000.0 and sig["queue_len"] == 120_000 and sig["busy"] == 1.0
    assert rows[0]["reason"] == f"score {start['score']:.1f}" and start["score"] >= 70

    # Re-running either interval writes nothing (and I1 is before the last decided one).
    n_dec, n_state = len(decisions(store)), store.read("operator_state").num_rows
    for iv in (IV[1], IV[0]):
        again = step(store, "checkpoint", iv, dwell=1)
        assert again.status is StepStatus.ALREADY_DONE and again.written == ()
    assert (len(decisions(store)), store.read("operator_state").num_rows) == (n_dec, n_state)

    # The executor (skewlab run --scale-out) switched: group 0's keys sit on workers 0 and 4.
    split = next(k for k in (f"h{i}" for i in range(100)) if hash_worker(k, W) == 0)
    store.append(
        "assignments",
        [{"version": 1, "key": key_of(0), "worker": 0, "set_id": 0, "reason": "kept",
          "effective_ms": IV[2][0]},
         {"version": 1, "key": split, "worker": 4, "set_id": 1, "reason": "scale-out",
          "effective_ms": IV[2][0]}],
        app_id=f"scaleout:{RUN}", version=1, run_id=RUN,
    )  # fmt: skip
    run.interval(IV[2], LIGHT, LIGHT)
    r3 = step(store, "checkpoint", IV[2], dwell=1)
    assert r3.reason == "g0: SwitchRouting, StopInstances" and r3.numbers["scaling"] == 0
    g0 = r3.decision[0]
    assert g0.instances == (0, 4) and g0.phase is Phase.NORMAL and g0.snapshot.active == (1, 2)


def test_policy_state_carries_over_between_intervals(tmp_path: Path) -> None:
    """Dwell 2: one overloaded interval changes nothing; the second one scales out."""
    store = DeltaStore(tmp_path / "a")
    run = Run(store)
    run.interval(IV[0], OVER, {**LIGHT, 0: 60_000})
    r1 = step(store, "checkpoint", IV[0])
    assert r1.status is StepStatus.DECIDED and r1.written == ("operator_state",)
    assert r1.reason.startswith("no action; top score") and r1.numbers["actions"] == 0
    assert not store.exists("decisions")
    assert r1.decision[0].snapshot.detector == (int(Level.NORMAL), int(Level.SCALE_OUT), 1)
    assert state_checkpoints(store) == [IV[0][1]]
    theta = CheckpointStore(store, state_run_id(RUN)).read(IV[0][1])[0].theta
    assert theta["policy"] == "checkpoint" and theta["workers"] == W
    assert snapshot_from_dict(theta["snapshot"]) == r1.decision[0].snapshot

    run.interval(IV[1], OVER, {**LIGHT, 0: 60_000})
    r2 = step(store, "checkpoint", IV[1])
    assert r2.reason == "g0: TakeCheckpoint, StartInstances, SplitState, Replay, FeedInput"
    assert r2.numbers["checkpoints"] == 1 and r2.numbers["scaling"] == 1

    # The same second interval without the first one's state decides nothing.
    fresh = DeltaStore(tmp_path / "b")
    other = Run(fresh)
    other.offset = dict(run.offset)
    other.interval(IV[1], OVER, {**LIGHT, 0: 60_000})
    assert step(fresh, "checkpoint", IV[1]).numbers["actions"] == 0


def test_light_interval_decides_nothing(store: DeltaStore) -> None:
    Run(store).interval(IV[0], LIGHT, LIGHT)
    r = step(store, "checkpoint", IV[0], dwell=1)
    assert r.status is StepStatus.DECIDED and r.written == ("operator_state",)  # the state only
    assert r.numbers["actions"] == 0 and r.numbers["alarmed"] == 0
    assert r.numbers["max_score"] == pytest.approx(5.5)
    assert {d.phase for d in r.decision} == {Phase.NORMAL}
    assert all(d.level <= Level.NORMAL and not d.actions for d in r.decision)
    assert not store.exists("decisions") and not CheckpointStore(store, f"{RUN}#g0").checkpoints()


def state_checkpoints(store: DeltaStore) -> list[int]:
    return CheckpointStore(store, state_run_id(RUN), "control-scale-out").checkpoints()


def test_interval_without_rows_is_no_load(store: DeltaStore) -> None:
    Run(store).interval(IV[0], LIGHT, LIGHT)
    r = step(store, "checkpoint", IV[2])
    assert r.status is StepStatus.NO_LOAD and r.written == ()
    assert not store.exists("decisions") and state_checkpoints(store) == []


def test_active_backup_records_secondaries_at_alarming(store: DeltaStore) -> None:
    Run(store).interval(IV[0], LOADED, LOADED)
    r = step(store, "active-backup", IV[0], dwell=1)
    assert r.reason == "g0: StartInstances, SplitState, FeedInput"
    (start,) = [d["detail"] for d in decisions(store) if d["detail"]["action"] == "StartInstances"]
    assert (start["role"], start["instances"], start["carried_out"]) == ("secondary", [1, 2], False)
    assert r.decision[0].phase is Phase.ALARMED


class CrashAt(DeltaStore):
    """A real DeltaStore failing its first append to ``table`` (a crash at a named point)."""

    def __init__(self, root: Path, table: str) -> None:
        super().__init__(root)
        self.table, self.armed = table, True

    def append(self, table: str, data: Any, **kw: Any) -> bool:
        if table == self.table and self.armed:
            self.armed = False
            raise RuntimeError(f"crash before appending to {table}")
        return super().append(table, data, **kw)


def test_retry_after_a_crash_writes_what_one_clean_run_writes(tmp_path: Path) -> None:
    ref, faulty = DeltaStore(tmp_path / "ref"), CrashAt(tmp_path / "faulty", "decisions")
    for s in (ref, faulty):
        Run(s).interval(IV[0], LOADED, LOADED)
    step(ref, "checkpoint", IV[0], dwell=1)
    with pytest.raises(RuntimeError, match="crash"):
        step(faulty, "checkpoint", IV[0], dwell=1)
    retry = step(faulty, "checkpoint", IV[0], dwell=1)
    assert retry.status is StepStatus.DECIDED and retry.numbers["checkpoints"] == 1
    assert retry.written == ("decisions", "operator_state")  # the checkpoint was there already
    for s in (ref, faulty):
        assert [r["detail"]["action"] for r in decisions(s)] == ["TakeCheckpoint"]
    rows = {
        name: sorted((r["run_id"], r["checkpoint"], r["instance"], r["key"])
                     for r in s.read("operator_state").to_pylist())
        for name, s in (("ref", ref), ("faulty", faulty))
    }  # fmt: skip
    assert rows["ref"] == rows["faulty"]


def test_snapshot_json_round_trip() -> None:
    cfg = StateManagerSettings("r", "/d", "checkpoint", W, SVC).policy_config()
    pol = cfg.build(clock=FakeClock(5.0))
    pol.observe(90.0)
    pol.observe(90.0)
    snap = pol.snapshot()
    assert snapshot_from_dict(json.loads(json.dumps(snapshot_to_dict(snap)))) == snap


@pytest.mark.parametrize(
    ("policy", "params", "message"),
    [
        ("checkpointing", BASE, "scale_out must be one of checkpoint, active-backup, restart"),
        ("checkpoint", {"workers": W}, "scale-out needs service_us"),
        ("checkpoint", {"service_us": SVC}, "scale-out needs workers"),
        ("checkpoint", {**BASE, "service_us": 0}, "scale-out service_us must be a number > 0"),
        ("checkpoint", {**BASE, "max_instances": 32}, "max_instances must be in 2..16"),
        ("checkpoint", {**BASE, "factor": 3}, "scale-out has no parameter factor; valid: workers"),
        ("checkpoint", {**BASE, "dwell": 1.5}, "scale-out dwell must be an integer"),
        ("checkpoint", {**BASE, "alarming": 80},
         "scale-out params: thresholds must satisfy 0 <= scale_in <= alarming < scale_out"),
        ("restart", {**BASE, "interval_s": 0}, "scale-out params: interval_s must be > 0"),
    ],
)  # fmt: skip
def test_bad_params_fail_with_one_line(
    store: DeltaStore, policy: str, params: dict[str, Any], message: str
) -> None:
    Run(store).interval(IV[0], LOADED, LOADED)
    with pytest.raises(ConfigError) as err:
        run_step("scale-out", store, RUN, policy, params, *IV[0])
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not store.exists("decisions") and state_checkpoints(store) == []


def test_worker_count_must_match_the_state(store: DeltaStore) -> None:
    run = Run(store)
    run.interval(IV[0], LIGHT, LIGHT)
    step(store, "checkpoint", IV[0])
    run.interval(IV[1], LIGHT, LIGHT)
    with pytest.raises(ConfigError, match=r"scaled out over 4 workers.*workers=8"):
        step(store, "checkpoint", IV[1], workers=8)

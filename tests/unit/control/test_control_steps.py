"""The control steps against real Delta tables in a tmp dir (no services needed).

Each test writes ``key_loads`` / ``partition_loads`` rows for one-minute data
intervals with :class:`DeltaStore`, runs a step and reads the output tables back:

* a decision writes its rows once; the same interval again writes nothing;
  the next interval makes a new decision on top of the previous one;
* a crash injected between two writes of a step, then a retry, leaves exactly
  the rows one clean run writes;
* the scheduled path (state restored from Delta each interval) decides exactly
  as the in-process path (state held in memory) on the same loads.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from skewlab.control import (
    RebalanceParams,
    RebalanceState,
    StepStatus,
    autoscale_step,
    rebalance_step,
    run_step,
)
from skewlab.control.rebalance import state_run_id
from skewlab.errors import ConfigError
from skewlab.io.delta import DeltaStore
from skewlab.rebalance.base import hash_worker
from skewlab.testing import FakeClock

pytestmark = pytest.mark.unit

RUN = "key-test-1"
W = 4
MIN = 60_000
T0 = 1_772_366_640_000  # 2026-03-01T12:04:00Z, a minute boundary
I1 = (T0, T0 + MIN)
I2 = (T0 + MIN, T0 + 2 * MIN)
I3 = (T0 + 2 * MIN, T0 + 3 * MIN)
DLB = {"workers": W, "lead_s": 0.5, "theta": 10.0}


class CrashAt(DeltaStore):
    """A real DeltaStore that fails its ``nth`` append to ``table`` (a crash at a named point)."""

    def __init__(self, root: Path, table: str, nth: int = 1) -> None:
        super().__init__(root)
        self.table = table
        self.left = nth

    def append(self, table: str, data: Any, **kw: Any) -> bool:
        if table == self.table:
            self.left -= 1
            if self.left == 0:
                raise RuntimeError(f"crash before appending to {table}")
        return super().append(table, data, **kw)


def keys_on(worker: int, n: int, prefix: str = "k") -> list[str]:
    """``n`` keys whose KEY-grouping worker (of W) is ``worker``."""
    out = []
    i = 0
    while len(out) < n:
        k = f"{prefix}{i}"
        if hash_worker(k, W) == worker:
            out.append(k)
        i += 1
    return out


HOT = keys_on(0, 3, "hot")
COLD = [keys_on(w, 1, "cold")[0] for w in range(1, W)]


HOT1 = keys_on(1, 3, "hx")


def skewed(start: int, scale: int = 1, hot: list[str] = HOT) -> list[dict[str, Any]]:
    """Two 30 s windows: three hot keys (on worker 0), one light key on every other worker.

    Each window is written as two micro-batch rows per key (what the route job does).
    """
    rows = []
    for w0 in (start, start + 30_000):
        for k in hot:
            rows += [{"window_start": w0, "key": k, "worker": hash_worker(k, W),
                      "count": 250 * scale, "bytes": 25_000 * scale}] * 2  # fmt: skip
        for k in COLD:
            rows += [{"window_start": w0, "key": k, "worker": hash_worker(k, W),
                      "count": 50 * scale, "bytes": 5_000 * scale}] * 2  # fmt: skip
    return rows


@pytest.fixture
def store(tmp_path: Path) -> DeltaStore:
    return DeltaStore(tmp_path / "delta")


def write_loads(store: DeltaStore, rows: list[dict[str, Any]], batch: int) -> None:
    store.append("key_loads", rows, app_id=f"route:{RUN}", version=batch, run_id=RUN)


def rows_of(store: DeltaStore, table: str, run_id: str = RUN) -> list[dict[str, Any]]:
    return store.read(table, run_id=run_id).to_pylist()


def clock_after(interval: tuple[int, int]) -> FakeClock:
    return FakeClock(interval[1] / 1000 + 3.0)


# ---------------------------------------------------------------- rebalance


def test_rebalance_decides_once_per_interval_and_builds_on_the_last(store: DeltaStore) -> None:
    outside = [{"window_start": T0 - 1_000, "key": "early", "worker": 1, "count": 10**6,
                "bytes": 1}, {"window_start": I1[1], "key": "late", "worker": 2,
                "count": 10**6, "bytes": 1}]  # fmt: skip
    write_loads(store, skewed(T0) + outside, 0)
    r1 = rebalance_step(store, RUN, "dlb-h", DLB, *I1, clock=clock_after(I1))

    assert r1.status is StepStatus.DECIDED
    assert set(r1.written) == {"assignments", "operator_state", "decisions"}
    assert r1.numbers["keys"] == len(HOT) + len(COLD)  # the rows outside [start, end) are not read
    assert r1.numbers["load"] == 2 * 2 * (3 * 250 + 3 * 50)
    moved = [r for r in rows_of(store, "assignments") if r["reason"] == "moved"]
    assert {r["key"] for r in moved} & set(HOT), "no hot key left worker 0"
    assert all(r["worker"] != hash_worker(r["key"], W) for r in moved)
    assert all(r["set_id"] == 1 and r["version"] == 1 for r in moved)
    assert all(r["effective_ms"] == round((I1[1] / 1000 + 3.5) * 1000) for r in moved)
    (dec,) = rows_of(store, "decisions")
    detail = json.loads(dec["detail"])
    assert (dec["loop"], dec["policy"], detail["interval_ms"]) == ("rebalance", "dlb-h", list(I1))
    assert detail["keys_moved"] == len(moved) == r1.numbers["keys_moved"]
    assert dec["imbalance_after"] < dec["imbalance_before"]

    # The same interval again (a retry, a cleared task): nothing read twice, nothing written.
    counts = {t: len(rows_of(store, t)) for t in ("assignments", "decisions")}
    again = rebalance_step(store, RUN, "dlb-h", DLB, *I1, clock=clock_after(I1))
    assert again.status is StepStatus.ALREADY_DONE and again.written == ()
    assert {t: len(rows_of(store, t)) for t in counts} == counts

    # A later interval, same load pattern: placed by the new map, so already balanced.
    write_loads(store, skewed(I3[0]), 1)
    r3 = rebalance_step(store, RUN, "dlb-h", DLB, *I3, clock=clock_after(I3))
    assert r3.status is StepStatus.DECIDED and r3.version == I3[1]
    assert r3.numbers["imbalance_before"] == pytest.approx(r1.numbers["imbalance_after"])
    assert len(rows_of(store, "decisions")) == 2
    cps = store.read("operator_state", run_id=state_run_id(RUN))["checkpoint"].to_pylist()
    assert sorted(set(cps)) == [0, I1[1], I3[1]]
    # I2 (holding the "late" row) comes too late now: decisions only move forward.
    assert rebalance_step(store, RUN, "dlb-h", DLB, *I2).status is StepStatus.ALREADY_DONE


def test_rebalance_without_load_writes_nothing(store: DeltaStore) -> None:
    write_loads(store, skewed(T0), 0)
    r = rebalance_step(store, RUN, "lptf", DLB, *I2, clock=clock_after(I2))
    assert r.status is StepStatus.NO_LOAD and r.written == ()
    assert not store.exists("decisions") and not store.exists("assignments")


@pytest.mark.parametrize(
    ("crash", "nth", "wrote_before"),
    [
        ("operator_state", 1, False),  # the start state (checkpoint 0)
        ("operator_state", 2, True),  # the state after the decision (checkpoint v)
        ("decisions", 1, True),  # the marker
    ],
)
def test_rebalance_retry_after_a_crash_completes_without_doubling(
    tmp_path: Path, crash: str, nth: int, wrote_before: bool
) -> None:
    ref, faulty = DeltaStore(tmp_path / "ref"), CrashAt(tmp_path / "faulty", crash, nth)
    for s in (ref, faulty):
        write_loads(s, skewed(T0), 0)
    rebalance_step(ref, RUN, "smalops", {"workers": W, "threshold": 0.1, "gate": False}, *I1)
    with pytest.raises(RuntimeError, match="crash"):
        rebalance_step(faulty, RUN, "smalops", {"workers": W, "threshold": 0.1, "gate": False},
                       *I1)  # fmt: skip
    assert faulty.exists("assignments") is wrote_before
    retry = rebalance_step(
        DeltaStore(tmp_path / "faulty"), RUN, "smalops",
        {"workers": W, "threshold": 0.1, "gate": False}, *I1,
    )  # fmt: skip
    assert retry.status is StepStatus.DECIDED
    for table in ("assignments", "decisions"):
        got, want = rows_of(faulty, table), rows_of(ref, table)
        assert len(got) == len(want), table
    pick = ("key", "worker", "set_id", "version", "reason")
    assert sorted(tuple(r[c] for c in pick) for r in rows_of(faulty, "assignments")) == sorted(
        tuple(r[c] for c in pick) for r in rows_of(ref, "assignments")
    )
    (got,), (want,) = rows_of(faulty, "decisions"), rows_of(ref, "decisions")
    assert json.loads(got["detail"])["moves"] == json.loads(want["detail"])["moves"]


def test_scheduled_and_in_process_paths_decide_alike(tmp_path: Path) -> None:
    """SMALOPS (random choices, heavy map): restored from Delta == held in memory.

    The second interval has new heavy keys (placed by the restored generator) and
    drops the first interval's (known only from the restored map).
    """
    params = {"workers": W, "threshold": 0.1, "gate": False, "seed": 7}
    sched, live = DeltaStore(tmp_path / "sched"), DeltaStore(tmp_path / "live")
    state = RebalanceState.start(live, RUN, RebalanceParams.of("smalops", params))
    for s in (sched, live):
        write_loads(s, skewed(T0), 0)
        write_loads(s, skewed(I2[0], scale=3, hot=HOT1), 1)
    moves = {}
    for name, s, st in (("sched", sched, None), ("live", live, state)):
        out = []
        for iv in (I1, I2):
            r = rebalance_step(s, RUN, "smalops", params, *iv, state=st, clock=clock_after(iv))
            out.append([(m.key, m.src, m.dst, m.kind) for m in r.decision.moves])
        moves[name] = out
    assert moves["sched"] == moves["live"]
    assert [{kind for *_, kind in step} for step in moves["sched"]] == [{"place"}, {"place"}]
    latest = {
        name: sorted((r["key"], r["worker"], r["set_id"], r["reason"])
                     for r in s.latest_assignments(RUN).to_pylist())
        for name, s in (("sched", sched), ("live", live))
    }  # fmt: skip
    assert latest["sched"] == latest["live"]
    home = [r for r in latest["sched"] if r[0] in HOT]
    assert home and all(r[1] == 0 for r in home)  # not heavy any more: back on hash
    assert "home" in {r[3] for r in home}
    assert not live.exists("operator_state")  # the in-process state is not checkpointed
    assert state.steps == 2


def test_rebalance_starts_from_existing_assignments(store: DeltaStore) -> None:
    """A pinned key of another writer's version stays put; versions continue after it."""
    pinned = HOT[0]
    store.append(
        "assignments",
        [{"version": 3, "key": pinned, "worker": 2, "set_id": 1, "reason": "moved",
          "effective_ms": T0 - 5_000}],
        app_id=f"other:{RUN}", version=0, run_id=RUN,
    )  # fmt: skip
    write_loads(store, skewed(T0), 0)
    r = rebalance_step(store, RUN, "dlb-h", DLB, *I1, clock=clock_after(I1))
    assert r.status is StepStatus.DECIDED
    placed = {m.key: m.src for m in r.decision.moves}
    assert placed.get(pinned, 2) == 2  # the interval saw the key on worker 2, not its hash
    latest = store.latest_assignments(RUN).to_pylist()
    assert {row["version"] for row in latest} == {4}
    assert {row["key"]: row["worker"] for row in latest}[pinned] != 0


def test_rebalance_refuses_a_worker_count_that_does_not_match_the_run(store: DeltaStore) -> None:
    write_loads(store, skewed(T0), 0)
    rebalance_step(store, RUN, "dlb-h", DLB, *I1, clock=clock_after(I1))
    write_loads(store, skewed(I2[0]), 1)
    with pytest.raises(ConfigError, match=r"rebalanced over 4 workers.*workers=8"):
        rebalance_step(store, RUN, "dlb-h", {**DLB, "workers": 8}, *I2)


def test_policy_change_keeps_the_routing_in_force(store: DeltaStore) -> None:
    write_loads(store, skewed(T0), 0)
    rebalance_step(store, RUN, "dlb-h", DLB, *I1, clock=clock_after(I1))
    before = {r["key"]: r["worker"] for r in store.latest_assignments(RUN).to_pylist()}
    write_loads(store, skewed(I2[0]), 1)
    r = rebalance_step(store, RUN, "lptf", {"workers": W, "theta": 50.0}, *I2)
    assert r.status is StepStatus.DECIDED and r.reason == "below-threshold"
    after = {r["key"]: r["worker"] for r in store.latest_assignments(RUN).to_pylist()}
    assert after == before  # lptf seeded with dlb-h's map: nothing sent home


# ---------------------------------------------------------------- autoscale

CBAR = 1_200.0  # C = 1000 bytes/s


def speeds_rows(start: int, speeds: list[float], topic: str = "routed-x") -> list[dict[str, Any]]:
    """Two windows per interval; each window's speed written as two half-rows (two batches)."""
    rows = []
    for w0 in (start, start + 30_000):
        for p, s in enumerate(speeds):
            rows += [{"window_start": w0, "topic": topic, "partition": p, "bytes": int(s * 15),
                      "records": 1, "bytes_per_s": s / 2}] * 2  # fmt: skip
    return rows


def write_speeds(store: DeltaStore, rows: list[dict[str, Any]], batch: int) -> None:
    store.append("partition_loads", rows, app_id=f"route:{RUN}", version=batch, run_id=RUN)


def owners(store: DeltaStore, iteration: int) -> dict[int, tuple[str, str]]:
    return {
        r["partition"]: (r["consumer"], r["action"])
        for r in rows_of(store, "consumer_assignments")
        if r["iteration"] == iteration
    }


def test_autoscale_decides_once_per_interval_and_iterates(store: DeltaStore) -> None:
    write_speeds(store, speeds_rows(T0, [600.0, 300.0, 300.0, 200.0]), 0)
    r1 = autoscale_step(store, RUN, "mwf", {"capacity": CBAR}, *I1, clock=clock_after(I1))
    assert r1.status is StepStatus.DECIDED and r1.reason == "unassigned"
    assert set(r1.written) == {"decisions", "consumer_assignments"}
    first = owners(store, 1)
    assert sorted(first) == [0, 1, 2, 3] and {a for _, a in first.values()} == {"assign"}
    load = Counter()
    for p, (c, _) in first.items():
        load[c] += [600.0, 300.0, 300.0, 200.0][p]
    assert max(load.values()) <= 1_000.0 and len(load) == r1.numbers["consumers"] == 2
    (dec,) = rows_of(store, "decisions")
    detail = json.loads(dec["detail"])
    assert (dec["loop"], dec["policy"], dec["reason"]) == ("autoscale", "mwf", "unassigned")
    assert detail["speeds"] == [600.0, 300.0, 300.0, 200.0] and detail["iteration"] == 1

    again = autoscale_step(store, RUN, "mwf", {"capacity": CBAR}, *I1)
    assert again.status is StepStatus.ALREADY_DONE and again.written == ()
    assert (
        len(rows_of(store, "consumer_assignments")) == 4 and len(rows_of(store, "decisions")) == 1
    )

    write_speeds(store, speeds_rows(I2[0], [900.0, 600.0, 300.0, 200.0]), 1)
    r2 = autoscale_step(store, RUN, "mwf", {"capacity": CBAR}, *I2, clock=clock_after(I2))
    assert r2.status is StepStatus.DECIDED and r2.reason == "over-capacity"
    second = owners(store, 2)
    assert sorted(second) == [0, 1, 2, 3]
    assert {a for _, a in second.values()} <= {"keep", "move", "assign"}
    assert any(a == "keep" for _, a in second.values())  # MWF keeps what still fits
    load2 = Counter()
    for p, (c, _) in second.items():
        load2[c] += [900.0, 600.0, 300.0, 200.0][p]
    assert max(load2.values()) <= 1_000.0 and len(load2) == r2.numbers["consumers"] == 3
    assert len(rows_of(store, "decisions")) == 2


def test_autoscale_retry_after_a_crash_completes_without_doubling(tmp_path: Path) -> None:
    faulty = CrashAt(tmp_path / "d", "consumer_assignments")
    write_speeds(faulty, speeds_rows(T0, [600.0, 300.0, 300.0, 200.0]), 0)
    with pytest.raises(RuntimeError, match="crash"):
        autoscale_step(faulty, RUN, "bfd", {"capacity": CBAR}, *I1)
    assert len(rows_of(faulty, "decisions")) == 1 and not faulty.exists("consumer_assignments")
    retry = autoscale_step(faulty, RUN, "bfd", {"capacity": CBAR}, *I1)
    assert retry.status is StepStatus.DECIDED and retry.written == ("consumer_assignments",)
    assert len(rows_of(faulty, "decisions")) == 1
    assert sorted(owners(faulty, 1)) == [0, 1, 2, 3]  # iteration 1, not 2: the same decision


def test_autoscale_needs_a_topic_when_the_interval_has_several(store: DeltaStore) -> None:
    write_speeds(store, speeds_rows(T0, [100.0]) + speeds_rows(T0, [50.0, 50.0], "other"), 0)
    with pytest.raises(ConfigError, match=r"several topics.*other, routed-x"):
        autoscale_step(store, RUN, "ffd", {"capacity": CBAR}, *I1)
    r = autoscale_step(store, RUN, "ffd", {"capacity": CBAR, "topic": "other"}, *I1)
    assert r.status is StepStatus.DECIDED and r.numbers["partitions"] == 2
    assert {row["topic"] for row in rows_of(store, "consumer_assignments")} == {"other"}


def test_autoscale_without_load_writes_nothing(store: DeltaStore) -> None:
    write_speeds(store, speeds_rows(T0, [100.0]), 0)
    r = autoscale_step(store, RUN, "mwf", {"capacity": CBAR, "partitions": 8}, *I2)
    assert r.status is StepStatus.NO_LOAD and not store.exists("consumer_assignments")


def test_run_step_validates_before_touching_the_store(store: DeltaStore) -> None:
    with pytest.raises(ConfigError, match="no parameter threshold; valid: workers, theta"):
        run_step("rebalance", store, RUN, "dlb-h", {"workers": W, "threshold": 0.1}, *I1)
    with pytest.raises(ConfigError, match="needs capacity"):
        run_step("autoscale", store, RUN, "mwf", {}, *I1)
    with pytest.raises(ConfigError, match="start < end"):
        run_step("autoscale", store, RUN, "mwf", {"capacity": CBAR}, I1[1], I1[0])
    assert not any(store.exists(t) for t in ("decisions", "assignments", "consumer_assignments"))

"""Crash point rebalance.mid_reassignment: after an assignments version, before the decision.

The live rebalancer loop runs against real Delta tables in a tmp dir; the crash
point is replaced by one that raises, so the test sees what a crashed loop left
behind and what a loop started again makes of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skewlab.control import rebalance_loop
from skewlab.control.rebalance_loop import MID_REASSIGNMENT, RebalanceLoop, RebalanceSettings
from skewlab.io.delta import DeltaStore
from skewlab.rebalance.base import hash_worker
from skewlab.testing import FakeClock

pytestmark = pytest.mark.unit

RUN = "key-crash-1"
W = 4
T0 = 1_772_366_640_000


class Crash(Exception):
    pass


def keys_on(worker: int, n: int, prefix: str) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        if hash_worker(f"{prefix}{i}", W) == worker:
            out.append(f"{prefix}{i}")
        i += 1
    return out


def loads(start: int, hot: list[str]) -> list[dict[str, Any]]:
    """Two 30 s windows: the ``hot`` keys heavy on one worker, one light key elsewhere."""
    cold = [keys_on(w, 1, "cold")[0] for w in range(W) if w != hash_worker(hot[0], W)]
    return [
        {"window_start": w0, "key": k, "worker": hash_worker(k, W), "count": c, "bytes": 10 * c}
        for w0 in (start, start + 30_000)
        for k, c in [*((k, 500) for k in hot), *((k, 50) for k in cold)]
    ]


def test_a_loop_crashed_mid_reassignment_is_picked_up_by_the_next_one(tmp_path: Path, monkeypatch):
    store = DeltaStore(tmp_path / "delta")
    s = RebalanceSettings(RUN, str(tmp_path / "delta"), "dlb-h", W, 60.0, 0.5, {"theta": 10.0})
    hits: list[str] = []

    def crash(name: str) -> None:
        hits.append(name)
        if name == MID_REASSIGNMENT and hits.count(name) == 1:
            raise Crash(name)

    monkeypatch.setattr(rebalance_loop, "crash_point", crash)
    route = f"route:{RUN}"
    store.append("key_loads", loads(T0, keys_on(0, 3, "hot")), app_id=route, version=0, run_id=RUN)
    clock = FakeClock(T0 / 1000 + 63.0)
    with pytest.raises(Crash):
        RebalanceLoop(s, clock=clock, store=store).step()

    written = store.read("assignments", run_id=RUN).to_pylist()
    assert written and {r["version"] for r in written} == {1}
    assert store.read("decisions", run_id=RUN).num_rows == 0  # the round never finished
    moved = {r["key"]: (r["worker"], r["set_id"]) for r in written}

    again = RebalanceLoop(s, clock=clock, store=store)  # the loop started again
    assert again.version == 1 and again.state.map == moved
    hx = loads(T0 + 60_000, keys_on(1, 3, "hx"))
    store.append("key_loads", hx, app_id=route, version=1, run_id=RUN)
    clock.advance(60.0)
    decision = again.step()
    assert decision is not None and hits.count(MID_REASSIGNMENT) >= 1
    assert store.read("decisions", run_id=RUN).num_rows == 1
    rows = store.read("assignments", run_id=RUN).to_pylist()
    newest = max(r["version"] for r in rows)
    assert newest in (1, 2)
    for r in rows:  # a key that moved in version 1 keeps its set id or moves on from it
        if r["version"] == newest and r["key"] in moved:
            assert r["set_id"] >= moved[r["key"]][1]

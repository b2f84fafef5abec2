"""Where an old instance learns its cut: ``decisions`` -> the parts a switch gives to
instances whose plans shadow it (``skewlab.live.worker.cut.switches``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skewlab.io.delta import DeltaStore
from skewlab.live.worker.cut import switches
from skewlab.state import SplitHashes, owner, split_hash

RUN = "cut-run"


def decide(store: DeltaStore, n: int, ts: int, detail: dict[str, Any]) -> None:
    row = {
        "ts": ts,
        "loop": "scale-out",
        "policy": "checkpoint",
        "detail": json.dumps(detail),
        "cost": 0.0,
        "imbalance_before": None,
        "imbalance_after": None,
        "reason": "test",
    }
    store.append("decisions", [row], app_id=f"d:{RUN}", version=n, run_id=RUN)


def plan(w: int, epoch: int, sources: list[int], part: int, parts: int) -> dict[str, Any]:
    p = {"epoch": epoch, "group": 0, "sources": sources, "part": part, "parts": parts}
    return {"action": "StartInstances", "plans": {str(w): p}}


def switch(frm: list[int], to: list[int], version: int) -> dict[str, Any]:
    return {"action": "SwitchRouting", "from": frm, "to": to, "version": version}


def test_a_switch_cuts_only_the_parts_of_planned_shadows(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path))
    decide(store, 1, 100, plan(2, 100, [0], 1, 2))
    followers, specs = switches(store, RUN, 0)
    assert followers == {2: 100} and specs == []  # planned, not switched: no cut yet
    decide(store, 2, 200, switch([0], [0, 2], 1))
    decide(store, 3, 300, switch([1], [1, 3], 2))  # another operator's switch
    followers, (spec,) = switches(store, RUN, 0)
    assert spec.version == 1 and spec.parts == 2 and spec.moved == {1: 2}
    assert spec.plans == {2: 100}
    keys = [f"k{i}" for i in range(200)]
    assert {k for k in keys if spec.takes(k)} == {k for k in keys if owner(k, 2, split_hash) == 1}
    assert spec.takes_many(keys) == [spec.takes(k) for k in keys]  # one call, the same answer
    hashes = SplitHashes()
    hashes.add(keys[:50])  # hashed before the cut; the rest at it
    assert spec.takes_many(keys, hashes) == [spec.takes(k) for k in keys]
    assert switches(store, RUN, 1) == ({}, [])  # worker 1's switch has no planned shadow


def test_a_plan_written_after_the_switch_or_for_other_parts_is_not_cut(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path))
    decide(store, 1, 100, plan(2, 100, [0], 0, 2))  # its part is not where the switch puts it
    decide(store, 2, 200, switch([0], [0, 2], 1))
    decide(store, 3, 300, plan(3, 300, [0], 1, 2))  # planned after the switch
    followers, specs = switches(store, RUN, 0)
    assert specs == [] and followers == {2: 100, 3: 300}

"""Where an old instance learns a scale-out switch that moves its keys (the cut).

The state manager's ``decisions`` name, per new instance, its plan (sources, part of
parts, epoch) and, per switch, the group's instances before and after. An old
instance cuts the hash parts that a switch gives to a planned instance shadowing it,
and first writes the cut's offset as a ``Cut`` decision row (:func:`write_cut`): the
promise both sides read (:func:`cuts_of`). Details: docs/scaleout.md, "The cut".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from skewlab.pipeline.store import Store
from skewlab.rundir import app_id
from skewlab.state.operator_state import SplitHashes, owner, split_hash

__all__ = ["CutSpec", "cuts_of", "read_decisions", "switches", "write_cut"]

CUT = "Cut"
"""The ``action`` of an old instance's cut row in ``decisions``."""


@dataclass(frozen=True, slots=True)
class CutSpec:
    """One switch moving hash parts of ``worker``'s keys to instances that shadow it.

    ``version`` is the switch's ``assignments`` version; ``moved`` maps each moved part
    of ``parts`` to its new instance; ``plans`` the plan epoch of each such instance (the
    instance applies only a cut made for its own plan)."""

    version: int
    parts: int
    moved: dict[int, int]
    plans: dict[int, int]

    def __post_init__(self) -> None:
        if self.parts < 1:
            raise ValueError(f"parts must be >= 1, got {self.parts}")

    def takes(self, key: str) -> bool:
        """Whether ``key`` falls in a moved part (``owner(key, parts)``, the switch's hash)."""
        return owner(key, self.parts, split_hash) in self.moved

    def takes_many(self, keys: list[str], hashes: SplitHashes | None = None) -> list[bool]:
        """:meth:`takes` of each of ``keys``, hashed in one call (an old instance's cut
        looks at every key it holds: 100k at the README's scale). ``hashes``: the keys'
        split hashes taken before (an old instance takes them once a plan names it),
        so only keys new since are hashed here."""
        moved, n = self.moved, self.parts
        kept = SplitHashes() if hashes is None else hashes
        return [h % n in moved for h in kept.raw(keys)]

    def entry(self, at: int, keys: int | None = None) -> dict[str, Any]:
        """The cut: this switch, the routed offset ``at``, and once known the number of
        ``keys`` stopped (the committed cut has it; the promise, written before the keys
        are looked at, does not: they follow from the state at ``at``)."""
        out: dict[str, Any] = {
            "v": self.version,
            "at": at,
            "parts": self.parts,
            "moved": {str(p): w for p, w in self.moved.items()},
            "plans": {str(w): e for w, e in self.plans.items()},
        }
        if keys is not None:
            out["keys"] = keys
        return out


def read_decisions(store: Store, run_id: str) -> Any:
    """The ``decisions`` columns :func:`switches` and :func:`cuts_of` read (one read for both)."""
    return store.read("decisions", run_id=run_id, columns=["ts", "loop", "detail"])


def switches(
    store: Store, run_id: str, worker: int, table: Any = None
) -> tuple[dict[int, int], list[CutSpec]]:
    """(per instance whose newest plan names ``worker`` as a source: that plan's epoch;
    the switches that move ``worker``'s keys to such planned instances, oldest first).
    A switch's plan is the newest one of its instance written at or before it.
    ``table``: :func:`read_decisions`' result when already read."""
    t = read_decisions(store, run_id) if table is None else table
    plans: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    switch_rows: list[tuple[int, dict[str, Any]]] = []
    for ts, loop, detail in zip(
        t["ts"].to_pylist(), t["loop"].to_pylist(), t["detail"].to_pylist()
    ):
        if loop != "scale-out":
            continue
        if f'"{CUT}"' in detail:
            continue
        if '"plans"' in detail:
            for w, p in json.loads(detail).get("plans", {}).items():
                plans.setdefault(int(w), []).append((int(ts), p))
        elif '"SwitchRouting"' in detail:
            d = json.loads(detail)
            if d.get("action") == "SwitchRouting" and worker in d.get("from", []):
                switch_rows.append((int(ts), d))
    followers: dict[int, int] = {}
    for w, ps in plans.items():
        newest = max((p for _, p in ps), key=lambda x: int(x["epoch"]))
        if worker in newest["sources"]:
            followers[w] = int(newest["epoch"])
    out: list[CutSpec] = []
    for ts, d in sorted(switch_rows, key=lambda r: (r[0], int(r[1].get("version", 0)))):
        to = [int(w) for w in d.get("to", [])]
        moved: dict[int, int] = {}
        epochs: dict[int, int] = {}
        for i, w in enumerate(to):
            before = [p for t_p, p in plans.get(w, []) if t_p <= ts]
            if not before:
                continue
            p = max(before, key=lambda x: int(x["epoch"]))
            if worker in p["sources"] and int(p["part"]) == i and int(p["parts"]) == len(to):
                moved[i] = w
                epochs[w] = int(p["epoch"])
        if moved:
            out.append(CutSpec(int(d.get("version", 0)), len(to), moved, epochs))
    return followers, out


def write_cut(store: Store, run_id: str, worker: int, entry: dict[str, Any], ts_ms: int) -> None:
    """The promise of ``worker``'s cut ``entry`` (:meth:`CutSpec.entry`): one ``decisions``
    row, written once per (worker, switch version) before the worker stops any key. A
    row already there (a dead process's) is kept: it is the cut (:func:`cuts_of`)."""
    row = {
        "ts": ts_ms,
        "loop": "scale-out",
        "policy": "cut",
        "detail": json.dumps({"action": CUT, "worker": worker, **entry}, sort_keys=True),
        "cost": 0.0,
        "imbalance_before": None,
        "imbalance_after": None,
        "reason": f"instance {worker} stops parts {sorted(entry['moved'])} of "
        f"{entry['parts']} at {entry['at']}",
    }
    store.append(
        "decisions",
        [row],
        app_id=app_id(f"cut-{worker}", run_id),
        version=int(entry["v"]),
        run_id=run_id,
    )


def cuts_of(store: Store, run_id: str, worker: int, table: Any = None) -> dict[int, dict[str, Any]]:
    """``worker``'s promised cuts by switch version (the first row of each version);
    ``table``: :func:`read_decisions`' result when already read."""
    t = read_decisions(store, run_id) if table is None else table
    out: dict[int, tuple[int, dict[str, Any]]] = {}
    for ts, loop, detail in zip(
        t["ts"].to_pylist(), t["loop"].to_pylist(), t["detail"].to_pylist()
    ):
        if loop != "scale-out" or f'"{CUT}"' not in detail:
            continue
        d = json.loads(detail)
        if d.get("action") != CUT or int(d.get("worker", -1)) != worker:
            continue
        v = int(d["v"])
        if v not in out or int(ts) < out[v][0]:
            out[v] = (int(ts), d)
    return {v: d for v, (_, d) in out.items()}

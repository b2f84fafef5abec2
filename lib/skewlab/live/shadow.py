"""A started instance's shadow of its hash part of the instances it replaces (scale-out).

:class:`Shadow` follows the state manager's plan: restore the part (step 1), replay the
sources' routed partitions into shadow sets (step 2), take each key over at its routing
switch (step 3). Plan, offsets and dedup watermarks are committed with the worker's state,
so a restarted instance resumes. Details: docs/scaleout.md, "One mechanism".
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from skewlab.faults import crash_point
from skewlab.io.delta import DeltaStore
from skewlab.io.progress import progress_at
from skewlab.io.state_store import CheckpointStore, state_rows_at
from skewlab.pipeline import events
from skewlab.pipeline.handoff import META_KEY, KeySets, Rec, SetEntry, Status
from skewlab.rundir import RunDir
from skewlab.state import owner, split_hash

log = logging.getLogger(__name__)


def checkpoint_run(run_id: str, group: int) -> tuple[str, str]:
    """(run id, operator) under which operator ``group``'s checkpoints are stored."""
    return f"{run_id}#g{group}", f"g{group}"


def newest_plan(store: DeltaStore, run_id: str, worker: int) -> dict[str, Any] | None:
    """The newest plan the state manager wrote for ``worker`` (None: never planned)."""
    t = store.read("decisions", run_id=run_id, columns=["loop", "detail"])
    best: dict[str, Any] | None = None
    for loop, detail in zip(t["loop"].to_pylist(), t["detail"].to_pylist()):
        if loop != "scale-out" or '"plans"' not in detail:
            continue
        plan = json.loads(detail).get("plans", {}).get(str(worker))
        if plan is not None and (best is None or plan["epoch"] > best["epoch"]):
            best = plan
    return best


class Shadow:
    """Steps 1-3 of the module doc for one worker's :class:`KeySets`."""

    def __init__(
        self,
        sets: KeySets,
        store: DeltaStore,
        run_id: str,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.sets, self.store, self.run_id, self.wall = sets, store, run_id, wall
        self.taken: dict[tuple[str, int], tuple[int, int, int, int]] = {}
        """(key, set) -> (sent ms, applied ms, restored bytes, replayed records) until committed."""

    @property
    def meta(self) -> dict[str, Any] | None:
        """The committed shadow plan and progress (``KeySets.shadow_meta``: sources, part,
        parts, offsets, watermarks); ``None`` when this instance shadows nothing."""
        return self.sets.shadow_meta

    @property
    def read(self) -> int:
        """Records read in shadowed partitions, over all plans (part of the commit version)."""
        return int((self.meta or {}).get("read", 0))

    @property
    def active(self) -> bool:
        """True while some source of the plan has not reached its end of replay."""
        m = self.meta
        return m is not None and not all(s["ended"] for s in m["sources"].values())

    def mine(self, key: str) -> bool:
        """True if ``key`` falls in this instance's hash part: ``owner(key, parts) == part``
        (``split_hash``, the hash the routing switch uses). Needs a plan (:attr:`meta`)."""
        m = self.meta
        assert m is not None
        return owner(key, int(m["parts"]), split_hash) == int(m["part"])

    # ------------------------------------------------------------ step 1: restore

    def start(self, plan: dict[str, Any]) -> dict[str, Any]:
        """Restore this instance's part of the sources' state per ``plan``; returns stats."""
        t0 = self.wall()
        sets = self.sets
        stale = set(sets.shadow)
        sets.shadow.clear()
        sets.shadow_stats.clear()
        sets._changed.update(stale)  # rewrite their rows without the old shadow
        read = self.read
        sets.shadow_meta = {
            "epoch": plan["epoch"],
            "group": plan["group"],
            "part": plan["part"],
            "parts": plan["parts"],
            "read": read,
            "sources": {},
        }
        parts = None
        cp_id = None
        if plan.get("checkpoint"):
            cps = CheckpointStore(self.store, *checkpoint_run(self.run_id, plan["group"]))
            cp_id = cps.latest()
            parts = cps.read(cp_id) if cp_id is not None else None
        keys = nbytes = beta = 0
        for src in plan["sources"]:
            items: list[tuple[str, dict[str, Any]]]
            if parts is not None and src in parts:
                cp = parts[src]
                version: int | None = cp.tau
                items = [(k, v) for k, v in cp.theta.items()]
                b = cp.theta.get(META_KEY, {}).get("beta")
            else:
                version = self.store.committed_version(
                    "partials", RunDir.worker_app(src, self.run_id)
                )
                rows = (
                    [] if version is None else state_rows_at(self.store, self.run_id, src, version)
                )
                items = [(k, json.loads(v)) for k, v, _ in rows]
                b = None
            offset, wm = (
                (0, {}) if version is None else progress_at(self.store, self.run_id, src, version)
            )
            if b is not None:
                beta += max(int(b[1]) - offset, 0)
            for key, d in items:
                if key == META_KEY or not self.mine(key):
                    continue
                entries = d.get("sets", [])
                if not entries:
                    continue  # handed on before this state: not held by the source
                size = len(json.dumps(d, sort_keys=True))
                if len(entries) == 1 and entries[0]["status"] == Status.ACTIVE.value:
                    e = SetEntry.from_json(entries[0], [])
                    e.source = src
                    sets.shadow_start(key, e, size)
                    keys += 1
                    nbytes += size
                else:  # the source itself waits for the key's state: no shadow of it
                    top = max(int(x["set"]) for x in entries)
                    sets.shadow_start(key, SetEntry(top, src, Status.WAITING), 0)
            sets.shadow_meta["sources"][str(src)] = {
                "offset": offset,
                "wm": {str(p): o for p, o in wm.items()},
                "ended": False,
            }
        stats = {
            "checkpoint": cp_id,
            "keys": keys,
            "bytes": nbytes,
            "beta_records": beta,
            "restore_s": round(self.wall() - t0, 3),
            "from": {s: v["offset"] for s, v in sets.shadow_meta["sources"].items()},
        }
        sets.shadow_meta["restore"] = stats
        log.info(
            "shadow of %s part %d/%d restored: %s",
            plan["sources"],
            plan["part"],
            plan["parts"],
            stats,
        )
        return stats

    # ------------------------------------------------------------ steps 2-3: replay, take over

    def step(
        self,
        client: Any,
        topic: str,
        ends: dict[int, int],
        cap: int,
        apply: Callable[[str, list[Rec]], None],
    ) -> tuple[int, int]:
        """Replay about ``cap`` records of this instance's part of each source; returns
        (records read, records replayed into shadows).

        The operator's work (the caller's cost) is the part's records only: the seed's
        secondary gets its own share ``S_a`` of the input stream, the other parts'
        records are skipped on reading. So each step reads ``cap x parts`` records,
        and a shadow replays its part up to ``parts`` times as fast as the source
        works off the whole partition: it catches up from its restored offset and
        reaches the switch before the source does. ``apply(key, recs)`` applies the
        records of a key taken over (output live)."""
        m = self.meta
        if m is None:
            return 0, 0
        sets = self.sets
        n = taken = 0
        for src_s, st in m["sources"].items():
            if st["ended"]:
                continue
            src, off = int(src_s), int(st["offset"])
            upto = min(ends.get(src, 0), off + cap * max(int(m["parts"]), 1))
            if upto <= off:
                continue
            crash_point("worker.restoring")  # replaying
            wm = {int(p): int(o) for p, o in st["wm"].items()}
            last = off - 1
            for rec in client.fetch(topic, src, off, upto):
                last = rec.offset
                n += 1
                hdrs = rec.headers
                if (eos := events.header(hdrs, events.EOS_HEADER)) is not None:
                    key = (rec.key or b"").decode()
                    if self.mine(key):
                        sid, nxt, sp = (int(x) for x in eos.split(":"))
                        got, recs = sets.shadow_end_of_set(key, sid, src, sp, nxt)
                        if got is not None:
                            self._take(key, got, recs, rec.timestamp_ms, apply)
                elif events.header(hdrs, events.HANDOFF_HEADER) is not None:
                    continue
                elif events.header(hdrs, events.END_HEADER) is not None:
                    st["ended"] = True
                    for key, sid, recs in sets.shadow_end_of_stream(src):
                        self._take(key, sid, recs, rec.timestamp_ms, apply)
                else:
                    dec = events.decode([rec.value], routed=True)
                    if dec.rejects:
                        continue
                    p, o = events.parse_src(hdrs)
                    if o <= wm.get(p, -1):
                        continue  # a replayed duplicate: the source drops it too
                    wm[p] = o
                    key = dec.keys[0]
                    if not self.mine(key):
                        continue
                    sh = events.header(hdrs, events.SET_HEADER)
                    sid = int(sh.split(":")[0]) if sh else 0
                    sets.shadow_record(key, sid, src, Rec(dec.ts[0], dec.seq[0], dec.sizes[0], p))
                    taken += 1
            st["offset"] = last + 1
            st["wm"] = {str(p): o for p, o in wm.items()}
            m["read"] = int(m["read"]) + (last + 1 - off)
        return n, taken

    def _take(
        self,
        key: str,
        sid: int,
        recs: list[Rec],
        sent_ms: int,
        apply: Callable[[str, list[Rec]], None],
    ) -> None:
        """Set ``sid`` of ``key`` taken over from its shadow: note the times, apply ``recs``."""
        restored, replayed = self.sets.shadow_stats.pop(key, [0, 0])
        self.taken[(key, sid)] = (sent_ms, round(self.wall() * 1000), restored, replayed)
        m = self.meta
        if m is not None:
            m["taken"] = int(m.get("taken", 0)) + 1
        if recs:
            apply(key, recs)

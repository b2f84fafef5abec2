"""A started instance's shadow of its hash part of the instances it replaces (scale-out).

:class:`Shadow` follows the state manager's plan:

1. restore the part from the replaced instances' checkpoint;
2. replay the sources' routed partitions into shadow sets;
3. take each key over at its routing switch.

Plan, offsets and dedup watermarks are committed with the worker's state, so a
restarted instance resumes. Details: docs/scaleout.md, "One mechanism".
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from skewlab.faults import crash_point
from skewlab.io.delta.store import DeltaStore
from skewlab.io.kafka import fetch_range
from skewlab.io.kafka.base import FetchedRange
from skewlab.io.progress import committed_progress, progress_at
from skewlab.io.state_store import CheckpointStore, newest_rows
from skewlab.live.worker.batch import DATA, END, EOS, classify
from skewlab.live.worker.cut import CUT, cuts_of, read_decisions
from skewlab.pipeline.handoff import META_KEY, KeySets, Rec
from skewlab.rundir import RunDir
from skewlab.state.operator_state import owner, split_hash, split_hashes

log = logging.getLogger(__name__)


CHECKPOINT_WAIT_S = 30.0
"""Longest a restore waits for the checkpoint its plan names (:meth:`Shadow._checkpoint_for`)."""
CUT_POLL_S = 0.05
"""Seconds between two looks for a source's promised cut while it is not known: a look
costs a Delta version check (~2 ms); ``decisions`` is read only when that moved."""

CHECKPOINT_POLL_S = 0.05


def _active_one(row: bytes) -> bool:
    """A state row holding exactly one set, ACTIVE (its restored bytes count), read from
    the row's JSON text as ``KeySets.rows`` writes it, without decoding it."""
    return row.count(b'"set": ') == 1 and b'"status": "active"' in row


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
        d = json.loads(detail)
        if d.get("action") == CUT:  # an old instance's cut names plans, not a plan
            continue
        plan = d.get("plans", {}).get(str(worker))
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
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.sets, self.store, self.run_id, self.wall = sets, store, run_id, wall
        self.sleep = sleep
        self.taken: dict[tuple[str, int], tuple[int, int, int, int]] = {}
        """(key, set) -> (sent ms, applied ms, restored bytes, replayed records) until committed."""
        self._mine: dict[str, bool] = {}
        """Per key seen, :meth:`mine` under the current plan (cleared by :meth:`start`)."""
        self.reader: Any = None
        """A Kafka client of its own for the fetch thread (None: no read-ahead); set by
        the worker, never shared with another thread."""
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shadow-fetch")
        self._ahead: tuple[tuple[str, int, int, int], Future[FetchedRange]] | None = None
        """The next chunk's fetch, started in the background: (topic, source, from, to)."""
        self.poll_s = 0.2
        """Seconds between two looks at a source's commit (:meth:`follow`)."""
        self.cut_poll_s = CUT_POLL_S
        """Seconds between two looks for a cut not known yet (:meth:`follow`)."""
        self._polled = self._cut_polled = float("-inf")
        self._decisions_seen: int | None = None
        """The ``decisions`` version of the last look for cuts (None: not looked yet)."""

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

    @property
    def live_any(self) -> bool:
        """Some source of the plan reached its cut: keys are live here (their records output)."""
        m = self.meta
        return m is not None and any(s.get("live") for s in m["sources"].values())

    def awaiting_cut(self, slack: int) -> bool:
        """True while some source's replay stands within ``slack`` records of its
        source's last commit (its bound) and no cut is known yet: then short steps see
        the cut soon. A replay far behind, or one that knows its cut, reads on at full
        steps (it has that much to catch up)."""
        m = self.meta
        return m is not None and any(
            not s["ended"]
            and not s.get("live")
            and s.get("cut") is None
            and int(s.get("bound", s["offset"])) - int(s["offset"]) <= slack
            for s in m["sources"].values()
        )

    def mine(self, key: str) -> bool:
        """True if ``key`` falls in this instance's hash part: ``owner(key, parts) == part``
        (``split_hash``, the hash the routing switch uses). Needs a plan (:attr:`meta`)."""
        got = self._mine.get(key)
        if got is None:
            m = self.meta
            assert m is not None
            got = self._mine[key] = owner(key, int(m["parts"]), split_hash) == int(m["part"])
        return got

    def mine_many(self, keys: list[str]) -> list[bool]:
        """:meth:`mine` of each of ``keys``, hashed in one call (a restore splits every
        key of its sources' state: 100k at the README's scale) and cached the same way."""
        m = self.meta
        assert m is not None
        part = int(m["part"])
        got = [b == part for b in split_hashes(keys, int(m["parts"]))]
        self._mine.update(zip(keys, got))
        return got

    # ------------------------------------------------------------ step 1: restore

    def _checkpoint_for(self, cps: CheckpointStore, plan: dict[str, Any]) -> int | None:
        """The stored copy to restore when the plan has no ``refs`` (:meth:`start` reads a
        checkpoint by reference otherwise): the plan's ``checkpoint_id`` (waited for while
        it is written, looked at every :data:`CHECKPOINT_POLL_S`), or the newest one when
        the plan names none.
        Never a later one than the plan names: a checkpoint taken after the switch holds
        the old instance's state after its cut (the moved keys gone, tau past ``P``), and
        an instance restarted before its first commit restores again. When the named one
        is still missing after :data:`CHECKPOINT_WAIT_S` (its write failed or was
        skipped), the newest one before it: any stored checkpoint is a consistent state,
        only an older one."""
        want = plan.get("checkpoint_id")
        if want is None:
            return cps.latest()
        want = int(want)
        since = self.wall()
        while True:
            have = cps.checkpoints()
            if want in have:
                return want
            if self.wall() - since >= CHECKPOINT_WAIT_S:
                older = max((c for c in have if c < want), default=None)
                log.warning(
                    "checkpoint %s not written after %.0f s: restoring %s",
                    want,
                    CHECKPOINT_WAIT_S,
                    older,
                )
                return older
            self.sleep(CHECKPOINT_POLL_S)

    def start(self, plan: dict[str, Any]) -> dict[str, Any]:
        """Restore this instance's part of the sources' state per ``plan``; returns stats."""
        t0 = self.wall()
        sets = self.sets
        self._mine.clear()
        # rows to rewrite without the old shadow: the keys it decoded or its own state names
        stale = {k for k, _ in sets.shadow.decoded()} | (set(sets.shadow) & set(sets.received))
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
        cp_id = None
        cp_run = checkpoint_run(self.run_id, plan["group"])
        refs: dict[str, dict[str, int | None]] = plan.get("refs") or {}
        if plan.get("checkpoint") and refs:
            cp_id = int(plan["checkpoint_id"])  # its theta read where the copy is made from
        elif plan.get("checkpoint"):
            cp_id = self._checkpoint_for(CheckpointStore(self.store, *cp_run), plan)
        cp_table = (
            None
            if cp_id is None or refs
            else self.store.read(
                "operator_state",
                run_id=cp_run[0],
                columns=["instance", "key", "value", "tau"],
                filters=[("checkpoint", "=", cp_id)],
            )
        )
        keys = nbytes = beta = 0
        base: dict[str, dict[str, int]] = {}
        for src in plan["sources"]:
            version: int | None
            beta_end: int | None = None  # the routed end the checkpoint was taken at
            mask = None if cp_table is None else pc.equal(cp_table["instance"], src)
            ref = refs.get(str(src))
            if ref is None and mask is not None and pc.any(mask).as_py():  # the stored copy
                assert cp_table is not None and cp_id is not None
                part = cp_table.filter(mask)
                version = int(part["tau"][0].as_py())
                meta = part.filter(pc.equal(part["key"], META_KEY))["value"].to_pylist()
                stored = json.loads(meta[0]).get("beta") if meta and meta[0] else None
                beta_end = None if stored is None else int(stored[1])
                rows = self._part_rows(part)
                base[str(src)] = {"checkpoint": cp_id}
            else:  # the source's committed rows: at the checkpoint's tau, or its last commit
                version = (
                    ref["version"]
                    if ref is not None
                    else self.store.committed_version(
                        "partials", RunDir.worker_app(src, self.run_id)
                    )
                )
                rows = [] if version is None else self._source_rows(src, int(version))
                if version is not None:
                    base[str(src)] = {"version": int(version)}
                end = ref.get("end") if ref is not None else None
                beta_end = None if end is None else int(end)
            offset, wm = (
                (0, {}) if version is None else progress_at(self.store, self.run_id, src, version)
            )
            if beta_end is not None:
                beta += max(beta_end - offset, 0)
            for key, raw in rows:  # decoded when first used (pipeline.shadow_entries)
                if sets.shadow_base(key, raw, src) and _active_one(raw):
                    keys += 1
                    nbytes += len(raw)
            sets.shadow_meta["sources"][str(src)] = {
                "offset": offset,
                "wm": {str(p): o for p, o in wm.items()},
                "ended": False,
                "bound": offset,
                "cut": None,
                "live": False,
            }
        sets.shadow_meta["base"] = base
        stats = {
            "checkpoint": cp_id,
            "by_reference": bool(refs),
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

    def _source_rows(self, src: int, version: int) -> list[tuple[str, bytes]]:
        """This instance's keys' rows of ``src``'s committed state at ``version``."""
        return self._part_rows(
            self.store.read(
                "operator_state",
                run_id=self.run_id,
                columns=["checkpoint", "key", "value"],
                filters=[("instance", "=", src), ("checkpoint", "<=", version)],
            )
        )

    def load_base(self) -> int:
        """A restarted instance's base again (:meth:`start` restored it from these
        immutable rows and never wrote it): each key of its part that its own committed
        state does not name; live where the committed plan reached its source's cut.
        Returns the keys added."""
        m, sets = self.meta, self.sets
        if m is None or not m.get("base"):
            return 0
        cp_run = checkpoint_run(self.run_id, int(m["group"]))
        added = 0
        for src_s, where in m["base"].items():
            src = int(src_s)
            if "checkpoint" in where:
                t = self.store.read(
                    "operator_state",
                    run_id=cp_run[0],
                    columns=["key", "value"],
                    filters=[("checkpoint", "=", int(where["checkpoint"])), ("instance", "=", src)],
                )
                rows = self._part_rows(t)
            else:
                rows = self._source_rows(src, int(where["version"]))
            if m["sources"].get(src_s, {}).get("live"):
                sets.shadow.live_sources.add(src)
            for key, raw in rows:
                if key not in sets.received:  # the own state names it: that row holds
                    added += int(sets.shadow_base(key, raw, src))
        log.info("shadow base of %s reloaded: %d keys", sorted(m["base"]), added)
        return added

    def _part_rows(self, t: Any) -> list[tuple[str, bytes]]:
        """``(key, value)`` of this instance's keys among the state rows ``t`` (columns
        ``key``, ``value`` and, for incremental rows, ``checkpoint``: then per key its
        newest row, :func:`~skewlab.io.state_store.newest_rows`). Only these rows
        are decoded later: the other parts' keys are never parsed."""
        if t.num_rows == 0:
            return []
        if "checkpoint" in t.column_names:
            t = newest_rows(t)
        t = t.filter(pc.not_equal(t["key"], META_KEY))
        keys: list[str] = t["key"].to_pylist()
        take = [i for i, ok in enumerate(self.mine_many(keys)) if ok]
        values = t["value"].take(pa.array(take, pa.int64())).to_pylist()
        return [(keys[i], v) for i, v in zip(take, values) if v]

    # ------------------------------------------------------------ the cut

    def follow(self) -> None:
        """Look at each source's last commit (at most every :attr:`poll_s`) and, while a
        source's cut is not known, at its promised cuts (every :attr:`cut_poll_s`, reading
        ``decisions`` only when its Delta version moved). The committed routed offset
        bounds the replay (a shadow never runs past what its source committed, so nothing
        it replayed suppressed can fall after the source's cut), and a cut the source
        promised for this instance's plan (its ``Cut`` row, written before it stopped any
        key) gives the offset ``P`` where the keys go live here
        (docs/scaleout.md, "The cut")."""
        m = self.meta
        if m is None:
            return
        now = self.wall()
        todo = {
            int(src): st
            for src, st in m["sources"].items()
            if not st["ended"] and not st.get("live")
        }
        if now - self._polled >= self.poll_s:
            self._polled = now
            for src, st in todo.items():
                off, _ = committed_progress(
                    self.store, self.run_id, src, RunDir.worker_app(src, self.run_id)
                )
                st["bound"] = max(int(st.get("bound", 0)), off)
        waiting = {src: st for src, st in todo.items() if st.get("cut") is None}
        if not waiting or now - self._cut_polled < self.cut_poll_s:
            return
        self._cut_polled = now
        seen = self.store.table_version("decisions")
        if seen is not None and seen == self._decisions_seen:
            return  # no decision row since the last look: no new cut
        self._decisions_seen = seen
        me, epoch = str(self.sets.worker), int(m["epoch"])
        table = read_decisions(self.store, self.run_id)  # one read for every source
        for src, st in waiting.items():
            for c in cuts_of(self.store, self.run_id, src, table).values():
                if st.get("cut") is None and int(c.get("plans", {}).get(me, -1)) == epoch:
                    st["cut"] = int(c["at"])
                    log.info(
                        "shadow: source %d cuts at routed offset %d (v%d); shadow at %d",
                        src,
                        st["cut"],
                        int(c["v"]),
                        int(st["offset"]),
                    )

    def _limit(self, src: int, st: dict[str, Any]) -> int | None:
        """How far the replay of ``src`` may read now (None: no bound, live past the
        cut); goes live when the replay stands at the cut. Called as a chunk starts: a
        step that reached the cut ends there (:meth:`step`), so the replay's cost is
        paid before the keys count as processing here again."""
        if st.get("live"):
            return None
        cut = st.get("cut")
        if cut is not None and int(st["offset"]) >= int(cut):
            keys = self.sets.shadow_go_live(src)
            st["live"], st["live_ms"] = True, round(self.wall() * 1000)
            log.info("shadow: %d keys of source %d live at routed offset %d", len(keys), src, cut)
            return None
        return int(cut) if cut is not None else int(st.get("bound", st["offset"]))

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
        records of a key taken over (output live).

        A chunk of ``cap x parts`` records that brought less than half of ``cap``
        records of work (end-of-set markers, other parts' keys) is followed by the
        next one, up to :attr:`MAX_CHUNKS` per step: they cost the operator nothing,
        and a step per chunk would add a look-up and a flush each."""
        n = taken = work = 0
        for _ in range(self.MAX_CHUNKS):
            read, replayed, live = self._chunk(client, topic, ends, cap, apply)
            n, taken, work = n + read, taken + replayed, work + replayed + live
            if read == 0 or work >= cap // 2 or self._at_cut():
                break
        return n, taken

    def _at_cut(self) -> bool:
        """Some source's replay stands at its cut and has not gone live yet."""
        m = self.meta or {"sources": {}}
        return any(
            not s.get("live") and s.get("cut") is not None and int(s["offset"]) >= int(s["cut"])
            for s in m["sources"].values()
        )

    MAX_CHUNKS = 4
    """Chunks of ``cap x parts`` records one :meth:`step` reads at most."""

    def _fetch(
        self, client: Any, topic: str, src: int, off: int, upto: int
    ) -> tuple[FetchedRange, int]:
        """Records ``[off, end)`` of ``src`` and ``end``: the prefetched chunk if it starts
        at ``off`` and ends by ``upto`` (a replay reads its sources in order), else
        ``[off, upto)`` fetched now. A prefetch is only a read: a crash loses nothing
        the commit holds."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            (t, s, a, b), fut = ahead
            try:
                got = fut.result()
            except Exception as exc:  # read again below, where an error is raised
                log.warning("shadow read-ahead of %s[%d] %d..%d failed: %s", t, s, a, b, exc)
            else:
                if (t, s, a) == (topic, src, off) and b <= upto:
                    return got, b
        return fetch_range(client, topic, src, off, upto), upto

    def _chunk(
        self,
        client: Any,
        topic: str,
        ends: dict[int, int],
        cap: int,
        apply: Callable[[str, list[Rec]], None],
    ) -> tuple[int, int, int]:
        """One read of up to ``cap x parts`` records per source (:meth:`step`); returns
        records read, replayed into shadows (suppressed) and applied live (past a cut)."""
        m = self.meta
        if m is None:
            return 0, 0, 0
        sets = self.sets
        n = taken = live_n = 0
        for src_s, st in m["sources"].items():
            if st["ended"]:
                continue
            src, off = int(src_s), int(st["offset"])
            limit = self._limit(src, st)
            end = ends.get(src, 0) if limit is None else min(ends.get(src, 0), limit)
            upto = min(end, off + cap * max(int(m["parts"]), 1))
            if upto <= off:
                continue
            crash_point("worker.restoring")  # replaying
            wm = {int(p): int(o) for p, o in st["wm"].items()}
            recs, upto = self._fetch(client, topic, src, off, upto)
            nxt = min(end, upto + cap * max(int(m["parts"]), 1))
            if nxt > upto and self.reader is not None:  # read on while this chunk is processed
                fut = self._pool.submit(fetch_range, self.reader, topic, src, upto, nxt)
                self._ahead = ((topic, src, upto, nxt), fut)
            b = classify(recs)
            n += len(recs)
            mine, record = self.mine, sets.shadow_record
            for i, kind in enumerate(b.kinds):
                if kind == DATA:
                    p, o = b.src_partition[i], b.src_offset[i]
                    if o <= wm.get(p, -1):
                        continue  # a replayed duplicate: the source drops it too
                    wm[p] = o
                    key = b.keys[i]
                    if not mine(key):
                        continue
                    tag = b.tags[i]
                    sid = int(tag.split(":")[0]) if tag else 0
                    r = Rec(b.ts[i], b.seq[i], b.sizes[i], p)
                    if record(key, sid, src, r):
                        apply(key, [r])  # past the cut: the source dropped it, output here
                        live_n += 1
                    else:
                        taken += 1
                elif kind == EOS:
                    rec = recs[i]
                    key = (rec.key or b"").decode()
                    if mine(key):
                        tag = b.tags[i]
                        assert tag is not None
                        sid, nxt, sp = (int(x) for x in tag.split(":"))
                        e = sets.shadow.get(key)
                        live_ms = st.get("live_ms") if e is not None and e.live else None
                        got, done = sets.shadow_end_of_set(key, sid, src, sp, nxt)
                        if got is not None:
                            self._take(key, got, done, rec.timestamp_ms, apply, live_ms)
                elif kind == END:
                    st["ended"] = True
                    live = {k for k, e in sets.shadow.items() if e.live}
                    for key, sid, done in sets.shadow_end_of_stream(src):
                        lms = st.get("live_ms") if key in live else None
                        self._take(key, sid, done, recs[i].timestamp_ms, apply, lms)
            last = recs[-1].offset if recs else off - 1
            st["offset"] = last + 1
            st["wm"] = {str(p): o for p, o in wm.items()}
            m["read"] = int(m["read"]) + (last + 1 - off)
        return n, taken, live_n

    def _take(
        self,
        key: str,
        sid: int,
        recs: list[Rec],
        sent_ms: int,
        apply: Callable[[str, list[Rec]], None],
        live_ms: int | None = None,
    ) -> None:
        """Set ``sid`` of ``key`` taken over from its shadow: note the times, apply ``recs``.
        A key live since its source's cut was processing here from ``live_ms`` on."""
        restored, replayed = self.sets.shadow_stats.pop(key, [0, 0])
        applied = live_ms if live_ms is not None else round(self.wall() * 1000)
        self.taken[(key, sid)] = (sent_ms, applied, restored, replayed)
        m = self.meta
        if m is not None:
            m["taken"] = int(m.get("taken", 0)) + 1
        if recs:
            apply(key, recs)

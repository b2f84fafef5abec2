"""Message sets at a worker: which key records to apply now, buffer, or hand off (SMALOPS Fig. 5).

:class:`KeySets` keeps, per key, the sets this worker holds or awaits. One set ``s`` of a key:

1. its entry is created by its first record, marker or hand-off: set 0 ``ACTIVE`` with
   empty state, a later set ``WAITING``;
2. while ``WAITING``, the key's records of the set are buffered, in order;
3. the hand-off of set ``s - 1`` brings its state: the buffer is applied, the set is
   ``ACTIVE`` (a second copy of a hand-off is ignored);
4. ``ACTIVE`` records are applied at once (a seq not above its splitter's last: a violation);
5. once every splitter ended the set (or the stream ended) and it is ``ACTIVE``, its state
   leaves as a :class:`Handoff` to its next holder.

The records and shadow sets: docs/pipeline.md, "Message sets at a worker".
"""

from __future__ import annotations

import enum
import gc
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from skewlab.errors import ConfigError
from skewlab.pipeline.shadow_entries import ShadowEntries

log = logging.getLogger(__name__)

META_KEY = ""
"""Checkpoint row of the worker itself (input keys are never empty)."""
_NO_SETS = b'"sets": []'
"""In a state row (:meth:`KeySets.rows`: ``json.dumps`` with sorted keys): it holds no set."""


class Status(enum.Enum):
    """Where one message set stands at one worker."""

    WAITING = "waiting"
    ACTIVE = "active"


@dataclass(frozen=True, slots=True)
class Rec:
    """One event of a key as the operator applies it (ts s, seq, size, splitter)."""

    ts: float
    seq: int
    size: int
    splitter: int


@dataclass(frozen=True, slots=True)
class Handoff:
    """The state of set ``set_id - 1`` of ``key``, from ``src`` to ``dst``."""

    key: str
    set_id: int
    src: int
    dst: int
    state: dict[str, Any]

    def value(self) -> bytes:
        """The state as canonical JSON bytes (sorted keys): the hand-off record's value."""
        return json.dumps(self.state, sort_keys=True, separators=(",", ":")).encode()

    @property
    def tuples(self) -> int:
        """The number of the key's events the state has applied (its ``count``)."""
        return int(self.state["count"])


def empty_state() -> dict[str, Any]:
    """A new set-0 state: nothing applied (count, sum, last seq per splitter, violations)."""
    return {"count": 0, "sum": 0, "last": {}, "violations": 0}


@dataclass
class SetEntry:
    """One message set of one key held (or awaited) by this worker."""

    set_id: int
    source: int
    status: Status
    state: dict[str, Any] = field(default_factory=empty_state)
    ended: set[int] = field(default_factory=set)
    next_worker: int | None = None
    buffer: list[Rec] = field(default_factory=list)
    live: bool = False
    """A shadow past its source's cut (docs/scaleout.md, "The cut"): its records are live
    output here, its source stopped the key."""

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON-able dict for a checkpoint row; the buffer is left out (it is
        stored in the row's ``buffered`` column)."""
        d = {
            "set": self.set_id,
            "source": self.source,
            "status": self.status.value,
            "state": self.state,
            "ended": sorted(self.ended),
            "next": self.next_worker,
        }
        if self.live:
            d["live"] = True
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any], buffer: list[Rec]) -> SetEntry:
        """The entry :meth:`to_json` wrote, with its ``buffer`` of records restored."""
        return cls(
            int(d["set"]),
            int(d["source"]),
            Status(d["status"]),
            d["state"],
            {int(p) for p in d["ended"]},
            d["next"],
            buffer,
            bool(d.get("live", False)),
        )


def _copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A copy of a set's state (JSON values: ``last`` is its only nested dict)."""
    return {**state, "last": dict(state["last"])}


def _apply(state: dict[str, Any], r: Rec) -> None:
    last = state["last"]
    p = str(r.splitter)
    if r.seq <= last.get(p, -1):
        state["violations"] += 1
    else:
        last[p] = r.seq
    state["count"] += 1
    state["sum"] += r.size


def cut_row(completed: int, cut: int, received: int) -> bytes:
    """The ``operator_state`` value of a key stopped at a cut with no set left: what
    ``json.dumps(..., sort_keys=True)`` makes of it in :meth:`KeySets.changed_rows`,
    written directly (a cut commit writes one per cut key: 50k at the README's scale)."""
    return (
        f'{{"completed": {completed:d}, "cut": {cut:d}, "received": {received:d}, "sets": []}}'
    ).encode()


class KeySets:
    """The message sets of every key at one worker (steps 1-5 of the module doc).

    ``record`` / ``receive`` return the records to apply now (the caller adds
    them to its partials); ``take_handoffs`` returns completed sets to send.
    """

    def __init__(self, worker: int, splitters: int) -> None:
        if splitters < 1:
            raise ConfigError(f"splitters must be >= 1, got {splitters}")
        self.worker = worker
        self.splitters = splitters
        self.sets: dict[str, dict[int, SetEntry]] = {}
        self.received: dict[str, int] = {}
        self.completed: dict[str, int] = {}
        self.stream_ended = False
        self.applied_handoffs: list[Handoff] = []
        self._out: list[Handoff] = []
        self._changed: set[str] = set()
        """Keys whose entry may have changed since the last :meth:`changed_rows`."""
        self.shadow: ShadowEntries[SetEntry] = ShadowEntries(self._decode_base)
        """Shadow sets (docs/pipeline.md): WAITING = the key is not shadowed (its holder waits).
        Restored keys stay their holder's rows until used (:meth:`shadow_base`)."""
        self.shadow_stats: dict[str, list[int]] = {}
        """Per shadowed key: [bytes of its restored state, records replayed into it]."""
        self.shadow_meta: dict[str, Any] | None = None
        """The shadow's plan and per-source progress (the worker's; kept with the state)."""
        self._shadow_final: dict[str, tuple[int, dict[str, Any]]] = {}
        self.cut: dict[str, int] = {}
        """Keys this worker stopped at a cut (old instance): key -> the set stopped; its
        records of that set after the cut are dropped, no hand-off leaves."""
        self.bump = 0
        """Added to the worker's commit version (past a dead process's uncommitted flush;
        ``skewlab.live.worker.process``), committed with the state."""
        self.cuts: list[dict[str, Any]] = []
        """The cuts made here, oldest first (``{"v", "at", "parts", "moved", "plans",
        "keys"}``, docs/scaleout.md), committed with the state."""

    # ---------------------------------------------------------------- input

    def _entry(self, key: str, set_id: int, source: int) -> SetEntry | None:
        """Step 1: the entry of ``set_id`` of ``key`` (None once that set was handed on)."""
        if set_id <= self.completed.get(key, -1):
            return None
        sets = self.sets.setdefault(key, {})
        e = sets.get(set_id)
        if e is None:
            status = Status.ACTIVE if set_id == 0 else Status.WAITING
            e = sets[set_id] = SetEntry(set_id, source, status)
        return e

    def record(self, key: str, set_id: int, source: int, r: Rec) -> list[Rec]:
        """A data record of ``key`` in ``set_id`` (step 2 or 4); a record of a set cut
        here is dropped (its new instance applies it)."""
        c = self.cut.get(key)
        if c is not None and set_id <= c:
            return []
        self._changed.add(key)
        e = self._entry(key, set_id, source)
        if e is None:  # a set already handed on: should never happen, keep the count anyway
            sets = self.sets.get(key)
            e = min(sets.values(), key=lambda x: x.set_id) if sets else None
            if e is None:
                e = self.sets.setdefault(key, {})[set_id] = SetEntry(set_id, source, Status.ACTIVE)
            e.state["violations"] += 1
        if e.status is Status.WAITING:
            e.buffer.append(r)
            return []
        _apply(e.state, r)
        self._check_complete(key, e)
        return [r]

    def end_of_set(self, key: str, set_id: int, splitter: int, next_worker: int) -> None:
        """Splitter ``splitter`` routed its last record of ``set_id`` of ``key``."""
        c = self.cut.get(key)
        if c is not None and set_id <= c:
            return
        self._changed.add(key)
        e = self._entry(key, set_id, -1)
        if e is None:
            return
        e.ended.add(splitter)
        e.next_worker = next_worker
        self._check_complete(key, e)

    def end_of_stream(self) -> None:
        """No splitter routes any more: every set whose next holder is known ends."""
        self.stream_ended = True
        self._changed.update(self.sets)
        for key, sets in list(self.sets.items()):
            for e in sorted(sets.values(), key=lambda x: x.set_id):
                self._check_complete(key, e)

    def receive(self, h: Handoff) -> list[Rec]:
        """The hand-off of ``h.set_id - 1`` arrived (step 3); returns the buffer to apply."""
        self._changed.add(h.key)
        if h.set_id <= self.received.get(h.key, 0):
            self._check_duplicate(h)
            return []
        e = self._entry(h.key, h.set_id, h.src)
        if e is None:
            return []
        sh = self.shadow.get(h.key)
        if sh is not None and sh.set_id < h.set_id:  # the real hand-off came first
            del self.shadow[h.key]
        self.received[h.key] = h.set_id
        self.applied_handoffs.append(h)
        state = {
            "count": int(h.state["count"]),
            "sum": int(h.state["sum"]),
            "last": dict(h.state["last"]),
            "violations": int(h.state["violations"]),
        }
        buffered, e.buffer = e.buffer, []
        for r in buffered:
            _apply(state, r)
        e.state, e.status = state, Status.ACTIVE
        self._check_complete(h.key, e)
        return buffered

    def _check_complete(self, key: str, e: SetEntry) -> None:
        """Step 5: hand the set on when all splitters ended it and it holds its state."""
        if e.status is not Status.ACTIVE or e.next_worker is None:
            return
        if len(e.ended) < self.splitters and not self.stream_ended:
            return
        self._out.append(Handoff(key, e.set_id + 1, self.worker, e.next_worker, e.state))
        del self.sets[key][e.set_id]
        if not self.sets[key]:
            del self.sets[key]
        self.completed[key] = max(self.completed.get(key, -1), e.set_id)

    # ---------------------------------------------------------------- cut

    def cuttable(self, moved: Callable[[list[str]], list[bool]]) -> list[str]:
        """The keys a cut stops here: those this worker holds as their first holder
        (exactly one set, set 0, ACTIVE) for which ``moved`` (asked once, for all of
        them: a hash per key) says True. The rule is one the key's new instance
        evaluates on its shadow at the same offset (:meth:`shadow_go_live`), so both
        agree without a key list."""
        first: list[str] = []
        for key, sets in self.sets.items():
            e = sets.get(0)
            if len(sets) == 1 and e is not None and e.status is Status.ACTIVE:
                first.append(key)
        return [key for key, m in zip(first, moved(first), strict=True) if m]

    def cut_keys(self, keys: Iterable[str]) -> None:
        """Stop ``keys`` (:meth:`cuttable`) here: each set leaves with no hand-off, its
        later records of that set are dropped (:meth:`record`)."""
        for key in keys:
            del self.sets[key]
            self.cut[key] = 0
            self.completed[key] = max(self.completed.get(key, -1), 0)
            self._changed.add(key)

    def shadow_go_live(self, source: int) -> list[str]:
        """The shadow reached ``source``'s cut: every shadow of a key the source held as
        its first holder (set 0, ACTIVE: the source's :meth:`cut_keys` rule) goes live.
        Returns those keys."""
        out = []
        self.shadow.live_sources.add(source)  # base keys decode live (:meth:`_decode_base`)
        for key, e in self.shadow.decoded():
            if e.source == source and e.set_id == 0 and e.status is Status.ACTIVE:
                e.live = True
                self._changed.add(key)
                out.append(key)
        return out

    # ---------------------------------------------------------------- shadow

    def shadow_base(self, key: str, row: bytes, source: int) -> bool:
        """Shadow ``key`` from ``row``, the value of its holder ``source``'s state row (as
        :meth:`rows` writes it), decoded when the key is first used; not a change of
        this worker's state (the caller keeps where the row came from, to restore it
        again). False (nothing shadowed) for a row holding no set: the key was handed
        on before that state."""
        if _NO_SETS in row:
            return False
        self.shadow.add_base(key, row, source)
        return True

    def _decode_base(self, key: str, row: bytes, source: int, live: frozenset[int]) -> SetEntry:
        """The shadow entry of a base key (:meth:`shadow_base`): the holder's one ACTIVE
        set, live when its source's cut was reached (the rule of :meth:`shadow_go_live`);
        a holder that holds more than one set, or waits, is waited for (WAITING)."""
        entries = json.loads(row)["sets"]
        if len(entries) == 1 and entries[0]["status"] == Status.ACTIVE.value:
            e = SetEntry.from_json(entries[0], [])
            e.source = source
            e.live = source in live and e.set_id == 0
            self.shadow_stats.setdefault(key, [len(row), 0])
            return e
        top = max(int(x["set"]) for x in entries)
        self.shadow_stats.setdefault(key, [0, 0])
        return SetEntry(top, source, Status.WAITING)

    def shadow_start(self, key: str, entry: SetEntry, restored_bytes: int) -> None:
        """Shadow ``key`` from ``entry`` (its holder's set, copied or from a checkpoint)."""
        self._changed.add(key)
        self.shadow[key] = entry
        self.shadow_stats[key] = [restored_bytes, 0]

    def shadow_record(self, key: str, set_id: int, source: int, r: Rec) -> bool:
        """A record of ``key`` read in its holder's partition ``source``: apply it to the
        shadow. Returns True when the shadow is live (the caller outputs the record)."""
        if set_id < self.received.get(key, 0) or set_id <= self.completed.get(key, -1):
            return False
        e = self.shadow.get(key)
        if e is None:  # a key its holder had not seen at the shadow's start: empty state
            e = self.shadow[key] = SetEntry(set_id, source, Status.ACTIVE)
            self.shadow_stats[key] = [0, 0]
        if e.status is not Status.ACTIVE:
            return False
        self._changed.add(key)
        _apply(e.state, r)
        self.shadow_stats[key][1] += 1
        return e.live

    def shadow_end_of_set(
        self, key: str, set_id: int, source: int, splitter: int, nxt: int
    ) -> tuple[int | None, list[Rec]]:
        """An end-of-set marker read in the holder's partition ``source``.

        Returns the set taken over here from the shadow (None: not yet / not here)
        and the key's buffered records to apply now."""
        e = self.shadow.get(key)
        if e is None:
            if set_id < self.received.get(key, 0):
                return None, []
            e = self.shadow[key] = SetEntry(set_id, source, Status.ACTIVE)
            self.shadow_stats[key] = [0, 0]
        self._changed.add(key)
        e.ended.add(splitter)
        e.next_worker = nxt
        return self._shadow_check(key, e, False)

    def shadow_end_of_stream(self, source: int) -> list[tuple[str, int, list[Rec]]]:
        """The holder's partition ``source`` ended: its shadows with a next holder complete.
        Returns ``(key, set taken, records to apply)`` per key taken over here."""
        out: list[tuple[str, int, list[Rec]]] = []
        for key, e in list(self.shadow.items()):
            if e.source == source:
                sid, recs = self._shadow_check(key, e, True)
                if sid is not None:
                    out.append((key, sid, recs))
        return out

    def _shadow_check(self, key: str, e: SetEntry, ended: bool) -> tuple[int | None, list[Rec]]:
        if e.next_worker is None or not (ended or len(e.ended) >= self.splitters):
            return None, []
        del self.shadow[key]
        self._changed.add(key)
        if e.status is not Status.ACTIVE or e.next_worker != self.worker:
            self.shadow_stats.pop(key, None)
            return None, []
        h = Handoff(key, e.set_id + 1, e.source, self.worker, e.state)
        if not e.live:  # a live key's source cut it: no hand-off comes to compare
            self._shadow_final[key] = (h.set_id, _copy_state(e.state))
        before = len(self.applied_handoffs)
        recs = self.receive(h)
        if len(self.applied_handoffs) == before:
            return None, []  # the real hand-off came first
        return h.set_id, recs

    def _check_duplicate(self, h: Handoff) -> None:
        """A real hand-off of a set taken from a shadow must bring the same state."""
        have = self._shadow_final.pop(h.key, None)
        if have is None or have[0] != h.set_id:
            return
        if h.state != have[1]:
            sets = self.sets.get(h.key)
            if sets:  # shows as an order violation in the final key state
                min(sets.values(), key=lambda x: x.set_id).state["violations"] += 1
            log.error(
                "worker %d: shadow of %r set %d differs from its hand-off",
                self.worker,
                h.key,
                h.set_id,
            )

    # ---------------------------------------------------------------- output

    def take_handoffs(self) -> list[Handoff]:
        """The hand-offs of the sets completed since the last call (to send to their next
        holders); the list is emptied."""
        out, self._out = self._out, []
        return out

    def take_applied(self) -> list[Handoff]:
        """The hand-offs received and applied since the last call; the list is emptied."""
        out, self.applied_handoffs = self.applied_handoffs, []
        return out

    def waiting(self) -> int:
        """Sets still waiting for their hand-off."""
        return sum(
            1 for sets in self.sets.values() for e in sets.values() if e.status is Status.WAITING
        )

    def buffered(self) -> int:
        """Records buffered in waiting sets, over all keys."""
        return sum(len(e.buffer) for sets in self.sets.values() for e in sets.values())

    # ---------------------------------------------------------------- checkpoint

    def rows(self) -> list[tuple[str, bytes, bytes | None]]:
        """``(key, value, buffered)`` per key: the whole state, for one checkpoint."""
        return self._rows(
            set(self.sets) | set(self.received) | set(self.completed) | set(self.shadow)
        )

    def changed_rows(self) -> list[tuple[str, bytes, bytes | None]]:
        """The rows of the keys changed since the last call (and the worker's own row).

        An incremental checkpoint: the state at a checkpoint is, per key, its row of
        the newest checkpoint at or before it (:func:`latest_rows`). Keys never leave
        (a handed-on key keeps its ``completed`` mark), so no row needs a tombstone.
        """
        keys, self._changed = self._changed, set()
        return self._rows(keys)

    def _rows(self, keys: set[str]) -> list[tuple[str, bytes, bytes | None]]:
        m: dict[str, Any] = {"stream_ended": self.stream_ended}
        if self.shadow_meta is not None:
            m["shadow"] = self.shadow_meta
        if self.cuts:
            m["cuts"] = self.cuts
        if self.bump:
            m["bump"] = self.bump
        meta = json.dumps(m).encode()
        out: list[tuple[str, bytes, bytes | None]] = [(META_KEY, meta, None)]
        cut, shadow, received, completed = self.cut, self.shadow, self.received, self.completed
        for key in sorted(keys):
            sets = self.sets.get(key, {})
            if not sets and key in cut and key not in shadow:  # stopped at a cut: a fixed form
                out.append(
                    (key, cut_row(completed.get(key, -1), cut[key], received.get(key, 0)), None)
                )
                continue
            value = {
                "received": received.get(key, 0),
                "completed": completed.get(key, -1),
                "sets": [e.to_json() for _, e in sorted(sets.items())],
            }
            sh = shadow.get(key)
            if sh is not None:
                value["shadow"] = sh.to_json()
                value["shadow_stats"] = self.shadow_stats.get(key, [0, 0])
            if key in self.cut:
                value["cut"] = self.cut[key]
            buf = {
                str(s): [[r.ts, r.seq, r.size, r.splitter] for r in e.buffer]
                for s, e in sets.items()
            }
            has_buf = any(buf.values())
            out.append(
                (
                    key,
                    json.dumps(value, sort_keys=True).encode(),
                    json.dumps(buf).encode() if has_buf else None,
                )
            )
        return out

    @classmethod
    def from_rows(
        cls,
        worker: int,
        splitters: int,
        rows: list[tuple[str, bytes, bytes | None]],
    ) -> KeySets:
        """The key sets of ``worker`` restored from checkpoint ``rows`` (``(key, value,
        buffered)`` as :meth:`rows` wrote them; the :data:`META_KEY` row holds the worker's
        own stream-ended and shadow state)."""
        with _gc_paused():
            return cls._from_rows(worker, splitters, rows)

    @classmethod
    def _from_rows(
        cls, worker: int, splitters: int, rows: list[tuple[str, bytes, bytes | None]]
    ) -> KeySets:
        ks = cls(worker, splitters)
        values = _loads_all([value for _, value, _ in rows])
        bufs = iter(_loads_all([buffered for _, _, buffered in rows if buffered]))
        for (key, _, buffered), d in zip(rows, values):
            buf = next(bufs) if buffered else {}
            if key == META_KEY:
                ks.stream_ended = bool(d["stream_ended"])
                ks.shadow_meta = d.get("shadow")
                ks.cuts = list(d.get("cuts", []))
                ks.bump = int(d.get("bump", 0))
                continue
            if "cut" in d:
                ks.cut[key] = int(d["cut"])
            if "shadow" in d:
                ks.shadow[key] = SetEntry.from_json(d["shadow"], [])
                ks.shadow_stats[key] = list(d.get("shadow_stats", [0, 0]))
            ks.received[key] = int(d["received"])
            if int(d["completed"]) >= 0:
                ks.completed[key] = int(d["completed"])
            for ed in d["sets"]:
                recs = [
                    Rec(float(t), int(q), int(z), int(p))
                    for t, q, z, p in buf.get(str(ed["set"]), [])
                ]
                ks.sets.setdefault(key, {})[int(ed["set"])] = SetEntry.from_json(ed, recs)
        return ks


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: building 100k keys' state made millions of
    containers, and the collections they triggered, each walking every object made so
    far, took over half of :meth:`KeySets.from_rows` (1.9-4.9 s with them, 0.8-1.5 s
    without, same rows, 2 busy cores). The state holds no reference cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _loads_all(docs: list[bytes]) -> list[Any]:
    """``[json.loads(d) for d in docs]`` as one parse of a JSON array: at 100k state
    rows the per-call overhead was about half of decoding them."""
    if not docs:
        return []
    return list(json.loads(b"[" + b",".join(docs) + b"]"))


def latest_rows(
    rows: Iterable[tuple[int, str, bytes, bytes | None]],
) -> list[tuple[str, bytes, bytes | None]]:
    """Per key, the ``(key, value, buffered)`` of its newest checkpoint among ``rows``
    (``(checkpoint, key, value, buffered)`` of one instance, all at or before the
    checkpoint to restore): the whole state from :meth:`KeySets.changed_rows` rows."""
    newest: dict[str, tuple[int, bytes, bytes | None]] = {}
    for c, key, value, buffered in rows:
        have = newest.get(key)
        if have is None or c > have[0]:
            newest[key] = (c, value, buffered)
    return [(k, v, b) for k, (_, v, b) in sorted(newest.items())]

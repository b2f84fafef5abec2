"""One splitter instance of the live route job: grouping + explicit assignments.

The route job keeps one :class:`Splitter` per Kafka partition of ``events``
(DKG's SplitterBolt). Its grouping runs on *event time*: the splitter's clock is
the event timestamps it has routed, never the wall clock, so a micro-batch that
Spark replays after a crash gets exactly the decisions it got the first time
(same state from the checkpoint, same input, same clock).

Decisions, in order, for each batch (sorted by source offset):

1. events are routed in blocks of at most ``block_s`` seconds of event time;
   before each block the clock moves to the block's first timestamp, so DKG's
   warm-up, promotion cycles and check intervals see time pass;
2. the grouping decides every event of the block (its own state advances);
3. keys named by the explicit ``assignments`` map (a rebalancer's decision)
   go to the worker it names instead, whatever the grouping said.

With a live rebalancer, :meth:`Splitter.route_sets` replaces step 3 by versions
of the map, each with an ``effective`` event time (set by the rebalancer at or
after the wall time it wrote the version, so no event already routed can fall
under it). Per event, the newest version whose effective time is <= the event's
ts applies; the splitter keeps the last version it applied (and its map) in its
state, so a replayed batch routes exactly as the first attempt, however many
versions were written meanwhile. When a version starts applying, the splitter
emits one end-of-set :class:`Marker` per moved key, placed before the first
event under the new version, to the key's old worker.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skewlab.clock import ManualClock
from skewlab.grouping.base import Grouping, GroupingConfig, Snapshot
from skewlab.hashing import DKG_SEED, bucket
from skewlab.keys import KeyBatch, KeyVocab

SNAPSHOT_VERSION = 1


@dataclass(frozen=True, slots=True)
class SplitterState:
    """What a splitter carries between micro-batches (picklable)."""

    version: int
    grouping: Snapshot
    clock: float
    routed: int
    applied: int = 0
    sets: tuple[tuple[str, int, int, int], ...] = ()
    """The applied assignments version and its map: (key, worker, set id, source)."""


@dataclass(frozen=True, slots=True)
class AssignmentVersion:
    """One version of the rebalancer's map: key -> (worker, set id), from ``effective`` s."""

    version: int
    effective: float
    sets: tuple[tuple[str, int, int], ...]

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> list[AssignmentVersion]:
        """Versions (oldest first) from ``assignments`` rows of one run."""
        by: dict[int, list[Mapping[str, Any]]] = {}
        for r in rows:
            by.setdefault(int(r["version"]), []).append(r)
        out = []
        for v, rs in sorted(by.items()):
            eff = max(int(r["effective_ms"] or 0) for r in rs) / 1000.0
            sets = tuple(
                sorted((str(r["key"]), int(r["worker"]), int(r["set_id"] or 0)) for r in rs)
            )
            out.append(cls(v, eff, sets))
        return out


@dataclass(frozen=True, slots=True)
class Marker:
    """End of ``set_id`` of ``key`` on ``worker``; the next set goes to ``next_worker``.

    ``index``: the marker goes right before event ``index`` of the batch.
    """

    index: int
    key: str
    worker: int
    set_id: int
    next_worker: int


@dataclass(frozen=True, slots=True)
class RoutedSets:
    """Per event: worker, set id and source (holder of the previous set, -1: none)."""

    workers: np.ndarray
    set_ids: np.ndarray
    sources: np.ndarray
    markers: list[Marker]


class Splitter:
    """Routes one splitter's events with ``cfg`` and an optional assignments override."""

    def __init__(
        self, cfg: GroupingConfig, state: SplitterState | None = None, block_s: float = 0.1
    ) -> None:
        self.cfg = cfg
        self.block_s = float(block_s)
        self.clock = ManualClock(state.clock if state is not None else 0.0)
        self._state = state
        self._grouping: Grouping | None = None
        self.routed = state.routed if state is not None else 0
        self.applied = state.applied if state is not None else 0
        self._sets: dict[str, tuple[int, int, int]] = {
            k: (w, sid, src) for k, w, sid, src in (state.sets if state is not None else ())
        }
        self._vocab = KeyVocab()

    def _built(self, first_ts: float) -> Grouping:
        """The grouping, built on first use: a new splitter's clock starts at its first event."""
        if self._grouping is None:
            if self._state is None:
                self.clock.set(max(first_ts, 0.0))
                self._grouping = self.cfg.build(clock=self.clock)
            else:
                self._grouping = self.cfg.build(state=self._state.grouping, clock=self.clock)
        return self._grouping

    def route(
        self,
        keys: Sequence[str],
        ts: Sequence[float] | np.ndarray,
        assignments: Mapping[str, int] | None = None,
    ) -> np.ndarray:
        """Workers (``int64``) of the events, in order; ``ts`` must be nondecreasing per block."""
        n = len(keys)
        out = np.empty(n, dtype=np.int64)
        if n == 0:
            return out
        tsa = np.asarray(ts, dtype=np.float64)
        grouping = self._built(float(tsa[0]))
        batch = KeyBatch.from_keys(keys, self._vocab)
        i = 0
        while i < n:
            t0 = max(float(tsa[i]), self.clock.now())
            j = int(np.searchsorted(tsa, t0 + self.block_s, side="left"))
            j = max(j, i + 1)
            self.clock.set(t0)
            out[i:j] = grouping.route_batch(batch.slice(i, j))
            i = j
        if assignments:
            ids = batch.ids
            vocab_keys = self._vocab.keys
            for kid in np.unique(ids).tolist():
                w = assignments.get(vocab_keys[kid])
                if w is not None:
                    out[ids == kid] = w
        self.routed += n
        if len(self._vocab) > 1_000_000:
            self._vocab = KeyVocab()
        return out

    def route_sets(
        self,
        keys: Sequence[str],
        ts: Sequence[float] | np.ndarray,
        versions: Sequence[AssignmentVersion],
    ) -> RoutedSets:
        """Route by the grouping, then by the assignments version in force at each event.

        Versions at or below the applied one are ignored; the others apply in
        order from their effective time (see the module doc). Keys a version
        does not name keep the grouping's worker and set 0.
        """
        workers = self.route(keys, ts)
        n = len(keys)
        set_ids = np.zeros(n, dtype=np.int64)
        sources = np.full(n, -1, dtype=np.int64)
        markers: list[Marker] = []
        if n == 0:
            return RoutedSets(workers, set_ids, sources, markers)
        tmax = np.maximum.accumulate(np.asarray(ts, dtype=np.float64))
        starts = [0]
        pending = sorted((v for v in versions if v.version > self.applied), key=lambda v: v.version)
        maps = [dict(self._sets)]
        for v in pending:
            j = int(np.searchsorted(tmax, v.effective, side="left"))
            if j >= n:
                break
            cur = dict(maps[-1])
            for k, w, sid in v.sets:
                old_w, old_sid, _ = cur.get(k, (self._hash(k), 0, -1))
                if sid > old_sid and w != old_w:
                    markers.append(Marker(j, k, old_w, old_sid, w))
                    cur[k] = (w, sid, old_w)
            maps.append(cur)
            starts.append(j)
            self.applied = v.version
        starts.append(n)
        for m, (a, b) in zip(maps, itertools.pairwise(starts)):
            if b <= a or not m:
                continue
            for i in range(a, b):
                hit = m.get(keys[i])
                if hit is not None:
                    workers[i], set_ids[i], sources[i] = hit
        self._sets = maps[-1]
        return RoutedSets(workers, set_ids, sources, markers)

    def _hash(self, key: str) -> int:
        return bucket(key, int(self.cfg.workers), DKG_SEED)

    def state(self) -> SplitterState | None:
        """The state to carry to the next batch (``None`` until the first event)."""
        if self._grouping is None:
            return self._state
        sets = tuple(sorted((k, w, sid, src) for k, (w, sid, src) in self._sets.items()))
        return SplitterState(
            SNAPSHOT_VERSION,
            self._grouping.snapshot(),
            self.clock.now(),
            self.routed,
            self.applied,
            sets,
        )


def key_loads(
    window_s: float,
    ts: np.ndarray,
    keys: Sequence[str],
    workers: np.ndarray,
    sizes: np.ndarray,
) -> list[dict[str, Any]]:
    """Rows (window_start, key, worker, count, bytes) of one batch, for Delta ``key_loads``."""
    if len(keys) == 0:
        return []
    win = np.floor(np.asarray(ts, dtype=np.float64) / window_s) * window_s
    acc: dict[tuple[float, str, int], list[int]] = {}
    for w, k, wk, sz in zip(win.tolist(), keys, workers.tolist(), sizes.tolist()):
        slot = acc.get((w, k, wk))
        if slot is None:
            acc[(w, k, wk)] = [1, sz]
        else:
            slot[0] += 1
            slot[1] += sz
    return [
        {"window_start": w, "key": k, "worker": wk, "count": c, "bytes": b}
        for (w, k, wk), (c, b) in sorted(acc.items())
    ]

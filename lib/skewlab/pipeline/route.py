"""One splitter instance of the live route job: grouping + explicit assignments, on event time.

A replayed micro-batch routes exactly as the first attempt (state from the checkpoint, the
event timestamps as clock). The order of decisions is on :meth:`Splitter.route` and
:meth:`Splitter.route_sets`; the reasoning: docs/pipeline.md.
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
    """Routes one splitter's events (DKG's SplitterBolt) with ``cfg`` on event time.

    The grouping is built at the first event with a :class:`~skewlab.clock.ManualClock` set
    from the event timestamps, never the wall clock; :meth:`state` carries grouping, clock and
    applied assignments between micro-batches, so a replayed batch routes identically.
    """

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
        """Workers (``int64``) of the events, in order; ``ts`` must be nondecreasing per block.

        1. Events go in blocks of at most ``block_s`` s of event time; before each block the
           clock moves to its first timestamp (DKG's warm-up and intervals see time pass).
        2. The grouping decides every event of the block (its state advances).
        3. Keys named in ``assignments`` go to the worker it names instead.
        """
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

        Versions at or below the applied one are ignored; per event the newest version whose
        ``effective`` time is <= its ts applies. When a version starts applying, one end-of-set
        :class:`Marker` per moved key goes to the key's old worker before the first event under
        it: SMALOPS' message sets (Sec. II), whose id grows at each reassignment. Keys a
        version does not name keep the grouping's worker and set 0.
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

"""DYNAMIC_KEY grouping (DKG): a per-key ring slice of workers that grows and shrinks.

Dalabasmaz & Can, "Dynamic Key Grouping" (IEEE TPDS 2020), as the DKG seed and
its reference implementation (``DynamicKeyGrouping`` in
odalabasmaz/DynamicKeyGrouping) describe it. Per event of ``key``:

1. ``home = abs(murmur3_128(13).asLong()) % W``; the candidate pool is the ring
   slice ``(home + i) % W`` for ``i < poolSize`` (``poolSize`` starts at
   ``initial_pool = 2`` and is at most ``W``).
2. ``currentLoad(w) = 100 * count[w] // total`` (integer percentage of this
   splitter's own cumulative counts; 0 before the first event); the event goes
   to the least-loaded candidate, ties to the lowest ``i``.
3. Scaling check, only for keys in the key spaces and at most once per
   ``check_interval`` (60 s) per key (``now - lastCheck > check_interval``; a
   key's first check is due at once):

   * scale up (``poolSize + 1``) when the warm-up is over
     (``now - start > warmup``, 15 s, counted from *build time* like the
     reference's ``prepare``), the least-loaded candidate's load is above
     ``loadToScaleUp = idealLoad + sqrt(idealLoad)`` with ``idealLoad = 100 / W``,
     and the key is in the old space; the next ring worker
     ``(home + poolSize) % W`` is accepted (and takes this event) only if its
     load is below every current candidate's;
   * otherwise scale down by one when ``poolSize > initial_pool`` and at least
     two candidates are below ``loadToScaleDown = idealLoad - sqrt(idealLoad)``,
     then choose again among the smaller pool. (The reference computes
     ``loadToScaleDown`` but counts candidates below ``loadToScaleUp``; we
     implement the seed's rule.)

   The thresholds stay real numbers (the reference truncates them to ``int``):
   "above" is ``load > loadToScaleUp``, "below" is ``load < loadToScaleDown``.
4. The chosen worker's count and the total grow by one; the key's frequency
   grows by one (or it enters the baby space, see :mod:`._keyspace`).

Key spaces: promotion cycles run every ``promotion_interval`` (15 s) after
build (cycle ``k`` at ``start + k * promotion_interval``; teenage -> old on every
``old_every``-th = 4th cycle) and gc every ``gc_interval`` (60 s) evicts
teenage/old keys unseen for ``gc_ttl`` (1 h). The reference's background
threads become checks made on each routing call: when the injected clock has
passed the next cycle or gc time, the missed runs are made in time order
before the event is routed. A key's pool size and last check live on its key
space item: a key that leaves the spaces starts again from ``initial_pool``
(the reference keeps a separate, unbounded ``key -> poolSize`` map). So state is
bounded by ``capacity`` and ``baby_limit`` however many distinct keys flow.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.clock import Clock, ManualClock
from skewlab.errors import ConfigError, StateError
from skewlab.grouping._common import (
    BucketCache,
    FrozenState,
    check_int,
    check_seconds,
    make_state,
    open_state,
)
from skewlab.grouping._keyspace import OLD, SPACE_NAMES, KeyItem, KeySpaces
from skewlab.grouping.base import Snapshot, check_workers
from skewlab.hashing import DKG_SEED, bucket
from skewlab.keys import KeyBatch, KeyVocab

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DKGConfig:
    """Dynamic key grouping; every duration (s) and capacity has the seed's default.

    ``capacity`` plays the reference's ``distinctKeyCount`` hint (default 100):
    baby / teenage / old spaces hold ``int(0.5 c)`` / ``int(0.4 c)`` /
    ``int(0.1 c)`` keys. ``baby_limit`` bounds the baby space between cycles
    (our addition, see :mod:`skewlab.grouping._keyspace`).
    """

    name: ClassVar[str] = "dkg"
    workers: int
    initial_pool: int = 2
    warmup: float = 15.0
    check_interval: float = 60.0
    capacity: int = 100
    promotion_interval: float = 15.0
    old_every: int = 4
    gc_interval: float = 60.0
    gc_ttl: float = 3600.0
    baby_limit: int = 10_000

    def __post_init__(self) -> None:
        check_workers(self.workers)
        check_int("initial_pool", self.initial_pool, 1)
        check_int("capacity", self.capacity, 10)
        check_int("old_every", self.old_every, 1)
        check_int("baby_limit", self.baby_limit, 1)
        for name in ("warmup", "check_interval", "promotion_interval", "gc_interval", "gc_ttl"):
            check_seconds(name, getattr(self, name))
        for name in ("promotion_interval", "gc_interval"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}")
        if self.baby_limit < self.capacities[0]:
            raise ConfigError(
                f"baby_limit must be >= the baby space capacity {self.capacities[0]}, "
                f"got {self.baby_limit}"
            )

    @property
    def capacities(self) -> tuple[int, int, int]:
        """(baby, teenage, old) space capacities."""
        c = self.capacity
        return int(c * 0.5), int(c * 0.4), int(c * 0.1)

    def build(self, state: Snapshot | None = None, clock: Clock | None = None) -> DKGRouter:
        """The router; ``clock`` (default ``ManualClock(0)``) times warm-up and intervals."""
        return DKGRouter(self, clock if clock is not None else ManualClock(), state)


class DKGRouter:
    """The working DKG splitter (see the module docstring for the algorithm)."""

    def __init__(self, cfg: DKGConfig, clock: Clock, state: Snapshot | None = None) -> None:
        w = cfg.workers
        self._cfg = cfg
        self._clock = clock
        self._workers = w
        ideal = 100.0 / w
        self.ideal_load = ideal
        self.load_to_scale_up = ideal + math.sqrt(ideal)
        self.load_to_scale_down = ideal - math.sqrt(ideal)
        self._spaces = KeySpaces(*cfg.capacities, cfg.baby_limit)
        self._homes = BucketCache(w)
        self._vocab: KeyVocab | None = None
        self._cache: dict[int, KeyItem] = {}
        if state is None:
            now = clock.now()
            self._counts = [0] * w
            self._total = 0
            self._started = now
            self._cycle = 0
            self._next_cycle = now + cfg.promotion_interval
            self._next_gc = now + cfg.gc_interval
        else:
            self._restore(open_state(state, cfg.name, w))
        self._due = min(self._next_cycle, self._next_gc)

    # ------------------------------------------------------------------ state

    def _restore(self, s: Snapshot) -> None:
        counts = [int(c) for c in s["counts"]]
        if len(counts) != self._workers:
            raise StateError(f"dkg snapshot has {len(counts)} counts for {self._workers} workers")
        self._counts = counts
        self._total = int(s["total"])
        self._started = float(s["started"])
        self._cycle = int(s["cycle"])
        self._next_cycle = float(s["next_cycle"])
        self._next_gc = float(s["next_gc"])
        self._spaces.restore(s["spaces"])
        for it in self._spaces.items.values():
            self._place(it, bucket(it.key, self._workers, DKG_SEED))

    def snapshot(self) -> FrozenState:
        """Counts, clocks and the key spaces (keys by string, in space order)."""
        return make_state(
            DKGConfig.name,
            self._workers,
            counts=tuple(self._counts),
            total=self._total,
            started=self._started,
            cycle=self._cycle,
            next_cycle=self._next_cycle,
            next_gc=self._next_gc,
            spaces=self._spaces.snapshot(),
        )

    # -------------------------------------------------------------- inspection

    @property
    def workers(self) -> int:
        return self._workers

    def counts(self) -> tuple[int, ...]:
        """Events sent to each worker so far (this splitter's view)."""
        return tuple(self._counts)

    def current_load(self, worker: int) -> int:
        """``100 * count[worker] // total`` (step 2)."""
        return 100 * self._counts[worker] // self._total if self._total else 0

    def pool_size(self, key: str) -> int:
        """The key's current candidate pool size (``initial_pool`` if not in a space)."""
        it = self._spaces.items.get(key)
        return self._cfg.initial_pool if it is None else it.pool

    def grown_pools(self) -> dict[str, int]:
        """Keys whose candidate pool is now above ``initial_pool``, with its size."""
        init = self._cfg.initial_pool
        return {k: it.pool for k, it in self._spaces.items.items() if it.pool > init}

    def space_of(self, key: str) -> str | None:
        """``"baby"``, ``"teenage"``, ``"old"`` or ``None``."""
        it = self._spaces.items.get(key)
        return None if it is None else SPACE_NAMES[it.space]

    def frequency(self, key: str) -> int:
        """The key's event count since it entered the spaces (0 if not in one)."""
        it = self._spaces.items.get(key)
        return 0 if it is None else it.count

    def space_sizes(self) -> tuple[int, int, int]:
        """Keys held in the (baby, teenage, old) spaces."""
        sp = self._spaces
        return len(sp.baby), len(sp.teen), len(sp.old)

    # ------------------------------------------------------------ maintenance

    def _tick(self, now: float) -> None:
        """Run the promotion cycles and gc runs due by ``now``, in time order.

        After a long quiet gap (a stream paused for hours, a clock that starts
        far from the first event) replaying every missed cycle would cost time
        proportional to the gap and change nothing after the first few: cycles
        without new events only repeat the same promotions. So at most
        ``old_every + 1`` cycles and one gc run are replayed; the skipped ones
        still count toward the cycle number, keeping the teenage->old phase.
        """
        cfg = self._cfg
        keep = cfg.old_every + 1
        if self._next_cycle <= now:
            due = int((now - self._next_cycle) // cfg.promotion_interval) + 1
            if due > keep:
                skip = due - keep
                self._cycle += skip
                self._next_cycle += skip * cfg.promotion_interval
        if self._next_gc <= now:
            due = int((now - self._next_gc) // cfg.gc_interval) + 1
            if due > 1:
                self._next_gc += (due - 1) * cfg.gc_interval
        while min(self._next_cycle, self._next_gc) <= now:
            if self._next_cycle <= self._next_gc:
                self._cycle += 1
                promote_old = self._cycle % cfg.old_every == 0
                self._forget(self._spaces.cycle(promote_old))
                logger.debug("dkg cycle %d at %.3f (old: %s)", self._cycle, now, promote_old)
                self._next_cycle += cfg.promotion_interval
            else:
                self._forget(self._spaces.gc(self._next_gc, cfg.gc_ttl))
                self._next_gc += cfg.gc_interval
        self._due = min(self._next_cycle, self._next_gc)

    def _forget(self, gone: list[KeyItem]) -> None:
        cache = self._cache
        for it in gone:
            if it.vid >= 0:
                cache.pop(it.vid, None)
                it.vid = -1

    def _place(self, it: KeyItem, home: int) -> None:
        it.a = home
        it.b = (home + 1) % self._workers

    def _bind(self, vocab: KeyVocab) -> dict[int, KeyItem]:
        """The ``vocab id -> item`` cache for ``vocab`` (rebuilt when the vocabulary changes)."""
        if vocab is not self._vocab:
            self._vocab = vocab
            self._cache = {}
            for it in self._spaces.items.values():
                vid = vocab.id_of(it.key)
                it.vid = -1 if vid is None else vid
                if vid is not None:
                    self._cache[vid] = it
        return self._cache

    # ---------------------------------------------------------------- routing

    def _decide(self, key: str, it: KeyItem | None, home: int, now: float, vid: int) -> int:
        """Steps 2-4 for one event of ``key`` (``it`` is its item, if in a space)."""
        cfg = self._cfg
        w = self._workers
        counts = self._counts
        n = self._total
        pool = cfg.initial_pool if it is None else it.pool
        best, low, below = self._least_loaded(home, min(pool, w))
        if it is not None and now - it.last_check > cfg.check_interval:
            it.last_check = now
            if now - self._started > cfg.warmup and low > self.load_to_scale_up and it.space == OLD:
                if pool < w:
                    nxt = (home + pool) % w
                    if (100 * counts[nxt] // n if n else 0) < low:
                        best = nxt
                        it.pool = pool + 1
                        logger.debug("dkg scale up %r to %d workers", key, pool + 1)
            elif pool > cfg.initial_pool and below >= 2:
                it.pool = pool - 1
                best = self._least_loaded(home, min(pool - 1, w))[0]
                logger.debug("dkg scale down %r to %d workers", key, pool - 1)
        counts[best] += 1
        self._total = n + 1
        if it is None:
            item, gone = self._spaces.add(key, now, cfg.initial_pool)
            self._place(item, home)
            if vid >= 0 and item.key in self._spaces.items:
                item.vid = vid
                self._cache[vid] = item
            self._forget(gone)
        else:
            it.count += 1
            it.last_seen = now
        return best

    def _least_loaded(self, home: int, size: int) -> tuple[int, int, int]:
        """(least-loaded candidate, its load, candidates below loadToScaleDown)."""
        w = self._workers
        counts = self._counts
        n = self._total
        down = self.load_to_scale_down
        best, low, below = home % w, 101, 0
        for i in range(size):
            t = (home + i) % w
            load = 100 * counts[t] // n if n else 0
            if load < down:
                below += 1
            if load < low:
                best, low = t, load
        return best, low, below

    def route(self, key: str) -> int:
        now = self._clock.now()
        if now >= self._due:
            self._tick(now)
        it = self._spaces.items.get(key)
        home = bucket(key, self._workers, DKG_SEED) if it is None else it.a
        return self._decide(key, it, home, now, -1)

    def route_batch(self, batch: KeyBatch) -> np.ndarray:
        """All events of ``batch`` at one clock reading, exactly as ``route`` would.

        The loop handles inline the common event (key in a space, pool of two,
        no scaling check due); everything else goes through ``_decide``.
        """
        if len(batch) == 0:
            return np.empty(0, dtype=np.int64)
        now = self._clock.now()
        if now >= self._due:
            self._tick(now)
        vocab = batch.vocab
        cache = self._bind(vocab)
        homes = self._homes.get(vocab, DKG_SEED)
        keys = vocab.keys
        items = self._spaces.items
        interval = self._cfg.check_interval
        counts = self._counts
        n = self._total
        out: list[int] = []
        append = out.append
        get = cache.get
        ids = batch.ids
        w = self._workers
        add = self._spaces.add
        new_fast = self._cfg.initial_pool == 2
        for vid, home in zip(ids.tolist(), homes[ids].tolist()):
            it = get(vid)
            if it is not None and it.pool == 2 and not now - it.last_check > interval:
                a = it.a
                b = it.b
                if n and 100 * counts[b] // n < 100 * counts[a] // n:
                    a = b
                counts[a] += 1
                n += 1
                it.count += 1
                it.last_seen = now
                append(a)
                continue
            if it is None:
                key = keys[vid]
                it = items.get(key)
                if it is None and new_fast:
                    # A key outside the spaces: pool of two, no scaling check, then it enters.
                    second = home + 1 if home + 1 < w else 0
                    a = home
                    if n and 100 * counts[second] // n < 100 * counts[home] // n:
                        a = second
                    counts[a] += 1
                    n += 1
                    item, gone = add(key, now, 2)
                    item.a = home
                    item.b = second
                    if gone:
                        self._forget(gone)
                    if key in items:
                        item.vid = vid
                        cache[vid] = item
                    append(a)
                    continue
                self._total = n
                if it is not None:
                    it.vid = vid
                    cache[vid] = it
                    append(self._decide(key, it, it.a, now, vid))
                else:
                    append(self._decide(key, None, home, now, vid))
            else:
                self._total = n
                append(self._decide(it.key, it, it.a, now, vid))
            n = self._total
        self._total = n
        return np.array(out, dtype=np.int64)

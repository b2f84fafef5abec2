"""DYNAMIC_KEY grouping (DKG): a per-key ring slice of workers that grows and shrinks.

Dalabasmaz & Can, "Dynamic Key Grouping" (TPDS 2020), the DKG seed. The per-event steps are
on :meth:`DKGRouter.route`; the key spaces in :mod:`._keyspace`; the deviations from the
reference implementation and why: docs/grouping.md.
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
    """The working DKG splitter: per-key candidate pools over a ring of ``W`` workers.

    The algorithm is on :meth:`route`; the thresholds ``ideal_load``, ``load_to_scale_up`` and
    ``load_to_scale_down`` are fixed at build (DKG: ``loadToScaleUp = idealLoad +
    sqrt(idealLoad)``). State is bounded by the key spaces' capacities (docs/grouping.md).
    """

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
        """Number of downstream workers ``W``."""
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
        """DKG for one event of ``key`` at the clock's now; returns the worker (``0 <= w < W``).

        First runs the promotion cycles and gc runs due by now. Then (DKG seed):

        1. ``home = abs(murmur3_128(13)) % W``; candidates are the ring slice
           ``(home + i) % W`` for ``i < poolSize`` (``initial_pool`` for a new key);
        2. ``currentLoad(w) = 100 * count[w] // total``; the least-loaded candidate wins
           (ties: lowest ``i``);
        3. for a key in the spaces, at most once per ``check_interval``: scale up by one when
           the warm-up is over, the winner's load exceeds
           ``loadToScaleUp = idealLoad + sqrt(idealLoad)`` (``idealLoad = 100 / W``) and the
           key is in the old space, taking the next ring worker only if it is less loaded than
           every candidate; else scale down by one when ``poolSize > initial_pool`` and two
           or more candidates are below ``loadToScaleDown = idealLoad - sqrt(idealLoad)``;
        4. the winner's count, the total and the key's frequency grow by one (a new key
           enters the baby space).
        """
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

"""D-Choices and W-Choices: more than two choices for the heavy hitters.

Nasir et al., "When Two Choices Are Not Enough" (ICDE 2016; not a seed). Tail keys get PKG's
two choices, heavy keys (SpaceSaving estimate above ``theta``) ``d`` choices or all ``W``.
The steps are on :meth:`ChoicesRouter.route`; the paper's rule for ``d``: docs/grouping.md.
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.clock import Clock
from skewlab.errors import ConfigError, StateError
from skewlab.grouping._common import BucketCache, FrozenState, check_int, make_state, open_state
from skewlab.grouping.base import Snapshot, check_workers
from skewlab.hashing import DKG_SEED, PKG_SECOND_SEED, bucket
from skewlab.keys import KeyBatch

logger = logging.getLogger(__name__)


def choice_seed(i: int) -> int:
    """Seed of the ``i``-th hashed choice: 13, 17, then ``1000 + i``."""
    return DKG_SEED if i == 0 else PKG_SECOND_SEED if i == 1 else 1000 + i


def _check_theta(theta: float | None) -> None:
    if theta is not None and (
        not isinstance(theta, int | float) or isinstance(theta, bool) or not 0 < theta < 1
    ):
        raise ConfigError(f"theta must be None or a number in (0, 1), got {theta!r}")


@dataclass(frozen=True, slots=True)
class DChoicesConfig:
    """D-Choices: heavy keys get ``d`` choices (``None``: the paper's rule), others two."""

    name: ClassVar[str] = "d-choices"
    workers: int
    d: int | None = None
    theta: float | None = None
    counters: int = 1000
    epsilon: float = 0.01
    refresh: int = 1000

    def __post_init__(self) -> None:
        check_workers(self.workers)
        if self.d is not None:
            check_int("d", self.d, 2)
        _check_theta(self.theta)
        check_int("counters", self.counters, 1)
        check_int("refresh", self.refresh, 1)
        if not isinstance(self.epsilon, int | float) or not 0 <= self.epsilon < 1:
            raise ConfigError(f"epsilon must be a number in [0, 1), got {self.epsilon!r}")

    def build(self, state: Snapshot | None = None, clock: Clock | None = None) -> ChoicesRouter:
        """The router; ``clock`` is accepted for the contract and unused."""
        return ChoicesRouter(
            self.name,
            self.workers,
            self.d,
            self.theta,
            self.counters,
            self.epsilon,
            self.refresh,
            state,
        )


@dataclass(frozen=True, slots=True)
class WChoicesConfig:
    """W-Choices: heavy keys may go to any of the ``W`` workers, others two."""

    name: ClassVar[str] = "w-choices"
    workers: int
    theta: float | None = None
    counters: int = 1000

    def __post_init__(self) -> None:
        check_workers(self.workers)
        _check_theta(self.theta)
        check_int("counters", self.counters, 1)

    def build(self, state: Snapshot | None = None, clock: Clock | None = None) -> ChoicesRouter:
        """The router; ``clock`` is accepted for the contract and unused."""
        return ChoicesRouter(
            self.name, self.workers, self.workers, self.theta, self.counters, 0.0, 1, state
        )


class SpaceSaving:
    """SpaceSaving top-k counters (Metwally et al. 2005), deterministic.

    A tracked key's ``count`` overestimates its frequency by at most ``error``.
    An untracked key replaces the counter with the smallest ``(count, stamp)``
    (``stamp``: the event number of the counter's last update, so ties evict
    the least recently updated) and starts at ``min + 1`` with ``error = min``.
    The heap holds one entry per key, possibly stale (counts only grow), and is
    refreshed lazily when the minimum is needed.
    """

    __slots__ = ("_heap", "capacity", "entries")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: dict[str, list[int]] = {}  # key -> [count, error, stamp]
        self._heap: list[tuple[int, int, str]] = []

    def offer(self, key: str, stamp: int) -> list[int]:
        """Count one event of ``key`` at event number ``stamp``; return its live entry.

        The entry is ``[count, error, stamp]`` (mutable, owned by the sketch): a tracked key
        gains one; an untracked one evicts the smallest ``(count, stamp)`` counter when full.
        """
        e = self.entries.get(key)
        if e is not None:
            e[0] += 1
            e[2] = stamp
            return e
        if len(self.entries) < self.capacity:
            e = [1, 0, stamp]
        else:
            low = self._pop_min()
            e = [low + 1, low, stamp]
        self.entries[key] = e
        heapq.heappush(self._heap, (e[0], stamp, key))
        return e

    def _pop_min(self) -> int:
        heap = self._heap
        while True:
            count, stamp, key = heapq.heappop(heap)
            e = self.entries[key]
            if e[0] == count and e[2] == stamp:
                del self.entries[key]
                return count
            heapq.heappush(heap, (e[0], e[2], key))

    def restore(self, entries: tuple[tuple[str, int, int, int], ...]) -> None:
        """Replace every counter with ``entries`` (as :meth:`snapshot` returned them)."""
        self.entries = {k: [int(c), int(err), int(s)] for k, c, err, s in entries}
        self._heap = [(e[0], e[2], k) for k, e in self.entries.items()]
        heapq.heapify(self._heap)

    def snapshot(self) -> tuple[tuple[str, int, int, int], ...]:
        """Every counter as ``(key, count, error, stamp)``, in insertion order."""
        return tuple((k, e[0], e[1], e[2]) for k, e in self.entries.items())


class ChoicesRouter:
    """D-Choices / W-Choices router: steps on :meth:`route`; the rule for ``d``: docs/grouping.md"""

    def __init__(
        self,
        name: str,
        workers: int,
        d: int | None,
        theta: float | None,
        counters: int,
        epsilon: float,
        refresh: int,
        state: Snapshot | None,
    ) -> None:
        self._name = name
        self._workers = workers
        self._fixed_d = d
        self.theta = theta if theta is not None else 2.0 / (5.0 * workers)
        self._epsilon = epsilon
        self._refresh = refresh
        self._ss = SpaceSaving(counters)
        self._buckets = BucketCache(workers)
        self._choices: dict[tuple[str, int], tuple[int, ...]] = {}
        self._loads = [0] * workers
        self._total = 0
        self._d = d if d is not None else 2
        self._scan = 0
        self._level = 0
        if state is not None:
            s = open_state(state, name, workers)
            self._loads = [int(x) for x in s["loads"]]
            if len(self._loads) != workers:
                raise StateError(f"{name} snapshot has {len(self._loads)} loads for {workers}")
            self._total = int(s["total"])
            self._d = int(s["d"])
            self._ss.restore(s["counters"])
            self._level = min(self._loads)

    @property
    def workers(self) -> int:
        """Number of downstream workers ``W``."""
        return self._workers

    @property
    def d(self) -> int:
        """The number of choices a heavy key gets now."""
        return self._d

    def loads(self) -> tuple[int, ...]:
        """Events sent to each worker so far (this splitter's view)."""
        return tuple(self._loads)

    def is_heavy(self, key: str) -> bool:
        """Step 2 for ``key`` at the current total (False before any event)."""
        e = self._ss.entries.get(key)
        return e is not None and self._total > 0 and (e[0] + e[1]) / self._total > self.theta

    def choices(self, key: str, d: int) -> tuple[int, ...]:
        """The ``d`` candidate workers of ``key`` (step 3), cached for heavy keys."""
        w = self._workers
        if d >= w:
            return tuple(range(w))
        got = self._choices.get((key, d))
        if got is None:
            got = tuple(bucket(key, w, choice_seed(i)) for i in range(d))
            if len(self._choices) >= 4 * self._ss.capacity:
                self._choices.clear()
            self._choices[(key, d)] = got
        return got

    def _solve_d(self) -> int:
        """The paper's smallest ``d`` for the current head (docs/grouping.md)."""
        total = self._total
        probs = [(c + err) / total for c, err, _ in self._ss.entries.values()]
        head = [p for p in probs if p > self.theta]
        w = self._workers
        if not head:
            return 2
        p1 = max(head)
        ph = min(sum(head), 1.0)
        pt = 1.0 - ph
        q = (w - 1) / w
        d = max(2, round(p1 * w))
        while d < w:
            b1 = 1.0 - q**d
            bh = 1.0 - q ** (len(head) * d)
            ok1 = p1 + (ph - p1) * b1**d + pt * b1**2 <= b1 + self._epsilon
            ok2 = ph + pt * bh**2 <= bh + self._epsilon
            if ok1 and ok2:
                return d
            d += 1
        return w

    def _least_loaded(self, key: str) -> int:
        """Step 4 for a heavy key: its least-loaded choice, the first in choice order on ties.

        When the choices are all workers (``d >= W``) that is the lowest-numbered
        worker at the minimum load. Loads only grow, so the workers at a given
        minimum ``level`` only leave it: a scan pointer moves forward over them
        and the level is recomputed only when none is left (amortised O(1)).
        """
        loads = self._loads
        if self._d < self._workers:
            return min(self.choices(key, self._d), key=loads.__getitem__)
        i, level, w = self._scan, self._level, self._workers
        while True:
            while i < w and loads[i] != level:
                i += 1
            if i < w:
                self._scan = i
                return i
            level = min(loads)
            self._level = level
            i = 0

    def route(self, key: str) -> int:
        """D-/W-Choices for one event of ``key``; returns the worker and counts the event.

        1. ``total += 1`` and the key is offered to the SpaceSaving estimator; with
           ``d=None`` the paper's ``d`` is recomputed every ``refresh`` events;
        2. the key is heavy when ``(count + error) / total > theta``;
        3. a tail key gets PKG's two choices (seeds 13, 17; ties keep the first); a heavy key
           its ``d`` hashed choices (all ``W`` when ``d >= W``, always for W-Choices);
        4. the least-loaded choice (first in choice order on ties) gets the event.
        """
        self._total += 1
        total = self._total
        e = self._ss.offer(key, total)
        if self._fixed_d is None and (total - 1) % self._refresh == 0:
            self._d = self._solve_d()
        loads = self._loads
        if (e[0] + e[1]) / total > self.theta:
            best = self._least_loaded(key)
        else:
            w = self._workers
            best = bucket(key, w, DKG_SEED)
            second = bucket(key, w, PKG_SECOND_SEED)
            if loads[best] > loads[second]:
                best = second
        loads[best] += 1
        return best

    def route_batch(self, batch: KeyBatch) -> np.ndarray:
        """Steps 1-4 per event, tail choices from cached per-vocabulary buckets."""
        vocab, ids = batch.vocab, batch.ids
        first = self._buckets.get(vocab, DKG_SEED)[ids].tolist()
        second = self._buckets.get(vocab, PKG_SECOND_SEED)[ids].tolist()
        keys = vocab.keys
        offer = self._ss.offer
        loads = self._loads
        theta = self.theta
        refresh = self._refresh
        auto = self._fixed_d is None
        total = self._total
        out: list[int] = []
        append = out.append
        for vid, c1, c2 in zip(ids.tolist(), first, second):
            key = keys[vid]
            total += 1
            e = offer(key, total)
            if auto and (total - 1) % refresh == 0:
                self._total = total
                self._d = self._solve_d()
            if (e[0] + e[1]) / total > theta:
                self._total = total
                c1 = self._least_loaded(key)
            elif loads[c1] > loads[c2]:
                c1 = c2
            loads[c1] += 1
            append(c1)
        self._total = total
        return np.array(out, dtype=np.int64)

    def snapshot(self) -> FrozenState:
        """Loads, event total, current ``d`` and the SpaceSaving counters."""
        return make_state(
            self._name,
            self._workers,
            loads=tuple(self._loads),
            total=self._total,
            d=self._d,
            counters=self._ss.snapshot(),
        )

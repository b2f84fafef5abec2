"""SMALOPS: heavy streams by lossy counting, two-choice placement, greedy best-fit migration.

Bhattacharya & Wood, Sec. II: balance only heavy streams, ``R_pi ~ R_pj`` (Eq. 1) measured by
``E_LB`` (Eq. 2). Steps on :meth:`SmalopsRebalancer.decide` and ``observe``; how Eq. 4 reads
with rates in messages per second, and why ``gate=False`` is the paper's setup:
docs/rebalance.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from skewlab import hashing
from skewlab.errors import ConfigError
from skewlab.keys import KeyBatch
from skewlab.rebalance.base import (
    DEFAULT_TUPLE_BYTES,
    Decision,
    LoadSnapshot,
    Move,
    check_positive,
    check_state,
    check_workers,
    finish,
    imbalance,
)
from skewlab.rebalance.dlb import check_bytes
from skewlab.sketch.base import Threshold
from skewlab.sketch.lossy_counting import LossyCountingConfig, LossyCountingSnapshot

__all__ = [
    "SmalopsConfig",
    "SmalopsRebalancer",
    "SmalopsSnapshot",
    "eq3_target",
    "eq4_holds",
    "partition_sizes",
]

log = logging.getLogger(__name__)

READINGS: dict[str, str] = {
    "share": "a key is heavy when its own count reaches t of the window's messages",
    "cumulative": "the heaviest keys that together carry t of the window's messages are heavy",
}
"""Readings of SMALOPS' share threshold ("flows that account for 10% or more of the messages").

Fig. 9's text fits ``cumulative`` ("keeping this threshold as low as possible allows us to keep
the number of keys being tracked lower": fewer keys carry a smaller share); ``share`` is the
per-key reading. A count threshold (an int) is per key in both."""

DETECT_AFTER = 1000
"""Events a counting window must hold before a key crossing the threshold is placed mid-window."""


def eq4_holds(
    t_msg: float, r_k: float, r_p1: float, r_p2: float, t_sm: float, unit_rate: float = 1.0
) -> bool:
    """SMALOPS Eq. 4: queueing gain of moving key ``k`` from p1 to p2 exceeds ``t_sm``.

    ``t_msg (1 + (1 - R_k / R_p1)) > t_SM + t_msg (1 + (1 - I / R_p2))``; ``I / R_p2``
    is capped at 1 (``R_p2 <= I``: nothing queued ahead on the target).
    """
    stay = t_msg * (1.0 + (1.0 - (r_k / r_p1 if r_p1 > 0 else 1.0)))
    share2 = 1.0 if r_p2 <= unit_rate else unit_rate / r_p2
    go = t_sm + t_msg * (1.0 + (1.0 - share2))
    return stay > go


def eq3_target(r_m: float, r_src: float, sizes: Mapping[int, float], r_avg: float) -> int | None:
    """Steps 4a-4b: the target minimising Eq. 3 among those that reduce the load distance.

    ``sizes`` maps candidate (underloaded) partitions to their ``R_p``; returns
    ``None`` when every candidate would increase (or keep) the distance to the source.
    """
    best: int | None = None
    best_cost = float("inf")
    for t in sorted(sizes):
        r_t = sizes[t]
        if abs((r_src - r_m) - (r_t + r_m)) >= abs(r_src - r_t):
            continue
        cost = abs((r_m + r_t) - r_avg)
        if cost < best_cost:
            best, best_cost = t, cost
    return best


def partition_sizes(
    rates: Mapping[str, float], where: Mapping[str, int], workers: int
) -> list[float]:
    """``R_p`` per partition: the summed rates of the heavy keys mapped to it (SMALOPS II)."""
    sizes = [0.0] * workers
    for k, r in rates.items():
        sizes[where[k]] += r
    return sizes


def e_lb_of(sizes: list[float]) -> float:
    """SMALOPS Eq. 2: ``E_LB = sum_j |R_pj - R_avg|`` over the partition sizes ``R_p``."""
    avg = sum(sizes) / len(sizes)
    return float(sum(abs(s - avg) for s in sizes))


@dataclass(frozen=True, slots=True)
class SmalopsSnapshot:
    """Immutable, picklable state: the lossy counter, the heavy map and the generator."""

    policy: str
    workers: int
    sketch: LossyCountingSnapshot
    heavy: tuple[tuple[str, int], ...]
    rng_state: str
    decisions: int


@dataclass(frozen=True, slots=True)
class SmalopsConfig:
    """SMALOPS over ``workers`` partitions (steps on :meth:`SmalopsRebalancer.decide`).

    ``threshold``: heavy above this share of the window's messages (float in
    (0, 1], default 0.1) or this absolute count (int). ``epsilon``: the lossy
    counter's error (must be below a share threshold). ``t_msg`` / ``t_sm`` /
    ``t_sm_per_tuple`` (seconds) and ``unit_rate`` (messages/s) enter Eq. 4;
    ``gate=False`` skips Eq. 4. ``seed`` seeds the two random choices.
    """

    name: ClassVar[str] = "smalops"
    workers: int
    threshold: Threshold = 0.1
    epsilon: float = 0.001
    t_msg: float = 50e-6
    t_sm: float = 0.0
    t_sm_per_tuple: float = 0.0
    unit_rate: float = 1.0
    gate: bool = True
    seed: int = 0
    tuple_bytes: int = DEFAULT_TUPLE_BYTES
    sketch: LossyCountingConfig = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_workers(self.workers)
        check_positive("t_msg", self.t_msg)
        check_positive("t_sm", self.t_sm, zero_ok=True)
        check_positive("t_sm_per_tuple", self.t_sm_per_tuple, zero_ok=True)
        check_positive("unit_rate", self.unit_rate)
        check_bytes(self.tuple_bytes)
        if not isinstance(self.gate, bool):
            raise ConfigError(f"smalops: gate must be True or False, got {self.gate!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError(f"smalops: seed must be an integer, got {self.seed!r}")
        sketch = LossyCountingConfig(epsilon=self.epsilon, threshold=self.threshold)
        object.__setattr__(self, "sketch", sketch)

    def build(
        self,
        state: SmalopsSnapshot | None = None,
        *,
        partitioner: str = "murmur3",
        reading: str = "share",
    ) -> SmalopsRebalancer:
        """The working SMALOPS, empty or continuing from ``state`` (StateError if not its own).

        ``partitioner`` names the broker's partitioner that places every key SMALOPS does not
        map (:data:`skewlab.hashing.PARTITIONERS`: ``murmur3``, KEY grouping's, the default;
        ``kafka``, Kafka's default partitioner, murmur2): dropped keys return to it and moves
        start from it. It must be the one the routing falls back to. ``reading`` says which
        keys a share ``threshold`` ``t`` makes heavy (:data:`READINGS`).
        """
        return SmalopsRebalancer(self, state, partitioner=partitioner, reading=reading)


class SmalopsRebalancer:
    """Working SMALOPS. Invariant: the map names only keys heavy in the last window."""

    policy: ClassVar[str] = "smalops"

    def __init__(
        self,
        config: SmalopsConfig,
        state: SmalopsSnapshot | None = None,
        *,
        partitioner: str = "murmur3",
        reading: str = "share",
    ) -> None:
        if reading not in READINGS:
            raise ConfigError(
                f"smalops: reading must be one of {', '.join(READINGS)}, got {reading!r}"
            )
        self.config = config
        self._home = hashing.partitioner(partitioner)
        self._reading = reading
        self._rng = np.random.default_rng(config.seed)
        self._fed = False
        if state is None:
            self._sketch = config.sketch.build()
            self._map: dict[str, int] = {}
            self._decisions = 0
        else:
            check_state(state, SmalopsSnapshot, self.policy, config.workers)
            self._sketch = config.sketch.build(state=state.sketch)
            self._map = dict(state.heavy)
            self._rng.bit_generator.state = json.loads(state.rng_state)
            self._decisions = state.decisions

    @property
    def workers(self) -> int:
        """Number of partitions (workers) balanced."""
        return self.config.workers

    @property
    def assignment(self) -> Mapping[str, int]:
        """The heavy map in force: ``key -> partition`` (a copy)."""
        return dict(self._map)

    @property
    def tracked(self) -> int:
        """Entries held by the lossy counter (the heavy-hitter state size)."""
        return len(self._sketch)

    def snapshot(self) -> SmalopsSnapshot:
        """Lossy counter, heavy map, generator state and decision count (immutable)."""
        return SmalopsSnapshot(
            self.policy,
            self.workers,
            self._sketch.snapshot(),
            tuple(self._map.items()),
            json.dumps(self._rng.bit_generator.state),
            self._decisions,
        )

    def _heavy(self) -> dict[str, int]:
        """The current window's heavy keys and their estimates, hottest first (:data:`READINGS`).

        ``cumulative``: the shortest run of the hottest keys whose estimates sum to at least
        ``threshold * n`` (per key, as ``share``, for a count threshold).
        """
        sk, t = self._sketch, self.config.threshold
        if self._reading == "share" or isinstance(t, int):
            return sk.heavy_hitters()
        need, total, out = t * sk.n, 0, {}
        for k, c in sk.heavy_hitters(1).items():
            if total >= need:
                break
            out[k] = c
            total += c
        return out

    def _two_choices(self, sizes: list[float]) -> int:
        """Step 3: the less loaded of two distinct random partitions."""
        if self.workers == 1:
            return 0
        a, b = (int(x) for x in self._rng.choice(self.workers, size=2, replace=False))
        return a if sizes[a] <= sizes[b] else b

    def observe(self, now: float, batch: KeyBatch) -> Decision | None:
        """Count a batch of the stream; place keys that just became heavy (step 3).

        Once the window holds ``detect_after`` events, every key the counter
        reports above the threshold and not yet in the map is placed by two
        random choices over the partitions' heavy counts so far, heaviest
        first. Returns the placements as a decision (``None`` if none); each
        move's state is the key's counted tuples of the window.
        """
        sk = self._sketch
        sk.update_batch(batch)
        self._fed = True
        if sk.n < DETECT_AFTER:
            return None
        hits = self._heavy()
        fresh = sorted((k for k in hits if k not in self._map), key=lambda k: (-hits[k], k))
        if not fresh:
            return None
        W, previous = self.workers, dict(self._map)
        counts = {k: float(sk.estimate(k)) for k in previous}
        sizes = partition_sizes(counts, previous, W)
        before = list(sizes)
        moves = []
        for k in fresh:
            p = self._two_choices(sizes)
            self._map[k] = p
            sizes[p] += hits[k]
            src = self._home(k, W)
            if p != src:
                tuples = int(hits[k])
                moves.append(
                    Move(k, src, p, tuples, tuples, tuples * self.config.tuple_bytes, "place")
                )
        return Decision(
            ts=now,
            policy=self.policy,
            moves=tuple(moves),
            imbalance_before=imbalance(np.asarray(before)),
            imbalance_after=imbalance(np.asarray(sizes)),
            reason="placed-online",
            assignment=tuple(self._map.items()),
            changed=True,
            keys_total=len(hits),
            load_total=int(sk.n),
            extra={"heavy_keys": float(len(hits)), "tracked_keys": float(len(sk))},
        )

    def decide(self, now: float, loads: LoadSnapshot) -> Decision:
        """SMALOPS over one interval (Sec. II); returns the decision and updates the map.

        1. Count the interval into the lossy counter (unless ``observe`` fed it) and close the
           window: keys above ``threshold`` are heavy, ``R_k`` = estimate / interval.
        2. Mapped keys no longer heavy return to their hash partition (``drop`` moves).
        3. New heavy keys, heaviest first, go to the less loaded of two distinct random
           partitions (``place`` moves; power of two choices).
        4. Best fit: for each partition above ``R_avg`` (most loaded first) and its heavy
           streams smallest first, while it is overloaded, move the stream to the underloaded
           target that reduces the load distance and minimises ``|(R_m + R_target) - R_avg|``
           (:func:`eq3_target`, Eq. 3), if Eq. 4 holds (:func:`eq4_holds`; skipped with
           ``gate=False``).

        Raises :class:`~skewlab.errors.ConfigError` when ``loads`` is for another worker count.
        """
        cfg = self.config
        if loads.workers != cfg.workers:
            raise ConfigError(f"smalops runs over {cfg.workers} workers, loads for {loads.workers}")
        W, T = cfg.workers, loads.interval_s
        # 1. heavy streams of this counting window
        if not self._fed:
            self._sketch.update_batch(loads.keys, loads.loads)
        self._fed = False
        tracked = len(self._sketch)
        hits = self._heavy()
        self._sketch.new_window()
        index = {k: i for i, k in enumerate(loads.keys)} if hits or self._map else {}
        heavy = {k: c / T for k, c in hits.items() if k in index}
        before = loads.placement
        final = np.array(before, copy=True)
        kinds: dict[int, str] = {}
        previous = self._map
        sizes_before = partition_sizes(heavy, {k: int(before[index[k]]) for k in heavy}, W)
        # 2. drop keys no longer heavy
        current: dict[str, int] = {}
        for k, w in previous.items():
            if k in heavy:
                current[k] = w
            elif k in index:
                i = index[k]
                final[i] = self._home(k, W)
                kinds[i] = "drop"
        sizes = partition_sizes({k: heavy[k] for k in current}, current, W)
        # 3. new heavy keys by two random choices, heaviest first
        for k in sorted((k for k in heavy if k not in current), key=lambda k: (-heavy[k], k)):
            p = self._two_choices(sizes)
            current[k] = p
            sizes[p] += heavy[k]
            kinds[index[k]] = "place"
        # 4. greedy best fit, gated by Eq. 4
        gated = no_target = 0
        r_avg = sum(sizes) / W
        on: dict[int, list[str]] = {}
        for k, p in current.items():
            on.setdefault(p, []).append(k)
        for p in sorted((p for p in range(W) if sizes[p] > r_avg), key=lambda p: (-sizes[p], p)):
            for k in sorted(on.get(p, ()), key=lambda k: (heavy[k], k)):
                if sizes[p] <= r_avg:
                    break
                r_m = heavy[k]
                under = {t: sizes[t] for t in range(W) if sizes[t] < r_avg}
                t = eq3_target(r_m, sizes[p], under, r_avg)
                if t is None:
                    no_target += 1
                    continue
                t_sm = cfg.t_sm + cfg.t_sm_per_tuple * int(loads.loads[index[k]])
                if cfg.gate and not eq4_holds(
                    cfg.t_msg, r_m, sizes[p], sizes[t], t_sm, cfg.unit_rate
                ):
                    gated += 1
                    continue
                current[k] = t
                sizes[p] -= r_m
                sizes[t] += r_m
                kinds.setdefault(index[k], "migrate")
        for k, w in current.items():
            final[index[k]] = w
        self._map = current
        self._decisions += 1
        moved = int(np.count_nonzero(final != before))
        if moved:
            reason = "moved"
        elif gated:
            reason = "gated-eq4"
        else:
            reason = "no-move" if heavy else "no-heavy-keys"
        return finish(
            now=now,
            policy=self.policy,
            loads=loads,
            final=final,
            before=before,
            kinds=kinds,
            default_kind="migrate",
            reason=reason,
            assignment=current,
            previous=previous,
            tuple_bytes=cfg.tuple_bytes,
            extra={
                "heavy_keys": float(len(heavy)),
                "tracked_keys": float(tracked),
                "e_lb_before": e_lb_of(sizes_before),
                "e_lb_after": e_lb_of(sizes),
                "gated_eq4": float(gated),
                "no_target": float(no_target),
            },
        )

"""DLB (Algorithm 1) with its DLB-H / DLB-L key policies, and the static KG baseline.

The steps are on :func:`dlb_pass`; why a pass never worsens imbScore and always ends:
docs/rebalance.md.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.errors import ConfigError
from skewlab.rebalance.base import (
    DEFAULT_TUPLE_BYTES,
    Decision,
    LoadSnapshot,
    check_positive,
    check_state,
    check_workers,
    finish,
    imbalance,
)

__all__ = [
    "DLBConfig",
    "DLBRebalancer",
    "MapSnapshot",
    "StaticConfig",
    "StaticRebalancer",
    "dlb_pass",
]

log = logging.getLogger(__name__)

PICKS = ("heavy", "light")


@dataclass(frozen=True, slots=True)
class MapSnapshot:
    """Immutable, picklable state of a map-keeping rebalancer (DLB, LPTF, static)."""

    policy: str
    workers: int
    assignment: tuple[tuple[str, int], ...]
    decisions: int


def check_theta(theta: object) -> None:
    """Raise :class:`~skewlab.errors.ConfigError` unless ``theta`` is a finite number >= 0 (%)."""
    check_positive("theta (imbScore threshold, %)", theta, zero_ok=True)


def check_bytes(tuple_bytes: object) -> None:
    """Raise :class:`~skewlab.errors.ConfigError` unless ``tuple_bytes`` is an int >= 0."""
    if not isinstance(tuple_bytes, int) or isinstance(tuple_bytes, bool) or tuple_bytes < 0:
        raise ConfigError(f"tuple_bytes must be an integer >= 0, got {tuple_bytes!r}")


class _Engines:
    """Per-engine keys sorted by load ascending, built on first use, plus sum / sum of squares."""

    def __init__(self, loads: np.ndarray, placement: np.ndarray, workers: int) -> None:
        self.loads = loads
        self.W = workers
        self.L = np.bincount(placement, weights=loads, minlength=workers).astype(np.int64).tolist()
        self.S = float(sum(self.L))
        self.Q = float(sum(x * x for x in self.L))
        live = np.flatnonzero(loads > 0)
        order = live[np.argsort(placement[live], kind="stable")]
        self._order = order
        self._bounds = np.searchsorted(placement[order], np.arange(workers + 1)).tolist()
        self._lists: dict[int, list[tuple[int, int]]] = {}

    def keys_of(self, e: int) -> list[tuple[int, int]]:
        lst = self._lists.get(e)
        if lst is None:
            sub = self._order[self._bounds[e] : self._bounds[e + 1]]
            sub = sub[np.argsort(self.loads[sub], kind="stable")]
            lst = list(zip(self.loads[sub].tolist(), sub.tolist()))
            self._lists[e] = lst
        return lst

    def imb(self) -> float:
        if self.S <= 0:
            return 0.0
        mean = self.S / self.W
        var = max(self.Q / self.W - mean * mean, 0.0)
        return 100.0 * math.sqrt(var) / mean

    def move(self, item: tuple[int, int], src: int, dst: int) -> None:
        x = item[0]
        self.Q += 2.0 * x * (x - (self.L[src] - self.L[dst]))
        self.L[src] -= x
        self.L[dst] += x
        bisect.insort(self.keys_of(dst), item)

    def by_load(self) -> Iterator[int]:
        """Engines most loaded first (the argmax alone first: it usually has the move)."""
        top = max(range(self.W), key=self.L.__getitem__)
        yield top
        rest = sorted((e for e in range(self.W) if e != top), key=self.L.__getitem__, reverse=True)
        yield from rest


def dlb_pass(
    loads: np.ndarray, placement: np.ndarray, workers: int, theta: float, pick: str
) -> tuple[np.ndarray, str, int]:
    """DLB Algorithm 1 over one interval: ``(new placement, reason, moves made)``.

    When imbScore (DLB Eq. 2) of ``placement`` exceeds ``theta``, repeat: ``e_min`` is the
    least loaded engine; for the engines from most loaded down, pick one key ``k*`` (DLB-H: the
    heaviest whose move improves imbScore; DLB-L: the lightest) and move it to ``e_min`` if
    that improves imbScore, i.e. if its load is below ``L_e - L_min``; stop at ``theta`` or
    when no engine has an improving key. imbScore never rises and the loop ends
    (docs/rebalance.md).

    ``pick`` is ``"heavy"`` (DLB-H) or ``"light"`` (DLB-L). Reasons:
    ``below-threshold`` (no pass needed), ``balanced`` (reached ``theta``),
    ``no-improving-move`` (Algorithm 1's step 4, docs/rebalance.md: every engine examined).
    """
    final = np.array(placement, dtype=np.int64, copy=True)
    eng = _Engines(np.asarray(loads, dtype=np.int64), final, workers)
    if eng.imb() <= theta:
        return final, "below-threshold", 0
    moves = 0
    while True:
        e_min = min(range(workers), key=eng.L.__getitem__)
        done = False
        for e in eng.by_load():
            gap = eng.L[e] - eng.L[e_min]
            if gap <= 0:
                break
            lst = eng.keys_of(e)
            if pick == "heavy":
                j = bisect.bisect_left(lst, (gap, -1)) - 1
            else:
                j = 0 if lst and lst[0][0] < gap else -1
            if j < 0 or not lst:
                continue
            item = lst.pop(j)
            eng.move(item, e, e_min)
            final[item[1]] = e_min
            moves += 1
            done = True
            break
        if not done:
            return final, "no-improving-move", moves
        if eng.imb() <= theta:
            return final, "balanced", moves


class _MapRebalancer:
    """Shared plumbing of the rebalancers that keep an explicit ``key -> worker`` map."""

    policy: ClassVar[str] = ""

    def __init__(self, workers: int, tuple_bytes: int, state: MapSnapshot | None) -> None:
        self._workers = workers
        self._tuple_bytes = tuple_bytes
        self._map: dict[str, int] = {}
        self._decisions = 0
        if state is not None:
            check_state(state, MapSnapshot, self.policy, workers)
            self._map = dict(state.assignment)
            self._decisions = state.decisions

    @property
    def workers(self) -> int:
        return self._workers

    @property
    def assignment(self) -> Mapping[str, int]:
        return dict(self._map)

    def snapshot(self) -> MapSnapshot:
        return MapSnapshot(self.policy, self._workers, tuple(self._map.items()), self._decisions)

    def _check(self, loads: LoadSnapshot) -> None:
        if loads.workers != self._workers:
            raise ConfigError(
                f"{self.policy} runs over {self._workers} workers, loads are for {loads.workers}"
            )

    def _active_map(self, loads: LoadSnapshot) -> dict[str, int]:
        """The map restricted to this interval's keys, at the workers they were seen on.

        Idle keys fall back to hash; a mapped key is pinned where it was processed.
        """
        if not self._map:
            return {}
        pinned = self._map
        return {k: w for k, w in zip(loads.keys, loads.placement.tolist()) if k in pinned}

    def _decide_with(
        self,
        now: float,
        loads: LoadSnapshot,
        final: np.ndarray,
        reason: str,
        kind: str,
        pin_all: bool = False,
    ) -> Decision:
        """Fold ``final`` into the map (every key with ``pin_all``) and record the decision."""
        previous = self._map
        if pin_all:
            current = dict(zip(loads.keys, final.tolist()))
        else:
            current = self._active_map(loads)
            for i in np.flatnonzero(final != loads.placement).tolist():
                current[loads.keys[i]] = int(final[i])
        self._map = current
        self._decisions += 1
        return finish(
            now=now,
            policy=self.policy,
            loads=loads,
            final=final,
            before=loads.placement,
            kinds={},
            default_kind=kind,
            reason=reason,
            assignment=current,
            previous=previous,
            tuple_bytes=self._tuple_bytes,
        )


@dataclass(frozen=True, slots=True)
class DLBConfig:
    """DLB over ``workers`` engines: imbScore threshold ``theta`` (%), key ``pick`` policy.

    ``pick="heavy"`` is DLB-H, ``pick="light"`` DLB-L. ``tuple_bytes`` sizes a
    moved tuple when the loads carry no byte counts.
    """

    name: ClassVar[str] = "dlb"
    workers: int
    theta: float = 15.0
    pick: str = "heavy"
    tuple_bytes: int = DEFAULT_TUPLE_BYTES

    def __post_init__(self) -> None:
        check_workers(self.workers)
        check_theta(self.theta)
        if self.pick not in PICKS:
            raise ConfigError(f"dlb: pick must be one of {', '.join(PICKS)}, got {self.pick!r}")
        check_bytes(self.tuple_bytes)

    @property
    def policy(self) -> str:
        """``dlb-h`` (pick heavy) or ``dlb-l`` (pick light): the name in decision rows."""
        return "dlb-h" if self.pick == "heavy" else "dlb-l"

    def build(self, state: MapSnapshot | None = None) -> DLBRebalancer:
        """The working DLB, empty or continuing from ``state`` (StateError if not its own)."""
        return DLBRebalancer(self, state)


class DLBRebalancer(_MapRebalancer):
    """Working DLB: one :func:`dlb_pass` per :meth:`decide`; the map holds the moved keys."""

    def __init__(self, config: DLBConfig, state: MapSnapshot | None = None) -> None:
        self.policy = config.policy  # type: ignore[misc]
        self.config = config
        super().__init__(config.workers, config.tuple_bytes, state)

    def decide(self, now: float, loads: LoadSnapshot) -> Decision:
        """DLB Algorithm 1 on the interval's loads; the moved keys join the explicit map.

        Mapped keys idle for the interval leave the map (back to hash). Raises
        :class:`~skewlab.errors.ConfigError` when ``loads`` is for another worker count.
        """
        self._check(loads)
        cfg = self.config
        final, reason, n = dlb_pass(loads.loads, loads.placement, cfg.workers, cfg.theta, cfg.pick)
        if n:
            log.debug("%s at %.1fs: %d moves (%s)", self.policy, now, n, reason)
        return self._decide_with(now, loads, final, reason, "migrate")


@dataclass(frozen=True, slots=True)
class StaticConfig:
    """The baseline that never moves a key (KG: every key stays on its hash)."""

    name: ClassVar[str] = "none"
    workers: int
    tuple_bytes: int = DEFAULT_TUPLE_BYTES

    def __post_init__(self) -> None:
        check_workers(self.workers)
        check_bytes(self.tuple_bytes)

    def build(self, state: MapSnapshot | None = None) -> StaticRebalancer:
        """The baseline, empty or continuing from ``state`` (StateError if not its own)."""
        return StaticRebalancer(self, state)


class StaticRebalancer(_MapRebalancer):
    """Records the imbalance of each interval and never moves anything."""

    policy: ClassVar[str] = "none"

    def __init__(self, config: StaticConfig, state: MapSnapshot | None = None) -> None:
        self.config = config
        super().__init__(config.workers, config.tuple_bytes, state)

    def decide(self, now: float, loads: LoadSnapshot) -> Decision:
        """A record with no moves and the interval's imbScore (DLB Eq. 2) before and after."""
        self._check(loads)
        imb = imbalance(loads.worker_loads())
        self._decisions += 1
        return Decision(
            ts=now,
            policy=self.policy,
            moves=(),
            imbalance_before=imb,
            imbalance_after=imb,
            reason="static",
            keys_total=len(loads.keys),
            load_total=int(loads.loads.sum()),
        )

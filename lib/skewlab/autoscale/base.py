"""The consumer-group bin-packing contract (Landau et al., Sec. III-IV, Eq. 3-14).

Partitions are items of size ``s_j(t_k)`` (bytes/s), consumers bins of capacity ``C``; each
iteration turns ``X(t_{k-1})`` and the new speeds into ``X(t_k)``. Longer notes:
docs/autoscale.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from skewlab.errors import ConfigError

__all__ = [
    "DEFAULT_CAPACITY_RATIO",
    "Assignment",
    "BinPacker",
    "Bins",
    "Capacity",
    "check_speeds",
]

DEFAULT_CAPACITY_RATIO = 5.0 / 6.0
"""``C / C_bar`` by default: the seed's ``C < 5/6 C_bar`` taken at its bound (Sec. VI-C)."""

_EPS = 1e-9
"""Relative tolerance of the capacity test (sums of floats)."""


def check_speeds(speeds: ArrayLike) -> np.ndarray:
    """Speeds as a 1-D float array; raises ConfigError unless finite and ``>= 0``."""
    arr = np.asarray(speeds, dtype=np.float64)
    if arr.ndim != 1:
        raise ConfigError(f"speeds must be one value per partition (1-D), got shape {arr.shape}")
    if arr.size and (not np.all(np.isfinite(arr)) or float(arr.min()) < 0.0):
        raise ConfigError("speeds must be finite and >= 0 (bytes/s)")
    return arr


@dataclass(frozen=True)
class Capacity:
    """Bin capacity ``C`` (algorithms) and consumer capacity ``C_bar`` (latency model).

    ``Capacity(consumer=120.0)`` gives ``C = 100`` by the 5/6 rule; an explicit
    ``bin`` must be positive and at most ``consumer``.
    """

    consumer: float
    bin: float | None = None

    def __post_init__(self) -> None:
        if not (np.isfinite(self.consumer) and self.consumer > 0):
            raise ConfigError(f"consumer capacity C_bar must be > 0, got {self.consumer!r}")
        if self.bin is None:
            object.__setattr__(self, "bin", DEFAULT_CAPACITY_RATIO * float(self.consumer))
        elif not (0 < self.bin <= self.consumer):
            raise ConfigError(
                f"bin capacity C must be in (0, C_bar={self.consumer}], got {self.bin!r}"
            )

    @property
    def c(self) -> float:
        """The bin capacity ``C``."""
        assert self.bin is not None
        return float(self.bin)

    @classmethod
    def from_bin(cls, c: float) -> Capacity:
        """The capacity whose ``C`` is ``c`` and ``C_bar = 6/5 c`` (the default rule inverted)."""
        if not (np.isfinite(c) and c > 0):
            raise ConfigError(f"bin capacity C must be > 0, got {c!r}")
        return cls(consumer=c / DEFAULT_CAPACITY_RATIO, bin=c)


@dataclass(frozen=True)
class Assignment:
    """A consumer-group configuration ``X(t_k)``: ``owner[j]`` consumer of partition ``j``.

    ``-1`` marks an unassigned partition. ``members`` are the consumers of the
    group (sorted ids); by default the distinct owners. Kafka's assignor may keep
    members that own nothing (more consumers than partitions), so ``members``
    can be given explicitly; every owner must be a member. Immutable and
    picklable (it is a snapshot of the group).
    """

    owner: tuple[int, ...]
    members: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        owners = {o for o in self.owner if o >= 0}
        if any(o < -1 for o in self.owner):
            raise ConfigError("owner ids must be >= 0, or -1 for unassigned")
        members = set(self.members) | owners
        if any(m < 0 for m in members):
            raise ConfigError("consumer ids must be >= 0")
        object.__setattr__(self, "members", tuple(sorted(members)))

    @classmethod
    def empty(cls, partitions: int) -> Assignment:
        """No partition assigned (Eq. 8, ``t < t_1``)."""
        return cls((-1,) * partitions)

    @classmethod
    def from_owner(cls, owner: ArrayLike, members: Sequence[int] = ()) -> Assignment:
        """From an owner per partition (any int array-like); ``members`` adds idle consumers."""
        return cls(tuple(int(o) for o in np.asarray(owner).ravel().tolist()), tuple(members))

    @classmethod
    def from_groups(cls, groups: dict[int, Sequence[int]], partitions: int) -> Assignment:
        """Build from ``{consumer: [partitions]}``; a partition listed twice raises."""
        owner = [-1] * partitions
        for c, parts in groups.items():
            for j in parts:
                if owner[j] != -1:
                    raise ConfigError(f"partition {j} assigned to {owner[j]} and {c}")
                owner[j] = int(c)
        return cls(tuple(owner), tuple(groups))

    @property
    def partitions(self) -> int:
        """Number of partitions ``|P|``."""
        return len(self.owner)

    @property
    def consumers(self) -> int:
        """Number of consumers in the group (the operational cost, ``sum_i y_i``)."""
        return len(self.members)

    def array(self) -> np.ndarray:
        """``owner`` as a fresh ``int64`` array (``-1`` = unassigned)."""
        return np.asarray(self.owner, dtype=np.int64)

    def unassigned(self) -> list[int]:
        """Partitions with no consumer, in index order."""
        return [j for j, o in enumerate(self.owner) if o < 0]

    def groups(self) -> dict[int, list[int]]:
        """``{consumer: [partitions in index order]}`` for every member."""
        out: dict[int, list[int]] = {m: [] for m in self.members}
        for j, o in enumerate(self.owner):
            if o >= 0:
                out[o].append(j)
        return out

    def loads(self, speeds: ArrayLike) -> dict[int, float]:
        """Sum of the partitions' speeds per member (``sum_j s_j x_ij``)."""
        s = check_speeds(speeds)
        if len(s) != self.partitions:
            raise ConfigError(f"{len(s)} speeds for {self.partitions} partitions")
        out = dict.fromkeys(self.members, 0.0)
        for j, o in enumerate(self.owner):
            if o >= 0:
                out[o] += float(s[j])
        return out


@runtime_checkable
class BinPacker(Protocol):
    """One heuristic: the current assignment + measured speeds -> the next assignment (Eq. 3-7).

    Invariants every implementation keeps (the contract tests check them):
    every partition gets exactly one consumer; a bin-packing heuristic never
    puts more than ``capacity`` into a consumer unless a single partition is
    larger than ``capacity`` (then it is alone); ``previous`` is not modified;
    the same ``rng`` state gives the same result (no other randomness). An item larger
    than ``capacity`` fits no bin: it gets a bin of its own (opened with ``h``), which is then
    over capacity, and nothing else goes there.
    """

    @property
    def name(self) -> str:
        """Registry name, e.g. ``mwf`` or ``kafka:15``."""
        ...

    def assign(
        self,
        speeds: ArrayLike,
        previous: Assignment | None,
        capacity: float,
        rng: np.random.Generator | None = None,
    ) -> Assignment:
        """The next assignment; ``rng`` draws any random choice (the online any-fit order)."""
        ...


class Bins:
    """The next consumer group ``N`` while a heuristic fills it (one iteration ``k``).

    Loads live in an array indexed by consumer id; an unused id has load
    ``+inf`` so it never "fits". Ties are broken towards the lowest id, so
    every heuristic is deterministic.

    ``f()`` is Eq. 12 (lowest unused id), ``g(j)`` Eq. 13 (previous owner of
    ``j``), ``h(j)`` Eq. 14 (``g(j)`` when it is not in use yet and a previous
    assignment exists, else ``f()``).
    """

    def __init__(self, speeds: np.ndarray, previous: Assignment | None, capacity: float) -> None:
        if not capacity > 0:
            raise ConfigError(f"capacity must be > 0, got {capacity!r}")
        p = len(speeds)
        if previous is not None and previous.partitions != p:
            raise ConfigError(
                f"previous assignment has {previous.partitions} partitions, speeds have {p}"
            )
        self.speeds = speeds
        self.capacity = float(capacity)
        self._lim = self.capacity * (1.0 + _EPS)
        self.prev = previous.array() if previous is not None else np.full(p, -1, dtype=np.int64)
        top = int(self.prev.max()) + 1 if p else 0
        size = max(p, top) + 1
        self.loads = np.full(size, np.inf)
        self.count = np.zeros(size, dtype=np.int64)
        self.owner = np.full(p, -1, dtype=np.int64)
        self._free = 0
        self._hi = 0
        self.last = -1
        """The most recently opened bin (Next Fit's only open bin)."""

    def used(self, c: int) -> bool:
        """Consumer ``c`` is open in this iteration (``y_c(t_k) = 1``)."""
        return bool(self.loads[c] != np.inf)

    def f(self) -> int:
        """Eq. 12: the lowest consumer id not yet used in this iteration."""
        while self.loads[self._free] != np.inf:
            self._free += 1
        return self._free

    def g(self, j: int) -> int:
        """Eq. 13: the consumer of partition ``j`` at ``k - 1`` (``-1`` if none)."""
        return int(self.prev[j])

    def h(self, j: int) -> int:
        """Eq. 14: reopen ``g(j)`` if it is not in use yet, else ``f()``."""
        g = self.g(j)
        if g >= 0 and not self.used(g):
            return g
        return self.f()

    def open(self, c: int) -> int:
        """Create consumer ``c`` (``y_c(t_k) = 1``) with no partition."""
        if self.used(c):
            raise ConfigError(f"consumer {c} is already open")
        self.loads[c] = 0.0
        self._hi = max(self._hi, c + 1)
        self.last = c
        return c

    def fits(self, c: int, j: int) -> bool:
        """Partition ``j`` fits consumer ``c`` (an empty open bin takes anything)."""
        return self.count[c] == 0 or self.loads[c] + self.speeds[j] <= self._lim

    def put(self, c: int, j: int) -> None:
        """Assign partition ``j`` to open consumer ``c`` (``x_cj = 1``); no capacity check."""
        self.loads[c] += self.speeds[j]
        self.count[c] += 1
        self.owner[j] = c

    def open_new(self, j: int) -> int:
        """Open the bin ``h(j, k)`` and put ``j`` into it (no open bin fits ``j``)."""
        c = self.open(self.h(j))
        self.put(c, j)
        return c

    # -- choosing among the open bins; -1 when none fits ---------------------------------

    def _room(self, j: int) -> float:
        return self._lim - float(self.speeds[j])

    def first_fit(self, j: int) -> int:
        """The lowest-id open bin that fits ``j`` (First Fit)."""
        ok = self.loads[: self._hi] <= self._room(j)
        if not ok.size:
            return -1
        c = int(ok.argmax())
        return c if ok[c] else -1

    def best_fit(self, j: int) -> int:
        """The fullest open bin that still fits ``j`` (Best Fit: tightest)."""
        view = self.loads[: self._hi]
        masked = np.where(view <= self._room(j), view, -np.inf)
        if not masked.size:
            return -1
        c = int(masked.argmax())
        return c if masked[c] != -np.inf else -1

    def worst_fit(self, j: int) -> int:
        """The emptiest open bin, if it fits ``j`` (Worst Fit: most slack)."""
        view = self.loads[: self._hi]
        if not view.size:
            return -1
        c = int(view.argmin())
        return c if view[c] <= self._room(j) else -1

    def result(self, members: Sequence[int] = ()) -> Assignment:
        """The filled group as an :class:`Assignment` (every open bin is a member)."""
        opened = np.flatnonzero(self.loads[: self._hi] != np.inf).tolist()
        return Assignment(tuple(self.owner.tolist()), tuple(opened) + tuple(members))


def decreasing(speeds: np.ndarray) -> np.ndarray:
    """Partition indices by speed, largest first (ties: lower index first)."""
    return np.argsort(-speeds, kind="stable")

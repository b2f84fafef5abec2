"""The rebalancer contract: per-key loads of an interval in (:class:`LoadSnapshot`), a
:class:`Decision` record out, scored on one scale (DLB Eq. 2 imbScore) for every policy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from skewlab.errors import ConfigError, StateError
from skewlab.hashing import DKG_SEED, bucket

__all__ = [
    "DEFAULT_TUPLE_BYTES",
    "Decision",
    "LoadSnapshot",
    "Move",
    "Rebalancer",
    "RebalancerConfig",
    "check_state",
    "check_workers",
    "hash_worker",
    "imbalance",
]

DEFAULT_TUPLE_BYTES = 100
"""Bytes of one buffered tuple when the loads carry no byte counts (the workloads' default)."""


def check_workers(workers: object) -> None:
    """Raise :class:`~skewlab.errors.ConfigError` unless ``workers`` is an int >= 1."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")


def check_positive(what: str, value: object, *, zero_ok: bool = False) -> None:
    """``value`` is a finite number > 0 (or >= 0 with ``zero_ok``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero_ok):  # type: ignore[operator]
        bound = ">= 0" if zero_ok else "> 0"
        raise ConfigError(f"{what} must be a finite number {bound}, got {value!r}")


def hash_worker(key: str, workers: int) -> int:
    """Where KEY grouping sends ``key`` (``murmur3(13) % W``): a key's place off the map."""
    return bucket(key, workers, DKG_SEED)


def imbalance(worker_loads: np.ndarray) -> float:
    """DLB Eq. 2 ``imbScore = 100 * std / mean`` (population std); 0 for an idle system."""
    loads = np.asarray(worker_loads, dtype=np.float64)
    mean = float(loads.mean()) if loads.size else 0.0
    if mean <= 0.0:
        return 0.0
    return 100.0 * float(loads.std()) / mean


def _frozen(a: np.ndarray, dtype: type) -> np.ndarray:
    out: np.ndarray = np.array(a, dtype=dtype, copy=True)
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class LoadSnapshot:
    """Per-key loads of one interval ``[now - interval_s, now)`` and the keys' placement.

    ``keys[i]`` carried ``loads[i]`` events (``bytes[i]`` bytes, if known) and was
    processed by worker ``placement[i]``. Keys are distinct; loads are ``> 0``
    (idle keys are simply absent). The arrays are read-only copies.
    """

    now: float
    interval_s: float
    workers: int
    keys: tuple[str, ...]
    loads: np.ndarray
    placement: np.ndarray
    bytes: np.ndarray | None = None

    def __post_init__(self) -> None:
        check_workers(self.workers)
        check_positive("interval_s", self.interval_s)
        n = len(self.keys)
        object.__setattr__(self, "keys", tuple(self.keys))
        object.__setattr__(self, "loads", _frozen(self.loads, np.int64))
        object.__setattr__(self, "placement", _frozen(self.placement, np.int64))
        if self.bytes is not None:
            object.__setattr__(self, "bytes", _frozen(self.bytes, np.int64))
        for name in ("loads", "placement", "bytes"):
            arr = getattr(self, name)
            if arr is not None and arr.shape != (n,):
                raise ConfigError(f"LoadSnapshot.{name} must have one entry per key ({n})")
        if n:
            if int(self.loads.min()) < 0:
                raise ConfigError("LoadSnapshot.loads must be >= 0")
            if int(self.placement.min()) < 0 or int(self.placement.max()) >= self.workers:
                raise ConfigError(f"LoadSnapshot.placement must be in 0..{self.workers - 1}")

    @classmethod
    def of(
        cls,
        loads: Mapping[str, int],
        placement: Mapping[str, int],
        *,
        workers: int,
        now: float = 0.0,
        interval_s: float = 1.0,
    ) -> LoadSnapshot:
        """From ``key -> load`` and ``key -> worker`` maps (every loaded key needs a worker)."""
        keys = tuple(loads)
        missing = [k for k in keys if k not in placement]
        if missing:
            raise ConfigError(f"no worker given for key(s) {missing[:5]}")
        return cls(
            now=now,
            interval_s=interval_s,
            workers=workers,
            keys=keys,
            loads=np.fromiter((loads[k] for k in keys), dtype=np.int64, count=len(keys)),
            placement=np.fromiter((placement[k] for k in keys), dtype=np.int64, count=len(keys)),
        )

    def worker_loads(self, placement: np.ndarray | None = None) -> np.ndarray:
        """DLB Eq. 1 ``eng_load[e]``: events per worker under ``placement`` (default: actual)."""
        where = self.placement if placement is None else placement
        return np.bincount(where, weights=self.loads, minlength=self.workers).astype(np.int64)

    def state_bytes(self, i: int, tuple_bytes: int) -> int:
        """Bytes of key ``i``'s state: its measured bytes, else ``loads[i] * tuple_bytes``."""
        if self.bytes is not None:
            return int(self.bytes[i])
        return int(self.loads[i]) * tuple_bytes


@dataclass(frozen=True, slots=True)
class Move:
    """One key changing worker: ``src -> dst`` with its load and the state moved with it.

    ``kind``: ``migrate`` (a balancing move), ``place`` (SMALOPS: a new heavy key
    placed by two random choices), ``drop`` (SMALOPS: a key no longer heavy
    returns to its hash worker), ``repack`` (LPTF).
    """

    key: str
    src: int
    dst: int
    load: int
    state_tuples: int
    state_bytes: int
    kind: str = "migrate"

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form for the ``decisions`` detail (``src``/``dst`` as ``from``/``to``)."""
        return {
            "key": self.key,
            "from": self.src,
            "to": self.dst,
            "load": self.load,
            "tuples": self.state_tuples,
            "bytes": self.state_bytes,
            "kind": self.kind,
        }


@dataclass(frozen=True)
class Decision:
    """One rebalancing decision: what moved, what it cost, and why (a ``decisions`` row).

    Invariants: each key appears in ``moves`` at most once (``src`` where it was
    in the interval, ``dst`` where it goes, never equal); ``assignment`` names
    each key once and is the whole explicit map in force after the decision.
    ``changed`` is true when ``assignment`` differs from the previous one.
    """

    ts: float
    policy: str
    moves: tuple[Move, ...]
    imbalance_before: float
    imbalance_after: float
    reason: str
    assignment: tuple[tuple[str, int], ...] = ()
    changed: bool = False
    keys_total: int = 0
    load_total: int = 0
    extra: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", dict(self.extra))

    @property
    def keys_moved(self) -> int:
        """Number of keys that changed worker."""
        return len(self.moves)

    @property
    def load_moved(self) -> int:
        """Events of the interval that belonged to the moved keys."""
        return sum(m.load for m in self.moves)

    @property
    def tuples_moved(self) -> int:
        """State moved, in tuples (DLB's "retransmitted tuples"; the row's ``cost``)."""
        return sum(m.state_tuples for m in self.moves)

    @property
    def bytes_moved(self) -> int:
        """State moved, in bytes."""
        return sum(m.state_bytes for m in self.moves)

    def assignment_map(self) -> dict[str, int]:
        """:attr:`assignment` as a ``key -> worker`` dict."""
        return dict(self.assignment)

    def detail(self, max_moves: int = 1000) -> dict[str, Any]:
        """The JSON-able detail column: totals, shares, extras and (up to ``max_moves``) moves."""
        return {
            "keys_moved": self.keys_moved,
            "keys_total": self.keys_total,
            "load_moved": self.load_moved,
            "load_total": self.load_total,
            "tuples_moved": self.tuples_moved,
            "bytes_moved": self.bytes_moved,
            "assigned": len(self.assignment),
            **{k: float(v) for k, v in self.extra.items()},
            "moves": [m.as_dict() for m in self.moves[:max_moves]],
            "moves_truncated": max(0, len(self.moves) - max_moves),
        }

    def to_row(self, loop: str = "rebalance") -> dict[str, Any]:
        """The Delta ``decisions`` row: ts ms, loop, policy, detail JSON, cost, imbalances, reason.

        ``cost`` is the state moved, in tuples (DLB's "retransmitted tuples").
        """
        return {
            "ts": round(self.ts * 1000.0),
            "loop": loop,
            "policy": self.policy,
            "detail": json.dumps(self.detail(), sort_keys=True),
            "cost": float(self.tuples_moved),
            "imbalance_before": float(self.imbalance_before),
            "imbalance_after": float(self.imbalance_after),
            "reason": self.reason,
        }


@runtime_checkable
class Rebalancer(Protocol):
    """A working rebalancer: it runs beside a grouping and pins hot keys to workers.

    Lifecycle (STYLE.md rule 1):

    1. ``cfg = SmalopsConfig(workers=8)`` validates itself in ``__post_init__`` and raises
       :class:`~skewlab.errors.ConfigError` naming what is allowed.
    2. ``rb = cfg.build(state=None)`` returns the working rebalancer.
    3. Every control interval the caller hands it a :class:`LoadSnapshot` and gets back a
       :class:`Decision`: ``rb.decide(now, loads)``. ``decision.assignment`` is the full
       explicit ``key -> worker`` map to route by from now on (keys it does not name stay on
       the grouping's hash); ``decision.moves`` says which keys changed worker and the cost.
    4. ``snap = rb.snapshot()`` is immutable and picklable; ``cfg.build(state=snap)`` makes
       the same decisions from there on.
    """

    @property
    def workers(self) -> int:
        """Number of workers (engines, partitions) balanced."""
        ...

    @property
    def assignment(self) -> Mapping[str, int]:
        """The explicit ``key -> worker`` map currently in force."""
        ...

    def decide(self, now: float, loads: LoadSnapshot) -> Decision:
        """One decision over the interval's ``loads``; updates :attr:`assignment`.

        Raises :class:`~skewlab.errors.ConfigError` when ``loads.workers`` differs.
        """
        ...

    def snapshot(self) -> Any:
        """Immutable, picklable state from which ``build(state=...)`` continues."""
        ...


@runtime_checkable
class RebalancerConfig(Protocol):
    """A frozen dataclass of parameters; ``name`` is its registry name."""

    name: ClassVar[str]
    workers: int

    def build(self, state: Any = None) -> Rebalancer:
        """The working rebalancer, empty or continuing from ``state``.

        Raises :class:`~skewlab.errors.StateError` for another policy's or size's snapshot.
        """
        ...


def check_state(state: Any, cls: type, policy: str, workers: int) -> None:
    """A snapshot restored into ``policy`` must be its own kind and worker count."""
    if not isinstance(state, cls):
        raise StateError(f"{policy}: expected a {cls.__name__}, got {type(state).__name__}")
    s_policy, s_workers = getattr(state, "policy", None), getattr(state, "workers", None)
    if s_policy != policy or s_workers != workers:
        raise StateError(
            f"{policy} over {workers} workers cannot restore a snapshot of "
            f"{s_policy} over {s_workers}"
        )


def finish(
    *,
    now: float,
    policy: str,
    loads: LoadSnapshot,
    final: np.ndarray,
    before: np.ndarray,
    kinds: Mapping[int, str],
    default_kind: str,
    reason: str,
    assignment: Mapping[str, int],
    previous: Sequence[tuple[str, int]] | Mapping[str, int],
    tuple_bytes: int,
    extra: Mapping[str, float] | None = None,
) -> Decision:
    """Build the :class:`Decision` from the interval's placement ``before`` and ``final``."""
    moved = np.flatnonzero(final != before).tolist()
    keys, lv = loads.keys, loads.loads
    moves = tuple(
        Move(
            key=keys[i],
            src=int(before[i]),
            dst=int(final[i]),
            load=int(lv[i]),
            state_tuples=int(lv[i]),
            state_bytes=loads.state_bytes(i, tuple_bytes),
            kind=kinds.get(i, default_kind),
        )
        for i in moved
    )
    prev = previous if isinstance(previous, Mapping) else dict(previous)
    return Decision(
        ts=now,
        policy=policy,
        moves=moves,
        imbalance_before=imbalance(loads.worker_loads(before)),
        imbalance_after=imbalance(loads.worker_loads(final)),
        reason=reason,
        assignment=tuple(assignment.items()),
        changed=prev != assignment,
        keys_total=len(keys),
        load_total=int(lv.sum()),
        extra=extra or {},
    )

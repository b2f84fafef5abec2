"""Key/value operator state and its hash decomposition (scale-out seed, "State model").

``decompose(M, eta)`` splits the seed's ``theta`` into ``eta`` parts by a key hash and
``compose`` joins them back (seed Eq. 1: compose(decompose(M)) = M, each part reads like the
original for the keys it owns). The default hash is the KEY grouping's, so a key's state
lives where its tuples are routed. Details: docs/state.md, "Key/value state".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from skewlab.errors import ConfigError, StateError
from skewlab.frozen import FrozenMapping
from skewlab.hashing import bucket, buckets, key_hash, key_hashes

__all__ = [
    "KeyHash",
    "OperatorState",
    "SplitHashes",
    "compose",
    "decompose",
    "default_hash",
    "owner",
    "repartition",
    "split_hash",
    "split_hashes",
]

KeyHash = Callable[[str, int], int]
"""``m(key, eta)``: the instance in ``[0, eta)`` that owns ``key``."""


def default_hash(key: str, eta: int) -> int:
    """``m(k) = abs(murmur3_64(k, 13)) % eta`` (the KEY grouping's hash)."""
    return bucket(key, eta)


SPLIT_SEED = 29
"""Seed of the hash that splits one scaled operator's keys (KEY's seed 13 formed them)."""


def split_hash(key: str, eta: int) -> int:
    """The live state manager's ``m(key)`` for splitting a group: ``murmur3(k, 29) % eta``."""
    return bucket(key, eta, SPLIT_SEED)


def split_hashes(keys: Iterable[str], eta: int) -> list[int]:
    """:func:`split_hash` of each of ``keys``, in one call (:func:`~skewlab.hashing.buckets`)."""
    if eta < 1:
        raise StateError(f"eta must be >= 1, got {eta}")
    return buckets(keys, eta, SPLIT_SEED)


class SplitHashes:
    """Each key's split hash before its rest (:func:`split_hash` is it modulo ``eta``),
    taken once per key and kept: a key's part among any number of instances is then
    arithmetic. The state manager's sweep and an old instance waiting for its cut
    hash a key when it first sees it, not all 100k keys on the switch's path."""

    def __init__(self) -> None:
        self._h: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._h)

    def add(self, keys: Iterable[str]) -> None:
        """Hash those of ``keys`` not hashed yet, in one call."""
        todo = [k for k in keys if k not in self._h]
        self._h.update(zip(todo, key_hashes(todo, SPLIT_SEED), strict=True))

    def part(self, key: str, eta: int) -> int:
        """``split_hash(key, eta)``."""
        h = self._h.get(key)
        if h is None:
            h = self._h[key] = key_hash(key, SPLIT_SEED)
        return h % eta

    def raw(self, keys: list[str]) -> list[int]:
        """The hash of each of ``keys`` (hashed now if not yet)."""
        self.add(keys)
        return list(map(self._h.__getitem__, keys))


class OperatorState(FrozenMapping):
    """An immutable key -> value map: the seed's theta.

    Values are whatever the operator keeps per key (JSON-encodable when the
    state goes to Delta). A key that is absent reads as ``None`` through
    :meth:`read`, the seed's "read operation". Instances are hashable by
    content only through equality (they are not meant as dict keys).
    """

    __slots__ = ()

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()) -> None:
        data = dict(items)
        for key in data:
            if not isinstance(key, str):
                raise ConfigError(f"state keys must be str, got {type(key).__name__} {key!r}")
        super().__init__(data)

    def __repr__(self) -> str:
        return f"OperatorState({len(self._data)} keys)"

    def read(self, key: str) -> Any:
        """The seed's read: the value of ``key``, ``None`` if the state has no such key."""
        return self._data.get(key)

    def to_dict(self) -> dict[str, Any]:
        """A mutable copy (what a running instance works on)."""
        return dict(self._data)


def _check_eta(eta: int) -> None:
    if isinstance(eta, bool) or not isinstance(eta, int) or eta < 1:
        raise ConfigError(f"eta (number of instances) must be an int >= 1, got {eta!r}")


def owner(key: str, eta: int, hash: KeyHash = default_hash) -> int:
    """``m(key)``: the instance of ``eta`` that owns ``key``; checks the hash's range."""
    where = hash(key, eta)
    if not 0 <= where < eta:
        raise StateError(f"hash sent key {key!r} to {where}, outside [0, {eta})")
    return where


def decompose(
    state: Mapping[str, Any], eta: int, hash: KeyHash = default_hash
) -> tuple[OperatorState, ...]:
    """``Decompose(M, eta)``: the parts of ``state`` for ``eta`` instances (seed Eq. 1, 2).

    Part ``i`` holds exactly the keys with ``m(k) = i``; every key lands in one
    part, so the parts are disjoint and their union is ``state``.
    """
    _check_eta(eta)
    parts: list[dict[str, Any]] = [{} for _ in range(eta)]
    for key, value in state.items():
        parts[owner(key, eta, hash)][key] = value
    return tuple(OperatorState(p) for p in parts)


def compose(*parts: Mapping[str, Any]) -> OperatorState:
    """``compose(M'_0, ..., M'_{p-1}) = M``: the union of disjoint parts (seed Eq. 1).

    Raises:
        StateError: a key is in two parts (the parts did not come from one
            decomposition, and merging them would silently drop a value).
    """
    merged: dict[str, Any] = {}
    for i, part in enumerate(parts):
        for key, value in part.items():
            if key in merged:
                raise StateError(f"key {key!r} is in more than one part (again in part {i})")
            merged[key] = value
    return OperatorState(merged)


def repartition(
    parts: Iterable[Mapping[str, Any]], eta: int, hash: KeyHash = default_hash
) -> tuple[OperatorState, ...]:
    """The state of some instances re-split onto ``eta`` instances: ``decompose(compose(...))``.

    Scale-out (more instances) and scale-in (fewer) are both this one step.
    """
    return decompose(compose(*parts), eta, hash)

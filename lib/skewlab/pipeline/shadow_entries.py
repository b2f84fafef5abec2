"""A worker's shadow sets, restored lazily: a key's entry is decoded when first used.

A scale-out instance restores its hash part of the instances it replaces (100k keys
at the README's scale) before it may take any key over. Decoding every restored
state when restoring, and writing it again with the instance's first commit, was
most of the time between its start and its switch. :class:`ShadowEntries` keeps a
restored key as the holder's stored row until the key is used (a record or marker
replayed into it, a hand-off, a take-over, a commit of it): its *base*. The base is
re-read from the same immutable rows when the instance restarts
(``skewlab.live.worker.shadow``), so a base entry is never written by the instance itself;
only keys it changed are. Details: docs/scaleout.md, "A lazy restore".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, TypeVar

__all__ = ["ShadowEntries"]

E = TypeVar("E")


class ShadowEntries(MutableMapping[str, E]):
    """``key -> entry`` of the shadow sets; base keys (:meth:`add_base`) are decoded on
    first access by ``decode(key, row, source, live_sources)``.

    Behaves as a dict of entries: ``get`` / ``[]`` / iteration see base keys too (and
    decode them); :meth:`decoded` iterates only the entries already decoded, which is
    all a change that applies to every base key alike needs (going live per source is
    kept in :attr:`live_sources` and applied as a base key is decoded)."""

    def __init__(self, decode: Callable[[str, bytes, int, frozenset[int]], E]) -> None:
        self._decode = decode
        self._entries: dict[str, E] = {}
        self._base: dict[str, tuple[bytes, int]] = {}
        self.live_sources: set[int] = set()
        """Sources whose cut this shadow reached: their base keys decode as live."""

    def add_base(self, key: str, row: bytes, source: int) -> None:
        """Shadow ``key`` from ``row``, its holder ``source``'s stored state row, decoded
        on first use. A key already decoded here is left as it is."""
        if key not in self._entries:
            self._base[key] = (row, source)

    @property
    def base_size(self) -> int:
        """Base keys not decoded yet."""
        return len(self._base)

    def decoded(self) -> Iterator[tuple[str, E]]:
        """``(key, entry)`` of the entries decoded so far (a snapshot: safe to change)."""
        return iter(list(self._entries.items()))

    def __getitem__(self, key: str) -> E:
        e = self._entries.get(key)
        if e is not None:
            return e
        row, source = self._base.pop(key)  # KeyError: not shadowed
        e = self._entries[key] = self._decode(key, row, source, frozenset(self.live_sources))
        return e

    def __setitem__(self, key: str, entry: E) -> None:
        self._base.pop(key, None)
        self._entries[key] = entry

    def __delitem__(self, key: str) -> None:
        found = self._entries.pop(key, None) is not None
        found = self._base.pop(key, None) is not None or found
        if not found:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._entries or key in self._base

    def __iter__(self) -> Iterator[str]:
        return iter([*self._entries, *self._base])  # a snapshot: decoding moves keys

    def __len__(self) -> int:
        return len(self._entries) + len(self._base)

    def clear(self) -> None:
        """No shadow at all (a new plan): entries, base and live sources."""
        self._entries.clear()
        self._base.clear()
        self.live_sources.clear()

    def __repr__(self) -> str:
        return f"ShadowEntries({len(self._entries)} decoded, {len(self._base)} base)"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, ShadowEntries | dict):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

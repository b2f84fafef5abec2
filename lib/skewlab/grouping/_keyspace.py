"""DKG's generational key spaces (baby / teenage / old), deterministic and bounded.

The DKG seed's "KeySpace": keys enter the baby space, promotion cycles move the most frequent
ones up, gc evicts stale ones; ``baby_limit`` (our addition) bounds the baby space between
cycles. The rules in full, and where they differ from the reference: docs/grouping.md.
"""

from __future__ import annotations

from collections.abc import Iterable

BABY, TEENAGE, OLD = 0, 1, 2
SPACE_NAMES = ("baby", "teenage", "old")
NEVER = float("-inf")
"""``last_check`` of a key never checked for scaling: its first check is due at once."""


class KeyItem:
    """One key in the spaces: its frequency, times and DKG pool size.

    ``vid`` is the key's id in the router's cached vocabulary (``-1`` if none),
    so evicting the item can clear the router's cache slot. ``a`` is the key's
    DKG home index and ``b == (a + 1) % W`` its second ring candidate; the
    router fills both (they depend on the worker count).
    """

    __slots__ = ("a", "b", "count", "key", "last_check", "last_seen", "pool", "space", "vid")

    def __init__(
        self,
        key: str,
        count: int,
        last_seen: float,
        last_check: float,
        pool: int,
        space: int,
    ) -> None:
        self.key = key
        self.count = count
        self.last_seen = last_seen
        self.last_check = last_check
        self.pool = pool
        self.space = space
        self.vid = -1
        self.a = -1
        self.b = -1

    def as_tuple(self) -> tuple[str, int, float, float, int]:
        """``(key, count, last_seen, last_check, pool)``: the item as its snapshot stores it."""
        return (self.key, self.count, self.last_seen, self.last_check, self.pool)


def _by_count(items: list[KeyItem]) -> list[KeyItem]:
    """Descending frequency, stable (Java's ``Collections.sort`` is stable too)."""
    return sorted(items, key=lambda it: -it.count)


class KeySpaces:
    """The three spaces and the index ``key -> item`` over all of them.

    Invariants: every item is in exactly one space list and in ``items``;
    ``len(teenage) <= teenage_cap``; ``len(old) <= old_cap``; ``len(baby) <=
    max(baby_limit, baby_cap + teenage_cap)`` (after a cycle the baby space holds
    its truncated keys plus at most ``teenage_cap`` demoted ones).
    """

    __slots__ = ("baby", "baby_cap", "baby_limit", "items", "old", "old_cap", "teen", "teen_cap")

    def __init__(self, baby_cap: int, teen_cap: int, old_cap: int, baby_limit: int) -> None:
        self.baby_cap = baby_cap
        self.teen_cap = teen_cap
        self.old_cap = old_cap
        self.baby_limit = baby_limit
        self.items: dict[str, KeyItem] = {}
        self.baby: list[KeyItem] = []
        self.teen: list[KeyItem] = []
        self.old: list[KeyItem] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, key: str, now: float, pool: int) -> tuple[KeyItem, list[KeyItem]]:
        """Put a new ``key`` (not in any space) in the baby space with frequency 1.

        Returns the item and the items evicted by an early compaction (which
        may include the new item itself when the baby space is full of more
        frequent keys).
        """
        item = KeyItem(key, 1, now, NEVER, pool, BABY)
        self.items[key] = item
        self.baby.append(item)
        evicted: list[KeyItem] = []
        if len(self.baby) > self.baby_limit:
            evicted = self._truncate_baby()
        return item, evicted

    def _truncate_baby(self) -> list[KeyItem]:
        ordered = _by_count(self.baby)
        self.baby = ordered[: self.baby_cap]
        gone = ordered[self.baby_cap :]
        for it in gone:
            del self.items[it.key]
        return gone

    def cycle(self, promote_old: bool) -> list[KeyItem]:
        """One ``KeySpaceManager`` cycle; returns the keys that left the spaces."""
        gone = self._truncate_baby()
        self.baby, self.teen = _promote(self.baby, _by_count(self.teen), self.teen_cap, TEENAGE)
        if promote_old:
            self.teen, self.old = _promote(
                _by_count(self.teen), _by_count(self.old), self.old_cap, OLD
            )
        return gone

    def gc(self, now: float, ttl: float) -> list[KeyItem]:
        """Evict teenage and old keys whose ``now - last_seen > ttl``."""
        gone: list[KeyItem] = []
        for name in ("teen", "old"):
            space: list[KeyItem] = getattr(self, name)
            keep = [it for it in space if not now - it.last_seen > ttl]
            if len(keep) != len(space):
                gone.extend(it for it in space if now - it.last_seen > ttl)
                setattr(self, name, keep)
        for it in gone:
            del self.items[it.key]
        return gone

    def snapshot(self) -> tuple[tuple[tuple[str, int, float, float, int], ...], ...]:
        """Each space (baby, teenage, old) in order, as item tuples."""
        return tuple(tuple(it.as_tuple() for it in s) for s in (self.baby, self.teen, self.old))

    def restore(self, spaces: Iterable[Iterable[tuple[str, int, float, float, int]]]) -> None:
        """Replace the three spaces with ``spaces`` (as :meth:`snapshot` returned them)."""
        lists: list[list[KeyItem]] = [[], [], []]
        for level, space in enumerate(spaces):
            for key, count, last_seen, last_check, pool in space:
                item = KeyItem(
                    key, int(count), float(last_seen), float(last_check), int(pool), level
                )
                lists[level].append(item)
                self.items[key] = item
        self.baby, self.teen, self.old = lists


def _promote(
    lower: list[KeyItem], upper: list[KeyItem], cap: int, level: int
) -> tuple[list[KeyItem], list[KeyItem]]:
    """Promote from ``lower`` to ``upper`` (both sorted by descending frequency).

    The result's upper space holds the ``cap`` most frequent keys of both, an
    upper key winning ties (a swap needs a strictly higher frequency); keys
    left in the lower space keep their order and demoted keys follow them.
    """
    was_upper = {id(it) for it in upper}
    merged = _by_count(upper + lower)  # stable: upper keys first among equals
    new_upper = merged[:cap]
    promoted = {id(it) for it in new_upper}
    stayed = [it for it in lower if id(it) not in promoted]
    demoted = [it for it in merged[cap:] if id(it) in was_upper]
    for it in new_upper:
        it.space = level
    for it in demoted:
        it.space = level - 1
    return stayed + demoted, new_upper

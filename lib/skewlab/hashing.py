"""Key hashing shared by every grouping.

The DKG and PKG reference implementations (Storm, Java) hash a key with Guava's
``Hashing.murmur3_128(seed).hashBytes(key.getBytes()).asLong()`` and take
``Math.abs(h) % W``. ``asLong()`` is the first 64-bit word (h1) of
MurmurHash3_x64_128, which is what ``mmh3.hash64(...)[0]`` returns; the key's
bytes are UTF-8. ``abs`` of the most negative long stays negative in Java; here
it becomes 2**63, which only matters for one key in 2**64.
"""

from __future__ import annotations

from collections.abc import Iterable

import mmh3

DKG_SEED = 13
"""Seed of DKG's (and KEY's) murmur3_128, and of PKG's first choice."""
PKG_SECOND_SEED = 17
"""Seed of PKG's second choice in its reference implementation."""


def murmur3_64(key: str, seed: int) -> int:
    """Signed h1 of MurmurHash3_x64_128 of the UTF-8 bytes of ``key`` (Guava ``asLong``)."""
    return int(mmh3.hash64(key.encode("utf-8"), seed, signed=True)[0])


def key_hash(key: str, seed: int = DKG_SEED) -> int:
    """``abs(murmur3_64(key, seed))``: a non-negative int below 2**64."""
    return abs(murmur3_64(key, seed))


def bucket(key: str, buckets: int, seed: int = DKG_SEED) -> int:
    """``abs(murmur3_64(key, seed)) % buckets`` as the reference implementations compute it."""
    return key_hash(key, seed) % buckets


def key_hashes(keys: Iterable[str], seed: int = DKG_SEED) -> list[int]:
    """:func:`key_hash` of each of ``keys`` in one call, without a Python call per key."""
    h = mmh3.hash64
    return [abs(h(k.encode("utf-8"), seed, signed=True)[0]) for k in keys]


def buckets(keys: Iterable[str], n: int, seed: int = DKG_SEED) -> list[int]:
    """:func:`bucket` of each of ``keys`` in one call: the same values, without a Python
    call per key (a scale-out instance's restore splits 100k keys at once)."""
    return [h % n for h in key_hashes(keys, seed)]

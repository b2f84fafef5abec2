"""Key hashing shared by every grouping.

The DKG and PKG reference implementations (Storm, Java) hash a key with Guava's
``Hashing.murmur3_128(seed).hashBytes(key.getBytes()).asLong()`` and take
``Math.abs(h) % W``. ``asLong()`` is the first 64-bit word (h1) of
MurmurHash3_x64_128, which is what ``mmh3.hash64(...)[0]`` returns; the key's
bytes are UTF-8. ``abs`` of the most negative long stays negative in Java; here
it becomes 2**63, which only matters for one key in 2**64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import mmh3

from skewlab.errors import ConfigError
from skewlab.registry import resolve

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


MURMUR2_SEED = 0x9747B28C
"""Seed of Kafka's ``Utils.murmur2`` (the Java client's default partitioner)."""
_M2 = 0x5BD1E995
_U32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2(data)``: MurmurHash2, 32-bit, seed ``0x9747b28c``, as a signed int.

    Steps as the Java client computes them (all arithmetic modulo 2**32):
    1. ``h = seed ^ len(data)``;
    2. per 4-byte little-endian word ``k``: ``k *= m; k ^= k >>> 24; k *= m; h *= m; h ^= k``;
    3. the 1-3 trailing bytes: ``h ^= byte[i] << 8 * i`` (highest first), then ``h *= m``;
    4. ``h ^= h >>> 13; h *= m; h ^= h >>> 15``.
    """
    n = len(data)
    h = (MURMUR2_SEED ^ n) & _U32
    end = n - n % 4
    for i in range(0, end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M2) & _U32
        k ^= k >> 24
        k = (k * _M2) & _U32
        h = ((h * _M2) & _U32) ^ k
    rest = n % 4
    if rest:
        for i in range(rest - 1, -1, -1):
            h ^= data[end + i] << (8 * i)
        h = (h * _M2) & _U32
    h ^= h >> 13
    h = (h * _M2) & _U32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: ``n & 0x7fffffff`` (not ``abs``: -2**31 maps to 0)."""
    return n & 0x7FFFFFFF


def kafka_partition(key: str, partitions: int) -> int:
    """Kafka's default partitioner for a keyed record: ``toPositive(murmur2(keyBytes)) % N``.

    The key is serialized as UTF-8 (Kafka's ``StringSerializer``).
    """
    return to_positive(murmur2(key.encode("utf-8"))) % partitions


def key_number(key: str) -> int:
    """The integer a key names: ``"17"`` or a Zipf rank's name ``"k17"`` give 17.

    Raises :class:`~skewlab.errors.ConfigError` for a key that names no integer
    (modulo partitioning is defined on integer keys only).
    """
    digits = key[1:] if key[:1].isalpha() else key
    if not digits.isdigit():
        raise ConfigError(f"key {key!r} names no integer: modulo needs keys like '17' or 'k17'")
    return int(digits)


def modulo_partition(key: str, partitions: int) -> int:
    """DLB's KG: ``key % |Engines|`` ("a simple modulo hash function on the tuple's key")."""
    return key_number(key) % partitions


def murmur3_partition(key: str, partitions: int) -> int:
    """skewlab's KEY grouping: :func:`bucket` with the DKG reference's seed."""
    return bucket(key, partitions, DKG_SEED)


PARTITIONERS: dict[str, Callable[[str, int], int]] = {
    "murmur3": murmur3_partition,
    "kafka": kafka_partition,
    "modulo": modulo_partition,
}
"""Fixed key -> partition functions by name: skewlab's KEY (murmur3), Kafka's default
partitioner (murmur2) and DLB's modulo."""


def partitioner(name: str) -> Callable[[str, int], int]:
    """The partitioner called ``name`` (an unknown name lists the valid ones)."""
    return resolve(PARTITIONERS, name, "partitioner")

"""Kafka's default partitioner (murmur2) and DLB's modulo, against their definitions."""

from __future__ import annotations

import pytest

from skewlab.errors import ConfigError, UnknownNameError
from skewlab.hashing import (
    MURMUR2_SEED,
    kafka_partition,
    key_number,
    modulo_partition,
    murmur2,
    murmur3_partition,
    partitioner,
    to_positive,
)

pytestmark = pytest.mark.unit

M = 0x5BD1E995
U32 = 0xFFFFFFFF


def _final_mix(h: int) -> int:
    h ^= h >> 13
    h = (h * M) & U32
    return h ^ (h >> 15)


def _signed(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


def test_murmur2_of_no_bytes_is_the_final_mix_of_the_seed() -> None:
    """Zero bytes: ``h = seed ^ 0``, no word, no tail, then the final mix."""
    assert murmur2(b"") == _signed(_final_mix(MURMUR2_SEED))


def test_murmur2_of_one_byte_mixes_it_into_the_tail() -> None:
    """One byte ``b``: ``h = seed ^ 1; h ^= b; h *= m``, then the final mix."""
    h = ((MURMUR2_SEED ^ 1) ^ ord("a")) * M & U32
    assert murmur2(b"a") == _signed(_final_mix(h))


def test_murmur2_of_one_word_takes_it_little_endian() -> None:
    """Four bytes: one word ``k`` read little-endian, ``k *= m; k ^= k >>> 24; k *= m``."""
    k = int.from_bytes(b"abcd", "little") * M & U32
    k = (k ^ (k >> 24)) * M & U32
    h = ((MURMUR2_SEED ^ 4) * M & U32) ^ k
    assert murmur2(b"abcd") == _signed(_final_mix(h))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("21", -973932308),
        ("foobar", -790332482),
        ("a-little-bit-long-string", -985981536),
        ("a-little-bit-longer-string", -1486304829),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        ("abc", 479470107),
    ],
)
def test_murmur2_matches_the_java_clients_published_vectors(text: str, expected: int) -> None:
    """The values of Kafka's ``UtilsTest.testMurmur2`` (words, tails of 1-3 bytes)."""
    assert murmur2(text.encode()) == expected


def test_to_positive_masks_the_sign_bit_instead_of_negating() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(12) == 12


def test_kafka_partition_is_to_positive_murmur2_mod_n() -> None:
    # murmur2("21") = -973932308; & 0x7fffffff = 1173551340; % 7 = 1173551340 - 7 * 167650191
    assert kafka_partition("21", 7) == 1173551340 - 7 * 167650191
    assert kafka_partition("abc", 16) == 479470107 % 16


def test_modulo_reads_the_integer_a_key_names() -> None:
    assert key_number("17") == 17 and key_number("k17") == 17
    assert [modulo_partition(f"k{r}", 5) for r in range(7)] == [0, 1, 2, 3, 4, 0, 1]
    with pytest.raises(ConfigError, match="names no integer"):
        modulo_partition("DE", 5)


def test_partitioners_by_name() -> None:
    assert partitioner("kafka") is kafka_partition
    assert partitioner("murmur3") is murmur3_partition
    with pytest.raises(UnknownNameError):
        partitioner("murmur4")

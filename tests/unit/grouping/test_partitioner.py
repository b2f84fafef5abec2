"""The fixed partitioners (Kafka's murmur2, DLB's modulo) as groupings."""

from __future__ import annotations

import pytest

from skewlab.errors import ConfigError, StateError
from skewlab.grouping import KeyConfig
from skewlab.grouping.partitioner import PartitionerConfig
from skewlab.hashing import kafka_partition
from skewlab.keys import KeyBatch, KeyVocab

pytestmark = pytest.mark.unit


def test_batch_and_single_routes_agree_as_the_vocabulary_grows() -> None:
    vocab = KeyVocab()
    router = PartitionerConfig(8, "kafka").build()
    first = KeyBatch.from_keys([f"k{i}" for i in range(5)], vocab=vocab)
    assert router.route_batch(first).tolist() == [kafka_partition(f"k{i}", 8) for i in range(5)]
    grown = KeyBatch.from_keys([f"k{i}" for i in range(12)], vocab=vocab)
    assert router.route_batch(grown).tolist() == [router.route(f"k{i}") for i in range(12)]


def test_modulo_deals_zipf_ranks_round_robin() -> None:
    router = PartitionerConfig(5, "modulo").build()
    batch = KeyBatch.from_keys([f"k{r}" for r in range(10)])
    assert router.route_batch(batch).tolist() == [0, 1, 2, 3, 4] * 2


def test_murmur3_is_key_grouping() -> None:
    keys = [f"k{i}" for i in range(50)]
    ours = PartitionerConfig(7, "murmur3").build().route_batch(KeyBatch.from_keys(keys))
    key = KeyConfig(7).build().route_batch(KeyBatch.from_keys(keys))
    assert ours.tolist() == key.tolist()


def test_bad_name_and_foreign_snapshot_are_refused() -> None:
    with pytest.raises(ConfigError, match="partitioner must be one of"):
        PartitionerConfig(4, "crc32")
    with pytest.raises(StateError):
        PartitionerConfig(4).build(state=KeyConfig(4).build().snapshot())

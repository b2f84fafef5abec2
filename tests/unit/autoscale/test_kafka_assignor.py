"""Kafka's range and round-robin assignors over a fixed group (the seed's baseline)."""

from __future__ import annotations

from collections import Counter

import pytest

from skewlab.autoscale import KafkaAssignor, make_algorithm

pytestmark = pytest.mark.unit


def test_range_gives_the_first_consumers_one_more_partition():
    a = make_algorithm("kafka:20").assign([1.0] * 32, None, 1.0)
    sizes = Counter(Counter(a.owner).values())
    assert sizes == {2: 12, 1: 8}  # the seed's example: 12 consumers x 2, 8 x 1
    assert list(a.owner) == sorted(a.owner)  # contiguous ranges
    assert a.consumers == 20


def test_round_robin_and_idle_members():
    a = make_algorithm("kafka-rr:3").assign([5.0] * 7, None, 1.0)
    assert a.owner == (0, 1, 2, 0, 1, 2, 0)
    idle = make_algorithm("kafka:5").assign([1.0, 1.0], None, 1.0)
    assert idle.owner == (0, 1)
    assert idle.consumers == 5  # idle consumers still cost


def test_ignores_speeds_and_previous_so_it_never_moves():
    algo = make_algorithm("kafka:4")
    first = algo.assign([90.0, 1.0, 80.0, 5.0, 70.0], None, 100.0)
    again = algo.assign([1.0, 99.0, 3.0, 50.0, 0.0], first, 100.0)
    assert first == again
    assert algo.name == "kafka:4"


def test_group_size_is_validated():
    from skewlab.errors import ConfigError

    with pytest.raises(ConfigError, match="group size"):
        make_algorithm("kafka")
    with pytest.raises(ConfigError, match="int"):
        make_algorithm("kafka:x")
    with pytest.raises(ConfigError, match=">= 1"):
        KafkaAssignor(consumers=0)
    with pytest.raises(ConfigError, match="takes no parameter"):
        make_algorithm("mwf:3")

"""SMALOPS' two readings of the share threshold, and the partitioner off the map."""

from __future__ import annotations

import pytest

from skewlab.errors import ConfigError
from skewlab.hashing import kafka_partition
from skewlab.rebalance import make_rebalancer
from skewlab.rebalance.base import LoadSnapshot

pytestmark = pytest.mark.unit

LOADS = {"k0": 50, "k1": 30, "k2": 15, "k3": 5}


def _heavy(threshold: float, reading: str) -> set[str]:
    rb = make_rebalancer("smalops", 4, threshold=threshold, gate=False).build(reading=reading)
    snap = LoadSnapshot.of(LOADS, dict.fromkeys(LOADS, 0), workers=4, interval_s=1.0)
    rb.decide(1.0, snap)
    return set(rb.assignment)


@pytest.mark.parametrize(
    ("threshold", "share", "cumulative"),
    [
        (0.1, {"k0", "k1", "k2"}, {"k0"}),
        (0.6, set(), {"k0", "k1"}),
        (0.9, set(), {"k0", "k1", "k2"}),
    ],
)
def test_share_and_cumulative_readings(
    threshold: float, share: set[str], cumulative: set[str]
) -> None:
    """Per key: each key's own share reaches t; cumulative: the hottest keys that carry t."""
    assert _heavy(threshold, "share") == share
    assert _heavy(threshold, "cumulative") == cumulative


def test_a_lower_cumulative_threshold_maps_no_more_keys() -> None:
    sizes = [len(_heavy(t, "cumulative")) for t in (0.05, 0.3, 0.6, 0.85, 1.0)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]


def test_dropped_keys_return_to_the_named_partitioner() -> None:
    rb = make_rebalancer("smalops", 8, threshold=0.4, gate=False).build(partitioner="kafka")
    rb.decide(1.0, LoadSnapshot.of(LOADS, dict.fromkeys(LOADS, 0), workers=8))
    assert "k0" in rb.assignment
    cooled = {"k0": 1, "k1": 60, "k2": 39}
    placement = {k: rb.assignment.get(k, kafka_partition(k, 8)) for k in cooled}
    d = rb.decide(2.0, LoadSnapshot.of(cooled, placement, workers=8))
    drops = [m for m in d.moves if m.key == "k0"]
    assert [m.dst for m in drops] == [kafka_partition("k0", 8)]


def test_unknown_reading_is_refused() -> None:
    with pytest.raises(ConfigError, match="reading must be one of"):
        make_rebalancer("smalops", 4).build(reading="per-window")

import pytest

from skewlab.pipeline.exactness import check

pytestmark = pytest.mark.unit


def test_identical_counts_are_exact():
    counts = {(0.0, "a"): (3, 30), (15.0, "b"): (1, 5)}
    report = check(counts, dict(counts))
    assert report.exact
    assert report.expected_events == report.actual_events == 4
    assert report.summary().startswith("EXACT")


def test_lost_doubled_and_sum_mismatch_are_told_apart():
    expected = {(0.0, "a"): (3, 30), (0.0, "b"): (2, 4), (0.0, "c"): (1, 1), (0.0, "d"): (2, 2)}
    actual = {(0.0, "a"): (2, 20), (0.0, "b"): (4, 8), (0.0, "c"): (1, 9), (0.0, "e"): (1, 1)}
    report = check(expected, actual)
    assert not report.exact
    assert report.lost == 1 + 2  # a lost one, d lost both
    assert report.doubled == 2 + 1  # b twice over, e never produced
    assert report.sum_mismatches == 1
    assert "NOT EXACT" in report.summary()
    assert len(report.examples) == 5

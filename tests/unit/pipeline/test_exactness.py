import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(deadline=None)  # the first example imports the live report modules (~0.5 s)
@given(
    st.floats(min_value=1.7e9, max_value=1.8e9, allow_nan=False),
    st.sampled_from([0.5, 1.0, 5.0, 15.0]),
)
def test_plain_count_windows_agree_with_route_and_workers(ts: float, window_s: float) -> None:
    """The checker, the route job's key_loads and the workers put an event in one window
    (a checker rounding ts to ms first moved events within 0.5 ms of a boundary)."""
    from skewlab.live.report.aggregate import _window_ms
    from skewlab.pipeline.route import key_loads
    from skewlab.pipeline.worker import window_start

    route = key_loads(window_s, np.asarray([ts]), ["k"], np.asarray([0]), np.asarray([1]))
    assert _window_ms(ts, window_s) == round(route[0]["window_start"] * 1000)
    assert _window_ms(ts, window_s) == round(window_start(ts, window_s) * 1000)


def test_event_just_before_a_boundary_stays_in_its_window() -> None:
    from skewlab.live.report.aggregate import _window_ms

    assert _window_ms(1795314181.9996, 1.0) == 1795314181000


def test_a_report_saved_as_a_dict_reads_back_equal() -> None:
    import dataclasses
    import json

    from skewlab.pipeline.exactness import ExactnessReport

    report = ExactnessReport(10, 9, 1, 0, 0, ("lost: w0 k", "x"), foreign_events=3)
    saved = json.loads(json.dumps(dataclasses.asdict(report)))  # as the run handle keeps it
    back = ExactnessReport.from_dict(saved)
    assert back == report and not back.exact

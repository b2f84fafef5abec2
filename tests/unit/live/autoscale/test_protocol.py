"""Pure parts of the live autoscaler: settings, messages, speed plans, evidence checks."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.live.autoscale.monitor import SpeedWindow
from skewlab.live.autoscale.protocol import (
    LiveSettings,
    Measurement,
    Message,
    Processed,
    Topics,
    downtimes,
    evidence_counts,
    inbox,
    overlaps,
    ownerships,
    percentiles,
    speed_plan,
)
from skewlab.live.autoscale.settings import AutoscaleSettings
from skewlab.pipeline.exactness import ExactnessReport, check

pytestmark = pytest.mark.unit


def _live(**over: object) -> LiveSettings:
    base: dict[str, object] = dict(
        run_id="r", bootstrap="h:1", run_dir=".", delta_root=".", partitions=4,
        capacity=120.0,
    )  # fmt: skip
    base.update(over)
    return LiveSettings(**base)  # type: ignore[arg-type]


def test_settings_defaults_and_validation() -> None:
    s = _live()
    assert s.max_consumers == 5
    assert s.group == "autoscale-r"
    assert s.topics == Topics.of("r")
    assert LiveSettings(**{**s.__dict__}) == s
    with pytest.raises(ConfigError, match="algorithm"):
        _live(algorithm="nope")
    with pytest.raises(ConfigError, match="iteration_s"):
        _live(iteration_s=0)
    with pytest.raises(ConfigError, match="min_span_s"):
        _live(window_s=2.0, min_span_s=3.0)


def test_inbox_zero_is_the_controller() -> None:
    assert [inbox(c) for c in range(3)] == [1, 2, 3]


def test_messages_measurements_and_evidence_round_trip() -> None:
    m = Message("report", 3, partitions=(1, 4), t=2.5)
    assert Message.decode(m.encode()) == m
    with pytest.raises(ConfigError, match="op"):
        Message("dance", 1)
    meas = Measurement(2, 10.0, 3.5, (1.0, 2.0))
    assert Measurement.decode(meas.encode()) == meas
    e = Processed("batch", 1, 2, 10, 20, 1.0, 1.5, (3, 4))
    assert Processed.decode(e.encode()) == e


def test_step_plan_rises_and_falls() -> None:
    plan = speed_plan("step:lo=0.1,hi=0.5,up=1,down=3", 2, 4, 100.0)
    assert plan.shape == (4, 2)
    assert plan[:, 0].tolist() == [10.0, 50.0, 50.0, 10.0]


def test_stream_plan_is_the_seeded_measurement_stream() -> None:
    a = speed_plan("stream:delta=5,seed=2", 8, 5, 100.0)
    assert a.shape == (5, 8) and np.array_equal(a, speed_plan("stream:delta=5,seed=2", 8, 5, 100))
    assert (a >= 0).all() and (a <= 100).all()
    assert np.allclose(speed_plan("const:level=0.25", 3, 2, 40.0), 10.0)


@pytest.mark.parametrize("spec", ["zipf:s=1", "step:lo=x", "step:wide=1", "stream:delta"])
def test_bad_workloads_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        speed_plan(spec, 2, 2, 1.0)


def test_autoscale_settings_check_everything_up_front() -> None:
    s = AutoscaleSettings(duration_s=60, iteration_s=30)
    assert s.iterations == 2 and s.c == pytest.approx(100_000.0)
    with pytest.raises(ConfigError):
        AutoscaleSettings(duration_s=10, iteration_s=30)
    with pytest.raises(ConfigError):
        AutoscaleSettings(workload="nope")
    assert AutoscaleSettings(algorithm="kafka:40", partitions=8).live("r", "h:1", ".", ".")


def test_speed_window_slides_and_waits_for_a_span() -> None:
    w = SpeedWindow(window_s=10.0, min_span_s=3.0)
    w.add(0.0, np.array([0.0, 0.0]), np.zeros(2))
    w.add(2.0, np.array([200.0, 0.0]), np.ones(2))
    assert not w.ready()
    with pytest.raises(ValueError):
        w.speeds()
    w.add(4.0, np.array([400.0, 40.0]), np.ones(2))
    assert w.ready() and w.speeds().tolist() == [100.0, 10.0]
    for t in range(5, 30):
        w.add(float(t), np.array([400.0 + 50 * (t - 4), 40.0]), np.ones(2))
    assert w.span <= 11.0
    assert w.speeds().tolist() == [50.0, 0.0]
    with pytest.raises(ValueError):
        w.add(1.0, np.zeros(2), np.zeros(2))


def _batch(c: int, p: int, s: int, e: int, t0: float, t1: float) -> Processed:
    return Processed("batch", c, p, s, e, t0, t1, tuple(range(e - s)))


def _verdict(ev: list[Processed], ends: dict[int, int]) -> ExactnessReport:
    return check(*evidence_counts(ev, ends))


def test_exactness_counts_missing_doubled_and_past_the_end() -> None:
    ev = [_batch(0, 0, 0, 5, 0, 1), _batch(1, 0, 5, 10, 2, 3), _batch(0, 1, 0, 3, 0, 1)]
    r = _verdict(ev, {0: 10, 1: 3})
    assert r.exact and (r.expected_events, r.actual_events) == (13, 13)
    # p0: offsets 10, 11 never processed, 4 and 5 twice; p1: offsets 3, 4 past the end
    r = _verdict([*ev, _batch(1, 0, 4, 6, 4, 5), _batch(1, 1, 3, 5, 4, 5)], {0: 12, 1: 3})
    assert (r.lost, r.doubled, r.sum_mismatches, r.exact) == (2, 4, 0, False)
    assert (r.expected_events, r.actual_events) == (15, 17)


def test_exactness_slots_are_offset_ranges_covered_alike() -> None:
    expected, actual = evidence_counts([_batch(0, 0, 0, 4, 0, 1), _batch(1, 0, 2, 6, 1, 2)], {0: 6})
    # one expected slot per stretch of equal cover: [0, 2) once, [2, 4) twice, [4, 6) once
    assert expected == {(0.0, "partition 0"): (2, 1), (2.0, "partition 0"): (2, 5),
                        (4.0, "partition 0"): (2, 9)}  # fmt: skip
    assert actual[(2.0, "partition 0")] == (4, 10)
    assert evidence_counts([], {0: 0, 1: 2}) == ({(0.0, "partition 1"): (2, 1)}, {})


def test_ownership_intervals_and_overlaps() -> None:
    ev = [
        Processed("start", 0, 0, 0, 0, 0.0, 0.0),
        _batch(0, 0, 0, 5, 0.5, 1.0),
        Processed("stop", 0, 0, 5, 5, 1.2, 1.2),
        Processed("start", 1, 0, 5, 5, 1.5, 1.5),
        _batch(1, 0, 5, 9, 2.0, 2.5),  # consumer 1 killed: no stop
    ]
    owned = ownerships(ev)
    assert [(o.consumer, o.t0, o.t1) for o in owned] == [(0, 0.0, 1.2), (1, 1.5, 2.5)]
    assert overlaps(owned) == []
    late = [*ev, Processed("start", 2, 0, 9, 9, 2.2, 2.2)]
    assert len(overlaps(ownerships(late))) == 1
    d = downtimes([{"partition": 0, "to": 1, "stop_sent": 1.0}], ev)
    assert d == [{"partition": 0, "start_s": 0.5, "first_record_s": 1.0}]


def test_percentiles() -> None:
    p = percentiles(list(range(101)))
    assert (p["p50_ms"], p["p90_ms"], p["max_ms"]) == (50.0, 90.0, 100.0)
    assert np.isnan(percentiles([])["p99_ms"])

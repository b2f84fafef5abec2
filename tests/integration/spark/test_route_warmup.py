"""The route job's warm-up batch runs the route code and leaves nothing behind.

It goes through decode, a splitter per source partition and the sink's record and
table builders (a dry sink), on a real Spark session: afterwards its scratch folder
is gone and the run's own Delta root holds no table, so no warm-up event is counted.
"""

from __future__ import annotations

import pytest

from skewlab.spark.route import RouteSettings
from skewlab.spark.warmup import run_warmup, synthetic_values

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("strategy", "message_sets"), [("dkg", False), ("key", True)])
def test_warmup_batch_runs_the_route_code_and_counts_nothing(
    spark, tmp_path, strategy, message_sets
):
    run_dir = tmp_path / "run"
    s = RouteSettings(
        run_id="warm",
        bootstrap="127.0.0.1:9",  # never contacted: a dry sink produces nothing
        events_topic="events-warm",
        routed_topic="routed-warm",
        workers=4,
        strategy=strategy,
        delta_root=str(tmp_path / "delta"),
        run_dir=str(run_dir),
        message_sets=message_sets,
        warmup_events=400,
    )
    folder = s.files.route_warmup
    assert run_warmup(spark, s, folder, t0=1_795_000_000.0) > 0
    assert not folder.exists()
    assert not (tmp_path / "delta").exists()


def test_synthetic_values_end_with_one_invalid_record():
    values = synthetic_values(5, 10.0)
    assert len(values) == 5 and values[-1] == b"not json"

"""A live run of more events than a non-looping trace holds is refused when its settings
are built (issue 18 item 3), not at the end of produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.runsettings import ExperimentSettings
from skewlab.spec import n_events
from skewlab.workload.trace import check_events
from skewlab.workload.trace_check import TraceError
from skewlab.workload.zipf import ZipfWorkload


def _trace(tmp_path: Path, rows: int) -> str:
    path = tmp_path / "t.csv"
    path.write_text("".join(f"k{i % 3},{i}\n" for i in range(rows)))
    return str(path)


def test_settings_refuse_more_events_than_the_trace_holds(tmp_path):
    path = _trace(tmp_path, 5)
    home = tmp_path / "home"
    with pytest.raises(TraceError, match="5 valid events but 6") as err:
        ExperimentSettings(workload=f"trace:{path}", events=6, home=str(home))
    assert "\n" not in str(err.value)
    assert not home.exists()
    five = ExperimentSettings(workload=f"trace:{path}", events=5, home=str(home))
    assert n_events(five.spec.workload) == 5
    looped = ExperimentSettings(workload=f"trace:path={path},loop=true", events=12, home=str(home))
    assert n_events(looped.spec.workload) == 12


def test_duration_times_rate_counts_too(tmp_path):
    path = _trace(tmp_path, 5)
    with pytest.raises(TraceError, match="5 valid events but 10"):
        ExperimentSettings(workload=f"trace:{path}", rate=2.0, duration_s=5.0, events=None)


def test_generated_workloads_always_pass():
    check_events(ZipfWorkload(s=1.1, v=2.72, seed=0), 10**9)

"""``skewlab run``'s exit status and the end-of-run notes, with the live run replaced by
summaries (the live stack is exercised by the integration tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skewlab import cli
from skewlab.live.summary import RunSummary

pytestmark = pytest.mark.unit


def _summary(strategy: str, *, exact: bool = True, quality: str = "passed") -> RunSummary:
    nan = float("nan")
    return RunSummary(
        run_id=f"run-{strategy}",
        strategy=strategy,
        workers=2,
        events=10,
        quarantined=0,
        produce_rate=1.0,
        throughput=1.0,
        std_dev=0.0,
        dist_cost=1.0,
        imb_score=0.0,
        p50_ms=nan,
        p90_ms=nan,
        p99_ms=nan,
        max_ms=nan,
        exact=exact,
        exactness="EXACT" if exact else "NOT EXACT",
        wall_s=1.0,
        window_s=1.0,
        quality=quality,
        quality_failures=[] if quality != "failed" else ["events: 1 row with a null key"],
    )


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("SKEWLAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return home


def _fake_runs(monkeypatch: pytest.MonkeyPatch, results: dict[str, RunSummary]) -> None:
    import skewlab.live.experiment as live_experiment

    def fake(s: Any, progress: Any = None) -> RunSummary:
        return results[s.strategy]

    monkeypatch.setattr(live_experiment, "run_experiment", fake)


@pytest.mark.parametrize(
    ("key", "dkg", "code"),
    [
        ({}, {}, 0),
        ({}, {"quality": "skipped"}, 0),
        ({}, {"quality": "failed"}, 1),
        ({"exact": False}, {}, 1),
        ({"exact": False}, {"quality": "failed"}, 1),
    ],
)
def test_exit_status_counts_exactness_and_data_quality(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: dict[str, Any],
    dkg: dict[str, Any],
    code: int,
) -> None:
    _fake_runs(monkeypatch, {"key": _summary("key", **key), "dkg": _summary("dkg", **dkg)})
    assert cli.main(["run", "--no-progress", "--compare", "key,dkg"]) == code
    out = capsys.readouterr().out
    if dkg.get("quality") == "failed":
        assert "events: 1 row with a null key" in out  # the failure is shown with the code

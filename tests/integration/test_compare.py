"""``skewlab compare`` against a real MLflow store (SQLite) holding two logged runs.

The runs are logged with :class:`~skewlab.io.tracking.Tracker` the way a live run
logs itself (params, summary metrics, ``load_w<i>`` and ``window_p*_ms`` series),
then compared through the CLI entry point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skewlab import cli

pytestmark = pytest.mark.integration

RUNS: dict[str, dict[str, Any]] = {
    "key": {"std_dev": 31.25, "p99_ms": 120.5, "loads": [[30, 10], [28, 12], [33, 7]]},
    "dkg": {"std_dev": 2.5, "p99_ms": 18.0, "loads": [[21, 19], [20, 20], [19, 21]]},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A data dir whose MLflow store holds one ``key`` and one ``dkg`` run; their ids."""
    from skewlab.io.tracking import Tracker, TrackingSettings

    home = tmp_path_factory.mktemp("compare-home")
    tracker = Tracker(TrackingSettings.for_data_dir(home))
    ids = []
    for strategy, spec in RUNS.items():
        params = {"strategy": strategy, "workers": 2, "window_s": 2.0, "seed": 7}
        rid = tracker.start_run("skewlab-live-zipf", f"{strategy}-run", params, {"mode": "live"})
        tracker.log_metrics(
            rid, {"std_dev": spec["std_dev"], "p99_ms": spec["p99_ms"], "events": 120.0}
        )
        loads = spec["loads"]
        for w in range(2):
            tracker.log_series(rid, f"load_w{w}", [row[w] for row in loads])
        tracker.log_series(rid, "window_p50_ms", [1.0, 1.5, 2.0])
        tracker.log_series(rid, "window_p99_ms", [spec["p99_ms"]] * 3)
        tracker.end_run(rid)
        ids.append(rid)
    return home, ids


def test_prints_runs_side_by_side_and_draws_the_plots(
    store: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, ids = store
    out = tmp_path / "plots"

    code = cli.main(["compare", *ids, "--home", str(home), "--out", str(out)])

    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].split() == ["key-run", "dkg-run"]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[2:] if ln and not ln.startswith(" ")}
    assert rows["run_id"] == ids
    assert rows["status"] == ["FINISHED", "FINISHED"]
    assert rows["params.strategy"] == ["*", "key", "dkg"]  # differs: marked
    assert rows["params.workers"] == ["2", "2"]
    assert rows["metrics.std_dev"] == ["31.25", "2.5"]
    assert rows["metrics.p99_ms"] == ["120.5", "18"]
    assert rows["metrics.events"] == ["120", "120"]
    assert not any(k.startswith(("metrics.load_w", "metrics.window_")) for k in rows)
    assert "* differs between the runs" in stdout
    for name in ("loads.png", "latency.png"):
        png = out / name
        assert f"  plot: {png}" in lines
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_series_read_back_for_the_plots(store: tuple[Path, list[str]]) -> None:
    from skewlab.commands.compare import _series
    from skewlab.io.tracking import Tracker, TrackingSettings

    home, ids = store
    tracker = Tracker(TrackingSettings.for_data_dir(home))
    series = _series(tracker, tracker.get_run_summary(ids[0]))
    assert series is not None
    assert series.loads.tolist() == [[30.0, 10.0], [28.0, 12.0], [33.0, 7.0]]
    assert series.window_s == 2.0
    assert series.p99 == [(0, 120.5), (1, 120.5), (2, 120.5)]
    assert series.label == "key-run: STD_DEV 31.25%"


def test_unknown_run_id_is_one_line_and_exit_2(
    store: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    home, ids = store
    code = cli.main(["compare", ids[0], "0" * 32, "--home", str(home)])
    stdout, stderr = capsys.readouterr()
    assert code == 2
    assert stdout == ""
    assert stderr.strip().splitlines() == [
        f"skewlab compare: error: unknown MLflow run id '{'0' * 32}' in "
        f"sqlite:///{home.resolve() / 'mlflow.db'}"
    ]


def test_home_without_a_store_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["compare", "abc", "--home", str(tmp_path / "empty")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("skewlab compare: error: no MLflow store at ")
    assert not (tmp_path / "empty").exists(), "compare must not create a store"


def test_no_run_id_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare"]) == 2
    assert capsys.readouterr().err.strip() == (
        "skewlab compare: error: give at least one RUN_ID (the MLflow run ids to compare)"
    )

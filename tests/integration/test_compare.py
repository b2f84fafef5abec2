"""``skewlab compare`` against a real MLflow store (SQLite) holding two logged runs.

The runs are logged with :class:`~skewlab.io.tracking.Tracker` the way a live run
logs itself (params, summary metrics, ``load_w<i>`` and ``window_p*_ms`` series),
and one the way ``skewlab simulate`` does (the loads as one ``window_loads.json``
table), then compared through the CLI entry point.
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
        params = {"strategy": strategy, "workers": 2, "window_s": 2.0, "seed": 7, "rate": 60}
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


def _section(stdout: str, header: str) -> dict[str, list[str]]:
    """The rows of the table whose header starts with ``header``: first cell -> the rest."""
    for block in stdout.split("\n\n"):
        lines = block.splitlines()
        if lines and lines[0].split()[:1] == [header]:
            return {ln.split()[0]: ln.split()[1:] for ln in lines[2:]}
    return {}


def test_prints_only_differing_params_and_marks_metric_differences(
    store: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, ids = store
    out = tmp_path / "plots"

    code = cli.main(["compare", *ids, "--home", str(home), "--out", str(out)])

    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    first = stdout.splitlines()
    assert first[0].split() == ["key-run", "dkg-run"]
    identity = {ln.split()[0]: ln.split()[1:] for ln in first[2:4]}
    assert identity["run_id"] == ids
    assert identity["status"] == ["FINISHED", "FINISHED"]

    params = _section(stdout, "param")
    assert params == {"strategy": ["key", "dkg"]}  # workers, window_s, seed, rate are equal
    assert "4 equal in every run" in stdout

    metrics = _section(stdout, "metric")
    std_dev, p99, events = metrics["std_dev"], metrics["p99_ms"], metrics["events"]
    # a differing metric: marked, both values, and the second run's ratio to the first
    assert std_dev[0] == "*"
    assert [float(v) for v in std_dev[1:]] == pytest.approx([31.25, 2.5, 2.5 / 31.25], rel=1e-3)
    assert float(p99[-1]) == pytest.approx(18.0 / 120.5, rel=5e-3)  # 3 digits
    # an equal metric: unmarked, ratio 1
    assert [float(v) for v in events] == [120.0, 120.0, 1.0]
    assert not any(k.startswith(("load_w", "window_")) for k in metrics)
    for png in (out / "loads.png", out / "latency.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_a_single_run_shows_every_param(
    store: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, ids = store
    assert cli.main(["compare", ids[0], "--home", str(home), "--out", str(tmp_path)]) == 0
    params = _section(capsys.readouterr().out, "param")
    assert set(params) == {"strategy", "workers", "window_s", "seed", "rate"}


def test_loads_read_from_the_simulate_table(tmp_path: Path) -> None:
    """A run that logged its loads as the ``window_loads.json`` table (as ``simulate`` does)."""
    from skewlab.commands.compare import LOADS_TABLE, _series
    from skewlab.io.tracking import Tracker, TrackingSettings

    tracker = Tracker(TrackingSettings.for_data_dir(tmp_path))
    rid = tracker.start_run("skewlab-simulate", "pkg", {"window_s": 5.0}, {"strategy": "pkg"})
    loads = [[6, 4, 10], [5, 5, 10]]
    table = {
        "t_s": [5.0 * t for t in range(2) for _ in range(3)],
        "worker": [w for _ in range(2) for w in range(3)],
        "events": [n for row in loads for n in row],
    }
    tracker.log_table(rid, table, LOADS_TABLE)
    tracker.end_run(rid)
    series = _series(tracker, tracker.get_run_summary(rid))
    assert series is not None
    assert series.loads.tolist() == loads
    assert series.window_s == 5.0


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

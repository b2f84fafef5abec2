"""``skewlab simulate``: the data dir, its MLflow runs, and inputs checked before any work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skewlab import cli
from skewlab.commands._sim_tracking import LOADS_TABLE, PLOT_NAMES
from skewlab.grouping import GROUPING_NAMES
from skewlab.workload.spec import WORKLOAD_NAMES

pytestmark = pytest.mark.unit

SMALL = ["simulate", "--workers", "4", "--workload", "zipf:s=1.2,keys=200", "--events", "6000"]
SETTINGS = {"workers", "workload", "events", "service_us", "rate", "splitters", "seed", "window_s"}


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No run may land in the checkout or a configured server: the cwd is the test's own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKEWLAB_HOME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _client(home: Path) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{home.resolve() / 'mlflow.db'}")


def test_home_holds_the_run_dir_and_one_mlflow_run_per_strategy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "data"
    code = cli.main(
        [*SMALL, "--compare", "key,pkg", "--window", "0.5", "--home", str(home), "--json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    run_dirs = list((home / "runs").glob("sim-*"))
    assert len(run_dirs) == 1 and (run_dirs[0] / "metrics.json").is_file()
    assert not (tmp_path / ".skewlab").exists()

    client = _client(home)
    ids = doc["mlflow"]["run_ids"]
    parent = client.get_run(doc["mlflow"]["parent_run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.params["strategies"] == "key,pkg"
    by_result = {r["strategy"]: r for r in doc["results"]}
    for strategy, rid in ids.items():
        run = client.get_run(rid)
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags["strategy"] == strategy
        assert Path(run.data.tags["run_dir"]) == run_dirs[0]
        # params: the settings (and the strategy), never a path or an id
        assert set(run.data.params) == SETTINGS | {"strategy"}
        assert run.data.metrics["std_dev"] == pytest.approx(by_result[strategy]["std_dev"])
        # per-window series stepped in seconds of event time (0.5 s windows -> 0, 0/1, 1, ...)
        steps = [m.step for m in client.get_metric_history(rid, "window_std_dev")]
        assert steps == sorted(steps) and steps[-1] <= doc["results"][0]["makespan_s"] + 1
        done = client.get_metric_history(rid, "events_done")  # logged while it ran
        assert done and max(m.value for m in done) == 6000
        artifacts = {f.path for f in client.list_artifacts(rid)}
        assert LOADS_TABLE in artifacts
        plots = {f.path for f in client.list_artifacts(rid, "plots")}
        assert plots == {f"plots/{n}" for n in PLOT_NAMES}
        local = client.download_artifacts(rid, LOADS_TABLE, str(tmp_path))
        table = json.loads(Path(local).read_text())
        events = table["columns"].index("events")
        assert sum(row[events] for row in table["data"]) == 6000


def test_skewlab_home_is_the_default_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "env-home"
    monkeypatch.setenv("SKEWLAB_HOME", str(home))
    code = cli.main([*SMALL, "--strategy", "dkg", "--no-plots", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rid = json.loads(out)["mlflow"]["run_ids"]["dkg"]
    assert _client(home).get_run(rid).data.tags["strategy"] == "dkg"
    assert len(list((home / "runs").glob("sim-*"))) == 1
    assert not (tmp_path / ".skewlab").exists()


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("bad_ts.csv", "key,timestamp\na,1\nb,x\n", 3),
        ("backwards.csv", "key,timestamp\na,2\nb,3\nc,1\n", 4),
        ("bad.jsonl", '{"key": "a"}\n{"key": "b"}\nnot json\n', 3),
    ],
)
def test_a_malformed_trace_fails_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, line: int
) -> None:
    trace = tmp_path / name
    trace.write_text(text)
    home = tmp_path / "data"
    code = cli.main(
        ["simulate", "--workload", f"trace:{trace}", "--events", "10", "--home", str(home)]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and f"{trace}:{line}:" in err[0]
    assert not home.exists(), "no run dir, no MLflow store before the inputs are valid"


@pytest.mark.parametrize(
    ("spec", "events", "ok"),
    [("trace:{f}", 5, False), ("trace:{f}", 3, True), ("trace:path={f},loop=true", 5, True)],
)
def test_a_short_trace_is_refused_unless_it_loops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, events: int, ok: bool
) -> None:
    trace = tmp_path / "short.csv"
    trace.write_text("key\na\nb\nc\n")
    home = tmp_path / "data"
    argv = ["simulate", "--workload", spec.format(f=trace), "--events", str(events)]
    code = cli.main([*argv, "--home", str(home), "--no-mlflow", "--no-plots", "--json"])
    captured = capsys.readouterr()
    assert code == (0 if ok else 2), captured.err
    assert home.exists() == ok
    if ok:
        assert json.loads(captured.out)["results"][0]["events"] == events


def test_help_lists_strategies_workloads_and_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # no line breaks inside hyphenated names
    assert cli.main(["simulate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in (*GROUPING_NAMES, *WORKLOAD_NAMES):
        assert name in text
    parser = cli.build_parser()
    defaults = parser.parse_args(["simulate"])
    for flag in ("--strategy", "--workers", "--workload", "--events", "--window", "--home"):
        assert f"{flag} " in text
    assert defaults.home is None  # resolved at run time: --home, $SKEWLAB_HOME, ./.skewlab
    assert text.count("(default:") >= 8

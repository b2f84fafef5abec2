"""``skewlab advise``: flags checked before any work, the report's files, MLflow and the command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skewlab import cli

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No run may land in the checkout or a configured server: the cwd is the test's own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKEWLAB_HOME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("SKEWLAB_KAFKA_BOOTSTRAP", raising=False)


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """2,000 events, one hot key, two bad rows (lines 3 and 6)."""
    rng = np.random.default_rng(1)
    lines = ["key,timestamp"]
    t = 0.0
    for i in range(2_002):
        t += 1 / 2000
        if i == 1:
            lines.append(",1.0")
        elif i == 4:
            lines.append("k,not-a-time")
        else:
            lines.append(f"{'hot' if rng.random() < 0.5 else f'k{rng.integers(500)}'},{t:.6f}")
    path = tmp_path / "events.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _advise(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["advise", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv",
    [
        ["--workers", "4"],  # no input
        ["--trace", "{trace}", "--topic", "t", "--workers", "4"],  # two inputs
        ["--trace", "{trace}"],  # no --workers
        ["--trace", "{trace}", "--workers", "0"],
        ["--trace", "{trace}", "--workers", "4", "--service-us", "-5"],
        ["--trace", "{trace}", "--workers", "4", "--rate", "nan"],
        ["--trace", "{trace}", "--workers", "4", "--format", "xml"],
        ["--trace", "{trace}", "--workers", "4", "--slack", "-1"],
        ["--trace", "{trace}", "--workers", "4", "--records", "0"],
        ["--trace", "missing.csv", "--workers", "4"],
        ["--topic", "events", "--workers", "4"],  # no broker to sample
        ["--topic", "events", "--bootstrap", "nohostport", "--workers", "4"],
        ["--delta", "{trace}", "--workers", "4"],  # a file, not a table dir
        ["--delta", ".", "--format", "csv", "--workers", "4"],
        ["--trace", "{trace}", "--bootstrap", "h:1", "--workers", "4"],
        ["--trace", "{trace}", "--workers", "4", "--verify-rate", "10"],
        ["--trace", "{trace}", "--workers", "4", "--measure-service"],  # without --verify
    ],
)
def test_a_bad_flag_is_one_line_and_exit_2_before_any_work(
    argv: list[str], trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _advise([a.format(trace=trace) for a in argv], capsys)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / ".skewlab").exists()


def test_advice_as_json_counts_bad_rows_and_ranks_every_candidate(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "out"
    argv = ["--trace", str(trace), "--workers", "4", "--no-mlflow", "--no-plots", "--json",
            "--out", str(out_dir), "--no-progress"]  # fmt: skip
    code, out, err = _advise(argv, capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["bad_rows"] == 2
    assert [b.split(": ")[0] for b in doc["bad"]] == [f"{trace}:3", f"{trace}:6"]
    assert doc["profile"]["events"] == 2_000
    ranks = [r["rank"] for r in doc["ranking"]]
    assert ranks == list(range(1, len(ranks) + 1))
    assert doc["recommended"] == doc["ranking"][0]["strategy"]
    assert json.loads((out_dir / "advice.json").read_text())["recommended"] == doc["recommended"]
    assert len(err.strip().splitlines()) == 1  # the bad-row line


def test_the_printed_command_is_one_skewlab_run_accepts(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from skewlab.commands.run import settings_list

    argv = ["--trace", str(trace), "--workers", "4", "--no-mlflow", "--no-plots", "--json",
            "--no-progress"]  # fmt: skip
    code, out, _ = _advise(argv, capsys)
    assert code == 0
    doc = json.loads(out)
    words = shlex.split(doc["run"])
    assert words[:2] == ["skewlab", "run"]
    args = cli.build_parser().parse_args(words[1:])
    (settings,) = settings_list(args)
    best = doc["ranking"][0]
    assert settings.workers == 4
    assert settings.events == doc["profile"]["events"]
    assert best["strategy"].split()[0].split("+")[0] == settings.strategy
    # the live run replays the valid events only: the written trace has no bad row
    path = settings.workload.removeprefix("trace:")
    from skewlab.advise import read_trace

    assert read_trace(path).bad_rows == 0 and len(read_trace(path)) == 2_000


def test_mlflow_run_holds_the_table_and_the_plots(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow import MlflowClient

    home = tmp_path / "data"
    argv = ["--trace", str(trace), "--workers", "4", "--home", str(home), "--no-progress"]
    code, _, _ = _advise(argv, capsys)
    assert code == 0
    client: Any = MlflowClient(tracking_uri=f"sqlite:///{home.resolve() / 'mlflow.db'}")
    exp = client.get_experiment_by_name("skewlab-advise")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    plots = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert {"ranking.csv", "ranking.json", "advice.json"} <= names
    assert {"plots/advise_table.png", "plots/key_distribution.png"} <= plots
    assert run.data.params["workers"] == "4"
    advice = json.loads((next(home.glob("runs/advise-*")) / "advice.json").read_text())
    assert run.data.tags["recommended"] == advice["recommended"]
    assert run.data.metrics["events"] == 2_000

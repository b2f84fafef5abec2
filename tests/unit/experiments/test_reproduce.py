"""``skewlab reproduce``: the two autoscale reproductions end to end at tiny scale, into a
real MLflow store (SQLite under tmp_path), the Markdown report and the CLI's errors."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from skewlab.cli import main
from skewlab.errors import ConfigError
from skewlab.experiments import ExperimentArgs, ExperimentReport, registry
from skewlab.experiments import reproduce as rep
from skewlab.experiments.claims import Claim, at_most

pytestmark = pytest.mark.unit

NAMES = ["autoscale-offline", "autoscale-latency"]
NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)


def test_every_default_scale_is_a_registered_experiment_in_range():
    known = registry()
    assert set(rep.REPRODUCE_SCALES) <= set(known)
    assert all(0 < s <= 1 for s in rep.REPRODUCE_SCALES.values())
    assert rep.resolve_names(None, known) == list(rep.REPRODUCE_SCALES)


def test_unknown_name_fails_before_anything_runs(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown experiment nope.*autoscale-offline"):
        rep.reproduce(["autoscale-latency", "nope"], home=tmp_path, now=NOW)
    assert not (tmp_path / "runs").exists()


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory: pytest.TempPathFactory) -> tuple[rep.ReproduceResult, Any]:
    from skewlab.io.tracking import Tracker, TrackingSettings

    home = tmp_path_factory.mktemp("home")
    tracker = Tracker(TrackingSettings.for_data_dir(home))
    msgs: list[str] = []
    result = rep.reproduce(
        NAMES, home=home, now=NOW, scale=0.02, tracker=tracker, progress=msgs.append
    )
    return result, tracker


def test_report_has_one_row_per_claim(reproduced):
    result, _ = reproduced
    assert result.out.name == "reproduce-20261123T120000Z"
    assert [o.name for o in result.outcomes] == NAMES and not result.failed
    claims = result.claims
    assert len(claims) == 10 + 6
    text = result.report_path.read_text()
    table = [ln for ln in text.splitlines() if ln.startswith("| autoscaling")]
    assert len(table) == len(claims)
    verdicts = [ln.strip("|").split("|")[-1].strip() for ln in table]
    assert verdicts.count("holds") == result.holding
    for o in result.outcomes:
        assert f"## {o.name}" in text and o.report is not None
        for plot in o.report.plots:
            link = plot.relative_to(result.out).as_posix()
            assert f"]({link})" in text and (result.out / link).exists()
    with (result.out / "claims.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["claim"] for r in rows] == [c.row()["claim"] for c in claims]


def test_mlflow_parent_and_children_carry_the_claims(reproduced):
    result, tracker = reproduced
    parent = tracker.client.get_run(result.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["claims"] == len(result.claims)
    assert parent.data.metrics["claims_hold"] == result.holding
    assert {"reproduce.md", "claims.csv"} <= set(tracker.list_artifacts(result.parent_run_id))
    children = tracker.child_runs(result.parent_run_id)
    assert len(children) == len(NAMES)
    for rid, outcome in zip(children, result.outcomes):
        run = tracker.client.get_run(rid)
        assert run.data.tags["experiment"] == outcome.name
        assert run.data.params["scale"] == "0.02"
        assert run.data.metrics["claims"] == len(outcome.claims)
        assert run.data.metrics["claims_hold"] == sum(c.holds for c in outcome.claims)
        artifacts = set(tracker.list_artifacts(rid))
        assert {"claims.csv", "table.txt", "plots"} <= artifacts
        local = tracker.artifact_dir(rid)
        assert local is not None
        with (local / "claims.csv").open() as fh:
            logged = list(csv.DictReader(fh))
        assert [r["ours"] for r in logged] == [c.shown for c in outcome.claims]


def _boom(args: ExperimentArgs) -> ExperimentReport:
    raise RuntimeError("broken experiment")


def _one_claim(args: ExperimentArgs) -> ExperimentReport:
    claim = Claim("test", "x is small", "<= 1", 2.0, at_most(1.0))
    return ExperimentReport(
        title="t",
        table="x = 2",
        claims=[claim],
        setup="x from a constant",
        metrics={"p99_10%": 2.0},
        params={"share (%)": 10},
    )


def test_a_failing_experiment_is_recorded_and_the_others_still_run(tmp_path, monkeypatch):
    monkeypatch.setattr(rep, "registry", lambda: {"boom": _boom, "one": _one_claim})
    result = rep.reproduce(["boom", "one"], home=tmp_path, now=NOW)
    assert result.failed == ["boom"]
    assert [len(o.claims) for o in result.outcomes] == [0, 1] and result.holding == 0
    text = result.report_path.read_text()
    assert "RuntimeError: broken experiment" in text
    assert "does not hold" in text and "x from a constant" in text


def test_failed_and_odd_named_runs_in_mlflow(tmp_path, monkeypatch):
    from skewlab.io.tracking import Tracker, TrackingSettings

    monkeypatch.setattr(rep, "registry", lambda: {"boom": _boom, "one": _one_claim})
    tracker = Tracker(TrackingSettings.for_data_dir(tmp_path))
    result = rep.reproduce(["boom", "one"], home=tmp_path, now=NOW, tracker=tracker)
    assert tracker.client.get_run(result.parent_run_id).info.status == "FAILED"
    boom, one = (tracker.client.get_run(o.run_id) for o in result.outcomes)
    assert boom.info.status == "FAILED" and "broken experiment" in boom.data.tags["error"]
    assert one.info.status == "FINISHED"
    assert one.data.metrics["p99_10pct"] == 2.0 and one.data.params["share _pct_"] == "10"


def test_cli_unknown_name_is_one_line_and_exit_2(capsys, tmp_path):
    code = main(["reproduce", "autoscale-latency", "nope", "--home", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "nope" in err
    assert not (tmp_path / "runs").exists()


def test_cli_list_has_one_line_per_experiment(capsys):
    assert main(["reproduce", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    for name, scale in rep.REPRODUCE_SCALES.items():
        line = next(ln for ln in out if ln.startswith(name + " "))
        assert line.split()[-1] == f"{scale:g}"


def test_cli_runs_and_exits_0_when_claims_do_not_hold(capsys, tmp_path: Path):
    doc = tmp_path / "reproduce-doc.md"
    code = main(
        [
            "reproduce",
            "autoscale-latency",
            "--scale",
            "0.1",
            "--home",
            str(tmp_path),
            "--no-mlflow",
            "--doc",
            str(doc),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert "autoscale-latency" in captured.err  # progress on stderr
    reports = list((tmp_path / "runs").glob("reproduce-*/reproduce.md"))
    assert len(reports) == 1
    assert not (tmp_path / "mlflow.db").exists()
    # the document is the run's claims table: rebuilt from its claims.csv, it is the same
    with (reports[0].parent / "claims.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert doc.read_text() == rep.claims_document(rows, 1, 0.1)
    table = [ln for ln in doc.read_text().splitlines() if ln.startswith("| autoscaling")]
    assert len(table) == len(rows) > 0

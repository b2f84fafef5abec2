"""The ``skewlab`` CLI run in-process: ``simulate`` output and one-line usage errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skewlab import cli
from skewlab.commands import simulate as simulate_cmd
from skewlab.commands._args import count

pytestmark = pytest.mark.unit

SMALL = [
    *("simulate", "--workers", "4", "--workload", "country:R80", "--events", "2e4"),
    "--no-mlflow",
]


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every command's default data dir is the test's own (never the checkout's .skewlab)."""
    home = tmp_path / "home"
    monkeypatch.setenv("SKEWLAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return home


def run_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, *extra: str) -> dict[str, Any]:
    code = cli.main([*SMALL, "--json", "--no-plots", "--out", str(tmp_path), *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    doc: dict[str, Any] = json.loads(captured.out)
    return doc


def test_compare_metrics_are_consistent(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = run_json(capsys, tmp_path, "--compare", "key,shuffle,pkg,dkg", "--service-us", "50")
    by = {r["strategy"]: r for r in doc["results"]}
    assert list(by) == ["key", "shuffle", "pkg", "dkg"]
    for r in by.values():
        assert r["events"] == 20_000
        assert r["throughput"] > 0
        assert r["queue_delay"]["n"] == 20_000
        assert r["queue_delay"]["p50"] <= r["queue_delay"]["p99"] <= r["queue_delay"]["max"]
        # imbScore = 100 std/mean and STD_DEV = 100 std/total, so imbScore = W * STD_DEV
        assert r["imb_score"] == pytest.approx(4 * r["std_dev"])
    assert by["key"]["dist_cost"] == 1.0
    assert by["key"]["merge_cost"] == 1.0
    assert by["shuffle"]["std_dev"] == pytest.approx(0.0, abs=1e-9)
    assert by["shuffle"]["dist_cost"] > by["pkg"]["dist_cost"] > 1.0
    assert by["pkg"]["dist_cost"] <= 2.0
    assert 1.0 <= by["dkg"]["dist_cost"] <= 4.0
    assert by["key"]["std_dev"] > by["pkg"]["std_dev"]
    # default rate: 80 % of the aggregate capacity W / service
    assert doc["settings"]["rate"] == pytest.approx(0.8 * 4 / 50e-6)
    saved = json.loads(Path(doc["files"]["metrics"]).read_text())
    assert [r["std_dev"] for r in saved["results"]] == [r["std_dev"] for r in doc["results"]]
    assert sum(map(sum, saved["results"][0]["window_loads"])) == 20_000


def test_same_stream_for_every_strategy(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    first = run_json(capsys, tmp_path, "--strategy", "key", "--seed", "3")
    again = run_json(capsys, tmp_path, "--compare", "shuffle,key", "--seed", "3")
    a, b = first["results"][0], again["results"][1]
    assert a["std_dev"] == b["std_dev"]
    assert a["queue_delay"] == b["queue_delay"]


def test_table_and_plots(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = cli.main([*SMALL, "--compare", "key,shuffle", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.out.splitlines()
    header = lines[0].split()
    assert header[:4] == ["strategy", "events", "throughput/s", "STD_DEV%"]
    rows = {ln.split()[0]: ln.split() for ln in lines[2:4]}
    assert rows["key"][header.index("DIST_COST")] == "1.000"
    assert rows["shuffle"][header.index("STD_DEV%")] == "0.000"
    for name in ("worker_loads.png", "latency_cdf.png", "metrics.json"):
        path = out / name
        assert f": {path}" in captured.out
        assert path.stat().st_size > 0
    assert (out / "worker_loads.png").read_bytes()[:4] == b"\x89PNG"


def test_default_out_dir_and_progress(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    _data_dir: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(simulate_cmd, "PROGRESS_MIN_EVENTS", 1)
    code = cli.main([*SMALL, "--strategy", "key", "--no-plots"])
    captured = capsys.readouterr()
    assert code == 0
    runs = list((_data_dir / "runs").glob("sim-*"))  # under $SKEWLAB_HOME, not ./.skewlab
    assert len(runs) == 1 and (runs[0] / "metrics.json").exists()
    assert not (tmp_path / ".skewlab").exists()
    progress = captured.err.splitlines()
    assert progress and "\r" not in captured.err  # stderr is not a terminal: whole lines
    assert 1 <= len(progress) <= 4


@pytest.mark.parametrize("events", ["5e6", "5000000", "5_000_000"])
def test_event_counts(events: str) -> None:
    assert count(events) == 5_000_000


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        ([*SMALL, "--strategy", "nosuch"], "valid:"),
        ([*SMALL, "--compare", "key,bogus"], "bogus"),
        ([*SMALL, "--compare", "key,key"], "twice"),
        (["simulate", "--workload", "nosuch:R80", "--events", "10"], "workload"),
        (["simulate", "--workload", "country:R200", "--events", "10"], "R"),
        (["simulate", "--events", "abc"], "--events"),
        (["simulate", "--events", "1.5"], "--events"),
        (["simulate", "--workers", "0"], "--workers"),
        (["simulate", "--service-us", "-3", "--events", "10"], "service"),
        (["simulate", "--rate", "-1"], "--rate"),
        (["simulate", "--bogus"], "--bogus"),
        ([], "required"),
        (["nosuch"], "invalid choice"),
    ],
)
def test_bad_usage_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], expect: str
) -> None:
    code = cli.main([*argv, "--out", str(tmp_path)] if argv[:1] == ["simulate"] else argv)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    assert expect in err


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", "--help"]) == 0
    assert "--compare" in capsys.readouterr().out


def test_every_registered_command_parses_to_its_run_function() -> None:
    parser = cli.build_parser()
    assert {"simulate", "run", "up", "down", "status"} <= set(cli.COMMANDS)
    assert parser.parse_args(["simulate"])._run is simulate_cmd.run
    for name in cli.COMMANDS:
        ns = parser.parse_args([name])
        assert callable(ns._run) and ns.command == name


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--strategy", "dkg", "--service-us", "100"], "runs on top of KEY grouping"),
        (["--service-us", "100", "--load-ramp", "0.5x/3s"], "load ramp must look like 2x/500s"),
        ([], "needs --service-us > 0"),
        (["--service-us", "100", "--scale-out-param", "alarming=90"], "0 <= scale_in <= alarming"),
        (["--service-us", "100", "--rebalance", "smalops"], "pick one"),
        (
            ["--service-us", "100", "--max-instances", "40"],
            "argument --max-instances: must be in 2..16, got 40",
        ),
    ],
)
def test_bad_scale_out_flags_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], flags: list[str], says: str
) -> None:
    code = cli.main(
        ["run", "--no-mlflow", "--strategy", "key", "--scale-out", "checkpoint", *flags]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def _raise_in_simulate(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    def boom(args: Any) -> int:
        raise exc

    monkeypatch.setattr(simulate_cmd, "run", boom)


def _unexpected_error(err: str) -> Path:
    """The one stderr line of an unexpected error -> its details file (must exist)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    _, sep, tail = lines[0].partition(" (details: ")
    assert sep and tail.endswith(")"), err
    path = Path(tail[:-1])
    assert path.is_file()
    return path


@pytest.mark.parametrize(
    "exc",
    [
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
        OSError(28, "No space left on device"),
        RuntimeError("Invalid table version: 99"),
    ],
)
def test_unexpected_error_is_one_line_with_its_traceback_in_the_data_dir(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    _data_dir: Path,
    exc: Exception,
) -> None:
    _data_dir.mkdir(parents=True)
    _raise_in_simulate(monkeypatch, exc)
    assert cli.main(["simulate", "--events", "10"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    path = _unexpected_error(captured.err)
    assert captured.err.startswith(f"skewlab: {type(exc).__name__}: {exc}")
    assert path.parent == (_data_dir / "logs").resolve()
    details = path.read_text()
    assert "Traceback" in details and "in boom" in details  # where it was raised


@pytest.fixture
def _temp_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The system temp dir of this test: a fresh folder (so its error files go there)."""
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    return tmp_path / "tmp"


def test_unexpected_error_without_a_data_dir_goes_to_a_temp_file(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    _data_dir: Path,
    _temp_dir: Path,
) -> None:
    _raise_in_simulate(monkeypatch, ValueError("bad"))
    assert cli.main(["simulate", "--events", "10"]) == 1
    path = _unexpected_error(capsys.readouterr().err)
    assert not _data_dir.exists()  # reporting an error does not create a data dir
    assert path.parent == _temp_dir
    assert "ValueError: bad" in path.read_text()


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_full_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, how: str, _temp_dir: Path
) -> None:
    _raise_in_simulate(monkeypatch, KeyError("missing"))
    argv = ["simulate", "--events", "10"]
    if how == "flag":
        argv = ["--debug", *argv]
    else:
        monkeypatch.setenv("SKEWLAB_DEBUG", "1")
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in boom" in err
    assert err.strip().splitlines()[-1].startswith("skewlab: KeyError: 'missing' (details: ")


def test_keyboard_interrupt_still_exits_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _raise_in_simulate(monkeypatch, KeyboardInterrupt())
    assert cli.main(["simulate", "--events", "10"]) == 130
    assert "interrupted" in capsys.readouterr().err

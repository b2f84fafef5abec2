"""``skewlab run``'s argument checks: a bad grouping parameter, a misspelt name or a country
workload without its skew is one line naming the flag, exit 2, before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skewlab import cli
from skewlab.errors import UnknownNameError
from skewlab.grouping import GROUPINGS
from skewlab.registry import closest, resolve
from skewlab.workload.spec import WORKLOADS

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _nothing_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Any attempt to reach a service or run an experiment is recorded (and fails)."""
    import skewlab.commands.run as run_cmd
    import skewlab.live.driver.run as live_run

    started: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        started.append(args)
        raise AssertionError("a service or run started before the flags were checked")

    monkeypatch.setenv("SKEWLAB_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(run_cmd, "get_service", refuse)
    monkeypatch.setattr(run_cmd, "start_route_host", refuse)
    monkeypatch.setattr(live_run, "run_experiment", refuse)
    return started


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(["run", *argv])
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("--strategy", "dkg", "--strategy-param", "workers=8"), "--workers"),
        (("--strategy", "key", "--strategy-param", "warmup=5"), "warmup"),
        (("--strategy", "dkg", "--strategy-param", "warmup=-1"), "warmup"),
        (("--compare", "key,dkg", "--strategy-param", "warmup=5"), "key"),
        (("--strategy", "pkg", "--strategy-param", "nosuch=1"), "nosuch"),
    ],
)
def test_a_strategy_param_the_grouping_does_not_take_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], named: str
) -> None:
    code, err = _run(capsys, *argv)
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "--strategy-param" in err and named in err
    assert "Traceback" not in err and "TypeError" not in err


def test_every_parameter_of_a_grouping_passes_the_check(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from skewlab.commands.run import check_strategy_params

    check_strategy_params("dkg", {"warmup": 5, "check_interval": 20}, 4)
    check_strategy_params("d-choices", {}, 4)


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (("--strategy", "dgk"), "dkg"),
        (("--workload", "cuntry:R80"), "country"),
        (("--strategy", "key", "--service-us", "100", "--rebalance", "smalop"), "smalops"),
        (
            ("--strategy", "key", "--service-us", "100", "--scale-out", "activ-backup"),
            "active-backup",
        ),
        (("--client", "confluen"), "confluent"),
    ],
)
def test_a_misspelt_name_gets_a_did_you_mean(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], meant: str
) -> None:
    code, err = _run(capsys, *argv)
    assert code == 2 and len(err.splitlines()) == 1
    assert f"did you mean {meant!r}" in err


def test_the_suggestion_is_the_closest_registered_name_or_none() -> None:
    assert closest("dgk", GROUPINGS) == "dkg"
    assert closest("PARTIAL_KYE", GROUPINGS) == "partial-key"
    assert closest("cuntry", WORKLOADS) == "country"
    assert closest("bogus", GROUPINGS) is None
    with pytest.raises(UnknownNameError) as info:
        resolve(GROUPINGS, "bogus", "grouping")
    assert info.value.suggestion is None and "did you mean" not in str(info.value)


@pytest.mark.parametrize("spec", ["country", "country-half", "country-half:size=50", "country:"])
def test_a_country_workload_without_its_skew_is_refused(
    capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    code, err = _run(capsys, "--workload", spec)
    assert code == 2 and len(err.splitlines()) == 1
    assert "--workload" in err and "R80" in err


@pytest.mark.parametrize("spec", ["country:R80", "country-half:r=60", "COUNTRY_SKEW_R50"])
def test_a_country_workload_with_its_skew_passes(spec: str) -> None:
    from skewlab.commands._args import workload

    assert workload(spec) == spec


def test_a_printed_mlflow_url_says_how_to_open_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No UI serves the local store: the line after the URL is the command that starts one;
    one that runs (any port) gives its own address instead; a tracking server needs none."""
    import skewlab.commands.run as run_cmd
    from skewlab.commands.run import mlflow_link
    from skewlab.commands.services import Found

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    url = "http://127.0.0.1:5000/#/experiments/1/runs/abc"
    monkeypatch.setattr(run_cmd, "find_mlflow_ui", lambda store: [])
    shown, hint = mlflow_link(str(tmp_path), url)
    assert shown == url and hint is not None
    assert "mlflow ui --backend-store-uri sqlite:///" in hint and str(tmp_path) in hint
    ui = Found(1, "http://127.0.0.1:5055", ("mlflow", "ui"))
    monkeypatch.setattr(run_cmd, "find_mlflow_ui", lambda store: [ui])
    assert mlflow_link(str(tmp_path), url) == (
        "http://127.0.0.1:5055/#/experiments/1/runs/abc",
        None,
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.internal:5000")
    assert mlflow_link(str(tmp_path), url)[1] is None

"""skewlab.orchestration.params: DAG params -> settings, the form schema, the XCom row."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import jsonschema
import pytest

from skewlab.errors import ConfigError
from skewlab.grouping import GROUPING_NAMES
from skewlab.live.experiment import ExperimentSettings
from skewlab.live.summary import RunSummary
from skewlab.orchestration.params import (
    PARAMS,
    ParamSpec,
    one_line,
    param_schemas,
    progress_logger,
    result_for_xcom,
    settings_from_params,
    settings_from_xcom,
    settings_to_xcom,
    verdict,
)

pytestmark = pytest.mark.unit


def _schema(name: str) -> dict[str, object]:
    kw = dict(param_schemas()[name])
    kw.pop("default")
    kw.pop("description")
    return kw


def test_defaults_match_the_library_defaults() -> None:
    lib = ExperimentSettings()
    for spec in PARAMS:
        assert spec.default == getattr(lib, spec.field), spec.name


def test_strategy_enum_is_every_grouping() -> None:
    assert param_schemas()["strategy"]["enum"] == list(GROUPING_NAMES)


@pytest.mark.parametrize("spec", PARAMS, ids=lambda s: s.name)
def test_default_passes_its_json_schema(spec: ParamSpec) -> None:
    jsonschema.validate(spec.default, _schema(spec.name))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("strategy", "nope"),
        ("workers", 0),
        ("workers", 65),
        ("workers", 2.5),
        ("partitions", 0),
        ("workload", ""),
        ("rate", 0),
        ("duration", -1),
        ("service_us", -1),
        ("window", 0),
        ("seed", -1),
    ],
)
def test_out_of_range_fails_the_form_and_the_helper(name: str, value: object) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, _schema(name))
    with pytest.raises(ConfigError) as err:
        settings_from_params({name: value})
    assert str(err.value).startswith(f"param {name} must be ")
    assert "\n" not in str(err.value)


def test_settings_from_params_maps_names_and_fills_defaults(tmp_path: Path) -> None:
    s = settings_from_params(
        {"strategy": "key", "workers": 2, "duration": 5, "window": 2, "rate": 2000},
        home=str(tmp_path),
    )
    assert (s.strategy, s.workers, s.partitions) == ("key", 2, 4)
    assert (s.duration_s, s.window_s, s.rate) == (5.0, 2.0, 2000.0)
    assert isinstance(s.duration_s, float)
    assert s.home == str(tmp_path.resolve())
    assert s.mlflow is True


def test_home_defaults_to_skewlab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKEWLAB_HOME", str(tmp_path / "h"))
    assert settings_from_params({}).home == str(tmp_path / "h")


def test_overrides_reach_the_settings(tmp_path: Path) -> None:
    s = settings_from_params({}, home=str(tmp_path), mlflow=False, events=10)
    assert s.mlflow is False and s.n_events == 10


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"workers": "2"}, "param workers must be an integer in 1..64, got '2'"),
        ({"workers": True}, "param workers must be an integer in 1..64, got True"),
        ({"rate": float("nan")}, "param rate must be a number > 0, got nan"),
        (
            {"strategy": "hash"},
            "param strategy must be one of " + ", ".join(GROUPING_NAMES) + ", got 'hash'",
        ),
        ({"workload": "zipf:s=abc"}, "zipf: parameter s must be float, got 'abc'"),
        ({"workload": "nope"}, "unknown workload 'nope'; valid: "),
        ({"wrokers": 2}, "unknown param(s) wrokers; valid: duration, partitions, rate, "),
    ],
)
def test_bad_params_give_one_line(params: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_params(params)
    text = str(err.value)
    assert text.startswith(message)
    assert "\n" not in text


def test_settings_round_trip_through_json(tmp_path: Path) -> None:
    s = settings_from_params({"strategy": "pkg", "seed": 3}, home=str(tmp_path))
    data = json.loads(json.dumps(settings_to_xcom(s)))
    assert settings_from_xcom(data) == s


def test_settings_from_xcom_refuses_unknown_fields() -> None:
    with pytest.raises(ConfigError, match="unknown settings field"):
        settings_from_xcom({"workers": 2, "bogus": 1})


def _summary(**kw: object) -> RunSummary:
    base = dict(
        run_id="key-1",
        strategy="key",
        workers=2,
        events=10,
        quarantined=0,
        produce_rate=10.0,
        throughput=9.0,
        std_dev=1.0,
        dist_cost=1.0,
        imb_score=2.0,
        p50_ms=float("nan"),
        p90_ms=1.0,
        p99_ms=float("inf"),
        max_ms=3.0,
        exact=True,
        exactness="EXACT: expected 10 events, merged 10",
        wall_s=1.0,
        window_s=2.0,
        window_loads=[[5, 5]],
        latency_values_ms=[1.0, 2.0],
        plots=["/tmp/a.png"],
        mlflow_run_id="abc",
    )
    base.update(kw)
    return RunSummary(**base)  # type: ignore[arg-type]


def test_result_for_xcom_is_the_scalar_row_as_strict_json() -> None:
    row = result_for_xcom(_summary())
    assert row["mlflow_run_id"] == "abc" and row["exact"] is True
    assert row["p50_ms"] is None and row["p99_ms"] is None and row["p90_ms"] == 1.0
    assert "window_loads" not in row and "latency_values_ms" not in row
    assert row["plots"] == ["/tmp/a.png"]
    json.dumps(row, allow_nan=False)
    assert set(row) == {f.name for f in dataclasses.fields(RunSummary)} - {
        "window_starts_ms",
        "window_loads",
        "window_latency_ms",
        "latency_values_ms",
        "latency_frac",
    }


def test_verdict() -> None:
    assert verdict(result_for_xcom(_summary())) is None
    bad = result_for_xcom(_summary(exact=False, exactness="NOT EXACT: lost 3\n doubled 0"))
    assert verdict(bad) == "run key-1 is not exact: NOT EXACT: lost 3 doubled 0"
    assert verdict({"run_id": "x"}) == "run x is not exact: no verdict"


def test_one_line() -> None:
    assert one_line("a\n  b\tc ") == "a b c"


def test_progress_logger_throttles(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    show = progress_logger(logging.getLogger("t"), every_s=10, clock=lambda: now[0])
    p = {"produced": 1.0, "total": 2.0, "routed": 1.0, "processed": 0.0, "imbalance": 0.0}
    with caplog.at_level(logging.INFO, logger="t"):
        for t in (0.0, 5.0, 10.0, 19.0, 20.5):
            now[0] = t
            show(p)
    assert len(caplog.records) == 3
    assert caplog.records[0].getMessage() == "produced 1/2 routed 1 processed 0 imbScore 0.0%"

"""skewlab.orchestration.params (and .runs): DAG params -> settings, the form, XCom, tags."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import jsonschema
import pytest

from skewlab.autoscale import ALGORITHM_NAMES
from skewlab.errors import ConfigError
from skewlab.grouping import GROUPING_NAMES
from skewlab.live.autoscale.settings import AutoscaleSettings
from skewlab.live.autoscale.summary import AutoscaleSummary
from skewlab.live.report.summary import RunSummary
from skewlab.orchestration.params import (
    PARAMS,
    REBALANCE_KEYS,
    SCALE_OUT_KEYS,
    SCALE_OUT_POLICIES,
    autoscale_timing,
    param_schemas,
    rebalance_keys,
    scale_out_keys,
    settings_from_params,
)
from skewlab.orchestration.paramspec import OFF, ParamSpec, one_line
from skewlab.orchestration.runs import (
    progress_logger,
    quality_skip_reason,
    result_for_xcom,
    run_for_xcom,
    run_tags,
    settings_from_xcom,
    settings_to_xcom,
    verdict,
)
from skewlab.runsettings import ExperimentSettings
from skewlab.spec import n_events

pytestmark = pytest.mark.unit


def _schema(name: str) -> dict[str, object]:
    kw = dict(param_schemas()[name])
    kw.pop("default")
    kw.pop("description")
    return kw


AUTOSCALE_DEFAULTS_DIFFER = {"autoscale_iteration"}
"""The CLI's 30 s iteration would not fit the form's default 20 s duration."""


def test_defaults_match_the_library_defaults(tmp_path: Path) -> None:
    grouping, autoscale = ExperimentSettings(), AutoscaleSettings()
    for spec in PARAMS:
        if spec.scope == "autoscale":
            if spec.name not in AUTOSCALE_DEFAULTS_DIFFER:
                assert spec.default == getattr(autoscale, spec.field), spec.name
        elif spec.name not in ("autoscale", "workload") and spec.field:
            lib = getattr(grouping, spec.field)
            assert spec.default == (OFF if lib is None and spec.enum else lib), spec.name
    # the workload and the load ramp are composed of several fields: the untouched form
    # gives the library's settings
    home = str(tmp_path)
    assert settings_from_params({}, home=home) == ExperimentSettings(home=str(tmp_path.resolve()))


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
        ("rebalance", "nope"),
        ("rebalance", "kg"),
        ("rebalance_interval", 0),
        ("rebalance_params", "theta=15"),
        ("rebalance_params", [1]),
        ("scale_out", "checkpointing"),
        ("scale_out", None),
        ("max_instances", 1),
        ("max_instances", 17),
        ("scale_out_interval", 0),
        ("scale_out_params", 40),
        ("workload", "country:R80"),
        ("workload", "cuntry"),
        ("skew", 101),
        ("skew", -1),
        ("zipf_s", 0),
        ("keys", 0),
        ("load_ramp_factor", 0.5),
        ("load_ramp_every", 0),
        ("autoscale", "nope"),
        ("autoscale", "kafka"),
        ("autoscale", "kafka:0"),
        ("autoscale", "kafka:65"),
        ("autoscale", "MWF"),
        ("autoscale", None),
        ("autoscale_workload", ""),
        ("autoscale_capacity", 0),
        ("autoscale_iteration", -1),
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
    assert s.mlflow is False and n_events(s.spec.workload) == 10


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"workers": "2"}, "param workers must be an integer in 1..64, got '2'"),
        ({"workers": True}, "param workers must be an integer in 1..64, got True"),
        ({"rate": float("nan")}, "param rate must be a number >= 1, got nan"),
        (
            {"strategy": "hash"},
            "param strategy must be one of " + ", ".join(GROUPING_NAMES) + ", got 'hash'",
        ),
        ({"workload": "zipf", "zipf_s": "abc"}, "param zipf_s must be a number in 0.05..5"),
        ({"workload": "nope"}, "param workload must be one of zipf, country, "),
        ({"wrokers": 2}, "unknown param(s) wrokers; valid: autoscale, autoscale_capacity, "),
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
    assert set(row) == {f.name for f in dataclasses.fields(RunSummary)} - set(RunSummary.SERIES)
    assert {"window_loads", "latency_values_ms", "instances_t", "processed_rate"} <= set(
        RunSummary.SERIES
    )


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


# --------------------------------------------------------------------------- policies


KEY = {"strategy": "key"}
SCALE = {"strategy": "key", "service_us": 200.0}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {**KEY, "rebalance": "smalops", "rebalance_interval": 2,
             "rebalance_params": {"threshold": 0.05, "gate": False}},
            {"rebalance": "smalops", "rebalance_interval_s": 2.0,
             "rebalance_params": {"threshold": 0.05, "gate": False}},
        ),
        (
            {**KEY, "rebalance": "smalops", "rebalance_params": {"threshold": 5, "seed": 3}},
            {"rebalance_params": {"threshold": 5, "seed": 3}},
        ),
        ({**KEY, "rebalance": "dlb-h", "rebalance_params": {"theta": 20}},
         {"rebalance": "dlb-h", "rebalance_params": {"theta": 20}}),
        ({**KEY, "rebalance": "dlb-l"}, {"rebalance": "dlb-l", "rebalance_params": {}}),
        ({**KEY, "rebalance": "lptf", "rebalance_params": {"theta": 0, "tuple_bytes": 64}},
         {"rebalance": "lptf"}),
        ({"rebalance": OFF}, {"rebalance": None, "scale_out": None}),
        (
            {**SCALE, "scale_out": "checkpoint", "max_instances": 4, "scale_out_interval": 0.5,
             "scale_out_params": {"alarming": 40, "scale_out": 70, "scale_in": 20,
                                  "cooldown_s": 5, "interval_s": 2, "change_fraction": 0.5}},
            {"scale_out": "checkpoint", "max_instances": 4, "scale_out_interval_s": 0.5,
             "scale_out_params": {"alarming": 40, "scale_out": 70, "scale_in": 20,
                                  "cooldown_s": 5, "interval_s": 2, "change_fraction": 0.5}},
        ),
        ({**SCALE, "scale_out": "active-backup", "max_instances": 16,
          "scale_out_params": {"hysteresis": 2, "dwell": 1, "factor": 2}},
         {"scale_out": "active-backup", "max_instances": 16}),
        ({**SCALE, "scale_out": "restart", "scale_out_params": {"interval_s": 0.5}},
         {"scale_out": "restart"}),
        ({**SCALE, "scale_out": "checkpoint", "load_ramp_factor": 2, "load_ramp_every": 10},
         {"load_ramp": "2x/10s", "n_events": 5000 * (10 + 10 * 2)}),
        ({"load_ramp_factor": 1.5, "load_ramp_every": 30},
         {"load_ramp": "1.5x/30s", "scale_out": None}),
        ({"load_ramp_factor": 1}, {"load_ramp": None}),
        ({"workload": "zipf", "zipf_s": 1.5, "keys": 50}, {"workload": "zipf:s=1.5,keys=50"}),
        ({"workload": "country-half", "skew": 60}, {"workload": "country-half:R60"}),
        ({"workload": "eps-switch", "keys": 100}, {"workload": "eps-switch:keys=100"}),
    ],
)  # fmt: skip
def test_policy_params_reach_the_settings(
    tmp_path: Path, params: dict[str, object], expected: dict[str, object]
) -> None:
    s = settings_from_params(params, home=str(tmp_path))
    assert isinstance(s, ExperimentSettings)
    derived = {"n_events": n_events(s.spec.workload)}  # skewlab.spec's, not a field
    assert {k: derived[k] if k in derived else getattr(s, k) for k in expected} == expected
    assert isinstance(s.rebalance_interval_s, float)


def test_smalops_count_threshold_stays_an_int(tmp_path: Path) -> None:
    s = settings_from_params(
        {**KEY, "rebalance": "smalops", "rebalance_params": {"threshold": 5}}, home=str(tmp_path)
    )
    assert isinstance(s, ExperimentSettings) and type(s.rebalance_params["threshold"]) is int


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("rebalance_params", {"nope": 1}, "param rebalance_params has no key nope; valid: "),
        ("rebalance_params", {"theta": -1},
         "param rebalance_params.theta must be a number >= 0, got -1"),
        ("rebalance_params", {"gate": "no"},
         "param rebalance_params.gate must be true or false, got 'no'"),
        ("rebalance_params", {"seed": 1.5},
         "param rebalance_params.seed must be an integer >= 0, got 1.5"),
        ("rebalance_params", {"threshold": 0},
         "param rebalance_params.threshold must be a number > 0, got 0"),
        ("scale_out_params", {"alarming": 101},
         "param scale_out_params.alarming must be a number in 0..100, got 101"),
        ("scale_out_params", {"scale_out": "70"},
         "param scale_out_params.scale_out must be a number in 0..100, got '70'"),
        ("scale_out_params", {"dwell": 0},
         "param scale_out_params.dwell must be an integer >= 1, got 0"),
        ("scale_out_params", {"cooldown_s": -1},
         "param scale_out_params.cooldown_s must be a number >= 0, got -1"),
        ("scale_out_params", {"change_fraction": 1.5},
         "param scale_out_params.change_fraction must be a number in (0, 1], got 1.5"),
        ("scale_out_params", {"threshold": 1}, "param scale_out_params has no key threshold"),
    ],
)  # fmt: skip
def test_bad_object_keys_fail_the_form_and_the_helper(
    name: str, value: object, message: str
) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(value, _schema(name))
    with pytest.raises(ConfigError) as err:
        settings_from_params({name: value})
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


BAD_COMBINATIONS = [
    (
        {**KEY, "rebalance": "smalops", "scale_out": "checkpoint", "service_us": 10},
        "rebalance=smalops and scale_out=checkpoint both move keys (both write the assignments); "
        "set one of them to none",
    ),
    (
        {"rebalance": "dlb-h"},
        "rebalance=dlb-h runs on top of KEY grouping: set strategy to key, got dkg",
    ),
    (
        {"strategy": "pkg", "scale_out": "restart", "service_us": 10},
        "scale_out=restart runs on top of KEY grouping: set strategy to key, got pkg",
    ),
    (
        {**KEY, "scale_out": "checkpoint"},
        "scale_out=checkpoint needs service_us > 0 (the per-event cost is what overloads a "
        "worker), got 0",
    ),
    (
        {**KEY, "rebalance": "dlb-h", "rebalance_params": {"threshold": 0.1}},
        "param rebalance_params: dlb-h takes theta, tuple_bytes; got threshold",
    ),
    (
        {**KEY, "rebalance": "smalops", "rebalance_params": {"threshold": 1.5}},
        "param rebalance_params: lossy-counting: threshold as a share of the window must be in "
        "(0, 1], got 1.5",
    ),
    (
        {**SCALE, "scale_out": "active-backup", "scale_out_params": {"interval_s": 3}},
        "param scale_out_params: active-backup takes scale_in, alarming, scale_out, hysteresis, "
        "dwell, factor, cooldown_s; got interval_s",
    ),
    (
        {**SCALE, "scale_out": "restart", "scale_out_params": {"change_fraction": 0.5}},
        "param scale_out_params: restart takes scale_in, alarming, scale_out, hysteresis, dwell, "
        "factor, cooldown_s, interval_s; got change_fraction",
    ),
    (
        {**SCALE, "scale_out": "checkpoint", "scale_out_params": {"alarming": 80}},
        "param scale_out_params: thresholds must satisfy 0 <= scale_in <= alarming < scale_out "
        "<= 100, got 25.0 / 80 / 70.0",
    ),
    (
        {"workload": "zipf", "skew": 50},
        "param skew is read by workload country, country-half only, not zipf",
    ),
    ({"workload": "trace"}, "param trace_file: workload trace needs the trace file's path"),
    (
        {"load_ramp_every": 100},
        "param load_ramp_every is read only when load_ramp_factor is above 1",
    ),
    (
        {"rebalance_params": {"theta": 15}},
        "param rebalance_params applies only when rebalance is set (to smalops, dlb-h, dlb-l, "
        "lptf); set rebalance or leave it at its default (rebalance_params={})",
    ),
    (
        {**KEY, "rebalance_interval": 2, "rebalance_params": {"theta": 15}},
        "params rebalance_interval, rebalance_params apply only when rebalance is set (to "
        "smalops, dlb-h, dlb-l, lptf); set rebalance or leave them at their defaults "
        "(rebalance_interval=10.0, rebalance_params={})",
    ),
    (
        {"max_instances": 4, "scale_out_interval": 2, "scale_out_params": {"alarming": 30}},
        "params max_instances, scale_out_interval, scale_out_params apply only when scale_out is "
        "set (to checkpoint, active-backup, restart); set scale_out or leave them at their "
        "defaults (max_instances=2, scale_out_interval=1.0, scale_out_params={})",
    ),
    (
        {"autoscale_capacity": 6000},
        "param autoscale_capacity applies only when autoscale is set (to an algorithm such as "
        "mwf); set autoscale or leave it at its default (autoscale_capacity=120000.0)",
    ),
    (
        {"autoscale": "mwf", "strategy": "key"},
        "param strategy applies to the grouping experiment only, not to autoscale=mwf (its "
        "params: partitions, duration, autoscale, autoscale_workload, autoscale_capacity, "
        'autoscale_iteration); leave it at its default (strategy="dkg") or set autoscale to none',
    ),
    (
        {
            "autoscale": "bfd",
            "workers": 8,
            "rebalance": "smalops",
            "scale_out_params": {"dwell": 3},
        },
        "params workers, rebalance, scale_out_params apply to the grouping experiment only, not "
        "to autoscale=bfd",
    ),
    (
        {"autoscale": "mwf", "autoscale_iteration": 30},
        "param duration (20 s) must be >= autoscale_iteration (30 s): the autoscaler decides "
        "once per iteration",
    ),
    (
        {"autoscale": "mwf", "autoscale_workload": "zipf:s=1.1"},
        "param autoscale_workload must be stream:delta=D[,start=..,seed=..], step:",
    ),
    (
        {"autoscale": "mwf", "autoscale_workload": "step:lo=0.1,hi=0.45,top=3"},
        "param autoscale_workload: step workload takes ['down', 'hi', 'lo', 'up'], got ['top']",
    ),
]


@pytest.mark.parametrize(("params", "message"), BAD_COMBINATIONS)
def test_conflicting_params_give_one_line(params: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_params(params)
    text = str(err.value)
    assert text.startswith(message)
    assert "\n" not in text


def test_form_defaults_with_changed_switch_only_are_fine(tmp_path: Path) -> None:
    """The form sends every param: the defaults of the other experiment must not conflict."""
    every_default = {p.name: p.default for p in PARAMS}
    s = settings_from_params({**every_default, "autoscale": "mwf"}, home=str(tmp_path))
    assert isinstance(s, AutoscaleSettings)
    s2 = settings_from_params({**every_default, **KEY, "rebalance": "lptf"}, home=str(tmp_path))
    assert isinstance(s2, ExperimentSettings) and s2.rebalance == "lptf"


def test_policy_keys_of_the_form_are_the_library_fields() -> None:
    from skewlab.rebalance import REBALANCER_NAMES

    by_policy = {p: set(rebalance_keys(p)) for p in REBALANCER_NAMES if p != OFF}
    assert set().union(*by_policy.values()) == {k.name for k in REBALANCE_KEYS}
    assert by_policy["dlb-h"] == by_policy["lptf"] == {"theta", "tuple_bytes"}
    by_policy = {p: set(scale_out_keys(p)) for p in SCALE_OUT_POLICIES}
    assert set().union(*by_policy.values()) == {k.name for k in SCALE_OUT_KEYS}
    assert {"alarming", "scale_out", "scale_in", "cooldown_s"} <= by_policy["active-backup"]


def test_policy_names_match_the_live_runtimes() -> None:
    from skewlab import runsettings as state_manager
    from skewlab.control import rebalance as rebalancer  # the names rebalance_loop checks

    assert param_schemas()["rebalance"]["enum"] == [OFF, *rebalancer.POLICIES]
    assert SCALE_OUT_POLICIES == state_manager.POLICIES
    assert param_schemas()["scale_out"]["enum"] == [OFF, *state_manager.POLICIES]


def test_object_params_refuse_unknown_keys_in_the_form() -> None:
    schema = _schema("scale_out_params")
    assert schema["additionalProperties"] is False
    jsonschema.validate({"alarming": 40, "scale_out": 70, "scale_in": 20, "cooldown_s": 5}, schema)
    jsonschema.validate(
        {"threshold": 0.05, "gate": False, "theta": 15}, _schema("rebalance_params")
    )


# --------------------------------------------------------------------------- autoscale


@pytest.mark.parametrize(
    "algorithm",
    [*ALGORITHM_NAMES, "kafka:1", "kafka:15", "kafka-rr:64"],
)
def test_every_autoscale_algorithm_passes_the_form_and_the_helper(
    algorithm: str, tmp_path: Path
) -> None:
    jsonschema.validate(algorithm, _schema("autoscale"))
    s = settings_from_params({"autoscale": algorithm}, home=str(tmp_path))
    assert isinstance(s, AutoscaleSettings) and s.algorithm == algorithm


def test_autoscale_params_map_like_the_cli(tmp_path: Path) -> None:
    from skewlab.cli import build_parser
    from skewlab.commands.autoscale import settings_list

    argv = ["autoscale", "--algorithm", "kafka:4", "--partitions", "6", "--capacity", "6000",
            "--workload", "step:lo=0.1,hi=0.45,up=2,down=3", "--duration", "8",
            "--iteration", "2", "--home", str(tmp_path)]  # fmt: skip
    (cli,) = settings_list(build_parser().parse_args(argv))
    s = settings_from_params(
        {"autoscale": "kafka:4", "partitions": 6, "autoscale_capacity": 6000,
         "autoscale_workload": "step:lo=0.1,hi=0.45,up=2,down=3", "duration": 8,
         "autoscale_iteration": 2},
        home=str(tmp_path),
    )  # fmt: skip
    assert s == cli
    assert (s.window_s, s.iterations) == (4.0, 4)


def test_autoscale_defaults(tmp_path: Path) -> None:
    s = settings_from_params({"autoscale": "mwf"}, home=str(tmp_path), mlflow=False)
    assert isinstance(s, AutoscaleSettings)
    assert (s.partitions, s.duration_s, s.iteration_s, s.capacity) == (4, 20.0, 5.0, 120_000.0)
    assert (s.workload, s.mlflow, s.home) == ("stream:delta=5", False, str(tmp_path.resolve()))
    assert autoscale_timing(5.0) == {
        "window_s": 10.0, "min_span_s": 2.5, "sample_s": 0.625, "publish_s": 5.0 / 3,
    }  # fmt: skip


def test_overrides_must_exist_in_the_selected_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="AutoscaleSettings has no field events"):
        settings_from_params({"autoscale": "mwf"}, home=str(tmp_path), events=10)


# --------------------------------------------------------------------------- XCom, tags


def test_policy_settings_round_trip_through_json(tmp_path: Path) -> None:
    for params in (
        {**KEY, "rebalance": "smalops", "rebalance_params": {"threshold": 5, "gate": False}},
        {**SCALE, "scale_out": "checkpoint", "scale_out_params": {"alarming": 40}},
        {"autoscale": "kafka-rr:3", "autoscale_workload": "const:level=0.4"},
    ):
        s = settings_from_params(params, home=str(tmp_path))
        data = json.loads(json.dumps(settings_to_xcom(s)))
        assert data["mode"] == ("autoscale" if "autoscale" in params else "grouping")
        assert settings_from_xcom(data) == s


def test_settings_from_xcom_without_mode_is_grouping_and_refuses_unknown_modes() -> None:
    s = settings_from_xcom(dataclasses.asdict(ExperimentSettings(workers=2)))
    assert isinstance(s, ExperimentSettings) and s.workers == 2
    with pytest.raises(ConfigError, match="unknown settings mode 'sim'"):
        settings_from_xcom({"mode": "sim"})


def test_run_tags_name_the_strategy_and_every_policy(tmp_path: Path) -> None:
    def tags(params: dict[str, object]) -> dict[str, str]:
        return run_tags(settings_to_xcom(settings_from_params(params, home=str(tmp_path))))

    assert tags({}) == {"strategy": "dkg", "rebalance": OFF, "scale_out": OFF, "autoscale": OFF}
    assert tags({**KEY, "rebalance": "dlb-l"})["rebalance"] == "dlb-l"
    assert tags({**SCALE, "scale_out": "restart"}) == {
        "strategy": "key", "rebalance": OFF, "scale_out": "restart", "autoscale": OFF,
    }  # fmt: skip
    assert tags({"autoscale": "mbfp"}) == {"autoscale": "mbfp"}


def test_quality_is_skipped_for_autoscale_runs_only(tmp_path: Path) -> None:
    grouping = settings_to_xcom(settings_from_params({}, home=str(tmp_path)))
    auto = settings_to_xcom(settings_from_params({"autoscale": "mwf"}, home=str(tmp_path)))
    assert quality_skip_reason(grouping) is None
    reason = quality_skip_reason(auto)
    assert reason is not None and reason.startswith("skipped: ") and "\n" not in reason


def _autoscale_summary(**kw: object) -> AutoscaleSummary:
    base = dict(
        run_id="mwf-1", algorithm="mwf", workload="stream:delta=5", records=10, exact=True,
        exactness="exact: 10 records", overlaps=0,
        latency={"p50_ms": 1.0, "p90_ms": float("nan"), "p99_ms": 3.0, "max_ms": 4.0},
        decisions=[{"consumers": 2, "rscore": 0.5, "moved": [1]}], samples=[], downtime=[],
        iteration_s=2.0, wall_s=9.0, run_dir="/tmp/r", plots=["/tmp/r/autoscale.png"],
        mlflow_run_id="xyz",
    )  # fmt: skip
    base.update(kw)
    return AutoscaleSummary(**base)  # type: ignore[arg-type]


def test_result_for_xcom_of_an_autoscale_run() -> None:
    row = result_for_xcom(_autoscale_summary())
    json.dumps(row, allow_nan=False)
    assert row["mode"] == "autoscale" and row["algorithm"] == "mwf"
    assert (row["exact"], row["mlflow_run_id"], row["p90_ms"]) == (True, "xyz", None)
    assert row["plots"] == ["/tmp/r/autoscale.png"] and row["downtime_ratio"] is None
    assert verdict(row) is None
    assert verdict({**row, "exact": False}) == "run mwf-1 is not exact: exact: 10 records"


def test_result_for_xcom_is_strict_json_inside_dicts() -> None:
    row = result_for_xcom(_summary(scale_log=[{"group": 0, "pause_s": float("nan")}]))
    assert row["scale_log"] == [{"group": 0, "pause_s": None}]
    json.dumps(row, allow_nan=False)


def test_verdict_fails_an_exact_run_whose_key_state_is_not() -> None:
    row = result_for_xcom(_summary(rebalance="smalops", state_exact=False, order_violations=2))
    assert (
        verdict(row) == "run key-1 is exact but its key state is not (2 per-key order violations)"
    )


def test_run_for_xcom_runs_the_selected_experiment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skewlab.live.autoscale import run as autoscale_run
    from skewlab.live.driver import run as live_run

    calls: list[object] = []

    def fake_run(s: object, progress: object = None) -> RunSummary:
        calls.append(s)
        return _summary()

    def fake_autoscale(s: object) -> AutoscaleSummary:
        calls.append(s)
        return _autoscale_summary()

    monkeypatch.setattr(live_run, "run_experiment", fake_run)
    monkeypatch.setattr(autoscale_run, "run_autoscale", fake_autoscale)
    grouping = settings_from_params({}, home=str(tmp_path))
    auto = settings_from_params({"autoscale": "mwf"}, home=str(tmp_path))
    assert run_for_xcom(grouping)["strategy"] == "key"
    assert run_for_xcom(auto)["mode"] == "autoscale"
    assert calls == [grouping, auto]


# --------------------------------------------------------------------------- ParamSpec


def test_param_spec_schema_and_checks() -> None:
    trace = next(p for p in PARAMS if p.name == "trace_file")
    assert trace.schema()["type"] == ["string", "null"]
    assert trace.check(None) is None and trace.check("/t.csv") == "/t.csv"
    spec = ParamSpec("n", "n", 1.0, "number", "N", "a number", minimum=0, nullable=True)
    assert spec.allowed() == "a number >= 0 or null"
    assert spec.check(2) == 2.0 and spec.check(2, coerce=False) == 2
    assert spec.differs(2.0) and not spec.differs(1)
    flag = ParamSpec("b", "b", True, "boolean", "B", "a flag")
    assert flag.schema() == {"type": "boolean", "title": "B"}
    with pytest.raises(ConfigError, match="param b must be true or false, got 1"):
        flag.check(1)
    sections = {p.schema().get("section") for p in PARAMS}
    assert None not in sections and len(sections) == 4


FORM_VALUES: list[object] = [
    None, True, -5, -1, 0, 1, 2, 16, 17, 64, 65, -0.5, 0.0, 0.5, 5000.0, float("inf"), "",
    "x", "key", "none", "zipf:s=1.1", "country:R80", "bogus", "2x/500s", "stream:delta=5",
    "kafka:4", {}, {"theta": 15},
]  # fmt: skip


@pytest.mark.parametrize("spec", PARAMS, ids=lambda s: s.name)
def test_the_form_schema_refuses_what_the_second_check_refuses(spec: ParamSpec) -> None:
    """Airflow validates the form schema when the run is created; it must agree with the
    plain-Python check on every scalar value (objects: their keys are checked the same)."""
    schema = spec.form_schema()
    for value in FORM_VALUES:
        try:
            spec.check(value)
            ok = True
        except ConfigError:
            ok = False
        if value == float("inf") or (isinstance(value, float) and spec.kind == "integer"):
            continue  # not JSON / JSON schema's 0.0 is an integer: the form sends neither
        try:
            jsonschema.validate(value, schema)
            json_ok = True
        except jsonschema.ValidationError:
            json_ok = False
        assert json_ok == ok, (spec.name, value)


def test_form_fields_cannot_hold_a_bad_value_and_say_what_is_allowed() -> None:
    """A choice is a drop-down (every value labelled); a number has inclusive bounds, which
    Airflow's number input brings a typed value back into; no field takes free text that
    a pattern would refuse in raw regex; every field says under it what is allowed."""
    for name, kwargs in param_schemas().items():
        assert kwargs["description"].endswith(".") and " Allowed: " in kwargs["description"]
        assert "exclusiveMinimum" not in kwargs and "not" not in kwargs, name
        if "enum" in kwargs:
            assert set(kwargs.get("values_display", {})) >= {str(v) for v in kwargs["enum"]}
        if kwargs["type"] in ("integer", "number"):
            assert "minimum" in kwargs, name
    free_text = {n for n, kw in param_schemas().items() if "pattern" in kw}
    assert free_text <= {"autoscale", "autoscale_workload"}  # short patterns, named by Airflow
    schemas = param_schemas()
    for name, bad in (("workers", 0), ("rate", -5), ("service_us", -0.5), ("seed", -1),
                      ("workload", "cuntry:R80"), ("skew", 120)):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schemas[name])

"""``skewlab_control``'s params, schedule, data interval and step registry (pure, no Delta)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path

import jsonschema
import pytest

from skewlab.control import STEPS, StepResult, StepStatus, resolve_step
from skewlab.control.rebalance import next_assignment_rows
from skewlab.errors import ConfigError, UnknownNameError
from skewlab.orchestration.control.forms import FORMS
from skewlab.orchestration.control.params import (
    DEFAULT_SCHEDULE,
    SCHEDULE_ENV,
    VARIABLE,
    ControlSettings,
    control_schedule,
    interval_ms,
    param_schemas,
    param_specs,
    settings_from_params,
    uses_variable,
)
from skewlab.rebalance.base import hash_worker

pytestmark = pytest.mark.unit

GOOD = {"run_id": "key-20260301T120000-abc123", "delta_root": "/data/delta", "rebalance": "dlb-h"}


def test_params_are_common_plus_each_step_form_and_defaults_pass_the_form() -> None:
    schemas = param_schemas()
    assert list(schemas) == [
        "run_id", "delta_root",
        "rebalance", "workers", "rebalance_lead", "rebalance_params",
        "autoscale", "autoscale_capacity", "autoscale_params",
        "scale_out", "scale_out_params",
    ]  # fmt: skip
    assert list(STEPS) == ["rebalance", "autoscale", "scale-out"]
    assert schemas["scale_out"]["enum"] == ["none", "checkpoint", "active-backup", "restart"]
    assert schemas["rebalance"]["enum"] == ["none", "smalops", "dlb-h", "dlb-l", "lptf"]
    assert schemas["autoscale"]["enum"][:3] == ["none", "nf", "nfd"]
    form = {
        name: {k: v for k, v in kw.items() if k not in ("default", "description", "section")}
        for name, kw in schemas.items()
    }
    for name, kw in schemas.items():
        jsonschema.validate(kw["default"], form[name])  # the form accepts every default
        assert name in {p.name for p in param_specs()}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate("has space", form["run_id"])


def test_settings_from_good_params() -> None:
    s = settings_from_params(
        {**GOOD, "workers": 8, "rebalance_params": {"theta": 20}, "autoscale": "mwf",
         "autoscale_capacity": 5000, "autoscale_params": {"topic": "routed-x"}}
    )  # fmt: skip
    assert (s.run_id, s.delta_root) == (GOOD["run_id"], "/data/delta")
    reb, auto = s.step("rebalance"), s.step("autoscale")
    assert reb is not None and auto is not None
    assert (reb.policy, dict(reb.params)) == ("dlb-h", {"workers": 8, "lead_s": 1.0, "theta": 20})
    assert (auto.policy, dict(auto.params)) == ("mwf", {"capacity": 5000.0, "topic": "routed-x"})
    assert ControlSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s


def test_scale_out_params_take_the_shared_workers() -> None:
    s = settings_from_params(
        {**GOOD, "rebalance": "none", "workers": 6, "scale_out": "checkpoint",
         "scale_out_params": {"service_us": 500, "alarming": 40, "dwell": 1, "interval_s": 60}}
    )  # fmt: skip
    plan = s.step("scale-out")
    assert plan is not None and [p.name for p in s.steps] == ["scale-out"]
    assert (plan.policy, dict(plan.params)) == (
        "checkpoint",
        {"workers": 6, "service_us": 500, "alarming": 40, "dwell": 1, "interval_s": 60},
    )


def test_a_step_set_to_none_is_not_planned() -> None:
    s = settings_from_params({**GOOD, "rebalance": "none", "autoscale": "bfd"})
    assert s.step("rebalance") is None and [p.name for p in s.steps] == ["autoscale"]


def test_empty_delta_root_takes_the_data_dirs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("SKEWLAB_DELTA_ROOT", raising=False)
    monkeypatch.setenv("SKEWLAB_HOME", str(tmp_path))
    s = settings_from_params({**GOOD, "delta_root": ""})
    assert s.delta_root == str(tmp_path.resolve() / "delta")
    monkeypatch.setenv("SKEWLAB_DELTA_ROOT", "s3://bucket/delta")
    assert settings_from_params({**GOOD, "delta_root": ""}).delta_root == "s3://bucket/delta"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rebalance": "best"}, "param rebalance must be one of none, smalops, dlb-h, dlb-l, lptf"),
        ({"autoscale": "kafka:4"}, "param autoscale must be one of none, nf, nfd"),
        ({"workers": 0}, "param workers must be an integer in 1..1024, got 0"),
        ({"rebalance_lead": -1}, "param rebalance_lead must be a number >= 0"),
        ({"rebalance_params": {"alpha": 1}}, "rebalance_params has no key alpha; valid: threshold"),
        ({"rebalance_params": {"threshold": 0.1}},
         "rebalance: rebalancer 'dlb-h' has no parameter threshold; valid: workers, theta"),
        ({"rebalance_params": {"theta": -5}}, "param rebalance_params.theta must be a number >= 0"),
        ({"autoscale": "mwf", "autoscale_params": {"bin_capacity": 10**9}},
         "autoscale: bin capacity C must be in (0, C_bar=120000.0]"),
        ({"autoscale": "mwf", "autoscale_capacity": 0},
         "param autoscale_capacity must be a number > 0"),
        ({"run_id": ""}, "param run_id is empty: trigger with the run id of a live run"),
        ({"run_id": "a b"}, "param run_id must be a run id without spaces"),
        ({"rebalance": "none"}, "nothing to control: every step is none; set rebalance (one of"),
        ({"rebalanse": "dlb-h"}, "unknown param(s) rebalanse; valid: autoscale"),
        ({"scale_out": "checkpointing"},
         "param scale_out must be one of none, checkpoint, active-backup, restart"),
        ({"scale_out": "restart"}, "scale-out: scale-out needs service_us (microseconds"),
        ({"scale_out": "checkpoint", "scale_out_params": {"service_us": 1, "workers": 4}},
         "scale_out_params has no key workers; valid: service_us"),
        ({"scale_out": "checkpoint", "scale_out_params": {"service_us": 1, "alarming": 75}},
         "scale-out: scale-out params: thresholds must satisfy 0 <= scale_in <= alarming"),
    ],
)  # fmt: skip
def test_bad_params_fail_with_one_line_naming_what_is_allowed(
    change: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_params({**GOOD, **change})
    text = str(err.value)
    assert message in text and "\n" not in text


def test_the_variable_configures_scheduled_runs() -> None:
    defaults = {name: kw["default"] for name, kw in param_schemas().items()}
    conf = json.dumps({"run_id": "r9", "delta_root": "/d", "autoscale": "mwf"})
    s = settings_from_params(defaults, variable=conf)
    assert s.run_id == "r9" and [p.name for p in s.steps] == ["autoscale"]
    with pytest.raises(ConfigError, match=f"Variable {VARIABLE} is not JSON"):
        settings_from_params(defaults, variable="{run_id: r9")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        settings_from_params(defaults, variable="[1, 2]")
    with pytest.raises(ConfigError, match=f"set the Airflow Variable {VARIABLE}"):
        settings_from_params(defaults, variable=None)


def test_only_scheduled_runs_read_the_variable() -> None:
    class RunType(StrEnum):
        SCHEDULED = "scheduled"
        MANUAL = "manual"

    assert uses_variable(RunType.SCHEDULED) and uses_variable("scheduled")
    assert not uses_variable(RunType.MANUAL) and not uses_variable("backfill")


def test_schedule_from_the_environment() -> None:
    assert control_schedule({}) == DEFAULT_SCHEDULE == "* * * * *"
    assert control_schedule({SCHEDULE_ENV: "*/5 * * * *"}) == "*/5 * * * *"
    assert control_schedule({SCHEDULE_ENV: "@hourly"}) == "@hourly"
    assert control_schedule({SCHEDULE_ENV: "off"}) is None
    with pytest.raises(ConfigError, match=f"{SCHEDULE_ENV} must be a cron expression"):
        control_schedule({SCHEDULE_ENV: "every minute"})


def test_interval_in_epoch_ms() -> None:
    start = datetime(2026, 3, 1, 12, 4, tzinfo=UTC)
    assert interval_ms(start, start + timedelta(minutes=1)) == (
        1_772_366_640_000,
        1_772_366_700_000,
    )
    with pytest.raises(ConfigError, match="no data interval"):
        interval_ms(None, start)
    with pytest.raises(ConfigError, match="is empty; the control DAG needs a schedule"):
        interval_ms(start, start)


def test_registry_lookup_and_shape() -> None:
    assert resolve_step("Rebalance") is STEPS["rebalance"]
    with pytest.raises(UnknownNameError, match="valid: autoscale, rebalance"):
        resolve_step("scale-up")
    for name, step in STEPS.items():
        switch = FORMS[name].form()[0]
        assert step.name == name and switch.name == step.switch
        assert switch.enum == ("none", *step.policies)


def test_step_result_is_strict_json() -> None:
    r = StepResult("rebalance", "lptf", "r", 0, 60_000, 60_000, StepStatus.DECIDED, "repacked",
                   ("decisions",), {"imbalance_before": float("nan"), "keys_moved": 2})  # fmt: skip
    d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert d["status"] == "decided" and d["imbalance_before"] is None and d["keys_moved"] == 2
    assert "decided (repacked); wrote decisions; imbalance_before=nan keys_moved=2" in r.describe()


def test_next_assignment_rows() -> None:
    w = 4
    a, b = "alpha", "beta"
    ha, hb = hash_worker(a, w), hash_worker(b, w)
    other = (ha + 1) % w
    assert next_assignment_rows({}, {}, w) == []
    assert next_assignment_rows({}, {a: ha}, w) == []  # pinned at home: nothing changes
    rows = next_assignment_rows({b: ((hb + 1) % w, 1)}, {a: other}, w)
    assert rows == [
        {"key": a, "worker": other, "set_id": 1, "reason": "moved"},
        {"key": b, "worker": hb, "set_id": 2, "reason": "home"},
    ]
    rows = next_assignment_rows({a: (other, 1), b: (hb, 2)}, {a: (other + 1) % w}, w)
    assert [(r["key"], r["set_id"], r["reason"]) for r in rows] == [(a, 2, "moved"), (b, 2, "kept")]

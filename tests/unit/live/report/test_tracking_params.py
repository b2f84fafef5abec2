"""What a live run's MLflow run looks like to someone comparing runs: the experiment opens
in MLflow's classic view, run names differ, no param holds "None", and one workload is one
param value however it was typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.io.tracking import EXPERIMENT_KIND_TAG, Tracker, TrackingSettings
from skewlab.live.driver.experiment import new_run_id
from skewlab.live.report.tracking import open_live_run, run_name, run_params
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings

pytestmark = pytest.mark.unit


def _settings(home: Path, **kw: object) -> ExperimentSettings:
    return ExperimentSettings(home=str(home), experiment="params-test", **kw)  # type: ignore[arg-type]


def test_no_param_is_unset_and_switched_off_controls_are_left_out(tmp_path: Path) -> None:
    params = run_params(_settings(tmp_path, strategy_params={"warmup": 2}))
    assert all(v is not None and str(v) != "None" for v in params.values()), params
    assert not any(k.startswith(("rebalance", "scale_out", "max_instances")) for k in params)
    assert params["strategy_params.warmup"] == 2
    on = run_params(_settings(tmp_path, strategy="key", rebalance="smalops"))
    assert on["rebalance"] == "smalops" and "rebalance_interval_s" in on


def test_one_workload_is_one_param_value_however_it_was_written(tmp_path: Path) -> None:
    short = run_params(_settings(tmp_path, workload="zipf"))["workload"]
    long = run_params(_settings(tmp_path, workload="zipf:s=1.1,v=2.72"))["workload"]
    alias = run_params(_settings(tmp_path, workload="COUNTRY_SKEW_R80"))["workload"]
    assert short == long
    assert alias == run_params(_settings(tmp_path, workload="country:R80"))["workload"]


def test_run_names_of_runs_started_together_differ_early(tmp_path: Path) -> None:
    ids = [new_run_id("dkg") for _ in range(5)]
    names = [run_name(i) for i in ids]
    assert len(set(names)) == len(names)
    assert all(len(n) <= 12 for n in names), names  # short enough not to be cut
    assert run_name(ids[0], "key+smalops").startswith("key+smalops-")
    assert run_name("not-a-skewlab-id") == "not-a-skewlab-id"


def test_the_experiment_opens_in_the_classic_view_and_runs_are_named(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ts = TrackingSettings.for_data_dir(home)
    old = Tracker(ts)
    legacy = old.client.create_experiment("params-test")  # made before the kind was set
    a = open_live_run(_settings(home), RunDir.create(home, new_run_id("dkg")), ts)
    b = open_live_run(_settings(home), RunDir.create(home, new_run_id("dkg")), ts)
    exp = old.client.get_experiment(legacy)
    assert exp.tags[EXPERIMENT_KIND_TAG] == "custom_model_development"
    fresh = Tracker(ts).experiment_id("another")
    assert old.client.get_experiment(fresh).tags[EXPERIMENT_KIND_TAG] == "custom_model_development"
    names = {old.client.get_run(r.mlflow_run_id).info.run_name for r in (a, b)}
    assert len(names) == 2

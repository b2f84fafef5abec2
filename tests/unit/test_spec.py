"""The run's settings are declared once (skewlab.spec) and every shape derives from it."""

from __future__ import annotations

import argparse
import ast
import dataclasses
from pathlib import Path

import pytest

from skewlab import cli
from skewlab.clock import ManualClock
from skewlab.commands import run as run_cmd
from skewlab.commands._args import flag_dest
from skewlab.control.rebalance_loop import RebalanceSettings
from skewlab.errors import ConfigError
from skewlab.grouping import GROUPING_NAMES, make_grouping
from skewlab.orchestration.params import PARAMS, settings_from_params
from skewlab.orchestration.paramspec import OFF
from skewlab.runsettings import ExperimentSettings, StateManagerSettings
from skewlab.services.datadir import resolve_home
from skewlab.spec import (
    DEFAULTS,
    DKG_TIMINGS,
    SETTINGS,
    NoControl,
    RebalanceControl,
    ScaleOutControl,
    grouping_params,
    scaled_grouping_params,
    time_scale,
)
from skewlab.workload import WORKLOAD_NAMES, parse_workload

pytestmark = pytest.mark.unit


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    run_cmd.configure(parser)
    return parser.parse_args(list(argv))


def test_every_shape_takes_its_defaults_from_the_one_table() -> None:
    lib = ExperimentSettings()
    (cli_settings,) = run_cmd.settings_list(_parse())
    assert cli_settings == dataclasses.replace(lib, home=str(resolve_home(None)))
    for s in SETTINGS:
        assert getattr(lib, s.name) == s.default, s.name
    assert {f.name for f in dataclasses.fields(ExperimentSettings)} == {s.name for s in SETTINGS}
    params = {p.field: p for p in PARAMS if p.scope != "autoscale"}
    for s in SETTINGS:
        if s.param is not None and s.name != "workload":  # the workload: several fields
            form = params[s.name].default
            assert form == (OFF if s.default is None and s.choices else s.default), s.name
    untouched = settings_from_params({}, home=str(resolve_home(None)))
    assert untouched == dataclasses.replace(lib, home=str(resolve_home(None)))
    loop = RebalanceSettings("r", "/d", "smalops", 4)
    assert (loop.interval_s, loop.lead_s) == (
        DEFAULTS["rebalance_interval_s"],
        DEFAULTS["rebalance_lead_s"],
    )
    sm = StateManagerSettings("r", "/d", "checkpoint", 4, 100.0)
    assert (sm.interval_s, sm.lead_s, sm.max_instances) == (
        DEFAULTS["scale_out_interval_s"],
        DEFAULTS["scale_out_lead_s"],
        DEFAULTS["max_instances"],
    )


def test_the_spec_tree_has_one_control_part() -> None:
    assert isinstance(ExperimentSettings().spec.control, NoControl)
    reb = ExperimentSettings(strategy="key", rebalance="dlb-h", rebalance_params={"theta": 20})
    c = reb.spec.control
    assert isinstance(c, RebalanceControl) and c.policy == "dlb-h" and c.params == {"theta": 20}
    so = ExperimentSettings(strategy="key", scale_out="restart", service_us=100.0)
    assert isinstance(so.spec.control, ScaleOutControl)
    spec = ExperimentSettings(strategy="pkg", workers=6, rate=10.0).spec
    assert (spec.grouping.strategy, spec.grouping.workers, spec.workload.rate) == ("pkg", 6, 10.0)


def test_strategy_params_reach_the_settings_and_bad_names_list_the_valid_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    (s,) = run_cmd.settings_list(_parse("--strategy", "dkg", "--strategy-param", "warmup=5"))
    assert s.strategy_params == {"warmup": 5}
    code = cli.main(["run", "--no-mlflow", "--strategy-param", "bogus=1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "bogus" in err and "check_interval" in err and "warmup" in err


def test_the_dag_form_takes_strategy_params_checked_against_the_grouping(
    tmp_path: Path,
) -> None:
    s = settings_from_params({"strategy_params": {"warmup": 3.0}}, home=str(tmp_path))
    assert isinstance(s, ExperimentSettings) and s.strategy_params == {"warmup": 3.0}
    with pytest.raises(ConfigError) as exc:
        settings_from_params(
            {"strategy": "pkg", "strategy_params": {"warmup": 3.0}}, home=str(tmp_path)
        )
    assert "\n" not in str(exc.value) and "warmup" in str(exc.value)


def test_dkg_timings_scale_to_a_short_run_unless_the_user_sets_them() -> None:
    params, f = scaled_grouping_params("dkg", {}, 20.0)
    assert f == pytest.approx(20.0 / 300.0)
    assert params == {k: v * f for k, v in DKG_TIMINGS.items()}
    assert scaled_grouping_params("dkg", {"warmup": 5.0}, 20.0) == ({"warmup": 5.0}, 1.0)
    assert scaled_grouping_params("dkg", {}, 600.0) == ({}, 1.0)
    assert scaled_grouping_params("pkg", {}, 20.0) == ({}, 1.0)
    main_job = ExperimentSettings()  # the README's first command's length: 20 s of events
    assert time_scale(main_job.spec) < 1.0 and grouping_params(main_job.spec)["warmup"] < 15.0


def _keys_over_2(params: dict[str, float], n: int, rate: float, workers: int) -> int:
    router = make_grouping("dkg", workers=workers, **params).build(clock=(clk := ManualClock()))
    spread: dict[str, set[int]] = {}
    for chunk in parse_workload("country:R80", seed=1).events(n, rate=rate):
        for t, key in zip(chunk.ts, chunk.keys.keys(), strict=True):
            clk.set(float(t))
            spread.setdefault(key, set()).add(router.route(key))
    return sum(1 for v in spread.values() if len(v) > 2)


def test_scaled_dkg_grows_pools_for_hot_keys_in_a_short_run() -> None:
    rate, run_s, workers = 2_000.0, 20.0, 4
    n = int(rate * run_s)
    scaled, _ = scaled_grouping_params("dkg", {}, run_s)
    assert _keys_over_2({}, n, rate, workers) == 0  # the seed's timings: not yet
    assert _keys_over_2(scaled, n, rate, workers) >= 1


def test_run_takes_its_data_dir_from_skewlab_home_like_simulate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SKEWLAB_HOME", raising=False)
    (plain,) = run_cmd.settings_list(_parse())
    assert Path(plain.home) == tmp_path.resolve() / ".skewlab"
    monkeypatch.setenv("SKEWLAB_HOME", str(tmp_path / "env-home"))
    (env,) = run_cmd.settings_list(_parse())
    assert Path(env.home) == (tmp_path / "env-home").resolve()
    (flag,) = run_cmd.settings_list(_parse("--home", "flag-home"))
    assert Path(flag.home) == (tmp_path / "flag-home").resolve()  # --home wins


def _flag_helps() -> dict[str, str]:
    parser = argparse.ArgumentParser()
    run_cmd.configure(parser)
    return {a.option_strings[0]: a.help or "" for a in parser._actions if a.option_strings}


def test_run_help_lists_every_strategy_and_workload_kind_and_each_is_accepted() -> None:
    helps = _flag_helps()
    listed = helps["--strategy"].split(": ", 1)[1].split(" (default")[0].split(", ")
    assert listed == list(GROUPING_NAMES)
    for name in listed:
        (s,) = run_cmd.settings_list(_parse("--strategy", name))
        assert s.strategy == name
    kinds = helps["--workload"].split("one of ", 1)[1].split(";")[0].split(", ")
    assert sorted(kinds) == sorted(WORKLOAD_NAMES)
    for kind in kinds:
        if kind == "trace":  # trace needs a file
            continue
        # the country workloads need their skew R; the others run on their defaults
        assert parse_workload(f"{kind}:R80" if kind.startswith("country") else kind) is not None


def test_run_help_shows_each_default_and_the_shown_value_is_the_default() -> None:
    helps = _flag_helps()
    shown = 0
    for s in SETTINGS:
        if s.flag is None or s.repeat or s.kind == "boolean" or s.name == "home":
            continue
        text = " ".join(helps[s.flag].split())
        if s.default is None:
            assert "(default:" not in text, s.flag
            continue
        value = text.rsplit("(default: ", 1)[1].removesuffix(")")
        # the value shown, given on the command line, is the value used without the flag
        assert getattr(_parse(s.flag, value), flag_dest(s)) == s.default, s.flag
        shown += 1
    assert shown >= 10


def test_every_declared_bound_and_choice_is_enforced_by_the_settings() -> None:
    checked = 0
    for s in SETTINGS:
        bad: list[object] = []
        if s.choices is not None:
            bad.append("no-such-" + s.name)
        if s.minimum is not None:
            bad.append(s.minimum - 1)
        if s.exclusive_minimum is not None:
            bad.append(s.exclusive_minimum)
        if s.maximum is not None:
            bad.append(s.maximum + 1)
        for value in bad:
            with pytest.raises(ConfigError, match=f"^{s.name} must be ") as exc:
                ExperimentSettings(**{s.name: value})
            assert s.allowed() in str(exc.value) and repr(value) in str(exc.value)
            checked += 1
    assert checked >= 20


def test_the_autoscale_form_takes_defaults_and_bounds_from_the_autoscale_rows() -> None:
    from skewlab.spec import AUTOSCALE_SETTINGS

    form = {p.name: p for p in PARAMS}
    rows = [s for s in AUTOSCALE_SETTINGS if s.param is not None]
    assert {s.param for s in rows} == {"autoscale_workload", "autoscale_capacity",
                                       "autoscale_iteration"}  # fmt: skip
    for s in rows:
        assert s.param is not None
        p = form[s.param]
        assert (p.field, p.kind) == (s.name, s.kind)
        if s.exclusive_minimum is not None:  # the form's inclusive floor lies above it
            assert p.minimum is not None and p.minimum > s.exclusive_minimum, s.name
        if s.name != "iteration_s":  # the form's own, shorter iteration
            assert p.default == s.default, s.name


def test_a_run_spec_is_built_only_from_validated_settings() -> None:
    """``RunSpec`` and its parts are constructed in ``skewlab.runsettings`` alone (from an
    ``ExperimentSettings``); no module of lib/, jobs/, dags/ or bench/ builds one."""
    root = Path(__file__).resolve().parents[2]
    parts = {"RunSpec", "GroupingSpec", "WorkloadSpec", "RuntimeSpec"}
    builders: set[str] = set()
    for top in ("lib", "jobs", "dags", "bench"):
        for path in sorted((root / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                func = node.func if isinstance(node, ast.Call) else None
                name = func.id if isinstance(func, ast.Name) else None
                name = func.attr if isinstance(func, ast.Attribute) else name
                if name in parts:
                    builders.add(str(path.relative_to(root)))
    assert builders == {"lib/skewlab/runsettings.py"}

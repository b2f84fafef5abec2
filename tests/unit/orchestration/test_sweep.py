"""The sweep (`skewlab.orchestration.sweep_*`): params, presets, grid, cells, comparison."""

from __future__ import annotations

import csv
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from skewlab.errors import ConfigError
from skewlab.grouping import GROUPING_NAMES
from skewlab.io.tracking import Tracker
from skewlab.orchestration import sweep_cells, sweep_compare
from skewlab.orchestration.sweep_compare import markdown_table
from skewlab.orchestration.sweep_form import param_schemas, settings_from_params
from skewlab.orchestration.sweep_grid import (
    MAX_CELLS,
    PRESETS,
    SweepCell,
    SweepSettings,
    grid_cells,
)


def _schema(name: str) -> dict[str, Any]:
    kw = dict(param_schemas()[name])
    kw.pop("default")
    kw.pop("description")
    return kw


@pytest.mark.unit
def test_param_defaults_satisfy_their_schema_and_build_settings(tmp_path: Path) -> None:
    for name, kw in param_schemas().items():
        jsonschema.validate(kw["default"], _schema(name))
    s = settings_from_params({}, home=str(tmp_path))
    assert s.mode == "sim" and s.preset == "" and s.experiment == "skewlab-sweep-custom"
    assert s.home == str(tmp_path.resolve())
    assert s.n_cells == 4 and s.cell_rate(4) == pytest.approx(0.8 * 4 / 1e-3)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"mode": "fast"}, "param mode: 'fast' is not allowed; allowed: one of sim, live"),
        ({"strategies": ["key", "nope"]}, "param strategies: 'nope' (in ['key', 'nope'])"),
        ({"strategies": ["key", "key"]}, "param strategies: ['key', 'key'] is not allowed"),
        ({"workloads": ["zipf:s=abc"]}, "zipf: parameter s must be float"),
        ({"workers": [0]}, "param workers: 0 (in [0])"),
        ({"seeds": []}, "param seeds: [] is not allowed"),
        (
            {"preset": "nope"},
            "param preset: 'nope' is not allowed; allowed: one of custom, dkg-country",
        ),
        ({"typo": 1}, "unknown param(s) typo"),
        ({"events": 1.5}, "param events: 1.5 is not allowed"),
        ({"mode": "live", "seeds": list(range(7))}, "live mode allows at most 24"),
    ],
)
def test_bad_params_fail_with_one_line(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_from_params(params, home="/tmp/x")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.unit
def test_presets_replace_the_grid_but_keep_seeds_and_mode() -> None:
    s = settings_from_params(
        {"preset": "dkg-country", "strategies": ["shuffle"], "seeds": [1, 2]}, home="/tmp/x"
    )
    p = PRESETS["dkg-country"]
    assert s.strategies == ("key", "shuffle", "pkg", "dkg") == p.strategies
    assert s.workloads[0] == "country:R0" and s.workloads[-1] == "country:R100"
    assert s.seeds == (1, 2) and s.workers == (10,) and s.service_us == 1000.0
    assert s.experiment == "skewlab-sweep-dkg-country" and s.n_cells == 4 * 6 * 2
    smalops = settings_from_params({"preset": "smalops-zipf"}, home="/tmp/x")
    assert smalops.strategies == GROUPING_NAMES and smalops.service_us == 50.0
    for name in PRESETS:  # every preset is a valid sim sweep
        assert settings_from_params({"preset": name}, home="/tmp/x").n_cells <= MAX_CELLS["sim"]


@pytest.mark.unit
def test_grid_order_and_unique_names() -> None:
    s = SweepSettings(strategies=("key", "pkg"), workloads=("country:R80",), workers=(2, 4))
    cells = grid_cells(s)
    assert [(c.workers, c.strategy) for c in cells] == [
        (2, "key"),
        (2, "pkg"),
        (4, "key"),
        (4, "pkg"),
    ]
    assert [c.index for c in cells] == [0, 1, 2, 3]
    assert len({c.name for c in cells}) == 4
    assert SweepCell.from_dict(cells[3].to_dict()) == cells[3]


@pytest.mark.unit
def test_settings_round_trip_through_json_dict() -> None:
    s = SweepSettings(workloads=("zipf:s=1.1,v=2.72", "country:R40"), seeds=(3,), rate=100.0)
    d = s.to_dict()
    assert d["workloads"] == ["zipf:s=1.1,v=2.72", "country:R40"]
    assert SweepSettings.from_dict(d) == s
    with pytest.raises(ConfigError, match="unknown sweep setting"):
        SweepSettings.from_dict({**d, "bogus": 1})


@pytest.mark.unit
def test_markdown_table_formats_numbers_and_missing_values() -> None:
    md = markdown_table([{"a": "key", "b": 1234.5678, "c": None, "d": 2.0}], ["a", "b", "c", "d"])
    assert md.splitlines() == ["| a | b | c | d |", "|---|---|---|---|", "| key | 1,235 | - | 2 |"]


@pytest.fixture
def small(tmp_path: Path) -> SweepSettings:
    return SweepSettings(
        strategies=("key", "shuffle"),
        workloads=("country:R80",),
        workers=(4,),
        events=5_000,
        window_s=1.0,
        experiment=f"sweep-{uuid.uuid4().hex[:8]}",
        home=str(tmp_path),
    )


@pytest.mark.integration
def test_cells_are_child_runs_and_retries_do_not_rerun(
    small: SweepSettings, tracking: Tracker
) -> None:
    parent = sweep_cells.start_parent(tracking, small, key="dag/run-1")
    assert sweep_cells.start_parent(tracking, small, key="dag/run-1") == parent
    cells = grid_cells(small)
    rows = [sweep_cells.run_cell(small, c, parent, tracking) for c in cells]
    assert [r["status"] for r in rows] == ["FINISHED", "FINISHED"]
    key, shuffle = rows
    assert key["moved_state"] == 0.0 and shuffle["moved_state"] > 0  # KEY never splits a key
    assert key["imb_score"] > shuffle["imb_score"]  # R80 overloads KEY's hot worker
    again = sweep_cells.run_cell(small, cells[0], parent, tracking)
    assert again["child_run_id"] == key["child_run_id"]
    assert len(tracking.child_runs(parent)) == 2


@pytest.mark.integration
def test_compare_writes_table_and_plots_and_flags_missing_cells(
    small: SweepSettings, tracking: Tracker, tmp_path: Path
) -> None:
    parent = sweep_cells.start_parent(tracking, small, key="dag/run-2")
    sweep_cells.run_cell(small, grid_cells(small)[0], parent, tracking)  # the second cell never ran
    result = sweep_compare.compare(small, parent, tracking, tmp_path / "out")
    assert result["cells"] == 2 and result["finished"] == 1
    assert result["missing"] == [grid_cells(small)[1].name]
    with (tmp_path / "out" / "sweep.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["status"] for r in rows] == ["FINISHED", "MISSING"]
    assert "## Mean per strategy" in result["markdown"]
    for f in result["files"]:
        assert Path(f).stat().st_size > 0
    names = {Path(a).name for a in tracking.list_artifacts(parent, "comparison")}
    assert {"sweep.csv", "sweep.md", "imbalance.png", "moved_state.png"} <= names
    assert tracking.get_run_summary(parent).status == "FAILED"

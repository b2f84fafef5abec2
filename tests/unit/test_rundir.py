"""RunDir names every file and Delta app id of a run, and nothing else in lib/ does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from skewlab.rundir import RunDir, app_id

pytestmark = pytest.mark.unit

LIB = Path(__file__).resolve().parents[2] / "lib" / "skewlab"


def test_every_name_lies_in_the_run_dir_and_none_repeats(tmp_path: Path) -> None:
    d = RunDir.create(tmp_path, "key-1")
    assert d.path == tmp_path.resolve() / "runs" / "key-1" and d.path.is_dir()
    assert d.run_id == "key-1" and RunDir.at(tmp_path, "key-1") == d
    files = [
        d.handle, d.settings, d.route_settings, d.expected, d.quality, d.controller_state,
        d.route_ready, d.route_stop, d.workers_stop, d.spares_stop, d.stop, d.checkpoint,
        d.spark_data, d.log("route"), d.log("worker-0"),
        *(d.worker_settings(i) for i in range(3)), *(d.worker_ready(i) for i in range(3)),
    ]  # fmt: skip
    assert all(f.parent == d.path for f in files)
    assert len(set(files)) == len(files)


def test_spares_stop_after_the_original_workers(tmp_path: Path) -> None:
    d = RunDir.of(tmp_path / "r")
    assert [d.worker_stop(i, 2) for i in range(4)] == [d.workers_stop] * 2 + [d.spares_stop] * 2


def test_app_ids_name_the_job_and_the_run() -> None:
    d = RunDir.of("/data/runs/dkg-7")
    assert d.app("route") == app_id("route", "dkg-7") == "route:dkg-7"
    assert RunDir.worker_app(3, "dkg-7") == "work-3:dkg-7"
    assert len({app_id(j, "r") for j in ("route", "aggregate", "monitor", "rebalance")}) == 4
    assert d.events_topic != d.routed_topic and d.run_id in d.events_topic


_MARKERS = ("route.ready", "route.stop", "workers.stop", "spares.stop", "handle.json",
            "route.json", "controller-state.json", "expected.json", "quality.json")  # fmt: skip


def test_no_other_module_spells_a_run_file_name() -> None:
    found = []
    for path in sorted(LIB.rglob("*.py")):
        if path.name == "rundir.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                hit = [m for m in _MARKERS if m in text and "``" not in text]
                if hit or (text.startswith("worker-") and text.endswith((".json", ".ready"))):
                    found.append(f"{path.relative_to(LIB)}:{node.lineno} {text!r}")
            if isinstance(node, ast.JoinedStr):
                parts = [v.value for v in node.values if isinstance(v, ast.Constant)]
                if any(str(p).endswith((".ready", ".stop")) for p in parts) or (
                    parts and parts[0] in ("work-", "route:", "aggregate:", "rebalance:")
                ):
                    found.append(f"{path.relative_to(LIB)}:{node.lineno} f-string {parts!r}")
    assert found == []

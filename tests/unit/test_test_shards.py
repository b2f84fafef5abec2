"""infra/test_shards.py: the two shards cover tests/ once, a JUnit request gets both reports."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _shards() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_shards", ROOT / "infra" / "test_shards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shard_b_runs_every_test_path_shard_a_does_not() -> None:
    shards = _shards().shard_args()
    a, b = shards["A"], shards["B"]
    assert b[0] == "tests"
    assert sorted(x.removeprefix("--ignore=") for x in b[1:]) == sorted(a)
    # every shard-A path is inside tests/ and no path is named twice
    assert all(p.startswith("tests/") for p in a) and len(set(a)) == len(a)
    # the Airflow users come before the crash matrix and the unit tests (one standalone)
    assert a.index("tests/browser") < a.index("tests/integration/crash") < a.index("tests/unit")


def test_the_junit_path_is_read_from_pytest_addopts_in_both_spellings() -> None:
    read = _shards().requested_junit
    assert read("--durations=0 --junitxml=/tmp/a.xml") == "/tmp/a.xml"
    assert read("--junit-xml /tmp/b.xml -q") == "/tmp/b.xml"
    assert read("-q --durations=40") is None


def _report(path: Path, names: list[str]) -> None:
    suites = ET.Element("testsuites")
    suite = ET.SubElement(suites, "testsuite", name="pytest", tests=str(len(names)))
    for n in names:
        ET.SubElement(suite, "testcase", classname="tests.x", name=n, time="1.0")
    ET.ElementTree(suites).write(path)


def test_merged_junit_holds_every_shards_cases(tmp_path: Path) -> None:
    _report(tmp_path / "a.xml", ["t1", "t2"])
    _report(tmp_path / "b.xml", ["t3"])
    out = tmp_path / "out" / "junit.xml"
    _shards().merge_junit([tmp_path / "a.xml", tmp_path / "b.xml", tmp_path / "gone.xml"], out)
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    assert [c.get("name") for c in root.iter("testcase")] == ["t1", "t2", "t3"]
    assert len(root.findall("testsuite")) == 2

"""Spark's Python worker daemon of the route job (:mod:`skewlab.spark.pydaemon`)."""

from __future__ import annotations

import gc
import types
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from skewlab.spark.pydaemon import frozen_after, spark_namespaces, strip_spark_zips

pytestmark = pytest.mark.unit


class Node:
    """An object that can sit in a reference cycle and be watched by a weak reference."""

    def __init__(self) -> None:
        self.other: Any = None


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_task_leaves_its_garbage_collected_and_its_survivors_frozen(unfrozen):
    kept: list[Node] = []
    dropped: list[weakref.ref[Node]] = []

    def task(sock: object, authenticated: bool) -> int:
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle only the collector frees
        dropped.append(weakref.ref(a))
        kept.append(Node())
        return 0 if authenticated else 1

    run = frozen_after(task)
    assert run(None, True) == 0
    assert dropped[0]() is None
    assert gc.get_freeze_count() > 0
    assert not any(o is kept[0] for o in gc.get_objects())  # frozen: no collection sees it
    assert run(None, False) == 1
    assert dropped[1]() is None


def test_an_error_out_of_a_task_goes_on_and_freezes_nothing(unfrozen):
    def task(sock: object, authenticated: bool) -> int:
        raise SystemExit(3)  # Spark's daemon ends the forked worker on it

    with pytest.raises(SystemExit):
        frozen_after(task)(None, True)
    assert gc.get_freeze_count() == 0


def test_only_sparks_zips_and_core_jar_leave_the_path():
    path = [
        "/s/python/lib/pyspark.zip",
        "/s/python/lib/py4j-0.10.9.9-src.zip",
        "/v/site-packages/pyspark/jars/spark-core_2.13-4.0.1.jar",
        "/v/site-packages",
        "/z.zip",
        "/j/other.jar",
    ]
    assert strip_spark_zips(path) == ["/v/site-packages", "/z.zip", "/j/other.jar"]


def test_namespace_packages_found_only_in_sparks_jar_are_named():
    jar = "/v/site-packages/pyspark/jars/spark-core_2.13-4.0.1.jar"
    only_jar = types.ModuleType("org")
    only_jar.__path__ = [f"{jar}/org"]  # type: ignore[attr-defined]
    also_site = types.ModuleType("ns")
    also_site.__path__ = [f"{jar}/ns", "/v/site-packages/ns"]  # type: ignore[attr-defined]
    regular = types.ModuleType("pkg")
    regular.__path__ = [f"{jar}/pkg"]  # type: ignore[attr-defined]
    regular.__file__ = f"{jar}/pkg/__init__.py"
    modules = {"org": only_jar, "ns": also_site, "pkg": regular, "gone": None, "gc": gc}
    assert spark_namespaces(modules) == ["org"]


def test_a_preloading_daemon_imports_on_its_first_wait_not_before(monkeypatch, capsys, unfrozen):
    """The modules are imported at the loop's first ``select`` (the port already reported),
    once, and frozen; one that fails is named and skipped, and the wait itself happens."""
    import select
    import sys

    from skewlab.spark.pydaemon import PreloadOnFirstWait

    name = "skewlab.experiments"
    monkeypatch.delitem(sys.modules, name, raising=False)
    waits: list[float] = []
    monkeypatch.setattr(select, "select", lambda r, w, x, t: waits.append(t) or ([], [], []))
    shim = PreloadOnFirstWait(["no_such_module_here", name])
    assert name not in sys.modules  # nothing before the daemon waits
    assert shim.select([0], [], [], 1) == ([], [], [])
    assert name in sys.modules and shim.pending == []
    assert gc.get_freeze_count() > 0
    assert "preloading no_such_module_here failed" in capsys.readouterr().err
    shim.select([0], [], [], 1)
    assert waits == [1, 1]
    assert shim.error is select.error

"""The ``SKEWLAB_*`` variables: one registry (skewlab.envsettings), read in one place.

The grep test fails on a new ad hoc read (``os.environ.get("SKEWLAB_...")``, ``env[X_ENV]``)
anywhere in lib/ but the registry, and on a ``SKEWLAB_*`` name the registry does not list.
"""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest

from skewlab.envsettings import VARIABLES, EnvSettings, env_settings, variable

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib" / "skewlab"
NAMES = {v.name for v in VARIABLES}

PENDING: dict[str, int] = {}
"""Files allowed a direct read while their owners switch (none left)."""


def _constants() -> set[str]:
    """Names bound to a ``"SKEWLAB_..."`` string anywhere in lib/ (``HOME_ENV``, ...)."""
    found = set()
    for path in LIB.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
                and node.value.value.startswith("SKEWLAB_")
            ):
                found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


def _is_variable(node: ast.expr, constants: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith("SKEWLAB_")
    if isinstance(node, ast.Name):
        return node.id in constants
    return isinstance(node, ast.Attribute) and node.attr in constants


def reads(source: str, constants: set[str]) -> list[int]:
    """Lines of ``source`` reading a SKEWLAB_ variable: ``X.get(V)``, ``X.pop(V)``,
    ``getenv(V)`` or ``X[V]`` (loaded), ``V`` a literal or a constant naming one."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and _is_variable(node.args[0], constants):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("get", "pop", "getenv"):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and _is_variable(node.slice, constants)
        ):
            lines.append(node.lineno)
    return lines


def test_the_detector_sees_each_kind_of_read() -> None:
    src = (
        "import os\nHOME_ENV = 'SKEWLAB_HOME'\n"
        "a = os.environ.get('SKEWLAB_X')\nb = os.getenv(HOME_ENV)\nc = env[HOME_ENV]\n"
        "env[HOME_ENV] = 'w'\nd = {'SKEWLAB_HOME': 1}\n"
    )
    assert reads(src, {"HOME_ENV"}) == [3, 4, 5]


def test_no_stray_skewlab_env_reads_in_lib() -> None:
    constants = _constants()
    stray = []
    for path in sorted(LIB.rglob("*.py")):
        rel = path.relative_to(LIB).as_posix()
        if rel == "envsettings.py":
            continue
        found = reads(path.read_text(), constants)
        if len(found) > PENDING.get(rel, 0):
            stray.append(f"{rel}: lines {found}")
    assert not stray, "read SKEWLAB_* variables through skewlab.envsettings: " + "; ".join(stray)


def test_every_skewlab_name_in_lib_is_registered() -> None:
    used = set()
    for path in LIB.rglob("*.py"):
        used.update(re.findall(r"\bSKEWLAB_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    assert used - NAMES == set(), "add these to skewlab.envsettings.VARIABLES"


def test_the_registry_and_the_settings_object_agree() -> None:
    assert [v.field for v in VARIABLES] == [f.name for f in fields(EnvSettings)]
    assert len(NAMES) == len(VARIABLES)
    assert all(v.kind in ("text", "path", "flag") and v.meaning for v in VARIABLES)


def test_docs_settings_lists_every_variable() -> None:
    doc = (ROOT / "docs" / "settings.md").read_text()
    listed = set(re.findall(r"^\| `(SKEWLAB_[A-Z0-9_]+)` \|", doc, re.MULTILINE))
    assert listed == NAMES


def test_unset_or_blank_takes_the_default_and_values_are_stripped() -> None:
    s = env_settings({"SKEWLAB_HOME": "  /data  ", "SKEWLAB_DELTA_ROOT": "   "})
    assert s.home == "/data"
    assert s.delta_root is None
    assert s.spark_ui is True and s.warm_spares is True and s.debug is False


@pytest.mark.parametrize(
    ("raw", "on"), [("0", False), ("false", False), ("OFF", False), ("no", False),
                    ("1", True), ("yes", True), ("true", True)],
)  # fmt: skip
def test_flags(raw: str, on: bool) -> None:
    s = env_settings({"SKEWLAB_DEBUG": raw, "SKEWLAB_SPARK_UI": raw})
    assert s.debug is on and s.spark_ui is on


def test_the_process_environment_is_read_on_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKEWLAB_CRASH", "route.in_batch@2")
    assert env_settings().crash == "route.in_batch@2"
    monkeypatch.delenv("SKEWLAB_CRASH")
    assert env_settings().crash is None
    assert variable("SKEWLAB_CRASH").field == "crash"


@pytest.mark.parametrize(
    ("raw", "where", "off"),
    [(None, None, False), ("/h", "/h", False), ("off", None, True), ("0", None, True)],
)
def test_route_host_is_a_directory_or_off(raw: str | None, where: str | None, off: bool) -> None:
    s = env_settings({} if raw is None else {"SKEWLAB_ROUTE_HOST": raw})
    assert s.route_host_dir == where
    assert (s.route_host is not None and s.route_host_dir is None) is off  # set, but off

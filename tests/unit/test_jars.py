"""The jar sets' location: ``$SKEWLAB_JARS`` or the repository's ``.jars``."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.errors import ConfigError
from skewlab.jars import JARS_ENV, jar_dir, jar_files, jars_root

pytestmark = pytest.mark.unit


def test_the_env_variable_names_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "spark").mkdir()
    (tmp_path / "spark" / "b.jar").write_bytes(b"")
    (tmp_path / "spark" / "a.jar").write_bytes(b"")
    monkeypatch.setenv(JARS_ENV, str(tmp_path))
    assert jars_root() == tmp_path
    assert [p.name for p in jar_files("spark")] == ["a.jar", "b.jar"]


def test_a_missing_or_empty_set_says_how_to_fetch_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JARS_ENV, str(tmp_path))
    (tmp_path / "broker").mkdir()
    for name in ("broker", "spark"):
        with pytest.raises(ConfigError, match=r"infra/setup\.sh") as err:
            jar_dir(name)
        assert name in str(err.value)
        assert "\n" not in str(err.value)


def test_without_the_variable_the_root_is_beside_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import skewlab

    monkeypatch.delenv(JARS_ENV, raising=False)
    assert jars_root() == Path(skewlab.__file__).resolve().parents[2] / ".jars"

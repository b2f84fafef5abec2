"""The Spark driver's class-data archive options (:mod:`skewlab.spark.class_archive`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.version import __version__

from skewlab.jars import JARS_ENV
from skewlab.spark.class_archive import archive_path, driver_java_options

pytestmark = pytest.mark.unit


def test_the_archive_is_named_for_the_installed_pyspark_in_the_spark_jar_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JARS_ENV, str(tmp_path))
    path = archive_path()
    assert path.parent == tmp_path / "spark" and __version__ in path.name


def test_options_map_the_archive_only_when_it_exists_and_never_override_a_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JARS_ENV, str(tmp_path))
    base = "-XX:+UseSerialGC"
    assert driver_java_options(base) == base  # no archive written: nothing added
    archive_path().parent.mkdir(parents=True)
    archive_path().write_bytes(b"x")
    mapped = driver_java_options(base).split()
    assert mapped[0] == base and f"-XX:SharedArchiveFile={archive_path()}" in mapped
    assert "-Xshare:auto" in mapped  # a JVM that cannot map it runs without it
    own = f"{base} -Xshare:off"
    assert driver_java_options(own) == own  # a user's own sharing choice stays

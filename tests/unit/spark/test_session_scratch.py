"""Where a Spark driver's temporary files go (:func:`skewlab.spark.session.scratch_settings`)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from skewlab.spark.session import scratch_dir, scratch_settings

pytestmark = pytest.mark.unit


def test_the_scratch_dir_is_created_under_the_data_dir(tmp_path: Path) -> None:
    path = scratch_dir(tmp_path / "spark")
    assert path.is_dir() and path.parent == (tmp_path / "spark").resolve()


def test_what_a_killed_driver_left_in_the_scratch_dir_goes_when_the_next_one_starts(
    tmp_path: Path,
) -> None:
    left = scratch_dir(tmp_path) / "blockmgr-1" / "0c"
    left.mkdir(parents=True)
    (left / "shuffle_0_0_0.data").write_bytes(b"x" * 100)
    assert list(scratch_dir(tmp_path).iterdir()) == []


def test_the_local_dir_and_the_jvm_temp_dir_are_both_the_scratch_dir(tmp_path: Path) -> None:
    got = scratch_settings(tmp_path, "-XX:+UseSerialGC")
    assert got["spark.local.dir"] == str(tmp_path)
    assert shlex.split(got["spark.driver.extraJavaOptions"]) == [
        "-XX:+UseSerialGC",
        f"-Djava.io.tmpdir={tmp_path}",
    ]


def test_a_path_with_a_space_stays_one_option(tmp_path: Path) -> None:
    where = tmp_path / "a b"
    options = shlex.split(scratch_settings(where)["spark.driver.extraJavaOptions"])
    assert options == [f"-Djava.io.tmpdir={where}"]


def test_options_naming_a_temp_dir_keep_theirs(tmp_path: Path) -> None:
    java = "-Djava.io.tmpdir=/elsewhere -XX:+UseSerialGC"
    assert scratch_settings(tmp_path, java)["spark.driver.extraJavaOptions"] == java

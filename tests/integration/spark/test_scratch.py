"""A Spark driver's temporary files stay in its data dir, never in the system's temporary
directory, whether it stops or is killed (docs/troubleshooting.md, "Temporary files").

Each driver runs in a process group of its own with ``$TMPDIR`` and the JVM's default
``java.io.tmpdir`` (``$JAVA_TOOL_OPTIONS``) pointed at an empty directory of the test's:
whatever would land in ``/tmp`` lands there instead. Two drivers: one built by
:func:`skewlab.spark.session.spark_session` (the route job's, the route host's, the tests'),
and the workers app (:mod:`skewlab.live.mains.workers_app`), which builds its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from tests.integration.fixtures.live import wait_for

pytestmark = pytest.mark.integration

DRIVER = """
import sys
from skewlab.spark.session import spark_session

spark = spark_session("skewlab-scratch-test", sys.argv[1], master="local[1]")
df = spark.range(100)
df.mapInArrow(lambda batches: batches, df.schema).count()  # a Python task
df.write.format("delta").save(sys.argv[2])  # Parquet files through Snappy
print("ready", flush=True)
sys.stdin.read()  # until the test closes stdin (or kills the group)
spark.stop()
"""
"""A driver that runs a Python task and a Delta write, says ``ready``, stops when told."""


def start(cmd: list[str], default_tmp: Path) -> subprocess.Popen[str]:
    """``cmd`` in a new process group, its default temporary directories ``default_tmp``."""
    default_tmp.mkdir()
    tool = f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} -Djava.io.tmpdir={default_tmp}".strip()
    env = {**os.environ, "TMPDIR": str(default_tmp), "JAVA_TOOL_OPTIONS": tool}
    return subprocess.Popen(
        cmd, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the driver's group (its JVM and Python workers too) and wait for every member."""
    members = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    os.killpg(proc.pid, signal.SIGKILL)
    psutil.wait_procs(members, timeout=60)


def session_driver(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """A :func:`spark_session` driver on ``tmp_path / "spark"``, ready; and its scratch dir."""
    data = tmp_path / "spark"
    cmd = [sys.executable, "-c", DRIVER, str(data), str(tmp_path / "table")]
    proc = start(cmd, tmp_path / "default-tmp")
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc, data / "tmp"


def workers_app(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """A warm workers app in ``tmp_path / "app"``, ready (it ran its first Python task)."""
    app = tmp_path / "app"
    cmd = [sys.executable, "-m", "skewlab.live.mains.workers_app", "--warm", str(app)]
    proc = start(cmd, tmp_path / "default-tmp")
    wait_for("the workers app's app.ready", (app / "app.ready").exists, watch=proc)
    return proc, app / "tmp"


def test_a_stopped_session_leaves_no_temporary_file_anywhere(tmp_path: Path) -> None:
    proc, scratch = session_driver(tmp_path)
    jvm = [p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "java"]
    proc.communicate("")  # stdin closed: the driver stops its session and leaves
    psutil.wait_procs(jvm, timeout=60)  # the JVM removes its files as it exits
    assert proc.returncode == 0
    assert list((tmp_path / "default-tmp").iterdir()) == []
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("driver", [session_driver, workers_app], ids=["session", "workers-app"])
def test_a_killed_driver_leaves_its_temporary_files_in_its_data_dir(
    tmp_path: Path, driver: Callable[[Path], tuple[subprocess.Popen[str], Path]]
) -> None:
    proc, scratch = driver(tmp_path)
    kill_group(proc)
    assert list((tmp_path / "default-tmp").iterdir()) == []
    assert {p.name.split("-")[0] for p in scratch.iterdir()} >= {"spark", "blockmgr"}

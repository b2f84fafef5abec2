"""launch: the first error of a child's log, and children killed as whole process groups."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from skewlab.live.driver.handle import ProcRecord
from skewlab.live.driver.launch import Detached, exit_cause, first_error, spawn

pytestmark = pytest.mark.unit

DATA = Path(__file__).parent / "data"

JAVA_ONLY = """\
26/11/24 00:52:05 WARN Utils: Your hostname, vm, resolves to a loopback address
26/11/24 00:53:26 ERROR Executor: Exception in task 0.0 in stage 3.0 (TID 7)
java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)
\tat org.apache.spark.unsafe.map.BytesToBytesMap.growAndRehash(BytesToBytesMap.java:900)
Caused by: java.io.IOException: No space left on device
\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)
=== Streaming Query ===
Logical Plan:
~WriteToMicroBatchDataSourceV1 ForeachBatchSink
"""

CHAINED = """\
2026-11-24 00:10:01,000 skewlab.live.worker.process worker 1 resumes at routed offset 0
Traceback (most recent call last):
  File "worker.py", line 10, in step
    value = decode(raw)
            ^^^^^^^^^^^
UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "worker.py", line 12, in step
    raise KafkaError("fetch failed") from None
skewlab.io.kafka.base.KafkaError: fetch failed
2026-11-24 00:10:02,000 skewlab.live.worker.process flushing
"""


def test_the_first_exception_of_a_real_spark_failure_not_its_last_plan_lines() -> None:
    log = DATA / "spark_foreach_batch_failure.log"
    text = log.read_text()
    assert "Logical Plan:" in text.splitlines()[-5:]  # what a tail would have shown
    assert first_error(log) == "ValueError: non-finite ts in batch 1"
    cause = exit_cause(1, log)
    assert cause.startswith("exit 1: ValueError: non-finite ts in batch 1")
    assert cause.endswith(f"log: {log}") and "\n" not in cause


def test_the_first_error_of_a_real_route_job_log_is_the_java_one_that_came_first() -> None:
    """An overloaded machine: the Python worker did not connect back in time; the Python
    traceback that follows is its consequence."""
    log = DATA / "spark_python_worker_timeout.log"
    assert "Traceback (most recent call last)" in log.read_text()
    assert (
        first_error(log) == "org.apache.spark.SparkException: Python worker failed to connect back."
    )


def test_java_stack_without_python_traceback_and_chained_python_errors(tmp_path: Path) -> None:
    java = tmp_path / "java.log"
    java.write_text(JAVA_ONLY)
    assert first_error(java) == "java.lang.OutOfMemoryError: Java heap space"
    chained = tmp_path / "chained.log"
    chained.write_text(CHAINED)
    assert first_error(chained) == (
        "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"
    )


def test_a_log_without_an_error_names_the_signal_and_last_line(tmp_path: Path) -> None:
    log = tmp_path / "worker-0.log"
    log.write_text("starting\nworker 0 resumes at routed offset 42\n")
    assert first_error(log) is None
    cause = exit_cause(-signal.SIGKILL, log)
    assert cause.startswith("killed by SIGKILL: no error in its log")
    assert "resumes at routed offset 42" in cause
    assert first_error(tmp_path / "missing.log") is None
    long = tmp_path / "long.log"
    long.write_text("RuntimeError: " + "x" * 5000 + "\n")
    assert len(first_error(long) or "") <= 300


TREE = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)"  # noqa: E501


def _group(pgid: int) -> list[int]:
    import os

    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.info["pid"]) == pgid:
                out.append(p.info["pid"])
        except (ProcessLookupError, psutil.Error):
            continue
    return out


def _wait_group(pgid: int, n: int) -> None:
    deadline = time.monotonic() + 30
    while len(_group(pgid)) < n:
        assert time.monotonic() < deadline, "the child did not start its own child"
        time.sleep(0.05)


def test_an_attached_child_leads_its_own_group_and_kill_takes_the_group(tmp_path: Path) -> None:
    import os

    proc = spawn([sys.executable, "-c", TREE], tmp_path / "tree.log")
    assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)  # not the driver's group
    _wait_group(proc.pid, 2)
    grandchild = next(p for p in _group(proc.pid) if p != proc.pid)
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    psutil.wait_procs([psutil.Process(grandchild)], timeout=30)
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == "zombie"


def test_detached_kill_of_a_non_leader_kills_it_and_its_children(tmp_path: Path) -> None:
    """An older run's child shared the driver's group: kill must not killpg it (that would
    be a no-op or hit the wrong group) but kill it and its descendants."""
    proc = subprocess.Popen([sys.executable, "-c", TREE])  # in this process's group
    try:
        deadline = time.monotonic() + 30
        while not psutil.Process(proc.pid).children():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child = psutil.Process(proc.pid).children()[0]
        rec = ProcRecord("worker-0", proc.pid, psutil.Process(proc.pid).create_time(), [], "")
        d = Detached(rec)
        assert d.alive()
        d.kill()
        assert proc.wait(timeout=30) == -signal.SIGKILL
        gone, _ = psutil.wait_procs([child], timeout=30)
        assert gone
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_recycled_pid_is_never_killed(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        real = psutil.Process(proc.pid).create_time()
        d = Detached(ProcRecord("route", proc.pid, real - 100.0, [], ""))  # another process
        assert not d.alive()
        d.kill()
        time.sleep(0.2)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("detached", [False, True])
def test_a_start_kills_the_unrecorded_process_a_dead_driver_left_of_that_name(
    tmp_path: Path, detached: bool
) -> None:
    """A driver killed between starting a child and recording it leaves a process no
    handle names (and its child); the next start of that name must not run beside it,
    while a process of another name of the same run is left alone."""
    from skewlab.live.driver.launch import LocalLauncher

    launcher = LocalLauncher(detached=detached)
    log = tmp_path / "worker-3.log"
    stray, _ = launcher.start("worker-3", [sys.executable, "-c", TREE], log)  # never recorded
    other, _ = launcher.start("worker-2", [sys.executable, "-c", TREE], tmp_path / "worker-2.log")
    _wait_group(stray.pid, 2)
    stray_tree = _group(stray.pid)
    new, _ = launcher.start("worker-3", [sys.executable, "-c", TREE], log)
    try:
        _, alive = psutil.wait_procs(
            [psutil.Process(p) for p in stray_tree if psutil.pid_exists(p)], timeout=30
        )
        assert not alive or all(p.status() == "zombie" for p in alive)
        assert new.poll() is None and other.poll() is None  # the new one and worker-2 run
    finally:
        for p in (new, other, stray):
            p.kill()


WITHOUT_PANDAS = """\
import sys
from skewlab.live.driver.launch import without_pandas
without_pandas()
without_pandas()  # twice: one finder
import numpy as np, pyarrow as pa
from skewlab.live.worker.rows import ms
table = pa.table({"k": ["a", "b"], "n": np.arange(2)})
assert table.column("n").to_pylist() == [0, 1], table
try:
    import pandas
except ModuleNotFoundError as exc:
    print("refused:", exc)
print("in sys.modules:", "pandas" in sys.modules)
"""


def test_a_worker_tier_process_converts_with_pyarrow_and_never_imports_pandas() -> None:
    """In a process of its own (pytest's own keeps pandas): conversions work as before,
    pandas is refused and never loaded, whoever asks."""
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_PANDAS], capture_output=True, text=True, check=True
    ).stdout
    assert "refused: pandas: not imported in a worker-tier process" in out, out
    assert "in sys.modules: False" in out, out


RUN_AS_MAIN = """\
import atexit, runpy, sys
names = lambda: [type(f).__name__ for f in sys.meta_path]
atexit.register(lambda: print("refusing:", "_NoPandas" in names()))
sys.argv = ["{module}"]  # no arguments: main prints its usage and returns 2
runpy.run_module("{module}", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "module",
    ["skewlab.live.worker.process", "skewlab.live.worker.warm", "skewlab.live.worker.consumer"],
)
def test_every_worker_tier_main_refuses_pandas(module: str) -> None:
    """Run as ``__main__``, the module installs the refusal (:func:`without_pandas`)."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_AS_MAIN.format(module=module)], capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert "usage:" in done.stderr
    assert "refusing: True" in done.stdout, done.stdout

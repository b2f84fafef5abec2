"""Crash points: fire on the n-th hit, once per marker directory, never when unarmed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from skewlab import faults

_SCRIPT = """
import sys
from skewlab.faults import crash_point
for i in range(5):
    crash_point("p")
    print(i, flush=True)
"""


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    full = {k: v for k, v in os.environ.items() if k not in (faults.ENV_POINTS, faults.ENV_DIR)}
    full.update(env)
    return subprocess.run([sys.executable, "-c", _SCRIPT], env=full, capture_output=True, text=True)


def test_parse_accepts_names_and_counts() -> None:
    assert faults.parse("a@2, b") == {"a": 2, "b": 1}
    assert faults.parse("") == {}


@pytest.mark.parametrize("bad", ["@2", "a@0", "a@x"])
def test_parse_rejects_bad_entries(bad: str) -> None:
    with pytest.raises(ValueError, match="bad crash point"):
        faults.parse(bad)


def test_unarmed_point_never_fires() -> None:
    faults.crash_point("p", env={})
    faults.crash_point("p", env={faults.ENV_POINTS: "other"})


def test_point_fires_on_nth_hit_then_once_per_marker_dir(tmp_path: Path) -> None:
    env = faults.crash_env({"p": 3}, tmp_path)
    first = _run(env)
    assert first.returncode == faults.CRASH_EXIT
    assert first.stdout.split() == ["0", "1"]
    assert faults.fired(tmp_path, "p")
    again = _run(env)
    assert again.returncode == 0
    assert again.stdout.split() == ["0", "1", "2", "3", "4"]


def test_point_without_marker_dir_fires_every_time(tmp_path: Path) -> None:
    env = {faults.ENV_POINTS: "p"}
    assert _run(env).returncode == faults.CRASH_EXIT
    assert _run(env).returncode == faults.CRASH_EXIT


def test_processes_reaching_a_point_at_once_fire_it_once(tmp_path: Path) -> None:
    env = faults.crash_env(["p"], tmp_path)
    import os

    full = {k: v for k, v in os.environ.items() if k not in (faults.ENV_POINTS, faults.ENV_DIR)}
    full.update(env)
    procs = [
        subprocess.Popen([sys.executable, "-c", _SCRIPT], env=full, stdout=subprocess.DEVNULL)
        for _ in range(6)
    ]
    codes = [p.wait() for p in procs]
    assert codes.count(faults.CRASH_EXIT) == 1
    assert codes.count(0) == 5

"""``skewlab run`` says what each phase does while it does it (issue 35 point 4).

One real run through the CLI (a subprocess, stderr not a terminal: plain lines), its
stderr read line by line as it arrives. The first line comes before the route job
exists (its ready marker is written after Spark's session and warm-up, tens of seconds
later on these machines); the start-up line with the Spark UI link comes before the
first event is produced; every phase after it is named before its work, in order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from skewlab.live.driver.lifecycle import gc
from skewlab.rundir import RunDir

pytestmark = pytest.mark.integration

ARGS = ["--workers", "2", "--partitions", "2", "--workload", "country:R80", "--window", "1",
        "--trigger", "0.5", "--no-mlflow", "--no-quality", "--seed", "7", "--events", "3000",
        "--rate", "1000"]  # fmt: skip

PHASES = [
    "connecting to the broker",
    "broker ",
    "topics ",
    "starting the route job",
    "start-up: ",
    "producing 3,000 events",
    "draining",
    "merging the workers' partials",
    "verdict: EXACT",
    "summary: ",
]
"""The beginnings of the phase lines, in the order a run says them."""


def test_every_phase_is_named_as_it_starts_and_the_first_line_comes_at_once(
    broker: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    cmd = [sys.executable, "-m", "skewlab.cli", "run", "--strategy", "key",
           "--bootstrap", broker.bootstrap, *ARGS, "--home", str(home)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))  # fmt: skip
    lines: list[tuple[float, str, bool]] = []  # (seconds since start, line, route job ready)
    t0 = time.monotonic()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            runs = list((home / "runs").iterdir()) if (home / "runs").is_dir() else []
            ready = any(RunDir.of(r).route_ready.exists() for r in runs)
            lines.append((time.monotonic() - t0, line.rstrip("\n"), ready))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.read()  # stderr is the reader's alone (communicate would share it)
        proc.wait(timeout=900)
        reader.join(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        gc(home)
    text = "\n".join(line for _, line, _ in lines)
    assert proc.returncode == 0, text
    said = [(t, line.split(": ", 1)[1], ready) for t, line, ready in lines
            if line.startswith("key: ")]  # fmt: skip
    # the first line is a phase line, printed before the route job even exists
    assert lines and lines[0][1].startswith("key: connecting to the broker"), text
    assert not lines[0][2], "the first line came only after the route job was ready"
    print(f"first line after {lines[0][0]:.1f} s: {lines[0][1]}")
    # each phase named, in order (progress lines of produce and drain come between)
    at = [next((i for i, (_, s, _) in enumerate(said) if s.startswith(p)), -1) for p in PHASES]
    assert -1 not in at and at == sorted(at), f"{dict(zip(PHASES, at))}\n{text}"
    startup = said[at[PHASES.index("start-up: ")]][1]
    assert "Spark UI http://127.0.0.1:" in startup, startup
    assert "EXACT" in out

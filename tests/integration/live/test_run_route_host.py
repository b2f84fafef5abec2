"""``skewlab run`` starts the data dir's route host and its runs share its one Spark session.

One real ``skewlab run --compare key,shuffle`` through the CLI with no
``$SKEWLAB_ROUTE_HOST`` (the session's host is not inherited): the command starts a host
under ``<data dir>/route-host`` while the broker connects, both runs' route queries run on
it (each ``route.ready`` names it) and end EXACT; the host stays up with a note saying how
to stop it; ``skewlab status`` lists it and ``skewlab down`` stops it by its stop file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from skewlab.commands.services import ROUTE_HOST
from skewlab.live.driver.lifecycle import gc
from skewlab.live.driver.route_host import ROUTE_HOST_ENV, HostDir, stop_host
from skewlab.rundir import RunDir

pytestmark = pytest.mark.integration

ARGS = ["--workers", "2", "--partitions", "2", "--workload", "country:R80", "--window", "1",
        "--no-mlflow", "--no-quality", "--seed", "7", "--events", "2000", "--rate", "1000",
        "--no-progress"]  # fmt: skip


def _skewlab(home: Path, *argv: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ROUTE_HOST_ENV}
    cmd = [sys.executable, "-m", "skewlab.cli", *argv, "--home", str(home)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def test_run_starts_a_route_host_its_runs_share_and_down_stops_it(
    broker: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    d = HostDir((home / ROUTE_HOST).resolve())
    try:
        run = _skewlab(home, "run", "--compare", "key,shuffle", "--bootstrap", broker.bootstrap,
                       *ARGS)  # fmt: skip
        assert run.returncode == 0, run.stderr[-4000:]
        assert run.stdout.count("EXACT") == 2, run.stdout
        readies = [
            json.loads(RunDir.of(r).route_ready.read_text()) for r in (home / "runs").iterdir()
        ]
        assert len(readies) == 2
        assert {r["host"] for r in readies} == {str(d.path)}  # one host, one session
        assert all("t_host" in r and "t_session" not in r for r in readies)
        rec = d.host_record()
        assert rec is not None and d.alive()
        notes = [ln for ln in run.stderr.splitlines() if "route host started" in ln]
        assert len(notes) == 1 and f"pid {rec.pid}" in notes[0], run.stderr[-2000:]
        assert "skewlab down --home" in notes[0]

        status = _skewlab(home, "status", timeout=120)
        row = next(ln.split() for ln in status.stdout.splitlines() if ln.startswith(ROUTE_HOST))
        assert row[1] == "running" and row[3] == str(rec.pid), status.stdout
        down = _skewlab(home, "down", timeout=300)
        assert f"{ROUTE_HOST}: stopped" in down.stdout.splitlines(), down.stdout + down.stderr
        assert not d.alive()
        assert "route host ready" in d.log.read_text()
    finally:
        stop_host(d.path)
        gc(home)

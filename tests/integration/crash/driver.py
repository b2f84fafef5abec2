"""A live run driven by separate driver processes, each resumed after the previous one died.

Crash points of the driver itself (``driver.mid_produce``) and of the control
loops that run as its threads (``rebalance.mid_reassignment``,
``scaleout.between_checkpoint_and_switch``) end the driver process: the run is
then resumed from its handle by a new driver, the path the ``skewlab_experiment``
DAG takes when a task is retried (:meth:`skewlab.live.driver.run.Run.resume`). The
children are started detached (their own sessions), so they outlive a driver.

:func:`drive` starts driver after driver (``python -c`` with :data:`DRIVER`, the
crash points in its environment) until one finishes; the last one writes the
run's summary as JSON for the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from skewlab import faults

DRIVER = r"""
import dataclasses, json, sys, time
from pathlib import Path
from skewlab.runsettings import ExperimentSettings
from skewlab.live.driver.handle import Phase as P
from skewlab.live.driver.run import Run
from skewlab.io.delta import DeltaStore

settings, run_id, run_dir, out, wait_moved = (
    json.loads(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]), int(sys.argv[5]))
if (run_dir / "handle.json").exists():
    run = Run.resume(run_dir)
else:
    run = Run.new(ExperimentSettings(**settings), run_id, detached=True)
h = run.ctx.handle

def hold_until_moved(sent, procs):
    # Hold the producer until the rebalancer wrote a version (a busy machine lags).
    if not wait_moved or sent < wait_moved:
        return
    store = DeltaStore(h.delta_root)
    deadline = time.monotonic() + 300
    while store.read("assignments", run_id=h.run_id).num_rows == 0:
        if time.monotonic() > deadline:
            raise SystemExit("no assignments version within 300 s")
        time.sleep(0.2)

run.ctx.hook = hold_until_moved
with run:
    steps = [(P.SERVICES, run.services), (P.TOPICS, run.topics), (P.STARTED, run.start),
             (P.PRODUCED, run.produce), (P.DRAINED, run.drain), (P.AGGREGATED, run.aggregate)]
    for phase, step in steps:
        if not h.done(phase):
            step()
    summary = run.summarize()
out.write_text(json.dumps(dataclasses.asdict(summary), default=str))
"""


def drive(
    settings: Any,
    run_id: str,
    run_dir: Path,
    env: Mapping[str, str],
    attempts: int,
    wait_moved: int = 0,
    timeout_s: float = 1800.0,
) -> tuple[list[int], dict[str, Any]]:
    """Drivers until one exits 0 (at most ``attempts``); their exit codes and the summary.

    Every driver but the last must die at a crash point (exit :data:`faults.CRASH_EXIT`).
    """
    import pytest

    run_dir.parent.parent.mkdir(parents=True, exist_ok=True)  # the data dir
    out = run_dir.parent.parent / f"{run_id}.summary.json"
    log = run_dir.parent.parent / f"{run_id}.driver.log"
    base = {k: v for k, v in os.environ.items() if k not in (faults.ENV_POINTS, faults.ENV_DIR)}
    full = {**base, **env}  # this process's settings (``SKEWLAB_WORKER_ENGINE``...) carry over
    codes: list[int] = []
    for _ in range(attempts):
        with open(log, "ab") as f:
            rc = subprocess.run(
                [sys.executable, "-c", DRIVER, json.dumps(asdict(settings)), run_id,
                 str(run_dir), str(out), str(wait_moved)],
                env=full, stdout=f, stderr=subprocess.STDOUT, timeout=timeout_s, check=False,
            ).returncode  # fmt: skip
        codes.append(rc)
        if rc == 0:
            return codes, json.loads(out.read_text())
        if rc != faults.CRASH_EXIT:
            tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-8:])
            pytest.fail(f"driver exited {rc} (not a crash point); {log}: {tail}")
    pytest.fail(f"no driver finished in {attempts} attempts: exit codes {codes}")

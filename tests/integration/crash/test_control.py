"""Crash matrix, control loops and the driver: runs driven by drivers that die and resume.

The rebalance run (KEY + SMALOPS, keys moving by message sets) carries every point
that exists in it: the driver dies mid-produce (``driver.mid_produce``), the next
driver's rebalancer dies right after writing an assignments version
(``rebalance.mid_reassignment``), the route job dies after a batch's Kafka
produce (``route.after_produce``), workers die around their partials commit, and
a worker killed by the test dies again as it restarts, restoring its key state
(``worker.restoring``, released once the first driver died). Each driver but the
last dies; the run is resumed from its handle by the next. At the end: every point
fired, the input holds exactly the workload (the resumed producer sent only what was
missing), 0 lost, 0 doubled, exact key state (one holder per key, its count = the
key's events), 0 order violations, and keys moved (by the version the crashed
rebalancer wrote, whose decision row is lost with it) with their state handed off.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from tests.integration.crash.driver import drive
from tests.integration.crash.harness import (
    WORKER_POINTS,
    Crashes,
    assert_survived,
    engine,
    supervised,
)
from tests.integration.fixtures.engine import running_attempt
from tests.integration.fixtures.live import LIVE_DEFAULTS, LiveRun, RunRefs

if TYPE_CHECKING:
    from skewlab.live.driver.handle import ProcRecord

pytestmark = [
    pytest.mark.integration,
    pytest.mark.crash,
    pytest.mark.skipif(not supervised(), reason="needs the driver's supervision (issue 18)"),
]

REBALANCE: dict[str, Any] = {
    **LIVE_DEFAULTS,
    "workload": "zipf:s=1.1,v=2.72,keys=50",
    "events": 12_288,
    "rate": 1_000.0,
    "rebalance": "smalops",
    "rebalance_params": {"threshold": 0.05, "gate": False},
    "rebalance_interval_s": 2.0,
    "rebalance_lead_s": 0.5,
    "max_events_per_trigger": 2_000,
}


class KillOnResume:
    """Once the first driver died, releases ``worker.restoring`` and SIGKILLs one running
    worker that did not crash (a local process: its session; a Spark task: its running
    attempt), whose restart (by a later driver's supervisor or by Spark's task retry) then
    dies at that point."""

    def __init__(self, refs: RunRefs, crashes: Crashes, first_driver_dead: Any) -> None:
        self.refs, self.crashes, self.dead = refs, crashes, first_driver_dead
        self.victim: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from skewlab.live.driver.handle import RunHandle

        while not self._stop.wait(0.1):
            if not self.dead():
                continue
            self.crashes.release_later()
            crashed = {self.crashes.pid(p) for p in self.crashes.points}
            with contextlib.suppress(Exception):
                procs = RunHandle.load(self.refs.run_dir).procs
                for name, rec in sorted(procs.items()):
                    pid = _running_pid(rec) if name.startswith("worker-") else None
                    if pid is not None and pid not in crashed:
                        kill = os.kill if rec.request is not None else os.killpg  # its session
                        with contextlib.suppress(ProcessLookupError):
                            kill(pid, signal.SIGKILL)
                        self.victim = name
                        return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _running_pid(rec: ProcRecord) -> int | None:
    """The pid of the process running for worker record ``rec`` (a Spark task: its running
    attempt's), or None."""
    from skewlab.live.driver.launch import Detached

    if rec.request is not None:
        return running_attempt(rec)
    return rec.pid if Detached(rec).alive() else None


def test_rebalance_run_survives_driver_controller_route_and_worker_crashes(live_refs):
    from skewlab.live.report.summary import RunSummary

    refs = live_refs("key", **REBALANCE)
    crashes = Crashes(
        refs.run_dir.parent.parent / "markers",
        {
            "driver.mid_produce": 1,
            "rebalance.mid_reassignment": 1,
            "route.after_produce": 2,
            **WORKER_POINTS,
        },
        later={"worker.restoring": 1},
    )
    t0 = time.monotonic()
    killer = KillOnResume(refs, crashes, lambda: crashes.pid("driver.mid_produce") is not None)
    try:
        codes, summary = drive(
            refs.settings, refs.run_id, refs.run_dir, crashes.env(), attempts=4, wait_moved=4096
        )
    finally:
        killer.close()
    assert codes == [86, 86, 0], codes
    run = LiveRun(**refs.__dict__, summary=RunSummary(**summary))
    assert killer.victim is not None
    restarts = assert_survived(run, crashes, killed=1)
    # Keys moved across the crashes: the version written just before the rebalancer's
    # crash is in force (its decision row is not: the round never finished), state was
    # handed off, and the final key state is exact (assert_survived).
    rows = refs.store.read("assignments", run_id=refs.run_id).to_pylist()
    assert min(r["version"] for r in rows) == 1
    assert run.summary is not None
    assert any(r["reason"] == "moved" for r in rows) and run.summary.handoffs >= 1
    print(f"crash rebalance ({engine(refs.run_dir)}): {sorted(crashes.fired())} codes {codes} "
          f"restarts {restarts} {time.monotonic() - t0:.0f} s")  # fmt: skip

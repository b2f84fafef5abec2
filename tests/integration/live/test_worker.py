"""A live worker killed mid-stream and restarted loses and doubles nothing.

The crash point: worker 0 is SIGKILLed once it has committed at least one flush
(``partials`` version > 0) and about half the events are produced; it is restarted
at once (by the test, or by Spark's task retry on the Spark worker engine) and must
resume from its committed routed offset, not from 0.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from tests.integration.fixtures.engine import engine, kill_worker, restart_killed, task_retries
from tests.integration.fixtures.live import LIVE_DEFAULTS, RunRefs, per_key_worker, wait_for

from skewlab.live.report.aggregate import verify

pytestmark = pytest.mark.integration

N = LIVE_DEFAULTS["events"]


def test_worker_killed_mid_stream_resumes_from_its_committed_offset(run_live):
    seen: dict[str, Any] = {}

    def crash_worker_0(sent: int, procs: Any, refs: RunRefs) -> None:
        if seen or sent < 0.5 * N:
            return
        app = f"work-0:{refs.run_id}"
        wait_for(
            "worker 0's first committed flush",
            lambda: (refs.store.committed_version("partials", app) or 0) > 0,
            watch=procs.workers[0],
        )
        seen["sent"] = sent
        proc = procs.workers[0]
        _, seen["rc"] = kill_worker(proc)
        seen["committed"] = refs.store.committed_version("partials", app)
        restart_killed(procs, 0, proc)

    run = run_live("pkg", hook=crash_worker_0)
    assert seen["rc"] == -9 and seen["sent"] >= 0.5 * N
    if engine(run.run_dir) == "spark":  # restarted as attempt 1 of its job, by Spark only
        assert task_retries(run.run_dir) == {"worker-0": 1}
    starts = [
        int(o)
        for o in re.findall(r"worker 0 resumes at routed offset (\d+)", run.log("worker-0.log"))
    ]
    assert len(starts) == 2 and starts[0] == 0
    # The second start resumed exactly where the last commit before the kill left off.
    assert starts[1] == seen["committed"] > 0
    progress = run.store.read(
        "worker_progress", run_id=run.run_id, filters=[("worker", "=", 0)]
    ).to_pylist()
    assert starts[1] in {r["routed_offset"] for r in progress}

    assert run.summary.exact, run.summary.exactness
    report = verify(run.store, run.client, run.run_id, run.events_topic, run.settings.window_s)
    assert (report.expected_events, report.actual_events) == (N, N)
    assert (report.lost, report.doubled, report.sum_mismatches) == (0, 0, 0)
    # Worker 0's partials still match what the route job sent it, key by key.
    routed = per_key_worker(run.store, "key_loads", run.run_id)
    partials = per_key_worker(run.store, "partials", run.run_id)
    assert partials == routed
    assert (
        sum(c for (_, w), c in partials.items() if w == 0)
        == run.client.end_offsets(run.routed_topic)[0]
    )

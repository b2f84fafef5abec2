"""Crash matrix, scale-out runs: every point of the run kind, each policy one run.

A KEY run with ``--scale-out <policy>`` and a load ramp that overloads a worker
(as ``tests/integration/live/test_scaleout.py``) is driven by drivers that die and
resume (:func:`~tests.integration.crash.driver.drive`). Each run carries several
points at once; they fire at different times, so one run covers them all:

- ``driver.mid_produce@2``: the first driver dies at its 2nd produce chunk, before
  any overload (checkpoint and restart runs);
- ``route.in_batch@2`` / ``route.after_produce@2``: the route job's 2nd micro-batch
  (one per run: a route restart costs a Spark start). Such a run starts its own route
  job; the restart run, arming none, runs its route query on the session's warm route
  host (``route_host.hostable``; docs/route-host.md);
- ``worker.before_commit`` / ``worker.after_commit``: a worker's first flush;
- ``worker.restoring@2``: the 2nd hit of the point in one process is only reached
  by a started instance replaying its shadow (the 1st is its start-up), so a new
  instance of the state manager dies mid-shadow: the driver's supervision (or, for
  workers run as Spark tasks, Spark's task retry) must restart it (it resumes from
  its committed plan and offsets);
- ``scaleout.after_cut`` (checkpoint run): the old instance dies right after
  committing its cut (docs/scaleout.md, "The cut"); restarted, it reads the cut
  from its committed state and keeps dropping the moved keys, while the new
  instance goes live at the committed offset;
- ``scaleout.between_checkpoint_and_switch``: the driver (its state manager
  thread) dies with the new instances started and the routing switch not done;
  the next driver's state manager is rebuilt from ``decisions`` and
  ``assignments`` (:mod:`skewlab.control.scaleout.recovery`) and finishes the
  switch (restart: at once; checkpoint / active backup: when the instances are
  ready / the load is at scale_out).

Each run must end with every point fired, a restart of the new instance, the
input exactly the workload, 0 lost, 0 doubled, exact key state, 0 order
violations, and one switch per scale event: no instance started while running, no
``assignments`` version written twice or skipped, and every start of a new instance's
process a manager start or a restart
(:func:`~tests.integration.crash.harness.restarts_of`). Each switch reports the
keys its version moved; the one the resumed driver's manager made moved some
(checkpoint, restart), and its scale event has them and their pause.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

from skewlab.control.scaleout.recovery import ORDER
from skewlab.spec import n_events
from tests.integration.crash.driver import drive
from tests.integration.crash.harness import Crashes, engine, restarts_of, supervised
from tests.integration.fixtures.live import LiveRun

pytestmark = [
    pytest.mark.integration,
    pytest.mark.crash,
    pytest.mark.skipif(not supervised(), reason="needs the driver's supervision (issue 18)"),
]

SCALE: dict[str, Any] = {
    "workers": 2,
    "partitions": 2,
    "workload": "zipf:s=0.8,v=2.72",
    "events": None,
    "rate": 30.0,
    "duration_s": 16.0,
    "load_ramp": "2x/4s",
    "service_us": 20_000.0,  # 50 events/s per instance: the third ramp step overloads one
    "max_events_per_trigger": None,
    "window_s": 1.0,
    "trigger_s": 0.5,
    "flush_interval_s": 0.5,
    "mlflow": False,
    "seed": 7,
    "scale_out_interval_s": 1.0,
    "scale_out_params": {"alarming": 35.0, "scale_out": 55.0, "cooldown_s": 60.0},
}
"""30 -> 240 events/s in 4 s steps (1,800 events): one overloaded worker, one scale event
enough. Each run's check that every switch moved keys covers the switch a resumed driver
finishes (docs/crash-matrix.md, "Time": the 32 s ramp was kept only while that switch
reported 0 keys moved and a second scale event had to show keys moving)."""
SWITCH = "scaleout.between_checkpoint_and_switch"
CUT = "scaleout.after_cut"
NEW_INSTANCE = {"worker.restoring": 2}
RUNS: dict[str, dict[str, int]] = {
    "checkpoint": {
        "driver.mid_produce": 2,
        "route.in_batch": 2,
        "worker.before_commit": 1,
        SWITCH: 1,
        CUT: 1,
        **NEW_INSTANCE,
    },
    "active-backup": {
        "route.after_produce": 2,
        "worker.after_commit": 1,
        SWITCH: 1,
        **NEW_INSTANCE,
    },
    "restart": {
        "driver.mid_produce": 2,
        "worker.before_commit": 1,
        "worker.after_commit": 1,
        SWITCH: 1,
        **NEW_INSTANCE,
    },
}
"""Per policy, the points its run arms (``point -> n``: fire at the n-th hit)."""


def new_instances(run: LiveRun, workers: int) -> list[int]:
    """The partitions >= W the state manager started an instance on (their logs)."""
    names = (p.stem for p in run.run_dir.glob("worker-*.log"))
    return sorted(j for j in (int(n.split("-")[1]) for n in names) if j >= workers)


def process_starts(run: LiveRun, j: int) -> int:
    """Processes of worker ``j`` that started reading (each logs where it resumes, as
    :func:`~tests.integration.crash.harness.worker_resumes` counts)."""
    log = run.run_dir / f"worker-{j}.log"
    return log.read_text(errors="replace").count("resumes at routed offset")


def _decisions(run: LiveRun, policy: str) -> list[dict[str, Any]]:
    """The run's scale-out decisions in the order they were taken (time, then the
    policy's order of one step's actions, as the recovery replays them)."""
    t = run.store.read("decisions", run_id=run.run_id, columns=["ts", "loop", "detail"])
    rows = [
        (int(ts), json.loads(d))
        for ts, loop, d in zip(t["ts"].to_pylist(), t["loop"].to_pylist(), t["detail"].to_pylist())
        if loop == "scale-out"
    ]
    order = ORDER.get(policy, ORDER["default"])
    rows.sort(key=lambda r: (r[0], order.get(str(r[1].get("action")), 99)))
    return [d for _, d in rows]


def manager_starts(details: list[dict[str, Any]], workers: int) -> dict[int, int]:
    """Per instance, how often the state managers started it (``started`` of their
    ``StartInstances`` rows; active backup stops its secondaries when the load falls
    below alarming and may start them again later). Fails if a manager started an
    instance its decisions still held running (a resumed manager that forgot it)."""
    running: set[int] = set(range(workers))
    starts: dict[int, int] = {}
    for d in details:
        if d["action"] == "StartInstances":
            for j in map(int, d.get("started", [])):
                assert j not in running, f"instance {j} started while running: {details}"
                running.add(j)
                starts[j] = starts.get(j, 0) + 1
        elif d["action"] == "StopInstances":
            running -= set(map(int, d.get("stopped", [])))
    return starts


@pytest.mark.parametrize("policy", list(RUNS))
def test_scale_out_run_survives_its_crash_points(live_refs: Any, policy: str) -> None:
    from skewlab.live.report.summary import RunSummary

    refs = live_refs("key", scale_out=policy, **SCALE)
    crashes = Crashes(refs.run_dir.parent.parent / "markers", RUNS[policy])
    t0 = time.monotonic()
    codes, summary = drive(
        refs.settings, refs.run_id, refs.run_dir, crashes.env(), attempts=4
    )  # every driver carries every point; each fires once (its marker)
    run = LiveRun(**refs.__dict__, summary=RunSummary(**summary))
    s = run.summary
    assert s is not None
    fired = crashes.fired()
    assert fired == set(RUNS[policy]), f"did not fire: {sorted(set(RUNS[policy]) - fired)}"
    driver_deaths = sum(p in fired for p in ("driver.mid_produce", SWITCH))
    assert codes == [86] * driver_deaths + [0], codes

    # Restarts: the route job and workers restarted, the new instance among them.
    restarts = restarts_of(run.run_dir)
    W = run.settings.workers
    if any(p.startswith("route.") for p in fired):
        assert restarts.get("route", 0) >= 1, restarts
    restarted = {int(k.split("-")[1]) for k in restarts if k.startswith("worker-")}
    assert any(j >= W for j in restarted), f"no new instance restarted: {restarts}"
    olds = sum(p in fired for p in ("worker.before_commit", "worker.after_commit", CUT))
    assert len([j for j in restarted if j < W]) >= min(olds, 1), restarts
    # A new instance's process started once per manager start plus once per restart (a
    # resumed driver's manager that forgot it would start it again while running).
    details = _decisions(run, policy)
    by_manager = manager_starts(details, W)
    for j in new_instances(run, W):
        want = by_manager.get(j, 0) + restarts.get(f"worker-{j}", 0)
        assert process_starts(run, j) == want, (j, by_manager, restarts)

    # The input, exactly; results and key state exact.
    n = n_events(run.settings.spec.workload)
    ends = run.client.end_offsets(run.events_topic)
    begins = run.client.begin_offsets(run.events_topic)
    assert sum(e - begins.get(p, 0) for p, e in ends.items()) == n
    assert s.exact, s.exactness
    assert "lost 0, doubled 0, sum mismatches 0" in s.exactness
    assert s.state_exact and s.order_violations == 0

    # One switch per scale event, written once, across the dead drivers.
    starts = [d for d in details if d["action"] == "StartInstances"]
    assert starts, "the state manager never started an instance"
    epochs = [p["epoch"] for d in starts for p in d.get("plans", {}).values()]
    assert len(epochs) == len(set(epochs))
    moves = run.store.read("assignments", run_id=run.run_id).to_pylist()
    versions = sorted({int(r["version"]) for r in moves})
    assert versions == list(range(1, len(versions) + 1)), versions
    switches = [d for d in details if d["action"] == "SwitchRouting" and d["from"] != d["to"]]
    assert len(switches) <= len(starts)  # a take-over only after instances were started
    if policy != "active-backup":  # its take-over waits for scale_out after the resume
        assert switches
    # A switch reports the keys its own version moved; the first is the one the resumed
    # driver's manager made (the first driver to reach SWITCH died there). It moved keys
    # (it read the keys routed before it switched), and its scale event has them and the
    # pause of their hand-offs. Not asserted for active backup: after its
    # route.after_produce crash a batch's records are in `routed` (the overload) while
    # its `key_loads` rows, which the manager reads, wait for the restarted route job,
    # so a take-over can see too few keys to move one.
    moved_by = Counter(int(r["version"]) for r in moves if r["reason"] == "scale-out")
    for d in switches:
        assert d["keys_moved"] in (0, moved_by[int(d["version"])]), (d, moved_by)
    if policy != "active-backup":
        first = switches[0]
        assert first["keys_moved"] >= 1, switches
        (ev,) = [
            e
            for e in s.scale_log
            if e["group"] == first["group"] and e["to"] == first["to"]
            and not e.get("recovered")
        ]  # fmt: skip
        assert ev["keys_moved"] == first["keys_moved"] and ev["pause_s"] > 0, ev
    print(
        f"crash scale-out {policy} ({engine(run.run_dir)}): {sorted(fired)} codes {codes} "
        f"restarts {restarts} "
        f"switches {len(switches)} {time.monotonic() - t0:.0f} s"
    )

"""Live rebalancing: keys move by message sets, order holds, results and key state stay exact.

Each test runs a real experiment (broker, Spark route job, workers, Delta) with the
rebalancer loop on top of KEY grouping, then checks the evidence:

* decisions rows with moves and assignments versions exist;
* a moved key's routed events sit on two workers, with set ids that only grow
  along each source partition;
* 0 per-key order violations, exact results (merged partials == plain count) and
  exact key state (one holder per key whose state counts the key's events);
* imbScore after the first move is below KEY's on the same events.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from tests.integration.fixtures.engine import crash_and_restart, engine, task_retries
from tests.integration.fixtures.live import (
    LiveRun,
    RunRefs,
    routed_sets,
    wait_for,
)

pytestmark = pytest.mark.integration

EVENTS = 12_288  # six produce chunks of 2,048 at 1,000/s: ~12 s of event time
BASE: dict[str, Any] = {
    "events": EVENTS,
    "rate": 1_000.0,
    "rebalance_interval_s": 2.0,
    "rebalance_lead_s": 0.5,
    "max_events_per_trigger": 2_000,
}
SMALOPS = {"threshold": 0.05, "gate": False}  # a few heavy keys of 50; Eq. 4 off (no queues)
SKEW_SWITCH = "eps-switch:low_s=3,high_s=9,keys=200"


def pause_until_moved(after: int) -> Any:
    """A hook holding the producer (once ``after`` events are sent) until a key moved.

    On a loaded machine the route job may lag the producer by many seconds; a
    version is effective from the wall time it is written, so without the pause
    the stream could end before the rebalancer saw any load.
    """

    def hook(sent: int, procs: Any, refs: RunRefs) -> None:
        if sent < after or sent > after + 2048:
            return
        wait_for(
            "the first assignments version",
            lambda: refs.store.read("assignments", run_id=refs.run_id).num_rows > 0,
            timeout_s=240,
            watch=procs.route,
        )
        eff = refs.store.read("assignments", run_id=refs.run_id)["effective_ms"].to_pylist()
        # The producer catches up after a pause: resume once the version applies.
        wait_for("the version to apply", lambda: time.time() > max(eff) / 1000 + 0.2)

    return hook


def pause_until_decided_on_all_sent(after: int) -> Any:
    """A hook holding the producer (once ``after`` events are sent) until a round saw them all.

    It waits for ``key_loads`` to count every sent event, then for a rebalance round that
    started after that (its ``decisions`` row's ``ts``), then for the newest
    ``assignments`` version to apply. With ``after`` past the switch to the skewed phase,
    the map in force then was decided on the skewed keys. (A pause until the first move
    only: a route job lagging by seconds let the only moves be decided on the balanced
    phase, and the skewed phase ended before a later version was in force; CI, stop 40:
    imbScore 98.3 % vs KEY's 98.1 %.)
    """

    def loaded(refs: RunRefs) -> int:
        t = refs.store.read("key_loads", run_id=refs.run_id, columns=["count"])
        return int(sum(t["count"].to_pylist()))

    def rounds_since(refs: RunRefs, t0_ms: float) -> bool:
        t = refs.store.read("decisions", run_id=refs.run_id, columns=["loop", "ts"])
        return any(
            loop == "rebalance" and ts >= t0_ms
            for loop, ts in zip(t["loop"].to_pylist(), t["ts"].to_pylist())
        )

    def hook(sent: int, procs: Any, refs: RunRefs) -> None:
        if sent < after or sent > after + 2048:
            return
        wait_for(
            f"key_loads to count {sent:,} events",
            lambda: loaded(refs) >= sent,
            timeout_s=240,
            watch=procs.route,
        )
        t0_ms = time.time() * 1000
        wait_for("a rebalance round over them", lambda: rounds_since(refs, t0_ms), timeout_s=120)
        t = refs.store.read("assignments", run_id=refs.run_id, columns=["effective_ms"])
        eff = [e for e in t["effective_ms"].to_pylist() if e is not None]
        assert eff, f"no key moved in the rounds over {sent:,} events"
        wait_for("the version to apply", lambda: time.time() > max(eff) / 1000 + 0.2)

    return hook


def assert_moved_and_exact(run: LiveRun) -> str:
    """The checks of the module doc; returns a moved key."""
    s = run.summary
    assert s is not None
    assert s.exact, s.exactness
    assert s.state_exact and s.order_violations == 0
    assert s.rebalances >= 1 and s.keys_moved >= 1 and s.handoffs >= 1
    assert run.store.read("decisions", run_id=run.run_id).num_rows >= 1
    versions = set(run.store.read("assignments", run_id=run.run_id)["version"].to_pylist())
    assert versions and min(versions) == 1
    moved = None
    for key, evs in routed_sets(run.client, run.routed_topic).items():
        if len({w for _, _, w, _ in evs}) < 2:
            continue
        moved = key
        for p in {p for p, _, _, _ in evs}:
            sets = [sid for q, _, _, sid in evs if q == p]
            assert sets == sorted(sets), f"set ids of {key!r} go back on splitter {p}"
        assert len({sid for *_, sid in evs}) >= 2
        by_set = {sid: {w for *_, w, x in evs if x == sid} for *_, sid in evs}
        assert all(len(ws) == 1 for ws in by_set.values()), by_set
    assert moved is not None, "no key was routed to two workers"
    return moved


def test_smalops_moves_heavy_keys_live(run_live):
    t0 = time.monotonic()
    run = run_live(
        "key",
        workload="zipf:s=1.1,v=2.72,keys=50",
        rebalance="smalops",
        rebalance_params=SMALOPS,
        hook=pause_until_moved(4096),
        **BASE,
    )
    assert_moved_and_exact(run)
    s = run.summary
    assert s.imb_after < s.imb_key_after, (s.imb_after, s.imb_key_after)
    print(
        f"smalops: imbScore {s.imb_after:.1f}% vs KEY {s.imb_key_after:.1f}% "
        f"in {time.monotonic() - t0:.0f} s"
    )


def test_dlb_h_rebalances_a_skew_switch_live(run_live):
    t0 = time.monotonic()
    run = run_live(
        "key",
        workload=SKEW_SWITCH,
        rebalance="dlb-h",
        hook=pause_until_decided_on_all_sent(6144),
        **BASE,
    )
    assert_moved_and_exact(run)
    s = run.summary
    assert s.imb_after < s.imb_key_after, (s.imb_after, s.imb_key_after)
    print(
        f"dlb-h: imbScore {s.imb_after:.1f}% vs KEY {s.imb_key_after:.1f}% "
        f"in {time.monotonic() - t0:.0f} s"
    )


def test_worker_killed_during_a_hand_off_restarts_and_stays_exact(run_live):
    seen: dict[str, Any] = {}

    def kill_old_holder(sent: int, procs: Any, refs: RunRefs) -> None:
        if seen or sent < 4096:
            return
        pause_until_moved(sent)(sent, procs, refs)
        rows = refs.store.read("assignments", run_id=refs.run_id).to_pylist()
        moved = [r for r in rows if r["version"] == 1 and r["set_id"] == 1]
        if not moved:
            return
        from skewlab.rebalance.base import hash_worker

        old = hash_worker(moved[0]["key"], refs.settings.workers)
        effective = max(r["effective_ms"] for r in moved) / 1000.0
        # Kill the old holder while the splitters cross the version: markers, buffering
        # on the new holder and the hand-off are in flight.
        wait_for("the version to apply", lambda: time.time() > effective + 0.3)
        seen["worker"], (_, seen["rc"]) = old, crash_and_restart(procs, old, pause_s=1.0)

    run = run_live(
        "key",
        workload="zipf:s=1.1,v=2.72,keys=50",
        rebalance="smalops",
        rebalance_params=SMALOPS,
        hook=kill_old_holder,
        **BASE,
    )
    assert seen and seen["rc"] == -9
    if engine(run.run_dir) == "spark":  # restarted as attempt 1 of its job, by Spark only
        assert task_retries(run.run_dir) == {f"worker-{seen['worker']}": 1}
    assert run.log(f"worker-{seen['worker']}.log").count("resumes at routed offset") == 2
    assert_moved_and_exact(run)

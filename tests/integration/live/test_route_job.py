"""The live route job end to end: groupings, a crash and restart, bad input.

Every test runs a real experiment (broker, Spark route job, worker processes, Delta)
through :func:`skewlab.live.driver.run.run_experiment` and then checks its evidence:

* the run is exact (merged ``results`` == a plain count of ``events``);
* the per-(key, worker) loads are the grouping's decisions: recomputed offline by
  replaying each partition of ``events`` through a :class:`~skewlab.pipeline.route.Splitter`
  batch by batch (the batches read back from the query's checkpoint), they equal
  Delta ``key_loads`` and the workers' ``partials`` summed over windows.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from typing import Any

import pytest
from tests.integration.fixtures.live import (
    LIVE_DEFAULTS,
    LiveRun,
    RunRefs,
    batch_ranges,
    kill_and_wait,
    per_key_worker,
    replay_decisions,
    topic_records,
    wait_for,
)

from skewlab.grouping import make_grouping
from skewlab.io.delta.schemas import QUARANTINE_RAW_PREFIX
from skewlab.live.driver.route_host import ROUTE_HOST_ENV, HostDir
from skewlab.live.report.aggregate import verify
from skewlab.pipeline import events

pytestmark = pytest.mark.integration

N = LIVE_DEFAULTS["events"]
W = LIVE_DEFAULTS["workers"]
HOT = "Turkey"  # the hot key of country:R80 (about 80 % of the events)

# DKG on a short clock: warm-up, promotion cycles and scaling checks all fall inside
# the ~2 s of event time a run produces, so the live run exercises the event-time clock.
DKG_FAST = {"warmup": 0.5, "check_interval": 0.5, "promotion_interval": 0.5, "old_every": 1}
STRATEGIES: dict[str, dict[str, Any]] = {
    "shuffle": {},
    "key": {},
    "pkg": {},
    "dkg": DKG_FAST,
}


def assert_exact(run: LiveRun, expected_events: int) -> None:
    """The summary's verdict and the exactness numbers, recomputed from the kept topic."""
    assert run.summary.exact, run.summary.exactness
    assert run.summary.events == N
    report = verify(run.store, run.client, run.run_id, run.events_topic, run.settings.window_s)
    assert (report.expected_events, report.actual_events) == (expected_events, expected_events)
    assert (report.lost, report.doubled, report.sum_mismatches) == (0, 0, 0)
    assert f"expected {expected_events} events, merged {expected_events}" in run.summary.exactness


def assert_loads_are_the_decisions(run: LiveRun, strategy_params: dict[str, Any]) -> Counter:
    """key_loads == partials == offline replay of the grouping, per (key, worker)."""
    ranges = batch_ranges(run.checkpoint)
    ends = run.client.end_offsets(run.events_topic)
    assert {p: e for p, (_, e) in ranges[-1][1].items()} == ends, "route job did not read all"
    cfg = make_grouping(run.settings.strategy, workers=run.settings.workers, **strategy_params)
    decided = replay_decisions(topic_records(run.client, run.events_topic), cfg, ranges)
    assert per_key_worker(run.store, "key_loads", run.run_id) == decided
    assert per_key_worker(run.store, "partials", run.run_id) == decided
    return decided


def workers_of(decided: Counter, key: str) -> set[int]:
    return {w for (k, w), c in decided.items() if k == key and c > 0}


def spark_starts(run: RunRefs) -> int:
    return run.log("route.log").count("skewlab.spark.session started Spark")


def query_starts(run: RunRefs) -> int:
    """Starts of the run's route query, on a session of its own or on the route host."""
    return run.log("route.log").count("route job ready: ")


def logged_batches(text: str) -> list[int]:
    return [int(b) for b in re.findall(r"batch (\d+): routed \d+", text)]


# ------------------------------------------------------------------ groupings


@pytest.fixture(scope="module")
def grouping_run(run_live):
    """``grouping_run(strategy) -> LiveRun``: one run per strategy, shared by the tests."""
    cache: dict[str, LiveRun] = {}

    def get(strategy: str) -> LiveRun:
        if strategy not in cache:
            cache[strategy] = run_live(strategy, strategy_params=STRATEGIES[strategy])
        return cache[strategy]

    return get


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_grouping_run_is_exact_and_loads_are_its_decisions(grouping_run, strategy):
    run = grouping_run(strategy)
    assert_exact(run, N)
    assert len(batch_ranges(run.checkpoint)) >= 2  # splitter state crossed micro-batches
    decided = assert_loads_are_the_decisions(run, STRATEGIES[strategy])
    assert sum(decided.values()) == N
    hot_workers = workers_of(decided, HOT)
    if strategy == "dkg":  # warm-up over, the hot key got old and its pool scaled up
        assert 3 <= len(hot_workers) <= W
    else:
        assert len(hot_workers) == {"key": 1, "pkg": 2, "shuffle": W}[strategy]
    hot_share = max(sum(c for (_, w), c in decided.items() if w == wk) for wk in range(W)) / N
    if strategy == "key":
        assert hot_share > 0.75  # one worker carries the hot key alone
    else:
        assert hot_share < 0.6


def test_dist_cost_and_imbalance_order_the_groupings(grouping_run):
    runs = {s: grouping_run(s).summary for s in STRATEGIES}
    assert runs["key"].dist_cost == 1.0
    assert 1.0 < runs["pkg"].dist_cost <= 2.0
    assert 1.0 < runs["dkg"].dist_cost < runs["shuffle"].dist_cost
    assert runs["shuffle"].dist_cost > runs["pkg"].dist_cost
    assert runs["key"].imb_score > max(runs[s].imb_score for s in ("shuffle", "pkg", "dkg"))
    assert runs["shuffle"].imb_score < runs["pkg"].imb_score


def test_the_grouping_runs_shared_the_route_hosts_one_session(grouping_run, route_host):
    """Each run's query ran on the session's warm route host: no Spark session of its own,
    ``route.ready`` names the host, the run's batches are in its own route log; the host
    started Spark once for all of them."""
    from skewlab.rundir import RunDir

    for run in (grouping_run("key"), grouping_run("pkg")):
        ready = json.loads(RunDir.of(run.run_dir).route_ready.read_text())
        assert ready["host"] == str(route_host)
        assert spark_starts(run) == 0 and query_starts(run) == 1
        assert logged_batches(run.log("route.log"))
    host_log = HostDir(route_host).log.read_text()
    assert host_log.count("skewlab.spark.session started Spark") == 1


def test_dkg_splitter_starts_its_clock_at_the_first_event():
    """First batch of a fresh DKG splitter at epoch event time t0: warm-up counts from t0.

    Regression: the splitter used to build its grouping with the clock at 0.0, so
    DKG's warm-up was over before the first event and its first ``route_batch`` ran
    ~1.5e8 missed promotion cycles (minutes) at real timestamps.
    """
    import pyarrow as pa

    from skewlab.spark.route import RouteSettings, decode_fn, splitter_fn

    s = RouteSettings(
        run_id="clock",
        bootstrap="127.0.0.1:9",
        events_topic="events-clock",
        routed_topic="routed-clock",
        workers=W,
        strategy="dkg",
        delta_root="/nonexistent",
        run_dir="/nonexistent",
    )
    t0 = 1_795_000_000.0
    raw = pa.RecordBatch.from_pydict(
        {
            "partition": pa.array([0, 0], pa.int32()),
            "offset": pa.array([0, 1], pa.int64()),
            "value": [events.encode("a", t0, 0), events.encode("b", t0 + 0.5, 1)],
        }
    )
    # The route job's two stages: decode next to the source, then the splitter.
    rows = pa.Table.from_batches(list(decode_fn(s.max_event_bytes)(iter([raw])))).to_pandas()
    started = time.monotonic()
    state, out = splitter_fn(s)((0,), None, rows)
    assert time.monotonic() - started < 5.0
    assert (out["worker"] >= 0).all()
    snap = state.grouping
    # DKG seed: warm-up (15 s) and the first promotion cycle count from the splitter's start.
    assert snap["started"] == t0
    assert snap["cycle"] == 0
    assert snap["next_cycle"] == t0 + 15.0


# ------------------------------------------------------------------ crash and restart


@pytest.mark.parametrize("where", ["own", "host"])
def test_route_job_killed_mid_stream_resumes_from_its_checkpoint(run_live, monkeypatch, where):
    """``own``: the route job's process is SIGKILLed and started again; ``host``: the run's
    query on the warm route host is cancelled (its ``kill``) and requested again."""
    if where == "own":
        monkeypatch.delenv(ROUTE_HOST_ENV, raising=False)
    seen: dict[str, Any] = {}

    def crash_route(sent: int, procs: Any, refs: RunRefs) -> None:
        if seen or sent < 0.4 * N:
            return
        commits = refs.checkpoint / "commits"

        def routed_batch_committed() -> bool:
            # A batch with events (so splitter state exists), committed by Spark too.
            v = refs.store.committed_version("key_loads", f"route:{refs.run_id}")
            return v is not None and (commits / str(v)).exists()

        wait_for("a committed batch with events", routed_batch_committed, watch=procs.route)
        seen["sent"] = sent
        if where == "own":
            seen["rc"] = kill_and_wait(procs.route)
        else:
            procs.route.kill()
            seen["rc"] = procs.route.wait(timeout=120)
        seen["committed"] = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        seen["log_batches"] = logged_batches(refs.log("route.log"))
        procs.restart_route()

    run = run_live("pkg", hook=crash_route)
    assert seen["rc"] == -9 and seen["sent"] == 4096
    assert query_starts(run) == 2
    assert spark_starts(run) == (2 if where == "own" else 0)  # the host's session served both
    # The restarted query continued the batch sequence from its checkpoint, not from 0.
    after = logged_batches(run.log("route.log"))[len(seen["log_batches"]) :]
    assert after and min(after) == seen["committed"] + 1
    ranges = batch_ranges(run.checkpoint)
    assert [b for b, _ in ranges] == list(range(len(ranges)))
    assert run.store.committed_version("key_loads", f"route:{run.run_id}") == ranges[-1][0]
    # Idempotent per batch: every event counted once in key_loads, exact at the end,
    # and the restored PKG state gave exactly the decisions of an uninterrupted replay.
    assert_exact(run, N)
    decided = assert_loads_are_the_decisions(run, {})
    assert sum(per_key_worker(run.store, "key_loads", run.run_id).values()) == N
    assert sum(decided.values()) == N


# ------------------------------------------------------------------ bad input

BAD_RECORDS: list[tuple[str, bytes]] = [
    ("not-json", b"this is {not json"),
    ("missing-key", b'{"ts": 1.5, "seq": 3, "payload": ""}'),
    ("bad-key", b'{"key": 42, "ts": 1.5, "seq": 3}'),
    ("bad-ts", b'{"key": "Turkey", "ts": "yesterday", "seq": 3}'),
    ("bad-seq", b'{"key": "Turkey", "ts": 1.5, "seq": "three"}'),
    ("not-object", b'["Turkey", 1.5, 3]'),
    ("too-large", events.encode("Turkey", 1.5, 3, "x" * (960 * 1024))),  # ~1 MB, kept bounded
    ("empty", b""),
    # issue 18's poison records: each one stopped the route job
    ("bad-ts", b'{"key": "poison", "ts": Infinity, "seq": 1}'),
    ("bad-key", b'{"key": "\\ud800", "ts": 1.5, "seq": 1}'),
    ("bad-ts", b'{"key": "poison", "ts": ' + b"9" * 401 + b', "seq": 1}'),
    ("bad-seq", b'{"key": "poison", "ts": 1.5, "seq": %d}' % 2**70),
    ("bad-ts", b'{"key": "poison", "ts": 1e300, "seq": 1}'),
]
"""One record of every kind the route job must quarantine, with its reason."""


def test_bad_input_is_quarantined_and_the_route_job_keeps_going(run_live, broker):
    from skewlab.io.kafka import KafkaSettings, connect

    injected: list[tuple[int, bytes]] = []

    def inject(sent: int, procs: Any, refs: RunRefs) -> None:
        if injected:
            return
        bad = connect(KafkaSettings(broker.bootstrap))
        try:
            for i, (_, raw) in enumerate(BAD_RECORDS):
                part = i % refs.settings.partitions
                bad.produce(refs.events_topic, raw, key=b"bad", partition=part)
                injected.append((part, raw))
            bad.flush()
        finally:
            bad.close()

    run = run_live("pkg", hook=inject)
    assert len(injected) == len(BAD_RECORDS)
    assert query_starts(run) == 1  # the route job never died
    assert run.summary.quarantined == len(BAD_RECORDS)
    assert_exact(run, N)  # over the valid events only
    assert_loads_are_the_decisions(run, {})

    rows = run.store.read("quarantine", run_id=run.run_id).to_pylist()
    assert len(rows) == len(BAD_RECORDS)
    records = topic_records(run.client, run.events_topic)
    got = {}
    for r in rows:
        assert r["topic"] == run.events_topic
        stored = records[r["partition"]][r["offset"]]
        assert stored.offset == r["offset"]
        value = stored.value or b""  # (partition, offset) is where the record is
        assert (r["raw"] or b"") == value[:QUARANTINE_RAW_PREFIX]  # a bounded prefix
        assert r["raw_bytes"] == len(value)
        assert r["raw_sha256"] == hashlib.sha256(value).hexdigest()
        got[value] = (r["reason"], r["partition"])
    P = run.settings.partitions
    assert got == {raw: (reason, i % P) for i, (reason, raw) in enumerate(BAD_RECORDS)}

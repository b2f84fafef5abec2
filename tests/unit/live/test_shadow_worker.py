"""Two live workers on an in-memory topic: a secondary shadows the primary and takes over.

Worker 0 is the primary of operator 0; worker 1 gets a plan (as the state
manager writes it) to shadow hash part 1 of 2 of worker 0's keys. The routed
records, end-of-set markers and hand-offs are written by hand the way the route
job and the workers write them. Checked: the secondary takes its keys at the
switch from its shadow (no state moved), its output before is suppressed, the
key state and the partials are exact, and a restarted secondary resumes its
replay from its committed shadow offsets.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from skewlab.io.delta import DeltaStore
from skewlab.io.kafka.base import KafkaSettings, Record
from skewlab.live import worker as worker_mod
from skewlab.live.summary import final_key_state
from skewlab.live.worker import Worker, WorkerSettings
from skewlab.pipeline import events
from skewlab.state import owner, split_hash

RUN = "shadow-run"
TOPIC = "routed"
SPLITTERS = 1


class Topic:
    """An in-memory ``routed`` shared by the workers' clients."""

    def __init__(self) -> None:
        self.parts: dict[int, list[Record]] = {}
        self.now_ms = 1_000

    def append(self, p: int, key: str, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        log = self.parts.setdefault(p, [])
        self.now_ms += 1
        log.append(Record(TOPIC, p, len(log), key.encode(), value, tuple(headers), self.now_ms))


class Client:
    def __init__(self, topic: Topic) -> None:
        self.t = topic

    def fetch(self, topic: str, p: int, start: int, end: int) -> list[Record]:
        return self.t.parts.get(p, [])[start:end]

    def end_offsets(self, topic: str) -> dict[int, int]:
        return {p: len(v) for p, v in self.t.parts.items()}

    def produce(
        self, topic: str, value: bytes, key: bytes, partition: int, headers: Any = ()
    ) -> None:
        self.t.append(partition, key.decode(), value, list(headers))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Topic, DeltaStore, Path]:
    topic = Topic()
    monkeypatch.setattr(worker_mod, "connect", lambda s: Client(topic))
    return topic, DeltaStore(str(tmp_path / "delta")), tmp_path


def make(tmp: Path, i: int, **settings: Any) -> Worker:
    """Instance ``i`` on the fake topic; ``settings`` replace the defaults below."""
    kw: dict[str, Any] = {"window_s": 1.0, "flush_interval_s": 0.0, **settings}
    s = WorkerSettings(
        run_id=RUN,
        worker=i,
        topic=TOPIC,
        kafka=KafkaSettings("fake:0"),
        delta_root=str(tmp / "delta"),
        splitters=SPLITTERS,
        cost="sleep",
        **kw,
    )
    return Worker(s, busy=lambda s: None)


KEYS = [f"k{i}" for i in range(12)]
MOVED = [k for k in KEYS if owner(k, 2, split_hash) == 1]


class Input:
    """Events of ``KEYS``, routed like the route job routes them."""

    def __init__(self, topic: Topic) -> None:
        self.topic, self.n, self.counts = topic, 0, Counter[str]()

    def send(self, rounds: int, moved_to: int | None = None) -> None:
        for _ in range(rounds):
            for k in KEYS:
                p, hdrs = 0, [events.src_header(0, self.n)]
                if moved_to is not None and k in MOVED:
                    p = moved_to
                    hdrs.append((events.SET_HEADER, b"1:0"))
                val = events.encode_routed(k, 1.0 + self.n * 1e-3, self.n, 1)
                self.topic.append(p, k, val, hdrs)
                self.n += 1
                self.counts[k] += 1

    def switch(self, to: int) -> None:
        """The routing switch: one end-of-set marker per moved key on the old partition."""
        for k in MOVED:
            self.topic.append(0, k, b"", [(events.EOS_HEADER, f"0:{to}:0".encode())])

    def end(self) -> None:
        for p in (0, 1):
            self.topic.append(p, "", b"", [(events.END_HEADER, b"1")])


def plan(store: DeltaStore, checkpoint: bool = False, epoch: int = 5) -> None:
    detail = {
        "action": "StartInstances",
        "plans": {
            "1": {
                "epoch": epoch,
                "group": 0,
                "sources": [0],
                "part": 1,
                "parts": 2,
                "checkpoint": checkpoint,
            }
        },
    }
    store.append(
        "decisions",
        [
            {
                "ts": 0,
                "loop": "scale-out",
                "policy": "active-backup",
                "detail": json.dumps(detail),
                "cost": 0.0,
                "imbalance_before": None,
                "imbalance_after": None,
                "reason": "test",
            }
        ],
        app_id=f"scaleout-decisions:{RUN}",
        version=epoch,
        run_id=RUN,
    )


def drain(*ws: Worker) -> None:
    for _ in range(20):
        for w in ws:
            w.step()


def partials_by_worker(store: DeltaStore) -> Counter[int]:
    t = store.read("partials", run_id=RUN, columns=["worker", "count"])
    out: Counter[int] = Counter()
    for w, c in zip(t["worker"].to_pylist(), t["count"].to_pylist()):
        out[w] += c
    return out


def test_secondary_shadows_and_takes_over_without_state_moving(env: Any) -> None:
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0)
    inp.send(3)
    drain(primary)
    primary.flush()  # the committed state the secondary copies
    plan(store)
    secondary = make(tmp, 1)
    assert secondary.shadow is not None and secondary.shadow.active
    inp.send(4)  # the primary and the shadow both read these
    drain(secondary)
    assert partials_by_worker(store)[1] == 0  # a shadow writes no output
    inp.switch(1)
    inp.send(2, moved_to=1)
    drain(secondary)  # the shadow reaches the markers before the primary does
    taken = secondary.sets.received if secondary.sets else {}
    assert {k for k, s in taken.items() if s == 1} == set(MOVED)
    drain(primary, secondary)  # the primary's hand-offs arrive: duplicates that agree
    inp.end()
    drain(primary, secondary)
    primary.flush()
    secondary.flush()
    counts, holders, violations = final_key_state(store, RUN)
    assert counts == dict(inp.counts) and set(holders.values()) == {1} and violations == 0
    by_worker = partials_by_worker(store)
    assert by_worker[1] == 2 * len(MOVED)  # only the records routed to it after the switch
    assert sum(by_worker.values()) == sum(inp.counts.values())
    ho = store.read("handoffs", run_id=RUN, columns=["key", "bytes", "tuples"]).to_pylist()
    assert {r["key"] for r in ho} == set(MOVED)
    assert all(r["tuples"] == 4 for r in ho)  # the 4 rounds replayed after the copy


def test_restarted_secondary_resumes_its_replay(env: Any) -> None:
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0)
    inp.send(2)
    drain(primary)
    primary.flush()
    plan(store)
    first = make(tmp, 1)
    inp.send(2)
    inp.switch(1)
    inp.send(1, moved_to=1)
    drain(first)
    first.flush()
    read = first.shadow.read if first.shadow else 0
    assert read > 0
    inp.send(1, moved_to=1)
    again = make(tmp, 1)  # crashed after its commit: same plan epoch, resumes
    assert again.shadow is not None and again.shadow.read == read
    drain(primary, again)
    inp.end()
    drain(primary, again)
    primary.flush()
    again.flush()
    counts, holders, violations = final_key_state(store, RUN)
    assert counts == dict(inp.counts) and set(holders.values()) == {1} and violations == 0
    assert sum(partials_by_worker(store).values()) == sum(inp.counts.values())


def test_replacement_restores_the_newest_checkpoint_and_replays_after_tau(env: Any) -> None:
    """Checkpointing: theta at tau from ``operator_state``, beta and the rest replayed."""
    from skewlab.control.scaleout_state import write_checkpoint

    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0)
    inp.send(2)
    drain(primary)
    primary.flush()
    inp.send(1)  # received, not yet processed: beta of the checkpoint
    ends = Client(topic).end_offsets(TOPIC)
    out = write_checkpoint(store, RUN, 0, [0], 0, ends)
    assert out["beta_records"] == len(KEYS)
    drain(primary)
    primary.flush()  # the primary moves on past the checkpoint
    inp.send(2)
    plan(store, checkpoint=True)
    new = make(tmp, 1)
    assert new.sets is not None and new.sets.shadow_meta is not None
    restore = new.sets.shadow_meta["restore"]
    assert restore["checkpoint"] == 0 and restore["beta_records"] == len(KEYS)
    assert restore["keys"] == len(MOVED)
    inp.switch(1)
    inp.send(1, moved_to=1)
    drain(new)
    taken = {k for k, s in new.sets.received.items() if s == 1}
    assert taken == set(MOVED)  # from the shadow, before the primary drained its backlog
    drain(primary, new)
    inp.end()
    drain(primary, new)
    primary.flush()
    new.flush()
    counts, holders, violations = final_key_state(store, RUN)
    assert counts == dict(inp.counts) and set(holders.values()) == {1} and violations == 0
    assert sum(partials_by_worker(store).values()) == sum(inp.counts.values())
    ho = store.read("handoffs", run_id=RUN, columns=["key", "tuples"]).to_pylist()
    assert all(r["tuples"] == 3 for r in ho)  # beta (1 round) + the 2 rounds after it


def test_stopped_secondary_counts_nothing_and_a_new_plan_starts_afresh(env: Any) -> None:
    """The load fell back: the secondary is stopped after committing its shadow; later a
    new plan (epoch) on the same partition restores again instead of resuming."""
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0)
    inp.send(2)
    drain(primary)
    primary.flush()
    plan(store, epoch=5)
    stopped = make(tmp, 1)
    inp.send(2)
    drain(stopped)
    stopped.flush()  # it committed shadow progress, then was killed
    assert stopped.version is not None and stopped.version > 0
    drain(primary)
    primary.flush()
    plan(store, epoch=6)  # alarming again later
    again = make(tmp, 1)
    meta = again.sets.shadow_meta if again.sets else None
    assert meta is not None and meta["epoch"] == 6
    assert meta["sources"]["0"]["offset"] == primary.offset  # copied afresh, not resumed
    inp.switch(1)
    inp.send(1, moved_to=1)
    drain(again, primary)
    inp.end()
    drain(primary, again)
    primary.flush()
    again.flush()
    counts, holders, violations = final_key_state(store, RUN)
    assert counts == dict(inp.counts) and set(holders.values()) == {1} and violations == 0
    by_worker = partials_by_worker(store)
    assert by_worker[1] == len(MOVED)  # only what was routed to it after the switch
    assert sum(by_worker.values()) == sum(inp.counts.values())


def test_a_shadow_overtakes_its_overloaded_source(env: Any) -> None:
    """The shadow pays the operator's cost for its part only (each step reads cap x parts
    records): stepping with its source in lockstep, from the same offset, it reaches the
    switch first and takes its keys there, while the source still works off its backlog."""
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []

    def slow(i: int) -> Worker:  # 10 records a step (the cost of 10 ms at 1 ms each)
        return make(tmp, i, flush_interval_s=0.01, service_us=1_000.0)

    primary = slow(0)
    primary.flush()
    plan(store)
    secondary = slow(1)
    inp.send(10)  # a backlog of 120 records for both
    inp.switch(1)
    inp.send(1, moved_to=1)
    steps = 0
    while secondary.sets is not None and len(secondary.sets.received) < len(MOVED):
        primary.step()
        secondary.step()
        steps += 1
        assert steps < 20, "the shadow never reached the switch"
    assert primary.handoffs_sent == 0 and primary.offset < 120  # still in its backlog
    drain(primary, secondary)
    inp.end()
    drain(primary, secondary)
    primary.flush()
    secondary.flush()
    counts, holders, violations = final_key_state(store, RUN)
    assert counts == dict(inp.counts) and set(holders.values()) == {1} and violations == 0
    assert sum(partials_by_worker(store).values()) == sum(inp.counts.values())

"""A checkpoint the state manager writes reads back as the worker's committed state.

A KEY worker with message sets commits its key state (one key with a set waiting
for its hand-off, so with buffered records; the others active; several flushes,
so the state is spread over incremental rows). ``write_checkpoint`` of its
operator, read through ``CheckpointStore.read``, must give per key the value of
the key's newest row at the commit, merged with its buffer (the reference
reading, ``state_rows_at``), tau = the commit version and beta = the routed
records after it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skewlab.control.scaleout.state import write_checkpoint
from skewlab.io.delta import DeltaStore
from skewlab.io.kafka.base import KafkaSettings, Record
from skewlab.io.state_store import CheckpointStore, state_rows_at
from skewlab.live.worker import process as worker_mod
from skewlab.live.worker.process import Worker
from skewlab.live.worker.settings import WorkerSettings
from skewlab.pipeline import events
from skewlab.pipeline.handoff import META_KEY
from tests.unit.live.worker.fake_kafka import LogClient

RUN = "cp-run"
TOPIC = "routed"


def test_checkpoint_reads_back_as_the_committed_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[Record] = []
    monkeypatch.setattr(worker_mod, "connect", lambda s: LogClient(log))
    s = WorkerSettings(
        run_id=RUN,
        worker=0,
        topic=TOPIC,
        kafka=KafkaSettings("fake:0"),
        delta_root=str(tmp_path / "delta"),
        window_s=1.0,
        flush_interval_s=0.0,
        splitters=1,
        cost="spin",
    )
    w = Worker(s, busy=lambda x: None)
    n = 0
    for rnd in range(3):
        for key in ("a", "b", "c", "d")[: 2 + rnd]:
            hdrs = [events.src_header(0, n)]
            if key == "d":
                hdrs.append((events.SET_HEADER, b"1:1"))  # waits for worker 1's hand-off
            val = events.encode_routed(key, 1.0 + n, n, 10 + n)
            log.append(Record(TOPIC, 0, len(log), key.encode(), val, tuple(hdrs), 0))
            n += 1
        w.step()
        w.flush()  # one incremental commit per round
    assert w.sets is not None and w.sets.buffered() > 0
    log.append(Record(TOPIC, 0, len(log), b"a", events.encode_routed("a", 9.0, 99, 1), (), 0))
    store = DeltaStore(str(tmp_path / "delta"))
    out = write_checkpoint(store, RUN, 0, [0], 7, {0: len(log)})
    (part,) = CheckpointStore(store, f"{RUN}#g0", "g0").read(7).values()
    assert part.tau == w.version and out["tau"] == {0: w.version}
    want: dict[str, Any] = {}
    for key, value, buffered in state_rows_at(store, RUN, 0, part.tau):
        v = json.loads(value)
        if buffered:
            v["buffered"] = json.loads(buffered)
        want[key] = v
    want[META_KEY]["beta"] = [w.offset, len(log)]
    assert dict(part.theta.items()) == want
    assert "buffered" in want["d"] and set(want) == {META_KEY, "a", "b", "c", "d"}
    assert out["keys"] == 4 and out["beta_records"] == 1
    again = write_checkpoint(store, RUN, 0, [0], 7, {0: len(log)})
    assert again["new"] is False  # idempotent


def test_a_checkpoint_holds_the_commit_seen_when_it_was_requested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written later (the manager's background thread), a checkpoint still holds the
    commit version seen at its request: a commit made meanwhile (an old instance's cut)
    is not in it."""
    log: list[Record] = []
    monkeypatch.setattr(worker_mod, "connect", lambda s: LogClient(log))
    s = WorkerSettings(
        run_id=RUN,
        worker=0,
        topic=TOPIC,
        kafka=KafkaSettings("fake:0"),
        delta_root=str(tmp_path / "delta"),
        window_s=1.0,
        flush_interval_s=0.0,
        splitters=1,
        cost="spin",
    )
    w = Worker(s, busy=lambda x: None)
    for n, key in enumerate(("a", "b")):
        val = events.encode_routed(key, 1.0 + n, n, 10 + n)
        log.append(Record(TOPIC, 0, len(log), key.encode(), val, (events.src_header(0, n),), 0))
    w.step()
    w.flush()
    seen = w.version
    val = events.encode_routed("c", 3.0, 2, 12)
    log.append(Record(TOPIC, 0, len(log), b"c", val, (events.src_header(0, 2),), 0))
    w.step()
    w.flush()  # committed after the request
    assert w.version is not None and seen is not None and w.version > seen
    store = DeltaStore(str(tmp_path / "delta"))
    out = write_checkpoint(store, RUN, 0, [0], 3, {0: len(log)}, {0: seen})
    (part,) = CheckpointStore(store, f"{RUN}#g0", "g0").read(3).values()
    assert out["tau"] == {0: seen} and part.tau == seen
    assert set(part.theta) == {META_KEY, "a", "b"}
    assert out["beta_records"] == 1  # "c": received after the commit it holds

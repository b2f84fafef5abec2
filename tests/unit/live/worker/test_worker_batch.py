"""A live worker without message sets decodes each fetched batch at once.

Checked on an in-memory ``routed`` partition: valid routed records are counted
into their (window, key) partials with the ``size`` they carry, an invalid
record is skipped (and its offset passed), a replayed record (same source
offset again) is dropped by the watermark, and a restarted worker resumes
after its committed offset without counting anything twice.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from skewlab.io.delta import DeltaStore
from skewlab.io.kafka.base import KafkaSettings, Record
from skewlab.live.worker import process as worker_mod
from skewlab.live.worker.process import Worker
from skewlab.live.worker.settings import WorkerSettings
from skewlab.pipeline import events
from tests.unit.live.worker.fake_kafka import LogClient

RUN = "batch-run"
TOPIC = "routed"
WINDOW = 5.0


def routed(log: list[Record], value: bytes, src: tuple[int, int]) -> None:
    hdr = events.src_header(*src)
    log.append(Record(TOPIC, 0, len(log), b"k", value, (hdr,), 1_000 + len(log)))


def make(tmp: Path) -> Worker:
    s = WorkerSettings(
        run_id=RUN,
        worker=0,
        topic=TOPIC,
        kafka=KafkaSettings("127.0.0.1:9"),
        delta_root=str(tmp / "delta"),
        window_s=WINDOW,
        flush_interval_s=0.0,
        max_fetch=7,
    )
    return Worker(s, wall=lambda: 1_000.0)


def expected(inputs: list[tuple[str, float, int]]) -> Counter[tuple[int, str]]:
    out: Counter[tuple[int, str]] = Counter()
    for key, ts, size in inputs:
        out[(int(ts // WINDOW * WINDOW * 1000), key)] += size
    return out


def partial_sums(store: DeltaStore) -> Counter[tuple[int, str]]:
    out: Counter[tuple[int, str]] = Counter()
    for r in store.read("partials", run_id=RUN).to_pylist():
        out[(r["window_start"], r["key"])] += int(r["sum"])
    return out


def test_batch_decode_counts_valid_skips_invalid_and_drops_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[Record] = []
    monkeypatch.setattr(worker_mod, "connect", lambda s: LogClient(log))
    inputs = []
    for i in range(20):
        key, ts, size = f"k{i % 3}", 100.0 + i * 0.7, 100 + i
        inputs.append((key, ts, size))
        routed(log, events.encode_routed(key, ts, i, size), (i % 2, i))
        if i == 5:
            routed(log, b"not json", (0, 1_000))  # invalid: skipped, its offset passed
        if i == 9:
            routed(log, events.encode_routed(key, ts, i, size), (i % 2, i))  # a replay
    w = make(tmp_path)
    while w.offset < len(log):
        w.step()
    w.flush()
    assert w.offset == len(log)
    assert (w.agg.accepted, w.agg.dropped) == (20, 1)
    store = DeltaStore(str(tmp_path / "delta"))
    assert partial_sums(store) == expected(inputs)

    more = [("k9", 200.0, 7), ("k0", 201.0, 3)]
    for j, (key, ts, size) in enumerate(more):
        routed(log, events.encode_routed(key, ts, 50 + j, size), (0, 50 + j))
    w2 = make(tmp_path)  # resumes after the committed offset
    assert w2.offset == w.offset
    while w2.offset < len(log):
        w2.step()
    w2.flush()
    assert partial_sums(store) == expected(inputs + more)

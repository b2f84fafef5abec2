"""A fetched batch of ``routed`` classified at once equals the per-record reading.

The reference is the per-record path the workers used before: ``events.header``
for markers, hand-offs and the end of stream, ``events.decode([value])`` and
``events.parse_src`` for a data record. Checked on a seeded mix of valid routed
events (with and without a set header), markers, hand-offs, end-of-stream
records and invalid values. Also: a worker with message sets pays the
operator's cost for a buffered record when it applies it, not when it buffers it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skewlab.io.kafka import fetch_range
from skewlab.io.kafka.base import FetchedRange, KafkaSettings, Record
from skewlab.live.worker import process as worker_mod
from skewlab.live.worker.batch import (
    DATA,
    END,
    EOS,
    HANDOFF,
    INVALID,
    WARM_RECORDS,
    classify,
    warm_classify,
)
from skewlab.live.worker.process import Worker
from skewlab.live.worker.settings import WorkerSettings
from skewlab.pipeline import events
from tests.unit.live.worker.fake_kafka import LogClient

TOPIC = "routed"


def mixed(n: int, seed: int) -> list[Record]:
    rng = np.random.default_rng(seed)
    out: list[Record] = []
    for i in range(n):
        kind = rng.choice(["data", "set", "eos", "handoff", "end", "bad", "esc"])
        key = f"k{int(rng.integers(0, 50))}"
        hdrs: list[tuple[str, bytes]] = [events.src_header(int(rng.integers(0, 3)), i * 7)]
        size = int(rng.integers(1, 500))
        value: bytes | None = events.encode_routed(key, 1.0 + i * 0.25, i, size)
        if kind == "set":
            hdrs.append((events.SET_HEADER, f"{int(rng.integers(1, 4))}:0".encode()))
        elif kind == "eos":
            hdrs, value = [(events.EOS_HEADER, b"1:2:0")], b""
        elif kind == "handoff":
            hdrs, value = [(events.HANDOFF_HEADER, b"1:0")], b'{"count":1}'
        elif kind == "end":
            hdrs, value = [(events.END_HEADER, b"1")], b""
        elif kind == "bad":
            value = b"not json" if i % 2 else None
        elif kind == "esc":  # valid, but not in the canonical shape: decoded by the slow path
            value = events.encode_routed(f"k\u00e9{i}", 2.5, i, 3)
        out.append(Record(TOPIC, 0, i, key.encode(), value, tuple(hdrs), 1_000 + i))
    return out


def reference(rec: Record) -> tuple[Any, ...]:
    h = rec.headers
    if (v := events.header(h, events.EOS_HEADER)) is not None:
        return (EOS, v)
    if (v := events.header(h, events.HANDOFF_HEADER)) is not None:
        return (HANDOFF, v)
    if events.header(h, events.END_HEADER) is not None:
        return (END,)
    dec = events.decode([rec.value], routed=True)
    if dec.rejects:
        return (INVALID,)
    p, o = events.parse_src(h)
    tag = events.header(h, events.SET_HEADER)
    return (DATA, tag, dec.keys[0], dec.ts[0], dec.seq[0], dec.sizes[0], p, o)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_classify_equals_the_per_record_reading(seed: int) -> None:
    recs = mixed(300, seed)
    b = classify(recs)
    assert len(b) == len(recs)
    got = []
    for i, k in enumerate(b.kinds):
        if k in (EOS, HANDOFF):
            got.append((k, b.tags[i]))
        elif k in (END, INVALID):
            got.append((k,))
        else:
            vals = (b.keys[i], b.ts[i], b.seq[i], b.sizes[i], b.src_partition[i], b.src_offset[i])
            got.append((k, b.tags[i], *vals))
    assert got == [reference(r) for r in recs]
    assert {k for k in b.kinds} >= {DATA, EOS, HANDOFF, END, INVALID}


def as_columns(recs: list[Record]) -> FetchedRange:
    """The records as a client's column fetch gives them: header pairs as lists."""
    return FetchedRange(
        TOPIC,
        0,
        [r.offset for r in recs],
        [r.value for r in recs],
        [list(r.headers) or None for r in recs],
        recs.__getitem__,
    )


def fields(b: Any) -> tuple[Any, ...]:
    return (b.kinds, b.tags, b.keys, b.ts, b.seq, b.sizes, b.src_partition, b.src_offset)


@pytest.mark.parametrize("seed", [1, 2])
def test_classify_of_columns_equals_classify_of_records(seed: int) -> None:
    """A mixed batch and an all-data batch (the fast path: every record's one header is
    its source, every value valid) read from columns give what the records give."""
    recs = mixed(200, seed)
    assert fields(classify(as_columns(recs))) == fields(classify(recs))
    plain = [
        Record(
            TOPIC,
            0,
            i,
            b"k",
            events.encode_routed(f"k{i % 7}", 0.5 * i, i, 1 + i % 9),
            (events.src_header(i % 3, 10 * i),),
            0,
        )
        for i in range(150)
    ]
    b = classify(as_columns(plain))
    assert fields(b) == fields(classify(plain))
    assert b.kinds == [DATA] * 150 and b.src_offset == [10 * i for i in range(150)]
    assert b.recs[-1].offset == 149 and b.recs[3] == plain[3]


def test_fetch_range_reads_a_fake_client_record_by_record() -> None:
    recs = mixed(20, 5)
    got = fetch_range(LogClient(recs), TOPIC, 0, 4, 9)
    assert len(got) == 5 and got.offsets == [4, 5, 6, 7, 8] and list(got) == recs[4:9]
    with pytest.raises(IndexError):
        got[5]


def test_a_data_record_without_its_source_header_raises() -> None:
    rec = Record(TOPIC, 0, 0, b"k", events.encode_routed("k", 1.0, 0, 1), (), 0)
    with pytest.raises(ValueError):
        classify([rec])
    with pytest.raises(ValueError):
        classify(as_columns([rec]))


def _data(src: bytes) -> Record:
    value = events.encode_routed("k", 1.0, 0, 1)
    return Record(TOPIC, 0, 0, b"k", value, ((events.SRC_HEADER, src),), 0)


def test_source_headers_parse_as_parse_src_reads_them() -> None:
    """Digits-only headers (one numpy parse) and others (per part) give what
    ``events.parse_src`` gives record by record; a malformed one raises."""
    gen = np.random.default_rng(5)
    digits = [f"{int(p)}:{int(o)}".encode() for p, o in gen.integers(0, 10**12, (500, 2))]
    for srcs in (digits, [*digits[:3], b" 7:08", b"+3:4", b"0009:1"]):
        b = classify([_data(s) for s in srcs])
        want = [events.parse_src([(events.SRC_HEADER, s)]) for s in srcs]
        assert list(zip(b.src_partition, b.src_offset)) == want
    for bad in (b"1:x", b"1:2:3", b"12", b"1:", b":5", b"1::2"):
        with pytest.raises(ValueError):
            classify([_data(b"4:5"), _data(bad)])


def test_a_buffered_record_costs_when_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records of a set waiting for its hand-off cost nothing until the hand-off applies
    them; then each costs once (``service_us`` per record, paid through ``busy``)."""
    log: list[Record] = []
    monkeypatch.setattr(worker_mod, "connect", lambda s: LogClient(log))
    paid: list[float] = []
    s = WorkerSettings(
        run_id="cost-run",
        worker=0,
        topic=TOPIC,
        kafka=KafkaSettings("fake:0"),
        delta_root=str(tmp_path / "delta"),
        window_s=1.0,
        flush_interval_s=60.0,
        service_us=1_000.0,
        splitters=1,
        cost="spin",
    )
    w = Worker(s, busy=paid.append)

    def data(key: str, i: int, set_hdr: bytes | None) -> None:
        hdrs = [events.src_header(0, i)]
        if set_hdr is not None:
            hdrs.append((events.SET_HEADER, set_hdr))
        val = events.encode_routed(key, 1.0, i, 1)
        log.append(Record(TOPIC, 0, len(log), key.encode(), val, tuple(hdrs), 0))

    for i in range(3):
        data("a", i, None)  # set 0 of "a": applied at once
    for i in range(3, 8):
        data("b", i, b"1:1")  # set 1 of "b": waits for worker 1's hand-off
    w.step()
    assert sum(paid) == pytest.approx(3 * 1e-3)
    assert w.sets is not None and w.sets.buffered() == 5
    state = {"count": 4, "sum": 4, "last": {}, "violations": 0}
    log.append(
        Record(
            TOPIC,
            0,
            len(log),
            b"b",
            json.dumps(state).encode(),
            ((events.HANDOFF_HEADER, b"1:1"),),
            0,
        )
    )
    w.step()
    assert sum(paid) == pytest.approx(8 * 1e-3)
    assert w.sets.buffered() == 0 and w.agg.accepted == 8


def test_the_warm_up_batch_takes_the_data_path_with_its_sources() -> None:
    """The warm-up runs the path a worker's batches take: every record a valid data
    record (decoded by the Arrow kernels, none invalid), its source header parsed."""
    b = warm_classify()
    assert len(b) == WARM_RECORDS
    assert b.kinds == [DATA] * WARM_RECORDS
    assert b.keys == [f"warm-up-{i}" for i in range(WARM_RECORDS)]
    assert b.src_partition == [0] * WARM_RECORDS
    assert b.src_offset == list(range(WARM_RECORDS))
    assert b.sizes == [40] * WARM_RECORDS

"""Samples of a user's stream for ``skewlab advise``: a Kafka topic, a Delta table.

Both end as a :class:`skewlab.advise.Stream` whose rows went through the trace rules
(:func:`skewlab.workload.trace_check.check_values`), bad ones counted.
:func:`sample_topic` reads the newest records of a topic through the project's Kafka
client, partitions assigned by hand, no group joined, no offset committed; a JSON value
with ``key`` gives key, time and size, any other value is keyed and timed by its record
(:func:`topic_values`). :func:`read_delta` reads a Delta table's ``key`` and optional
``timestamp``/``ts`` and ``size`` columns with delta-rs. Details: docs/advise.md, "Inputs".
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from skewlab.advise.base import AdviseError, Stream, stream_of
from skewlab.errors import ConfigError
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaSettings
from skewlab.workload.trace_check import check_values

__all__ = ["read_delta", "sample_topic", "topic_values"]

log = logging.getLogger(__name__)

_TS = ("ts", "timestamp")


def topic_values(value: bytes | None, key: bytes | None, timestamp_ms: int) -> tuple[Any, Any, Any]:
    """``(key, ts, size)`` of one record (module doc); unparsed values are checked later."""
    size = len(value) if value is not None else 0
    obj: Any = None
    if value:
        try:
            obj = json.loads(value)
        except (ValueError, RecursionError):
            obj = None
    if isinstance(obj, dict) and "key" in obj:
        ts = next((obj[n] for n in _TS if n in obj), None)
        return obj["key"], ts, obj.get("size", size)
    raw_key: Any = None
    if key is not None:
        try:
            raw_key = key.decode("utf-8")
        except UnicodeDecodeError:
            raw_key = key  # refused by the key rule, named in the bad row
    ts_s = timestamp_ms / 1000.0 if timestamp_ms > 0 else None
    return raw_key, ts_s, size


def sample_topic(bootstrap: str, topic: str, records: int, client: str = "confluent") -> Stream:
    """The newest ``records`` records of ``topic`` (spread over its partitions in
    proportion to what each holds) as a :class:`Stream`; see the module doc.

    Raises :class:`ConfigError` for a bad ``records`` and :class:`AdviseError` when the
    topic is missing or empty.
    """
    if records < 1:
        raise ConfigError(f"--records must be >= 1, got {records}")
    kc = connect(KafkaSettings(bootstrap, client))
    try:
        if topic not in kc.list_topics():
            raise AdviseError(f"kafka {bootstrap}: no topic {topic!r}")
        begins = kc.begin_offsets(topic)
        ends = kc.end_offsets(topic)
        held = {p: ends[p] - begins.get(p, 0) for p in ends}
        total = sum(held.values())
        if total <= 0:
            raise AdviseError(f"kafka {bootstrap}: topic {topic!r} is empty")
        rows: list[tuple[float, int, Any, Any, Any]] = []
        for p, n in sorted(held.items()):
            take = min(n, math.ceil(records * n / total))
            if take <= 0:
                continue
            rng = kc.fetch_range(topic, p, ends[p] - take, ends[p])
            for i in range(len(rng)):
                rec = rng[i]
                k, ts, size = topic_values(rec.value, rec.key, rec.timestamp_ms)
                order = ts if isinstance(ts, int | float) and not isinstance(ts, bool) else 0.0
                rows.append((float(order), rec.offset * 1000 + p, k, ts, size))
    finally:
        kc.close(0)
    rows.sort(key=lambda r: (r[0], r[1]))
    rows = rows[-records:]
    source = f"kafka:{topic}"
    items = ((i + 1, k, ts, size) for i, (_, _, k, ts, size) in enumerate(rows))
    log.info("sampled %d records of %s (%d held)", len(rows), topic, total)
    return stream_of(source, check_values(source, items))


def read_delta(path: str, records: int | None = None) -> Stream:
    """The ``key`` (and ``timestamp``/``ts``, ``size``) columns of the Delta table at
    ``path`` as a :class:`Stream`, ordered by time when it has one, the newest
    ``records`` rows if given. Raises :class:`AdviseError` when the table cannot be read
    or has no ``key`` column."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    if records is not None and records < 1:
        raise ConfigError(f"--records must be >= 1, got {records}")
    try:
        dt = DeltaTable(path)
    except (TableNotFoundError, DeltaError, OSError) as e:
        raise AdviseError(f"delta {path}: not a readable Delta table ({e})") from None
    names = {f.name.lower(): f.name for f in dt.schema().fields}
    if "key" not in names:
        raise AdviseError(f"delta {path}: no 'key' column; columns are {', '.join(names.values())}")
    ts_col = next((names[n] for n in ("timestamp", "ts") if n in names), None)
    size_col = names.get("size")
    cols = [names["key"], *(c for c in (ts_col, size_col) if c is not None)]
    table = dt.to_pyarrow_table(columns=cols)
    if ts_col is not None:
        table = table.sort_by([(ts_col, "ascending")])
    if records is not None and table.num_rows > records:
        table = table.slice(table.num_rows - records)
    keys = table.column(names["key"]).to_pylist()
    ts = table.column(ts_col).to_pylist() if ts_col else [None] * len(keys)
    if ts_col is not None and ts and hasattr(ts[0], "timestamp"):
        ts = [None if t is None else t.timestamp() for t in ts]
    sizes = table.column(size_col).to_pylist() if size_col else [None] * len(keys)
    source = f"delta:{path}"
    items = (
        (i + 1, k, "<null timestamp>" if ts_col and t is None else t, s)
        for i, (k, t, s) in enumerate(zip(keys, ts, sizes))
    )
    return stream_of(source, check_values(source, items))

"""``quarantine`` rows stay bounded: a prefix of the record, its length and its hash."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

from skewlab.io.delta.schemas import QUARANTINE, QUARANTINE_RAW_PREFIX
from skewlab.spark import tables

pytestmark = pytest.mark.unit


def test_a_large_poison_record_is_stored_as_prefix_length_and_hash() -> None:
    big = b"{" + b"x" * 1_000_000
    rejects = pa.table(
        {
            "raw": pa.array([big, b"not json", b""]),
            "src_partition": pa.array([0, 1, 2], pa.int32()),
            "src_offset": pa.array([5, 6, 7], pa.int64()),
            "reason": ["too-large", "not-json", "empty"],
        }
    )
    q = tables.quarantine("r1", rejects, "events", 123)
    assert q.schema == QUARANTINE.schema
    rows = q.to_pylist()
    for row, value in zip(rows, (big, b"not json", b""), strict=True):
        assert row["raw"] == value[:QUARANTINE_RAW_PREFIX]
        assert row["raw_bytes"] == len(value)
        assert row["raw_sha256"] == hashlib.sha256(value).hexdigest()
    assert len(rows[0]["raw"]) == QUARANTINE_RAW_PREFIX < len(big)
    assert [r["offset"] for r in rows] == [5, 6, 7]

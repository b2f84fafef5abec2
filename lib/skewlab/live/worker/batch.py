"""One fetched batch of ``routed`` records, classified and decoded at once.

The message-set paths of a worker (its own partition, a shadow's replay) read
every record's headers and decode every data record; doing the decode per
record (``events.decode([value])``) cost more than the rest of the loop. Here
a batch is classified in one pass over its headers and its data records are
decoded by :func:`skewlab.pipeline.events.decode_arrow` (row for row the same
verdict and values as ``decode``), their source headers parsed in one numpy
call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from skewlab.io.kafka.base import FetchedRange, Record
from skewlab.pipeline import events

DATA = 0
"""A valid routed event (key, ts, seq, size, source partition and offset decoded)."""
EOS = 1
"""An end-of-set marker (``tag`` = its header ``"<set>:<next worker>:<splitter>"``)."""
HANDOFF = 2
"""A hand-off record (``tag`` = its header ``"<set>:<from worker>"``)."""
END = 3
"""The route job's end-of-stream record."""
INVALID = 4
"""A data record that does not decode (the route job only forwards valid events)."""


@dataclass(slots=True)
class RoutedBatch:
    """Per record of the batch (same index as :attr:`recs`): its kind, its tag (the
    EOS / hand-off header, or a data record's set header; ``None`` when absent) and,
    for a :data:`DATA` record, its decoded values and source; other records hold
    placeholders (``""``, 0) there."""

    recs: Sequence[Record]
    kinds: list[int]
    tags: list[str | None]
    keys: list[str]
    ts: list[float]
    seq: list[int]
    sizes: list[int]
    src_partition: list[int]
    src_offset: list[int]

    def __len__(self) -> int:
        return len(self.recs)


def classify(recs: Sequence[Record]) -> RoutedBatch:
    """The batch of ``recs`` (a fetch of one ``routed`` partition, in offset order;
    a :class:`FetchedRange` is read by its columns).

    A data record is :data:`DATA` if ``events.decode`` accepts its value, else
    :data:`INVALID`; a :data:`DATA` record without a source header raises
    ``ValueError`` (as ``events.parse_src``)."""
    if isinstance(recs, FetchedRange):
        values_in, headers_in = recs.values, recs.headers
    else:
        values_in = [r.value for r in recs]
        headers_in = [r.headers for r in recs]
    n = len(recs)
    kinds = [DATA] * n
    tags: list[str | None] = [None] * n
    data: list[int] = []
    values: list[bytes | None] = []
    srcs: list[bytes | None] = []
    src_name = events.SRC_HEADER
    # The common case first: every record a data record whose one header is its source.
    firsts = [h[0] if h and len(h) == 1 else (None, None) for h in headers_in]
    if n and {f[0] for f in firsts} == {src_name}:
        data = list(range(n))
        values = values_in
        srcs = [f[1] for f in firsts]
    else:
        for i, hs in enumerate(headers_in):
            h = {k: b"" if v is None else v for k, v in hs or ()}
            if (v := h.get(events.EOS_HEADER)) is not None:
                kinds[i], tags[i] = EOS, v.decode("ascii")
            elif (v := h.get(events.HANDOFF_HEADER)) is not None:
                kinds[i], tags[i] = HANDOFF, v.decode("ascii")
            elif events.END_HEADER in h:
                kinds[i] = END
            else:
                data.append(i)
                values.append(values_in[i])
                srcs.append(h.get(src_name))
                if (v := h.get(events.SET_HEADER)) is not None:
                    tags[i] = v.decode("ascii")
    keys = [""] * n
    ts = [0.0] * n
    seq = [0] * n
    sizes = [0] * n
    part = [0] * n
    off = [0] * n
    if data:
        dec = events.decode_arrow(values, routed=True)
        if dec.column("reason").null_count == len(data):  # all valid (the usual batch)
            ok: Sequence[int] = range(len(data))
            src_ok = srcs
        else:
            reason = dec.column("reason").to_pylist()
            ok = [j for j, r in enumerate(reason) if r is None]
            for j, r in enumerate(reason):
                if r is not None:
                    kinds[data[j]] = INVALID
            dec = dec.take(ok)
            src_ok = [srcs[j] for j in ok]
        if None in src_ok:
            raise ValueError(f"routed record has no {events.SRC_HEADER!r} header")
        po = _parse_srcs(src_ok)  # type: ignore[arg-type]
        cols = (
            _pylist(dec.column("key")),
            _pylist(dec.column("ts")),
            _pylist(dec.column("seq")),
            _pylist(dec.column("size")),
            po[:, 0].tolist(),
            po[:, 1].tolist(),
        )
        if len(ok) == n:  # every record a valid data record: the columns as they are
            keys, ts, seq, sizes, part, off = cols
        else:
            for j, (k, t, q, z, p, o) in enumerate(zip(*cols)):
                i = data[ok[j]]
                keys[i], ts[i], seq[i], sizes[i], part[i], off[i] = k, t, q, z, p, o
    return RoutedBatch(recs, kinds, tags, keys, ts, seq, sizes, part, off)


WARM_RECORDS = 8
"""Synthetic routed events :func:`warm_classify` runs through :func:`classify`."""


def warm_classify() -> RoutedBatch:
    """:func:`classify` of :data:`WARM_RECORDS` synthetic routed events (data records with
    their source header): a worker runs it before it says it is ready, so its first batch
    does not wait for the first decode's imports and Arrow kernels (0.76 s measured in a
    fresh worker process against 3 ms after; docs/real-stack.md, session 31)."""
    recs = [
        Record(
            "warm-up",
            0,
            i,
            b"warm-up",
            events.encode_routed(f"warm-up-{i}", 0.001 * (i + 1), i, 40),
            ((events.SRC_HEADER, f"0:{i}".encode()),),
        )
        for i in range(WARM_RECORDS)
    ]
    return classify(FetchedRange.of_records("warm-up", 0, recs))


def _parse_srcs(srcs: list[bytes]) -> np.ndarray:
    """(partition, offset) rows of source headers ``b"<partition>:<offset>"``.

    Decimal digits only (the route job's headers): parsed in one ``np.fromstring``
    (~40 ns a header); anything else as the ``int64`` cast of each part (~240 ns),
    which raises ``ValueError`` on a malformed header."""
    if not srcs:
        return np.zeros((0, 2), dtype=np.int64)
    joined = b":".join(srcs)
    if joined.count(b":") == 2 * len(srcs) - 1 and not joined.translate(None, b"0123456789:"):
        flat = np.fromstring(joined.replace(b":", b" "), dtype=np.int64, sep=" ")
        if len(flat) == 2 * len(srcs):
            return flat.reshape(-1, 2)
    return np.array(joined.split(b":")).astype(np.int64).reshape(-1, 2)


def _pylist(col: pa.ChunkedArray) -> list[Any]:
    """``col.to_pylist()``, through numpy when it has no nulls (~20x faster per value)."""
    if col.null_count:
        return col.to_pylist()
    out: list[Any] = col.to_numpy(zero_copy_only=False).tolist()
    return out

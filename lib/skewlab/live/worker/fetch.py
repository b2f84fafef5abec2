"""How a worker reads its own partition of ``routed``: the end and the records, in
as few broker requests as the client allows.

A confluent client answers both for one partition (``end_offset``,
``fetch_available``: docs/throughput.md, "Session 6"); any other client (kafka-python,
test fakes) through ``end_offsets`` of the whole topic and ``fetch_range``.
"""

from __future__ import annotations

from skewlab.io.kafka import fetch_range
from skewlab.io.kafka.base import FetchedRange


def end_offset(client: object, topic: str, partition: int) -> int:
    """The true end of ``partition`` of ``topic`` (0 if the broker has none)."""
    one = getattr(client, "end_offset", None)
    if one is not None:
        end: int = one(topic, partition)
        return end
    ends: dict[int, int] = client.end_offsets(topic)  # type: ignore[attr-defined]
    return ends.get(partition, 0)


def fetch_available(
    client: object, topic: str, partition: int, start: int, limit: int
) -> FetchedRange:
    """The records of ``partition`` in ``[start, min(limit, end))``, ``end`` its true end
    at the time of the call (:func:`end_offset`); ``limit >= start``."""
    method = getattr(client, "fetch_available", None)
    if method is not None:
        rng: FetchedRange = method(topic, partition, start, limit)
        return rng
    end = end_offset(client, topic, partition)
    return fetch_range(client, topic, partition, start, max(start, min(end, limit)))

"""An in-memory stand-in for one partition of ``routed`` in the worker's unit tests.

The worker's batch paths are tested without a broker: a list of records is the
partition, ``fetch`` slices it and ``end_offsets`` is its length; what a worker
produces (hand-offs) is dropped. The live tests use the real broker.
"""

from __future__ import annotations

from typing import Any

from skewlab.io.kafka.base import Record


class LogClient:
    """Partition 0 of every topic is ``log`` (appending to it is producing)."""

    def __init__(self, log: list[Record]) -> None:
        self.log = log

    def fetch(self, topic: str, p: int, start: int, end: int) -> list[Record]:
        return self.log[start:end]

    def end_offsets(self, topic: str) -> dict[int, int]:
        return {0: len(self.log)}

    def produce(self, *a: Any, **kw: Any) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self, flush_s: float = 10.0) -> None:
        pass

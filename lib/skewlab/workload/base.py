"""The workload contract: a seeded, streaming source of keyed events.

A workload config is a frozen dataclass (validated in ``__post_init__``) whose
``events(n, chunk)`` yields :class:`EventChunk` objects covering exactly ``n``
events, at most ``chunk`` at a time, never materializing more than one chunk.
The same seed gives the same stream, chunk size notwithstanding.

Time in a workload is *event time* in seconds from the stream's start: events
arrive at ``rate`` events/s (``ts = seq / rate``) unless the workload (a trace)
carries its own timestamps. Workloads whose key distribution changes over time
(DLB's epsilon switching, SMALOPS' dynamic load) change it by event time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from skewlab.keys import KeyBatch, KeyVocab


@dataclass(frozen=True, slots=True)
class EventChunk:
    """Consecutive events: ``keys.ids[i]``, ``ts[i]`` (s, nondecreasing), ``sizes[i]`` (bytes).

    ``seq0`` is the sequence number of the first event in the whole stream.
    """

    seq0: int
    keys: KeyBatch
    ts: np.ndarray
    sizes: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def vocab(self) -> KeyVocab:
        """The stream's key vocabulary (shared by all its chunks; grows as keys appear)."""
        return self.keys.vocab


@runtime_checkable
class Workload(Protocol):
    """A frozen, seeded workload config."""

    name: ClassVar[str]

    @property
    def seed(self) -> int:
        """The seed that fixes the whole stream."""
        ...

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
        """Exactly ``n`` events at ``rate`` events/s, in chunks of at most ``chunk``."""
        ...

    def spec(self) -> str:
        """The spec string that parses back to this config (``zipf:s=1.1,v=2.72``)."""
        ...

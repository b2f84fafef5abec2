"""Tiny groupings and workloads that satisfy the protocols, for simulator tests.

They keep the simulator's tests independent of the real strategies: each is
a few lines whose behaviour is obvious, so a failing test points at the
simulator.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pytest

from skewlab.clock import Clock, ManualClock
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.workload.base import EventChunk


@dataclass(frozen=True)
class HashKeyConfig:
    """KEY grouping in miniature: ``hash(key) % W``."""

    name: ClassVar[str] = "fake-key"
    workers: int

    def build(self, state: Any = None, clock: Clock | None = None) -> _HashKey:
        return _HashKey(self.workers)


class _HashKey:
    def __init__(self, workers: int) -> None:
        self.workers = workers

    def route(self, key: str) -> int:
        return int(KeyVocab([key]).buckets(13, self.workers)[0])

    def route_batch(self, batch: KeyBatch) -> np.ndarray:
        return batch.vocab.buckets(13, self.workers)[batch.ids]

    def snapshot(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class RoundRobinConfig:
    """SHUFFLE in miniature; records the clock time seen by each batch."""

    name: ClassVar[str] = "fake-shuffle"
    workers: int
    seen_times: list[float] = field(default_factory=list, compare=False)

    def build(self, state: Any = None, clock: Clock | None = None) -> _RoundRobin:
        return _RoundRobin(self.workers, clock or ManualClock(), self.seen_times)


class _RoundRobin:
    def __init__(self, workers: int, clock: Clock, seen: list[float]) -> None:
        self.workers = workers
        self.clock = clock
        self.seen = seen
        self.next = 0

    def route(self, key: str) -> int:
        w = self.next
        self.next = (self.next + 1) % self.workers
        return w

    def route_batch(self, batch: KeyBatch) -> np.ndarray:
        self.seen.append(self.clock.now())
        out = (self.next + np.arange(len(batch))) % self.workers
        self.next = int((self.next + len(batch)) % self.workers)
        return out.astype(np.int64)

    def snapshot(self) -> dict[str, Any]:
        return {"next": self.next}


@dataclass(frozen=True)
class ConstConfig:
    """Sends everything to one worker (or, broken, outside the range)."""

    name: ClassVar[str] = "fake-const"
    workers: int
    target: int = 0

    def build(self, state: Any = None, clock: Clock | None = None) -> Any:
        cfg = self

        class _Const:
            workers = cfg.workers

            def route(self, key: str) -> int:
                return cfg.target

            def route_batch(self, batch: KeyBatch) -> np.ndarray:
                return np.full(len(batch), cfg.target, dtype=np.int64)

            def snapshot(self) -> dict[str, Any]:
                return {}

        return _Const()


@dataclass(frozen=True)
class ArrayWorkload:
    """Replays given keys at given times (a trace); ignores ``rate``."""

    name: ClassVar[str] = "fake-trace"
    keys: Sequence[str]
    ts: Sequence[float]
    seed: int = 0

    def events(self, n: int, chunk: int = 65_536, rate: float = 1.0) -> Iterator[EventChunk]:
        vocab = KeyVocab()
        ids = vocab.encode(list(self.keys[:n]))
        ts = np.asarray(self.ts[:n], dtype=np.float64)
        for lo in range(0, n, chunk):
            hi = min(lo + chunk, n)
            yield EventChunk(
                lo, KeyBatch(ids[lo:hi], vocab), ts[lo:hi], np.zeros(hi - lo, np.int64)
            )

    def spec(self) -> str:
        return "fake-trace"


@dataclass(frozen=True)
class RandomWorkload:
    """``keys`` keys drawn uniformly (or Zipf ``s``); arrivals periodic or Poisson."""

    name: ClassVar[str] = "fake-random"
    keys: int = 100
    seed: int = 0
    zipf_s: float = 0.0
    poisson: bool = False

    def events(self, n: int, chunk: int = 65_536, rate: float = 1.0) -> Iterator[EventChunk]:
        vocab = KeyVocab(f"k{i}" for i in range(self.keys))
        rng = np.random.default_rng(self.seed)
        last = 0.0
        for lo in range(0, n, chunk):
            m = min(chunk, n - lo)
            if self.zipf_s > 0:
                ids = np.minimum(rng.zipf(self.zipf_s, m) - 1, self.keys - 1)
            else:
                ids = rng.integers(0, self.keys, m)
            if self.poisson:
                ts = last + np.cumsum(rng.exponential(1.0 / rate, m))
                last = float(ts[-1])
            else:
                ts = np.arange(lo, lo + m) / rate
            yield EventChunk(
                lo, KeyBatch(ids.astype(np.int64), vocab), ts, np.zeros(m, dtype=np.int64)
            )

    def spec(self) -> str:
        return "fake-random"


@pytest.fixture
def fakes() -> Any:
    """The fake classes, as attributes (``fakes.HashKeyConfig(4)``)."""

    class _Fakes:
        pass

    ns = _Fakes()
    for cls in (HashKeyConfig, RoundRobinConfig, ConstConfig, ArrayWorkload, RandomWorkload):
        setattr(ns, cls.__name__, cls)
    return ns

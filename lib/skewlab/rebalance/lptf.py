"""LPTF: Longest Processing Time First re-packing of every key (DLB's baseline [14]).

LPTF "assigns the most loaded key to the least loaded engine and repeats this
procedure for all the keys" (DLB, section 5). As a rebalancer it is triggered
by the same rule as DLB (the interval's imbScore above ``theta``), then:

1. Sort the interval's keys by load, heaviest first (ties: first seen first).
2. Start every engine at load 0; give each key in turn to the least loaded
   engine (ties: lowest engine index), adding the key's load to it.
3. The result is the whole new map: every active key is pinned, and each key
   whose engine changed carries its state with it (DLB measured ~76% of the
   keys moving per rebalance).

LPT's bound: the most loaded engine ends within ``4/3 - 1/(3W)`` of the optimum.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.rebalance.base import (
    DEFAULT_TUPLE_BYTES,
    Decision,
    LoadSnapshot,
    check_workers,
    imbalance,
)
from skewlab.rebalance.dlb import MapSnapshot, _MapRebalancer, check_bytes, check_theta

__all__ = ["LPTFConfig", "LPTFRebalancer", "lpt_pack"]


def lpt_pack(loads: np.ndarray, workers: int) -> np.ndarray:
    """Steps 1-2: the LPT engine of every key (``int64``, aligned with ``loads``)."""
    loads = np.asarray(loads, dtype=np.int64)
    out = np.empty(loads.size, dtype=np.int64)
    if loads.size == 0:
        return out
    order = np.argsort(-loads, kind="stable")
    heap = [(0, e) for e in range(workers)]
    chosen: list[int] = []
    append = chosen.append
    replace = heapq.heapreplace
    for x in loads[order].tolist():
        load, e = heap[0]
        append(e)
        replace(heap, (load + x, e))
    out[order] = np.asarray(chosen, dtype=np.int64)
    return out


@dataclass(frozen=True, slots=True)
class LPTFConfig:
    """LPTF over ``workers`` engines, re-packing when imbScore exceeds ``theta`` (%)."""

    name: ClassVar[str] = "lptf"
    workers: int
    theta: float = 15.0
    tuple_bytes: int = DEFAULT_TUPLE_BYTES

    def __post_init__(self) -> None:
        check_workers(self.workers)
        check_theta(self.theta)
        check_bytes(self.tuple_bytes)

    def build(self, state: MapSnapshot | None = None) -> LPTFRebalancer:
        return LPTFRebalancer(self, state)


class LPTFRebalancer(_MapRebalancer):
    """Working LPTF (see the module docstring); the map pins every key of the last re-pack."""

    policy: ClassVar[str] = "lptf"

    def __init__(self, config: LPTFConfig, state: MapSnapshot | None = None) -> None:
        self.config = config
        super().__init__(config.workers, config.tuple_bytes, state)

    def decide(self, now: float, loads: LoadSnapshot) -> Decision:
        """Re-pack all keys with :func:`lpt_pack` when the interval's imbScore exceeds theta."""
        self._check(loads)
        if imbalance(loads.worker_loads()) <= self.config.theta:
            return self._decide_with(
                now, loads, np.array(loads.placement), "below-threshold", "repack"
            )
        final = lpt_pack(loads.loads, self.workers)
        return self._decide_with(now, loads, final, "repacked", "repack", pin_all=True)

"""LPTF: Longest Processing Time First re-packing of every key (DLB's baseline [14]).

LPTF "assigns the most loaded key to the least loaded engine and repeats this procedure for all
the keys" (DLB, Sec. 5); steps on :func:`lpt_pack`, notes in docs/rebalance.md.
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
    """The LPT engine of every key (``int64``, aligned with ``loads``); deterministic.

    1. Sort the keys by load, heaviest first (ties: first seen first).
    2. Start every engine at 0 and give each key in turn to the least loaded engine (ties:
       lowest index). LPT's bound: the maximum ends within ``4/3 - 1/(3W)`` of the optimum.
    """
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
        """The working LPTF, empty or continuing from ``state`` (StateError if not its own)."""
        return LPTFRebalancer(self, state)


class LPTFRebalancer(_MapRebalancer):
    """Working LPTF; after a re-pack the map pins every key of that interval."""

    policy: ClassVar[str] = "lptf"

    def __init__(self, config: LPTFConfig, state: MapSnapshot | None = None) -> None:
        self.config = config
        super().__init__(config.workers, config.tuple_bytes, state)

    def decide(self, now: float, loads: LoadSnapshot) -> Decision:
        """Re-pack all keys with :func:`lpt_pack` when the interval's imbScore exceeds theta.

        Below ``theta`` (DLB Eq. 2 trigger) nothing moves (reason ``below-threshold``); else
        every active key is pinned where LPT puts it and each key whose engine changed is a
        ``repack`` move carrying its interval's tuples (reason ``repacked``). Raises
        :class:`~skewlab.errors.ConfigError` when ``loads`` is for another worker count.
        """
        self._check(loads)
        if imbalance(loads.worker_loads()) <= self.config.theta:
            return self._decide_with(
                now, loads, np.array(loads.placement), "below-threshold", "repack"
            )
        final = lpt_pack(loads.loads, self.workers)
        return self._decide_with(now, loads, final, "repacked", "repack", pin_all=True)

"""One splitter instance of the live route job: grouping + explicit assignments.

The route job keeps one :class:`Splitter` per Kafka partition of ``events``
(DKG's SplitterBolt). Its grouping runs on *event time*: the splitter's clock is
the event timestamps it has routed, never the wall clock, so a micro-batch that
Spark replays after a crash gets exactly the decisions it got the first time
(same state from the checkpoint, same input, same clock).

Decisions, in order, for each batch (sorted by source offset):

1. events are routed in blocks of at most ``block_s`` seconds of event time;
   before each block the clock moves to the block's first timestamp, so DKG's
   warm-up, promotion cycles and check intervals see time pass;
2. the grouping decides every event of the block (its own state advances);
3. keys named by the explicit ``assignments`` map (a rebalancer's decision)
   go to the worker it names instead, whatever the grouping said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skewlab.clock import ManualClock
from skewlab.grouping.base import Grouping, GroupingConfig, Snapshot
from skewlab.keys import KeyBatch, KeyVocab

SNAPSHOT_VERSION = 1


@dataclass(frozen=True, slots=True)
class SplitterState:
    """What a splitter carries between micro-batches (picklable)."""

    version: int
    grouping: Snapshot
    clock: float
    routed: int


class Splitter:
    """Routes one splitter's events with ``cfg`` and an optional assignments override."""

    def __init__(
        self, cfg: GroupingConfig, state: SplitterState | None = None, block_s: float = 0.1
    ) -> None:
        self.cfg = cfg
        self.block_s = float(block_s)
        self.clock = ManualClock(state.clock if state is not None else 0.0)
        self._state = state
        self._grouping: Grouping | None = None
        self.routed = state.routed if state is not None else 0
        self._vocab = KeyVocab()

    def _built(self, first_ts: float) -> Grouping:
        """The grouping, built on first use: a new splitter's clock starts at its first event."""
        if self._grouping is None:
            if self._state is None:
                self.clock.set(max(first_ts, 0.0))
                self._grouping = self.cfg.build(clock=self.clock)
            else:
                self._grouping = self.cfg.build(state=self._state.grouping, clock=self.clock)
        return self._grouping

    def route(
        self,
        keys: Sequence[str],
        ts: Sequence[float] | np.ndarray,
        assignments: Mapping[str, int] | None = None,
    ) -> np.ndarray:
        """Workers (``int64``) of the events, in order; ``ts`` must be nondecreasing per block."""
        n = len(keys)
        out = np.empty(n, dtype=np.int64)
        if n == 0:
            return out
        tsa = np.asarray(ts, dtype=np.float64)
        grouping = self._built(float(tsa[0]))
        batch = KeyBatch.from_keys(keys, self._vocab)
        i = 0
        while i < n:
            t0 = max(float(tsa[i]), self.clock.now())
            j = int(np.searchsorted(tsa, t0 + self.block_s, side="left"))
            j = max(j, i + 1)
            self.clock.set(t0)
            out[i:j] = grouping.route_batch(batch.slice(i, j))
            i = j
        if assignments:
            ids = batch.ids
            vocab_keys = self._vocab.keys
            for kid in np.unique(ids).tolist():
                w = assignments.get(vocab_keys[kid])
                if w is not None:
                    out[ids == kid] = w
        self.routed += n
        if len(self._vocab) > 1_000_000:
            self._vocab = KeyVocab()
        return out

    def state(self) -> SplitterState | None:
        """The state to carry to the next batch (``None`` until the first event)."""
        if self._grouping is None:
            return self._state
        return SplitterState(
            SNAPSHOT_VERSION, self._grouping.snapshot(), self.clock.now(), self.routed
        )


def key_loads(
    window_s: float,
    ts: np.ndarray,
    keys: Sequence[str],
    workers: np.ndarray,
    sizes: np.ndarray,
) -> list[dict[str, Any]]:
    """Rows (window_start, key, worker, count, bytes) of one batch, for Delta ``key_loads``."""
    if len(keys) == 0:
        return []
    win = np.floor(np.asarray(ts, dtype=np.float64) / window_s) * window_s
    acc: dict[tuple[float, str, int], list[int]] = {}
    for w, k, wk, sz in zip(win.tolist(), keys, workers.tolist(), sizes.tolist()):
        slot = acc.get((w, k, wk))
        if slot is None:
            acc[(w, k, wk)] = [1, sz]
        else:
            slot[0] += 1
            slot[1] += sz
    return [
        {"window_start": w, "key": k, "worker": wk, "count": c, "bytes": b}
        for (w, k, wk), (c, b) in sorted(acc.items())
    ]

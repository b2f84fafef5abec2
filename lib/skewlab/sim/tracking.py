"""Bounded per-window counters: worker loads, merge cost and DKG's DIST_COST.

Memory never grows with the number of events (one row of ``W`` counts per window, a bitmask
per key); how the merge cost follows DKG's topology: docs/sim.md.
"""

from __future__ import annotations

import numpy as np

__all__ = ["WindowTracker"]


class WindowTracker:
    """Counts routed events per (window, worker) and keys' workers per window.

    Events must be added in nondecreasing event time (the stream's order).
    """

    def __init__(self, workers: int, window_s: float) -> None:
        self.workers = workers
        self.window_s = float(window_s)
        self._words = (workers + 63) // 64
        self._win = np.zeros((0, self._words), dtype=np.uint64)
        self._run = np.zeros((0, self._words), dtype=np.uint64)
        self._rows: list[np.ndarray] = []
        self._open: int | None = None
        self.partials = 0
        self.window_keys = 0

    def _grow(self, n_ids: int) -> None:
        have = self._win.shape[0]
        if n_ids <= have:
            return
        cap = max(n_ids, 2 * have, 1024)
        for name in ("_win", "_run"):
            old = getattr(self, name)
            new = np.zeros((cap, self._words), dtype=np.uint64)
            new[:have] = old
            setattr(self, name, new)

    def _close(self) -> None:
        """Step: count the open window's partials and keys, fold it into the run."""
        pop = np.bitwise_count(self._win).sum(axis=1, dtype=np.int64)
        self.partials += int(pop.sum())
        self.window_keys += int(np.count_nonzero(pop))
        self._run |= self._win
        self._win[:] = 0

    def _row(self, window: int) -> np.ndarray:
        while len(self._rows) <= window:
            self._rows.append(np.zeros(self.workers, dtype=np.int64))
        return self._rows[window]

    def add(self, ts: np.ndarray, ids: np.ndarray, workers: np.ndarray, vocab_size: int) -> None:
        """Account events with times ``ts``, vocabulary ids ``ids`` routed to ``workers``."""
        if ts.size == 0:
            return
        self._grow(vocab_size)
        windows = np.floor_divide(ts, self.window_s).astype(np.int64)
        first, last = int(windows[0]), int(windows[-1])
        if self._open is None:
            self._open = first
        cuts = np.searchsorted(windows, np.arange(first, last + 2), side="left")
        flat = self._win.reshape(-1)
        words = self._words
        for j, window in enumerate(range(first, last + 1)):
            lo, hi = int(cuts[j]), int(cuts[j + 1])
            if lo == hi:
                continue
            if window != self._open:
                self._close()
                self._open = window
            w = workers[lo:hi]
            self._row(window)[:] += np.bincount(w, minlength=self.workers)
            bits = np.left_shift(np.uint64(1), (w % 64).astype(np.uint64))
            np.bitwise_or.at(flat, ids[lo:hi] * words + w // 64, bits)

    def finish(self) -> None:
        """Close the last window (call once, after the last event)."""
        if self._open is not None:
            self._close()
            self._open = None

    def window_loads(self) -> np.ndarray:
        """``(windows, W)`` events routed per window (window ``i`` = ``[i*window_s, ...)``)."""
        if not self._rows:
            return np.zeros((0, self.workers), dtype=np.int64)
        return np.vstack(self._rows)

    def workers_per_key(self) -> np.ndarray:
        """Distinct workers that received each vocabulary id over the whole run so far."""
        return np.bitwise_count(self._run | self._win).sum(axis=1, dtype=np.int64)

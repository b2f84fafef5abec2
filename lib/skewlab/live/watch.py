"""Progress of a live run: produced / routed / processed and the current imbalance."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skewlab.io.delta import DeltaStore
from skewlab.metrics import imb_score

ProgressFn = Callable[[dict[str, float]], None]


class Watcher:
    """Calls ``progress`` with the run's counters, at most once a second."""

    def __init__(
        self,
        client: Any,
        events_topic: str,
        routed_topic: str,
        delta_root: str,
        run_id: str,
        progress: ProgressFn | None,
    ) -> None:
        self.client, self.events_topic, self.routed_topic = client, events_topic, routed_topic
        self.store = DeltaStore(delta_root)
        self.run_id = run_id
        self.progress = progress
        self._last = 0.0
        self._sent = 0
        self._total = 0

    def tick(self, sent: int | None, total: int | None) -> None:
        if sent is not None and total is not None:
            self._sent, self._total = sent, total
        now = time.time()
        if self.progress is None or now - self._last < 1.0:
            return
        self._last = now
        routed = self.client.end_offsets(self.routed_topic)
        loads = [routed.get(w, 0) for w in sorted(routed)]
        prog = self.store.read(
            "worker_progress", run_id=self.run_id, columns=["worker", "routed_offset"]
        )
        done: dict[int, int] = {}
        for w, o in zip(prog["worker"].to_pylist(), prog["routed_offset"].to_pylist()):
            done[w] = max(done.get(w, 0), o)
        self.progress(
            {
                "produced": float(self._sent),
                "total": float(self._total),
                "routed": float(sum(loads)),
                "processed": float(sum(done.values())),
                "imbalance": imb_score(loads) if sum(loads) else 0.0,
            }
        )

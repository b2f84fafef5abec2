"""The monitor process: each data partition's write speed (Landau et al. Sec. V-A).

Every ``sample_s`` the monitor reads what was appended to each partition
since its last sample (true end offsets, then the new records' key + value
bytes) and adds the cumulative byte counts to a :class:`SpeedWindow`. Every
``publish_s``, once the window spans more than ``min_span_s``, it publishes
the speeds (bytes/s over the sliding window, 30 s by default):

1. a :class:`~skewlab.live.autoscale.protocol.Measurement` to the ``monitor``
   topic (the controller reads the newest one);
2. one ``partition_loads`` row per partition to Delta, under the app
   transaction ``monitor:<run>`` with version = publication number.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from skewlab.clock import Clock, SystemClock
from skewlab.errors import ConfigError
from skewlab.io.delta.store import DeltaStore
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaClient
from skewlab.live.autoscale.protocol import LiveSettings, Measurement
from skewlab.rundir import app_id

__all__ = ["Monitor", "SpeedWindow", "main"]

log = logging.getLogger(__name__)


class SpeedWindow:
    """Sliding-window write speeds from cumulative byte counts.

    Invariant: samples are kept while younger than ``window_s`` (plus the one
    just older, so the window is covered end to end); the speed of partition
    ``j`` is ``(bytes_j(newest) - bytes_j(oldest)) / (t_newest - t_oldest)``.
    """

    def __init__(self, window_s: float = 30.0, min_span_s: float = 3.0) -> None:
        if not 0 <= min_span_s < window_s:
            raise ConfigError(f"need 0 <= min_span_s < window_s, got {min_span_s}, {window_s}")
        self.window_s = window_s
        self.min_span_s = min_span_s
        self._samples: deque[tuple[float, np.ndarray, np.ndarray]] = deque()

    def add(self, t: float, cum_bytes: np.ndarray, cum_records: np.ndarray) -> None:
        """Add a sample of cumulative bytes and records per partition at time ``t`` (s) and
        drop samples the window no longer needs; raises ``ValueError`` if ``t`` goes back."""
        if self._samples and t < self._samples[-1][0]:
            raise ValueError(f"samples must not go back in time ({t} < {self._samples[-1][0]})")
        self._samples.append((t, np.asarray(cum_bytes, float), np.asarray(cum_records, float)))
        while len(self._samples) > 2 and t - self._samples[1][0] >= self.window_s:
            self._samples.popleft()

    @property
    def span(self) -> float:
        """Seconds between the oldest and the newest sample kept (0 without samples)."""
        return self._samples[-1][0] - self._samples[0][0] if self._samples else 0.0

    def ready(self) -> bool:
        """True once the window spans more than ``min_span_s`` (the seed: > 3 s)."""
        return len(self._samples) >= 2 and self.span > self.min_span_s

    def speeds(self) -> np.ndarray:
        """Bytes/s per partition over the window; :class:`ValueError` before :meth:`ready`."""
        if not self.ready():
            raise ValueError("the window does not span enough time yet")
        (t0, b0, _), (t1, b1, _) = self._samples[0], self._samples[-1]
        return np.maximum(b1 - b0, 0.0) / (t1 - t0)

    def window_totals(self) -> tuple[float, np.ndarray, np.ndarray]:
        """Start of the window and the bytes and records added during it."""
        (t0, b0, r0), (_, b1, r1) = self._samples[0], self._samples[-1]
        return t0, b1 - b0, r1 - r0


class Monitor:
    """Samples the data topic and publishes speeds; see the module docstring."""

    def __init__(
        self,
        s: LiveSettings,
        client: KafkaClient | None = None,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.s = s
        self.client = client or connect(s.kafka)
        self.clock = clock or SystemClock()
        self.wall = wall
        self.store = DeltaStore(s.delta_root)
        self.window = SpeedWindow(s.window_s, s.min_span_s)
        self.pos = np.zeros(s.partitions, dtype=np.int64)
        self.bytes = np.zeros(s.partitions)
        self.seq = 0
        self._last_publish = -np.inf

    def sample(self) -> None:
        """Read each data partition's new records since the last sample, add their
        bytes (key + value) to the cumulative counts and add one sample to the window."""
        ends = self.client.end_offsets(self.s.topics.data)
        for p in range(self.s.partitions):
            end = ends.get(p, 0)
            if end <= self.pos[p]:
                continue
            total = 0
            for rec in self.client.fetch(self.s.topics.data, p, int(self.pos[p]), end, 10):
                total += len(rec.value or b"") + len(rec.key or b"")
            self.bytes[p] += total
            self.pos[p] = end
        self.window.add(self.clock.now(), self.bytes.copy(), self.pos.astype(float))

    def maybe_publish(self) -> Measurement | None:
        """Steps 1-2 of the module docstring when due; the measurement published."""
        now = self.clock.now()
        if not self.window.ready() or now - self._last_publish < self.s.publish_s:
            return None
        speeds = self.window.speeds()
        m = Measurement(self.seq, self.wall(), self.window.span, tuple(speeds.tolist()))
        self.client.produce(self.s.topics.monitor, m.encode(), partition=0)
        self.client.flush()
        start, nbytes, nrecords = self.window.window_totals()
        start_ms = round((m.t - (now - start)) * 1000)
        rows = [
            {
                "window_start": start_ms,
                "topic": self.s.topics.data,
                "partition": p,
                "bytes": int(nbytes[p]),
                "records": int(nrecords[p]),
                "bytes_per_s": float(speeds[p]),
            }
            for p in range(self.s.partitions)
        ]
        self.store.append(
            "partition_loads", rows, app_id=app_id("monitor", self.s.run_id), version=self.seq,
            run_id=self.s.run_id,
        )  # fmt: skip
        self.seq += 1
        self._last_publish = now
        return m

    def run(self, sleep: Callable[[float], None] = time.sleep) -> None:
        """Sample and publish until the run's stop file appears."""
        try:
            while not self.s.stop_file.exists():
                began = self.clock.now()
                self.sample()
                self.maybe_publish()
                sleep(max(0.0, self.s.sample_s - (self.clock.now() - began)))
        finally:
            self.client.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m skewlab.live.autoscale.monitor SETTINGS_JSON``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: monitor SETTINGS_JSON\n")
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    Monitor(LiveSettings.from_file(args[0])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

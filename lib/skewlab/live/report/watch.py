"""Progress of a live run: produced / routed / processed, lag, rate and the imbalance.

:class:`Watcher` reads the counters cheaply (the end offsets of ``routed`` and
the workers' committed offsets in ``worker_progress``; produced comes from the
producer) at most every ``every_s`` and hands them to a progress function.
:class:`ProgressLine` is the one the CLI uses: on a terminal one line per run,
redrawn in place by tqdm (the CLI's one progress library, also behind the command
bars) and at most :data:`LINE_WIDTH` columns; otherwise a plain line every
``plain_every_s`` (CI and Airflow logs), and a last one when it closes.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import IO, Any

from skewlab.io.delta.store import DeltaStore
from skewlab.metrics import imb_score

__all__ = ["ProgressFn", "ProgressLine", "Watcher", "progress_text"]

ProgressFn = Callable[[dict[str, float]], None]
"""Called with ``produced``, ``total``, ``routed``, ``processed``, ``lag`` (produced
not yet processed), ``rate`` (processed per second since the last call), ``imbalance``."""


class Watcher:
    """Calls ``progress`` with the run's counters, at most once per ``every_s``
    (the progress function's own ``every_s`` attribute when it has one, else 1 s)."""

    def __init__(
        self,
        client: Any,
        events_topic: str,
        routed_topic: str,
        delta_root: str,
        run_id: str,
        progress: ProgressFn | None,
        clock: Callable[[], float] = time.monotonic,
        sent: int = 0,
        total: int = 0,
    ) -> None:
        self.client, self.events_topic, self.routed_topic = client, events_topic, routed_topic
        self.store = DeltaStore(delta_root)
        self.run_id = run_id
        self.progress = progress
        self.clock = clock
        self.every_s = float(getattr(progress, "every_s", 1.0))
        self._last: float | None = None
        self._sent = sent
        """Events produced so far: ``sent`` when the watcher starts in a process that did not
        produce them (a DAG task after ``produce``), then the producer's :meth:`tick`."""
        self._total = total
        self._processed: tuple[float, float] | None = None
        self._offsets: tuple[float, dict[int, int], dict[int, int]] | None = None
        """(clock time, end offsets of ``routed``, committed offset per worker) of the last read."""

    def tick(self, sent: int | None, total: int | None) -> None:
        """Note the producer's ``sent`` of ``total`` events (a None keeps both) and call
        ``progress`` with :meth:`counters` if ``every_s`` passed since the last call."""
        if sent is not None and total is not None:
            self._sent, self._total = sent, total
        now = self.clock()
        if self.progress is None or (self._last is not None and now - self._last < self.every_s):
            return
        self._last = now
        self.progress(self.counters(now))

    def counters(self, now: float) -> dict[str, float]:
        """The :data:`ProgressFn` dict at ``now``: routed = end offsets of ``routed``,
        processed = the workers' highest committed offsets in ``worker_progress``, imbalance
        = :func:`~skewlab.metrics.imb_score` of the routed counts per partition, rate =
        processed per second since the previous call (which it remembers)."""
        routed, done = self._read(now)
        loads = [routed.get(w, 0) for w in sorted(routed)]
        processed = float(sum(done.values()))
        rate = 0.0
        if self._processed is not None and now > self._processed[0]:
            rate = max(0.0, (processed - self._processed[1]) / (now - self._processed[0]))
        self._processed = (now, processed)
        return {
            "produced": float(self._sent),
            "total": float(self._total),
            "routed": float(sum(loads)),
            "processed": processed,
            "lag": max(0.0, self._sent - processed),
            "rate": rate,
            "imbalance": imb_score(loads) if sum(loads) else 0.0,
        }

    def _read(self, now: float) -> tuple[dict[int, int], dict[int, int]]:
        """The end offsets of ``routed`` and each worker's highest committed offset in
        ``worker_progress`` (kept for :meth:`worker_offsets`)."""
        routed = self.client.end_offsets(self.routed_topic)
        prog = self.store.read(
            "worker_progress", run_id=self.run_id, columns=["worker", "routed_offset"]
        )
        done: dict[int, int] = {}
        for w, o in zip(prog["worker"].to_pylist(), prog["routed_offset"].to_pylist()):
            done[w] = max(done.get(w, 0), o)
        self._offsets = (now, routed, done)
        return routed, done

    def worker_offsets(self, worker: int) -> tuple[int, int] | None:
        """(committed offset, end offset of its partition of ``routed``) of ``worker``
        (0 committed before its first commit), from the last read of :meth:`counters`
        or of this method, read again once ``every_s`` old; None when ``routed`` has no
        such partition. The :class:`~skewlab.live.driver.supervise.Supervisor`'s progress."""
        now = self.clock()
        if self._offsets is None or now - self._offsets[0] >= self.every_s:
            self._read(now)
        assert self._offsets is not None
        _, routed, done = self._offsets
        if worker not in routed:
            return None
        return done.get(worker, 0), routed[worker]


LINE_WIDTH = 80
"""The progress line fits a classic terminal: parts are left out, least useful first."""


def compact(n: float) -> str:
    """A count in at most 6 characters: ``950``, ``96.3k``, ``12.5M``."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}" if abs(n) < 100 * size else f"{n / size:.0f}{unit}"
    return f"{n:.0f}"


def progress_text(label: str, p: dict[str, float], width: int = LINE_WIDTH) -> str:
    """The progress line of one run (no trailing newline), at most ``width`` characters:
    produced of the total, processed, rate and imbScore always; routed and lag while
    they fit (the label is shortened, ending in "…", only if even the core does not fit)."""
    total = max(p.get("total", 0.0), 1.0)
    core = [
        f"produced {compact(p['produced'])}/{compact(total)}",
        f"processed {compact(p['processed'])}",
        f"{compact(p.get('rate', 0.0))}/s",
        f"imbScore {p['imbalance']:.1f}%",
    ]
    optional = [(1, f"routed {compact(p['routed'])}"), (3, f"lag {compact(p.get('lag', 0.0))}")]
    while True:  # optional parts in priority order: routed before lag
        parts = list(core)
        for at, text in optional:
            parts.insert(at, text)
        line = f"{label}: " + " ".join(parts)
        if len(line) <= width:
            return line
        if not optional:
            room = width - len(line) + len(label) - 1
            short = label[: max(room, 1)] + "…" if room > 0 else ""
            return (f"{short}: " + " ".join(parts))[:width]
        optional.pop()


class ProgressLine:
    """A :data:`ProgressFn` writing to ``stream`` (see the module doc); :meth:`close`
    ends the line (terminal) or writes the last state (plain)."""

    def __init__(
        self,
        label: str,
        stream: IO[str],
        tty: bool | None = None,
        plain_every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.stream, self.clock = label, stream, clock
        self.tty = stream.isatty() if tty is None else tty
        self.plain_every_s = plain_every_s
        self.every_s = 1.0 if self.tty else min(plain_every_s, 5.0)
        self._last_plain: float | None = None
        self._last: dict[str, float] | None = None
        self._unshown = False
        self.width = LINE_WIDTH
        self._bar: Any = None

    def __call__(self, p: dict[str, float]) -> None:
        self._last = p
        if self.tty:
            self._draw(p)
            return
        text = progress_text(self.label, p)
        now = self.clock()
        self._unshown = True
        if self._last_plain is None or now - self._last_plain >= self.plain_every_s:
            self._last_plain, self._unshown = now, False
            self.stream.write(text + "\n")
            self.stream.flush()

    def _draw(self, p: dict[str, float]) -> None:
        """Redraw the terminal line: a tqdm bar that is only its description, cut to the
        width (the terminal's, at most :data:`LINE_WIDTH`)."""
        if self._bar is None:
            from tqdm import tqdm

            columns = shutil.get_terminal_size((LINE_WIDTH, 24)).columns or LINE_WIDTH
            self.width = min(columns, LINE_WIDTH)
            self._bar = tqdm(
                file=self.stream,
                bar_format="{desc}",
                ncols=self.width,
                dynamic_ncols=False,
                leave=True,
                mininterval=0,
            )
        self._bar.set_description_str(progress_text(self.label, p, self.width), refresh=True)

    def say(self, text: str) -> None:
        """One line on what the run is doing now: above the redrawn line on a terminal (it
        stays put), else a line of its own."""
        line = f"{self.label}: {text}"
        if self._bar is not None:
            self._bar.write(line, file=self.stream)
            return
        self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the line: stop the terminal redraw, or write the last counters not yet shown."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._last is not None and self._unshown:
            self._unshown = False
            self.stream.write(progress_text(self.label, self._last) + "\n")
            self.stream.flush()

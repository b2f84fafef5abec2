"""Progress of a long command on stderr, drawn by tqdm: rate and ETA.

On a terminal it is tqdm's updating bar; when the stream is not a terminal (a
log file, CI, a pipe) it is plain whole lines, one per :data:`STEP_PCT` percent,
each with the rate and the time left, and no carriage returns.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["PLAIN_FORMAT", "STEP_PCT", "EventProgress"]

STEP_PCT = 25
"""A plain (not a terminal) progress line every this many percent."""

PLAIN_FORMAT = (
    "{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} events [{elapsed}<{remaining}, {rate_fmt}]"
)
"""tqdm ``bar_format`` of the plain lines."""


class EventProgress:
    """``progress(done, total)`` callback (the simulator's ``Progress``) writing to ``stream``.

    Args:
        label: what is progressing (``"simulate dkg"``).
        stream: where to write (stderr).
        clock: monotonic seconds, for the plain lines' rate and ETA (injected in tests);
            the work is taken to start when the object is made.
    """

    def __init__(
        self, label: str, stream: TextIO, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.label = label
        self.stream = stream
        self.clock = clock
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._bar: Any = None
        self._start = clock()
        self._shown = -1

    def __call__(self, done: int, total: int) -> None:
        if self.tty:
            self._tty(done, total)
        else:
            self._plain(done, total)

    def _tty(self, done: int, total: int) -> None:
        from tqdm import tqdm

        if self._bar is None:
            size = shutil.get_terminal_size()
            self._bar = tqdm(
                total=total,
                desc=self.label,
                unit="ev",
                unit_scale=True,
                file=self.stream,
                leave=True,
                # a terminal reporting no size (0 x 0) gets 80 x 24: tqdm draws
                # nothing at 0 rows
                ncols=size.columns,
                nrows=size.lines,
            )
        self._bar.update(done - self._bar.n)
        if done >= total:
            self._bar.close()

    def _plain(self, done: int, total: int) -> None:
        from tqdm import tqdm

        step = 100 * done // total // STEP_PCT * STEP_PCT if total else 100
        if step == self._shown or (step == 0 and done < total):
            return
        self._shown = step
        line = tqdm.format_meter(
            done,
            total,
            self.clock() - self._start,
            prefix=self.label,
            unit="ev",
            unit_scale=True,
            bar_format=PLAIN_FORMAT,
        )
        self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Close the terminal bar if one is open (an interrupted run)."""
        if self._bar is not None:
            self._bar.close()

"""Progress on stderr: tqdm's bar on a terminal, periodic whole lines elsewhere."""

from __future__ import annotations

import io

import pytest

from skewlab.commands._progress import STEP_PCT, EventProgress

pytestmark = pytest.mark.unit


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _drive(progress: EventProgress, total: int, calls: int, now: list[float] | None = None) -> None:
    """``calls`` equal chunks of ``total`` events, one second of ``now`` each."""
    for i in range(1, calls + 1):
        if now is not None:
            now[0] = float(i)
        progress(total * i // calls, total)


def test_not_a_terminal_gets_one_whole_line_per_step_with_rate_and_eta() -> None:
    stream = io.StringIO()
    now = [0.0]
    progress = EventProgress("simulate key", stream, clock=lambda: now[0])
    _drive(progress, 100_000, 200, now)
    text = stream.getvalue()
    lines = text.splitlines()
    assert "\r" not in text
    assert len(lines) == 100 // STEP_PCT  # 25, 50, 75, 100 %
    # 500 events a second: 25,000 done after 50 s, 75,000 left take 150 s
    first = lines[0]
    assert "500ev/s" in first.replace(" ", "")
    assert "<00:02:30" in first or "<02:30" in first  # 150 s left at 25 %


def test_a_terminal_gets_the_updating_tqdm_bar() -> None:
    stream = _Terminal()
    progress = EventProgress("simulate key", stream)
    _drive(progress, 10_000, 10)
    text = stream.getvalue()
    assert "\r" in text  # redrawn in place
    assert "10.0k/10.0k" in text


def test_small_runs_print_nothing_before_the_first_step() -> None:
    stream = io.StringIO()
    progress = EventProgress("simulate key", stream, clock=lambda: 0.0)
    progress(1, 100)
    assert stream.getvalue() == ""

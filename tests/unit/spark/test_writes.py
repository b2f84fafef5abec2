"""When :class:`~skewlab.spark.writes.DeltaAppender` starts its rounds of appends.

The appends themselves (delta-spark) are recorded instead of run; the rows, the pending
files and the order are the appender's own. Real appends: tests/integration/spark.

* batches that arrive before a round is due share one round (one version, their rows);
* :meth:`flush` does not wait for the round's time; more than ``max_lag`` waiting do not;
* the process's first batch still gets a round of its own (it may be a replay);
* a round that took ``d`` seconds is followed by ``d`` seconds without one.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from skewlab.io.delta.convert import to_arrow
from skewlab.io.delta.schemas import table_spec
from skewlab.spark import writes
from skewlab.spark.writes import Append, DeltaAppender

pytestmark = pytest.mark.unit

HOUR = 3600.0
"""A round interval no test outlives: a round that starts did not wait for it."""


class Rounds:
    """Records each round's (version, key_loads counts) instead of appending."""

    def __init__(self) -> None:
        self.done: list[tuple[int, list[int]]] = []
        self.changed = threading.Condition()

    def __call__(self, spark: Any, root: Any, appends: Any, **kw: Any) -> None:
        (a,) = appends
        with self.changed:
            self.done.append((kw["version"], a.data.column("count").to_pylist()))
            self.changed.notify_all()

    def wait_for(self, n: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.done) >= n, timeout=60)


@pytest.fixture
def rounds(monkeypatch: pytest.MonkeyPatch) -> Rounds:
    r = Rounds()
    monkeypatch.setattr(writes, "delta_appends", r)
    return r


def _kl(count: int) -> list[Append]:
    rows = {"window_start": [0], "key": ["a"], "worker": [0], "count": [count], "bytes": [9]}
    return [Append("key_loads", rows)]


def app_rows(count: int) -> Any:
    return to_arrow(table_spec("key_loads"), _kl(count)[0].data, "r")


def _appender(tmp_path: Path, **kw: Any) -> DeltaAppender:
    return DeltaAppender(None, tmp_path / "d", tmp_path / "p", app_id="route:r", run_id="r", **kw)  # type: ignore[arg-type]


def test_batches_before_the_next_round_share_it_and_flush_does_not_wait(
    rounds: Rounds, tmp_path: Path
) -> None:
    app = _appender(tmp_path, max_lag=64, every_s=HOUR)
    app.submit(0, _kl(1))
    app.flush()  # the first round is due at once; the next one in an hour
    for b in (1, 2, 3):
        app.submit(b, _kl(b + 1))
    assert app.lag == 3 and sorted(p.name for p in (tmp_path / "p").iterdir()) == ["1", "2", "3"]
    app.close()
    assert rounds.done == [(0, [1]), (3, [2, 3, 4])]
    assert app.lag == 0 and not list((tmp_path / "p").iterdir())


def test_more_than_max_lag_waiting_start_a_round(rounds: Rounds, tmp_path: Path) -> None:
    app = _appender(tmp_path, max_lag=2, every_s=HOUR)
    app.submit(0, _kl(1))
    app.flush()
    for b in (1, 2, 3):  # the third one waiting is one too many
        app.submit(b, _kl(b + 1))
    rounds.wait_for(2)
    assert rounds.done == [(0, [1]), (3, [2, 3, 4])]
    app.close()


def test_the_first_batch_of_a_process_keeps_a_round_of_its_own(
    rounds: Rounds, tmp_path: Path
) -> None:
    app = _appender(tmp_path, max_lag=64, every_s=HOUR)
    app._save(5, {"key_loads": app_rows(6)})  # what a killed process left pending
    for b in (6, 7):  # 5: left by a crashed process; 6: maybe a replay; 7: new
        app.submit(b, _kl(b + 1))
    app.close()
    assert rounds.done == [(5, [6]), (6, [7]), (7, [8])]


def test_a_long_round_is_followed_by_as_long_a_pause(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    now = [100.0]
    took = Rounds()

    def slow_round(*args: Any, **kw: Any) -> None:
        now[0] += 10.0  # the round takes 10 s of the injected clock
        took(*args, **kw)

    monkeypatch.setattr(writes, "delta_appends", slow_round)
    app = _appender(tmp_path, max_lag=64, every_s=1.0, clock=lambda: now[0])
    app.submit(0, _kl(1))
    app.flush()  # ran 100 -> 110: no round before 120, though every_s is 1
    app.submit(1, _kl(2))
    with app._cond:
        now[0] = 119.9
        assert not app._due()
        now[0] = 120.0
        assert app._due()
    app.close()
    assert took.done == [(0, [1]), (1, [2])]

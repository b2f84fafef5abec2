"""When :class:`~skewlab.spark.writes.DeltaAppender` starts its rounds of appends.

The appends themselves (delta-spark) are recorded instead of run; the rows, the pending
files and the order are the appender's own. Real appends: tests/integration/spark.

* batches that arrive before a round is due share one round (one version, their rows);
* :meth:`flush` does not wait for the round's time; more than ``max_lag`` waiting do not;
* a table's commit leaves out the batches at or below the app's last version in it
  (left pending by a crash, or replayed) and holds the rest;
* the first round waits ``every_s``; a round that took ``d`` seconds is followed by ``d``
  seconds without one.
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
    """Records each round's (version, key_loads counts) instead of appending, and
    the rows of each table it appended to."""

    def __init__(self) -> None:
        self.done: list[tuple[int, list[int]]] = []
        self.rows: list[dict[str, int]] = []
        self.changed = threading.Condition()

    def __call__(self, spark: Any, root: Any, appends: Any, **kw: Any) -> None:
        by_table = {a.table: a.data for a in appends}
        kl = by_table.get("key_loads")
        with self.changed:
            counts = [] if kl is None else kl.column("count").to_pylist()
            self.done.append((kw["version"], counts))
            self.rows.append({t: d.num_rows for t, d in by_table.items()})
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


def _pl(partitions: int) -> Append:
    rows = {
        "window_start": [0] * partitions,
        "topic": ["routed"] * partitions,
        "partition": list(range(partitions)),
        "bytes": [9] * partitions,
        "records": [1] * partitions,
        "bytes_per_s": [0.6] * partitions,
    }
    return Append("partition_loads", rows)


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


def test_a_tables_commit_leaves_out_the_batches_it_has_and_holds_the_rest(
    rounds: Rounds, tmp_path: Path
) -> None:
    """5: left pending by a killed process, in key_loads already (its partition_loads
    commit had not run); 6: a replay, or new; 7: new."""
    done = {"key_loads": 5, "partition_loads": 4}
    app = _appender(tmp_path, max_lag=64, every_s=HOUR, committed=done.get)
    pl = to_arrow(table_spec("partition_loads"), _pl(1).data, "r")
    app._save(5, {"key_loads": app_rows(6), "partition_loads": pl})
    for b in (6, 7):
        app.submit(b, [*_kl(b + 1), _pl(b - 4)])
    app.close()
    assert rounds.done == [(7, [7, 8])]  # one commit per table, the newest batch's version
    assert rounds.rows == [{"key_loads": 2, "partition_loads": 1 + 2 + 3}]
    assert not list((tmp_path / "p").iterdir())


def test_a_table_that_has_every_batch_gets_no_commit(rounds: Rounds, tmp_path: Path) -> None:
    app = _appender(tmp_path, max_lag=64, every_s=HOUR, committed={"key_loads": 3}.get)
    for b in (2, 3):  # what a killed process appended but left pending
        app._save(b, {"key_loads": app_rows(b + 1)})
    app.close()
    assert rounds.done == [(3, [])] and rounds.rows == [{}]
    assert not list((tmp_path / "p").iterdir())


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
    with app._cond:  # the first round waits every_s too
        assert not app._due()
        now[0] = 101.0
        assert app._due()
    app.flush()  # ran 101 -> 111: no round before 121, though every_s is 1
    app.submit(1, _kl(2))
    with app._cond:
        now[0] = 120.9
        assert not app._due()
        now[0] = 121.0
        assert app._due()
    app.close()
    assert took.done == [(0, [1]), (1, [2])]

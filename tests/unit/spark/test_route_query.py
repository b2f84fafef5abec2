"""The route query's ``stop``: Spark's query stops first, then the sink closes (the
route sink's pending Delta appends), even when stopping the query fails."""

from __future__ import annotations

from typing import Any

import pytest

from skewlab.spark.route import RouteQuery


class FakeQuery:
    def __init__(self, fail: bool = False) -> None:
        self.fail, self.calls = fail, []
        self.isActive = True

    def stop(self) -> None:
        self.calls.append("query.stop")
        self.isActive = False
        if self.fail:
            raise RuntimeError("stop failed")


class FakeSink:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def __call__(self, batch: Any, batch_id: int) -> None:  # the foreachBatch function
        raise AssertionError("not called here")

    def close(self, spark: Any) -> None:
        self.calls.append(f"sink.close({spark})")


def test_stop_stops_the_query_then_closes_the_sink() -> None:
    q = FakeQuery()
    rq = RouteQuery(q, FakeSink(q.calls), "spark")  # type: ignore[arg-type]
    assert rq.isActive  # everything else is the query's
    rq.stop()
    assert q.calls == ["query.stop", "sink.close(spark)"]
    assert not rq.isActive


def test_the_sink_closes_when_stopping_the_query_fails() -> None:
    q = FakeQuery(fail=True)
    with pytest.raises(RuntimeError, match="stop failed"):
        RouteQuery(q, FakeSink(q.calls), "spark").stop()  # type: ignore[arg-type]
    assert q.calls == ["query.stop", "sink.close(spark)"]


def test_a_sink_without_close_is_left_alone() -> None:
    q = FakeQuery()
    RouteQuery(q, lambda batch, batch_id: None, "spark").stop()  # type: ignore[arg-type]
    assert q.calls == ["query.stop"]

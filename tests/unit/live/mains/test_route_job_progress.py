"""The route job logs Spark's progress of each micro-batch with input exactly once."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from skewlab.live.mains import route_job


class _JProgress:
    def __init__(self, d: dict[str, Any]) -> None:
        self.d = d

    def json(self) -> str:
        return json.dumps(self.d)


class _Query:
    def __init__(self) -> None:
        self.kept: list[_JProgress] = []
        self._jsq = self

    def recentProgress(self) -> list[_JProgress]:
        return self.kept[-100:]

    def add(self, batch: int, rows: int, ts: str) -> None:
        self.kept.append(
            _JProgress(
                {
                    "batchId": batch,
                    "numInputRows": rows,
                    "timestamp": ts,
                    "durationMs": {"addBatch": batch},
                }
            )
        )


def test_each_batch_with_input_is_logged_once_in_order(caplog: pytest.LogCaptureFixture) -> None:
    q, seen = _Query(), set[str]()
    caplog.set_level(logging.INFO, logger=route_job.__name__)

    def logged() -> list[str]:
        out = [r.getMessage().split(":")[0] for r in caplog.records]
        caplog.clear()
        return out

    q.add(0, 0, "t0")  # idle, then batch 0 runs with data under the same id
    route_job._log_progress(q, seen)  # type: ignore[arg-type]
    assert logged() == []
    q.add(0, 50, "t1")
    q.add(1, 70, "t2")
    route_job._log_progress(q, seen)  # type: ignore[arg-type]
    route_job._log_progress(q, seen)  # type: ignore[arg-type]
    assert logged() == ["progress batch 0", "progress batch 1"]
    for b in range(2, 150):  # more than Spark keeps between two polls
        q.add(b, 1, f"t{b + 1}")
    route_job._log_progress(q, seen)  # type: ignore[arg-type]
    assert logged() == [f"progress batch {b}" for b in range(50, 150)]

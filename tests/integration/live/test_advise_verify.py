"""``skewlab advise --verify``: the recommendation and KEY grouping run live on the user's
trace (replayed through Kafka on the session broker), beside the simulator's figures.

One command, two small live runs (~2 min on 2 busy cores): a trace whose hot key (40 %)
and its hash-mates overload one of two workers at 900 us per event, so the recommendation
is not KEY grouping and both strategies run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skewlab import cli
from skewlab.advise.base import stream_of
from skewlab.advise.readers import write_trace_csv
from skewlab.commands._advise_verify import DEFAULT_VERIFY_RATE

pytestmark = pytest.mark.integration

EVENTS = 6_000
RATE = 2_000.0


def test_verify_runs_the_advice_and_key_live_and_compares(
    broker: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SKEWLAB_KAFKA_BOOTSTRAP", broker.bootstrap)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    rng = np.random.default_rng(3)
    keys = ["hot" if x < 0.4 else f"k{int(x * 300)}" for x in rng.random(EVENTS)]
    trace = write_trace_csv(
        stream_of("t", ((k, None, None) for k in keys)), tmp_path / "t.csv", EVENTS
    )
    argv = ["advise", "--trace", str(trace), "--workers", "2", "--service-us", "900",
            "--rate", str(RATE), "--verify", "--verify-events", str(EVENTS), "--json",
            "--no-mlflow", "--no-plots", "--no-progress",
            "--home", str(tmp_path / "home")]  # fmt: skip
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    verify = doc["verify"]
    by = {(r["strategy"], r["metric"]): r for r in verify["records"]}
    strategies = {s for s, _ in by}
    assert strategies == {"key", doc["recommended"]}
    assert {m for _, m in by} == {"imbalance", "dist_cost", "p99_ms", "keys_moved_min"}
    # the stream's own rate, capped at what the live pipeline sustains on a busy machine
    assert verify["events"] == EVENTS and verify["rate"] == min(RATE, DEFAULT_VERIFY_RATE)
    # KEY grouping puts each key on one worker, in the simulator and live alike
    assert by[("key", "dist_cost")]["sim"] == by[("key", "dist_cost")]["live"] == 1.0
    # the recommendation splits the hot key live as in the simulator
    assert by[(doc["recommended"], "dist_cost")]["live"] > 1.0
    assert by[(doc["recommended"], "imbalance")]["live"] < by[("key", "imbalance")]["live"]
    assert [r["exact"] for r in verify["runs"]] == [True, True]
    for r in verify["records"]:
        assert math.isfinite(r["sim"]) and math.isfinite(r["live"])
        assert r["ratio"] == pytest.approx(r["sim"] / r["live"]) if r["live"] else True
    # calibrated on the KEY run: the route job's micro-batch and the pipeline's fixed delay
    # only ever add to what the simulator saw, for every strategy
    assert verify["trigger_s"] > 0 and verify["p99_offset_ms"] >= 0 and verify["fitted_on"] == "key"
    for s in strategies:
        p99 = by[(s, "p99_ms")]
        assert p99["sim"] >= p99["sim_uncalibrated"]

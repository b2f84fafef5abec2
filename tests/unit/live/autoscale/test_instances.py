"""Where the autoscale consumers run: what a retried attempt is sent again, persisted state."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.autoscale.controller import QueryAssignment, StartPartition, StopPartition
from skewlab.errors import ConfigError
from skewlab.live.autoscale.instances import (
    ConsumerProc,
    ConsumerTask,
    instances_state,
    load_instances,
    resume_actions,
)
from skewlab.live.autoscale.protocol import LiveSettings
from skewlab.live.driver.handle import ProcRecord

pytestmark = pytest.mark.unit


def test_a_new_attempt_gets_back_the_partitions_it_owns() -> None:
    owner = [1, 0, 1, -1, 2]
    assert resume_actions(1, owner, {}, queried=False) == [
        StartPartition(1, 0),
        StartPartition(1, 2),
    ]
    assert resume_actions(3, owner, {}, queried=False) == []  # owns nothing: nothing to send


def test_a_pending_stop_is_sent_again_and_that_partition_is_not_restarted() -> None:
    # partition 2 is being moved away from consumer 1 (stop sent, no ack): the new attempt
    # must ack the stop (it holds nothing), not read the partition again
    owner = [1, 0, 1]
    unacked = {(1, 2): False, (0, 1): False}
    assert resume_actions(1, owner, unacked, queried=False) == [
        StopPartition(1, 2),
        StartPartition(1, 0),
    ]


def test_a_pending_start_is_sent_again() -> None:
    # partition 3 was being given to consumer 1 (start sent to the dead attempt, no ack)
    owner = [1, -1, -1, -1]
    unacked = {(1, 3): True, (2, 1): True}
    assert resume_actions(1, owner, unacked, queried=False) == [
        StartPartition(1, 0),
        StartPartition(1, 3),
    ]


def test_while_synchronizing_only_the_query_is_sent_again() -> None:
    assert resume_actions(1, [1, 1], {(1, 0): False}, queried=True) == [QueryAssignment(1)]


def test_instances_round_trip_through_the_persisted_state(tmp_path: Path) -> None:
    rec = ProcRecord(
        "consumer-2", 42, 1.5, ["python"], str(tmp_path / "consumer-2.log"),
        str(tmp_path / "app.rc"), request=str(tmp_path / "consumer-2-1-ab.json"),
    )  # fmt: skip
    task = ConsumerTask.of(rec)
    state = instances_state({0: ConsumerProc(11), 2: task}, [(1, ConsumerProc(12)), (3, task)])
    assert state["pids"] == {"0": 11} and state["retiring"] == [12]
    procs, retiring = load_instances(state)
    assert isinstance(procs[0], ConsumerProc) and procs[0].pid == 11
    assert isinstance(procs[2], ConsumerTask) and procs[2].rec == rec
    assert procs[2].proc.rid == "consumer-2-1-ab"
    assert [(c, type(p)) for c, p in retiring] == [(-1, ConsumerProc), (3, ConsumerTask)]
    assert load_instances({}) == ({}, [])  # before the controller's first write


def test_the_engine_is_checked_in_the_settings() -> None:
    base = dict(run_id="r", bootstrap="b:1", run_dir="/tmp/r", delta_root="/tmp/d", partitions=4)
    assert LiveSettings(**base, engine="spark").engine == "spark"  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="engine must be one of local, spark"):
        LiveSettings(**base, engine="yarn")  # type: ignore[arg-type]

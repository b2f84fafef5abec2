"""One contract suite over every algorithm of the registry (STYLE.md rule 10)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.autoscale import (
    ALGORITHM_NAMES,
    ALGORITHMS,
    Assignment,
    AutoscalerConfig,
    BinPacker,
    MeasurementStream,
    make_algorithm,
    run_stream,
)
from skewlab.errors import StateError, UnknownNameError

pytestmark = pytest.mark.unit

C = 100.0
speed_vectors = st.lists(
    st.floats(min_value=0.0, max_value=C, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=40,
)


def check_valid(a: Assignment, speeds, capacity: float = C) -> None:
    s = np.asarray(speeds, dtype=float)
    assert a.partitions == len(s)
    assert all(o >= 0 for o in a.owner), "every partition has exactly one consumer"
    for load in a.loads(s).values():
        assert load <= capacity * (1 + 1e-9)
    assert a.consumers >= math.ceil(s.sum() / capacity - 1e-9)


@pytest.mark.parametrize("name", ALGORITHM_NAMES)
@settings(max_examples=60, deadline=None)
@given(speeds=speed_vectors, data=st.data())
def test_every_assignment_is_valid_with_or_without_a_previous_one(name, speeds, data):
    algo = make_algorithm(name)
    check_valid(algo.assign(speeds, None, C), speeds)
    owner = data.draw(st.lists(st.integers(-1, 12), min_size=len(speeds), max_size=len(speeds)))
    previous = Assignment(tuple(owner))
    check_valid(algo.assign(speeds, previous, C), speeds)
    assert previous.owner == tuple(owner)  # not modified


@pytest.mark.parametrize("name", ALGORITHM_NAMES)
def test_streams_stay_valid_and_are_deterministic(name):
    stream = MeasurementStream(partitions=30, measurements=15, delta=25, seed=3).generate()
    run = run_stream(name, stream, C)
    for a, s in zip(run.assignments, stream):
        check_valid(a, s)
    again = run_stream(name, stream, C)
    assert again.assignments == run.assignments
    assert run.rscores[0] == 0.0  # nothing is moved at the first iteration
    assert np.all(run.rscores >= 0)


@pytest.mark.parametrize("name", [*ALGORITHM_NAMES, "kafka:3", "kafka-rr:3"])
def test_protocol_name_and_empty_input(name):
    algo = make_algorithm(name)
    assert isinstance(algo, BinPacker)
    assert algo.name == name
    assert algo.assign([], None, C).owner == ()


def test_registry_resolves_case_insensitively_and_lists_names():
    assert make_algorithm("MWF") is ALGORITHMS["mwf"]
    with pytest.raises(UnknownNameError) as err:
        make_algorithm("best-fit")
    assert "mwf" in str(err.value) and "kafka" in str(err.value)


def test_autoscaler_steps_snapshots_and_resumes():
    cfg = AutoscalerConfig("mbfp", consumer_capacity=120.0)
    assert cfg.capacities.c == pytest.approx(100.0)  # the 5/6 rule
    stream = MeasurementStream(partitions=12, measurements=6, delta=20, seed=5).generate()
    whole = cfg.build()
    decisions = [whole.step(s) for s in stream]
    half = cfg.build()
    for s in stream[:3]:
        half.step(s)
    resumed = cfg.build(state=pickle.loads(pickle.dumps(half.snapshot())))
    rest = [resumed.step(s) for s in stream[3:]]
    assert [d.assignment for d in rest] == [d.assignment for d in decisions[3:]]
    assert decisions[-1].iteration == 6
    assert all(d.overloaded == () for d in decisions)
    with pytest.raises(StateError):
        cfg.build(state="nope")  # type: ignore[arg-type]


def test_autoscaler_handles_new_partitions_as_unassigned():
    scaler = AutoscalerConfig("mwf", consumer_capacity=1.2).build()
    scaler.step([0.5, 0.5])
    d = scaler.step([0.5, 0.5, 0.4])
    assert d.previous is not None and d.previous.owner[2] == -1
    assert all(o >= 0 for o in d.assignment.owner)

"""The confluent client's wait on the broker: "not yet" answers are waited out, others raise."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException

from skewlab.io.kafka.base import KafkaSettings
from skewlab.io.kafka.confluent import ConfluentClient


def _client(monkeypatch: pytest.MonkeyPatch) -> ConfluentClient:
    client = ConfluentClient(KafkaSettings("127.0.0.1:9"))
    monkeypatch.setattr(client, "_require_broker", lambda doing: None)  # the broker "answers"
    return client


@pytest.mark.parametrize(
    "code",
    [
        RdKafkaError.NOT_COORDINATOR,
        RdKafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        RdKafkaError.COORDINATOR_NOT_AVAILABLE,
        RdKafkaError._TIMED_OUT,
    ],
)
def test_a_moving_or_loading_coordinator_is_waited_out(
    monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    answers: list[object] = [KafkaException(RdKafkaError(code)), 7]

    def call(slice_s: float) -> int:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return int(answer)  # type: ignore[call-overload]

    assert _client(monkeypatch)._wait("committed offsets", call) == 7
    assert answers == []


def test_any_other_broker_error_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []

    def call(slice_s: float) -> int:
        calls.append(slice_s)
        raise KafkaException(RdKafkaError(RdKafkaError.GROUP_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException):
        _client(monkeypatch)._wait("committed offsets", call)
    assert len(calls) == 1

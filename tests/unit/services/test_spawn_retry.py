"""A service spawn's retry policy (tenacity): a lost port race is retried, nothing else is."""

from __future__ import annotations

import pytest

from skewlab.services.process import PortInUseError, ServiceStartError, spawn_retrying

pytestmark = pytest.mark.unit


def _run(policy, fn):
    for attempt in policy:
        with attempt:
            return fn()
    raise AssertionError("unreachable")


def test_a_lost_port_race_is_retried_on_a_new_port() -> None:
    ports = iter([5001, 5002, 5003])
    tried = []

    def spawn() -> int:
        port = next(ports)
        tried.append(port)
        if port < 5003:
            raise PortInUseError(f"port {port} taken")
        return port

    assert _run(spawn_retrying("echo", 3), spawn) == 5003
    assert tried == [5001, 5002, 5003]


def test_the_last_port_error_itself_is_raised_after_the_attempts() -> None:
    tried = []

    def spawn() -> None:
        tried.append(1)
        raise PortInUseError(f"port {len(tried)} taken")

    with pytest.raises(PortInUseError, match="port 3 taken"):
        _run(spawn_retrying("echo", 3), spawn)
    assert len(tried) == 3


def test_a_fixed_port_is_tried_once_and_a_failed_start_is_not_retried() -> None:
    tried = []

    def taken() -> None:
        tried.append(1)
        raise PortInUseError("taken")

    with pytest.raises(PortInUseError):
        _run(spawn_retrying("echo", 1), taken)
    assert len(tried) == 1

    def dies() -> None:
        tried.append(1)
        raise ServiceStartError("died")

    with pytest.raises(ServiceStartError):
        _run(spawn_retrying("echo", 3), dies)
    assert len(tried) == 2

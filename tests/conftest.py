"""How the suite shares 2 cores under ``-n 2`` (pytest-xdist): the unit tests on idle CPU.

``bash infra/test.sh`` with no arguments runs ``pytest -n 2`` (docs/testing.md, "Session 28").
Every test that starts or shares a service (broker, route host, warm workers app, Airflow)
runs in one worker, in collection order, as in one process: each service stops right after
its last user. The other worker takes the unit tests, and lowers its priority first, so it
runs on the CPU the services' tests leave idle (they kept the cores 58 % busy) and does not
slow them down. Session 27's split, half the integration tests on each worker, made every
test about twice as slow and gained nothing.

1. scheduling (:func:`pytest_xdist_make_scheduler`): each group of :func:`group_of` is one
   unit of work, sent whole to one worker, which runs it in collection order;
2. priority (:func:`pytest_runtest_setup`): a worker given the unit group is reniced to
   :data:`UNIT_NICE` before its first test (the processes its tests start inherit it).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

SERVICES = "services"
"""The group of every test that starts or shares the session's services."""
UNIT = "unit"
"""The group of the pure library's tests (``tests/unit``): no service, CPU only."""
UNIT_NICE = 10
"""The niceness the unit worker adds to its own (CFS weight 110 against 1024: about a tenth
of a core while the services' tests keep both busy, all of what they leave idle)."""


def group_of(nodeid: str) -> str:
    """The group of a test: :data:`UNIT` under ``tests/unit/``, else :data:`SERVICES`."""
    return UNIT if nodeid.startswith("tests/unit/") else SERVICES


class ByGroup(LoadScopeScheduling):
    """xdist's scope scheduling with :func:`group_of` for the scope (largest group first)."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ByGroup:
    """Step 1: schedule by group (the module doc)."""
    return ByGroup(config, log)


_reniced: list[bool] = []


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Step 2: an xdist worker about to run its first unit test gives way (the module doc).
    One process (no xdist) keeps its priority: nothing runs beside it."""
    if _reniced or not os.environ.get("PYTEST_XDIST_WORKER") or group_of(item.nodeid) != UNIT:
        return
    os.nice(UNIT_NICE)
    _reniced.append(True)

"""How the suite shares 2 cores under ``-n 2`` (pytest-xdist): three groups on two workers.

``bash infra/test.sh`` with no arguments runs ``pytest -n 2`` (docs/testing.md, "Session 29").
The groups are those of :mod:`tests.groups`. One worker runs the tests sharing the session's
services (broker, route host, warm workers app) in collection order, as in one process: each
service stops right after its last user. The other runs the tests that start what they use
(Airflow, DAG, browser, Spark, Delta), then the unit tests, which lower the worker's
priority first so they run on the CPU the others leave idle.

1. scheduling (:func:`pytest_xdist_make_scheduler`): each group is one unit of work, sent
   whole to one worker, which runs it in collection order; the groups go out in the order of
   their first test (``own``: tests/browser comes first; the services; the unit tests), so
   the unit tests go to the worker that empties first;
2. priority (:func:`pytest_runtest_setup`): a worker about to run its first unit test is
   reniced to :data:`UNIT_NICE` (the processes its tests start inherit it).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.groups import UNIT, group_of

UNIT_NICE = 10
"""The niceness the unit worker adds to its own (CFS weight 110 against 1024: about a tenth
of a core while the other tests keep both busy, all of what they leave idle)."""


class ByGroup(LoadScopeScheduling):
    """xdist's scope scheduling with :func:`group_of` for the scope, in collection order."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        config.option.loadscopereorder = False  # xdist would send the largest group first
        super().__init__(config, log)

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

"""How the suite shares 2 cores under ``-n 2`` (pytest-xdist): tests grouped by what they start.

``bash infra/test.sh -n 2`` (one process without it; docs/testing.md, "Session 27"). The
live, DAG and browser tests are CPU-bound and share the session's services (broker, route
host, Airflow), so they run in one worker, one after another, as without xdist. The other
worker takes the unit tests (one core), the autoscale runs (their control loops wait on the
wall clock), then the crash matrix (its runs start their own route jobs).

1. collection (:func:`pytest_collection_modifyitems`): Airflow's users move behind every
   other test, so the other worker's tests run beside the live runs, not beside Airflow's
   scheduler (Airflow loses most from sharing the cores);
2. scheduling (:func:`pytest_xdist_make_scheduler`): each group of :func:`group_of` is one
   unit of work, sent whole to one worker, which runs it in collection order.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

SERVICES = "services"
"""The group of every test that starts or shares the session's services."""
BESIDE = {
    "tests/unit/": "unit",
    "tests/integration/autoscale/": "autoscale",
    "tests/integration/crash/": "crash",
}
"""Folders whose tests run on the other worker, and their groups."""
LAST = "airflow_server"
"""The fixture whose users run after every other test."""


def group_of(nodeid: str) -> str:
    """The group of a test: its :data:`BESIDE` folder's group, else :data:`SERVICES`."""
    for folder, group in BESIDE.items():
        if nodeid.startswith(folder):
            return group
    return SERVICES


class ByGroup(LoadScopeScheduling):
    """xdist's scope scheduling with :func:`group_of` for the scope (largest group first)."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ByGroup:
    """Step 2: schedule by group (the module doc)."""
    return ByGroup(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Step 1, in an xdist worker: Airflow's users last (the module doc); the sort is stable.
    One process keeps the order in which each service stops right after its last user."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: LAST in getattr(item, "fixturenames", ()))

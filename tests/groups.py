"""The suite's test groups: which tests run together on one xdist worker (docs/testing.md).

A group is sent whole to one worker, which runs it in collection order, so a session service
(broker, route host, warm workers app, Airflow) is shared by the tests of one group and
stopped after that group's last user (``tests/integration/fixtures/lifetime.py``).
"""

from __future__ import annotations

SERVICES = "services"
"""The live, crash, autoscale and service tests: the session's broker, route host and warm
workers app."""
AIRFLOW = "airflow"
"""The DAG, browser and Airflow process tests: each starts what it runs (an Airflow of its
own, a data dir with its own broker; a route host of the worker's own), so they run beside
:data:`SERVICES` on the other worker."""
UNIT = "unit"
"""The pure library's tests (``tests/unit``): no service, CPU only."""

AIRFLOW_PATHS = (
    "tests/dags/",
    "tests/browser/",
    "tests/integration/test_airflow_rest.py",
    "tests/integration/test_airflow_stop.py",
)
"""The node id prefixes of :data:`AIRFLOW`."""


def group_of(nodeid: str) -> str:
    """The group of a test, from its node id."""
    if nodeid.startswith("tests/unit/"):
        return UNIT
    if nodeid.startswith(AIRFLOW_PATHS):
        return AIRFLOW
    return SERVICES

"""The suite's test groups: which tests run together on one xdist worker (docs/testing.md).

A group is sent whole to one worker, which runs it in collection order, so a session service
(broker, route host, warm workers app, Airflow) is shared by the tests of one group and
stopped after that group's last user (``tests/integration/fixtures/lifetime.py``).
"""

from __future__ import annotations

SERVICES = "services"
"""The live, crash, autoscale and service tests: the session's broker, route host and warm
workers app."""
OWN = "own"
"""The tests that start what they use: the DAG, browser and Airflow tests (an Airflow of their
own, data dirs with their own brokers, a route host of the worker's own), the broker service's
tests (brokers of their own), the Spark tests (a Spark session of the worker's own), the Delta
and MLflow tests (files only). They run beside :data:`SERVICES`, on the other worker."""
UNIT = "unit"
"""The pure library's tests (``tests/unit``): no service, CPU only."""

OWN_PATHS = (
    "tests/dags/",
    "tests/browser/",
    "tests/integration/test_airflow_rest.py",
    "tests/integration/test_airflow_stop.py",
    "tests/integration/services/",
    "tests/integration/spark/",
    "tests/integration/io/",
    "tests/integration/test_compare.py",
)
"""The node id prefixes of :data:`OWN`."""


def group_of(nodeid: str) -> str:
    """The group of a test, from its node id."""
    if nodeid.startswith("tests/unit/"):
        return UNIT
    if nodeid.startswith(OWN_PATHS):
        return OWN
    return SERVICES

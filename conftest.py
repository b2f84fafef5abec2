"""Root conftest: shared fixture modules (integration services) are plugins here.

SIGTERM (a CI timeout, ``timeout``, a session ending) is turned into KeyboardInterrupt,
so pytest still tears its fixtures down: the broker, Spark and each run's processes
stop instead of outliving the suite.
"""

import signal
from types import FrameType

pytest_plugins = [
    "tests.integration.fixtures.lifetime",
    "tests.integration.fixtures.route_host",
    "tests.integration.fixtures.broker",
    "tests.integration.fixtures.store",
    "tests.integration.fixtures.spark",
    "tests.integration.fixtures.live",
    "tests.integration.fixtures.airflow",
]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure() -> None:
    """Tear fixtures down on SIGTERM as on Ctrl-C (the module doc)."""
    signal.signal(signal.SIGTERM, _interrupt)

"""Root conftest: shared fixture modules (integration services) are plugins here."""

pytest_plugins = [
    "tests.integration.fixtures.lifetime",
    "tests.integration.fixtures.broker",
    "tests.integration.fixtures.store",
    "tests.integration.fixtures.spark",
    "tests.integration.fixtures.live",
    "tests.integration.fixtures.airflow",
]

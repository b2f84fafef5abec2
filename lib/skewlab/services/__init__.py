"""Embedded local services (start / health / stop), all under one data directory.

Today: the Kafka broker (Apache Kafka, KRaft, one node). An MLflow server or Airflow
joins by subclassing :class:`~skewlab.services.process.Service` and adding one registry
entry.

>>> from skewlab.services import get_service
>>> broker = get_service("broker", home="/tmp/skewlab")   # doctest: +SKIP
>>> broker.start().url                                    # doctest: +SKIP
'127.0.0.1:40123'
"""

from __future__ import annotations

import os

from skewlab.registry import resolve
from skewlab.services.broker import Broker, start_broker
from skewlab.services.broker_config import kafka_jars
from skewlab.services.datadir import HOME_ENV, DataDir, ServiceState, resolve_home
from skewlab.services.kafka_probe import kafka_api_versions_ok, kafka_metadata_brokers
from skewlab.services.process import (
    BinaryNotFoundError,
    PortInUseError,
    Service,
    ServiceError,
    ServiceStartError,
    ServiceStatus,
)

SERVICES: dict[str, type[Service]] = {
    "broker": Broker,
}


def get_service(name: str, home: DataDir | str | os.PathLike[str] | None = None) -> Service:
    """The service registered as ``name`` over the data directory ``home``."""
    return resolve(SERVICES, name, "service")(home)


__all__ = [
    "HOME_ENV",
    "SERVICES",
    "BinaryNotFoundError",
    "Broker",
    "DataDir",
    "PortInUseError",
    "Service",
    "ServiceError",
    "ServiceStartError",
    "ServiceState",
    "ServiceStatus",
    "get_service",
    "kafka_api_versions_ok",
    "kafka_jars",
    "kafka_metadata_brokers",
    "resolve_home",
    "start_broker",
]

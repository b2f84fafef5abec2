"""Consumer-group autoscaling by bin packing (Landau et al., the autoscaling seed).

Pure library, no Kafka: the contract (:mod:`.base`), the adapted any-fit and modified any-fit
heuristics (:mod:`.binpack`, :mod:`.modified`, Algorithm 1), Kafka's assignors, the registry
and autoscaler (:mod:`.algorithms`), costs (:mod:`.metrics`, Eq. 11/28/29), measurement streams
(Eq. 15), the latency model (Eq. 16-27) and the Sec. V-C controller. Notes: docs/autoscale.md.
"""

from __future__ import annotations

from skewlab.autoscale.algorithms import (
    ALGORITHM_NAMES,
    ALGORITHMS,
    ORDERS,
    Autoscaler,
    AutoscalerConfig,
    AutoscalerSnapshot,
    Reassignment,
    StreamRun,
    make_algorithm,
    run_stream,
)
from skewlab.autoscale.base import DEFAULT_CAPACITY_RATIO, Assignment, BinPacker, Capacity
from skewlab.autoscale.binpack import AnyFit
from skewlab.autoscale.controller import (
    Action,
    Controller,
    ControllerConfig,
    ControllerSnapshot,
    Phase,
    QueryAssignment,
    StartConsumer,
    StartPartition,
    StopConsumer,
    StopPartition,
    reassign,
    sentinel_reason,
)
from skewlab.autoscale.kafka_assignor import KafkaAssignor
from skewlab.autoscale.latency import LatencyModel, LatencySegments, LatencyStats
from skewlab.autoscale.metrics import (
    average_rscore,
    cbs,
    moved_partitions,
    pareto_front,
    rscore,
)
from skewlab.autoscale.modified import ModifiedAnyFit
from skewlab.autoscale.streams import (
    DELTAS,
    START_CONDITIONS,
    MeasurementStream,
    load_measurements,
    measurements_array,
)

__all__ = [
    "ALGORITHMS",
    "ALGORITHM_NAMES",
    "DEFAULT_CAPACITY_RATIO",
    "DELTAS",
    "ORDERS",
    "START_CONDITIONS",
    "Action",
    "AnyFit",
    "Assignment",
    "Autoscaler",
    "AutoscalerConfig",
    "AutoscalerSnapshot",
    "BinPacker",
    "Capacity",
    "Controller",
    "ControllerConfig",
    "ControllerSnapshot",
    "KafkaAssignor",
    "LatencyModel",
    "LatencySegments",
    "LatencyStats",
    "MeasurementStream",
    "ModifiedAnyFit",
    "Phase",
    "QueryAssignment",
    "Reassignment",
    "StartConsumer",
    "StartPartition",
    "StopConsumer",
    "StopPartition",
    "StreamRun",
    "average_rscore",
    "cbs",
    "load_measurements",
    "make_algorithm",
    "measurements_array",
    "moved_partitions",
    "pareto_front",
    "reassign",
    "rscore",
    "run_stream",
    "sentinel_reason",
]

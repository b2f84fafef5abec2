"""Consumer-group autoscaling by bin packing (Landau et al., the seed
consumer-group-autoscaling-bin-packing.txt). Pure library: no Kafka here.

* :mod:`.base` -- :class:`Assignment` (``X(t_k)``), :class:`Capacity` (``C``,
  ``C_bar``, the 5/6 rule), the :class:`BinPacker` contract, ``f``/``g``/``h``.
* :mod:`.binpack` -- NF, NFD, FF, FFD, BF, BFD, WF, WFD adapted with ``h(j, k)``.
* :mod:`.modified` -- MWF, MBF, MWFP, MBFP (Algorithm 1).
* :mod:`.kafka_assignor` -- Kafka's range / round-robin assignor over N consumers.
* :mod:`.algorithms` -- the :data:`ALGORITHMS` registry, :class:`AutoscalerConfig`,
  :func:`run_stream`.
* :mod:`.metrics` -- Rscore (Eq. 11), CBS (Eq. 28), average Rscore (Eq. 29), Pareto front.
* :mod:`.streams` -- measurement streams (Sec. VI-B, Eq. 15).
* :mod:`.latency` -- fixed / rebalanced queue latency model (Sec. VI-C, Eq. 16-27).
* :mod:`.controller` -- the Sec. V-C state machine, emitting actions as data.
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
from skewlab.autoscale.streams import DELTAS, START_CONDITIONS, MeasurementStream

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
    "make_algorithm",
    "moved_partitions",
    "pareto_front",
    "reassign",
    "rscore",
    "run_stream",
    "sentinel_reason",
]

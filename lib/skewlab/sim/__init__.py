"""Discrete-event queueing simulator that drives any grouping (see :mod:`.engine`).

>>> result = simulate(grouping_config, workload, events=1_000_000, rate=8_000.0)
>>> result.std_dev, result.dist_cost, result.queue_delay.p99
"""

from skewlab.sim.base import LoadView, RoutingOverride, SimError, SimHook
from skewlab.sim.engine import Progress, SimConfig, Simulator, simulate
from skewlab.sim.queue import fifo_departures, route_queues
from skewlab.sim.result import SimResult
from skewlab.sim.service import ConstantService, ServiceTime, UniformService, parse_service_us
from skewlab.sim.tracking import WindowTracker

__all__ = [
    "ConstantService",
    "LoadView",
    "Progress",
    "RoutingOverride",
    "ServiceTime",
    "SimConfig",
    "SimError",
    "SimHook",
    "SimResult",
    "Simulator",
    "UniformService",
    "WindowTracker",
    "fifo_departures",
    "parse_service_us",
    "route_queues",
    "simulate",
]

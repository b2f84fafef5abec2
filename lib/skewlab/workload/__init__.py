"""Workload generators: seeded, streaming sources of keyed events.

Every workload is a frozen config (see :mod:`skewlab.workload.base`) whose
``events(n, chunk, rate)`` streams :class:`EventChunk` objects and whose
``spec()`` parses back with :func:`parse_workload`. Names in :data:`WORKLOADS`:

- ``zipf``: SMALOPS' ``P(k) ~ (v + k)^-s`` (s=1.1, v=2.72).
- ``country`` / ``country-half``: DKG's ``COUNTRY_SKEW_R<R>`` / ``COUNTRY_HALF_SKEW_R<R>``.
- ``eps-switch``: DLB's Zipf exponent alternating 0.2 (5 min) / 1.5 (10 min).
- ``dynamic``: SMALOPS' dynamic load, Zipf ranks shifted to new keys every minute.
- ``trace``: replay of a CSV / JSON-lines file.
"""

from skewlab.workload.base import EventChunk, Workload
from skewlab.workload.country import COUNTRIES, CountryHalfWorkload, CountryWorkload
from skewlab.workload.dynamic import DynamicWorkload
from skewlab.workload.spec import WORKLOAD_NAMES, WORKLOADS, parse_workload
from skewlab.workload.switching import EpsSwitchWorkload
from skewlab.workload.trace import TraceWorkload
from skewlab.workload.zipf import ZipfWorkload

__all__ = [
    "COUNTRIES",
    "WORKLOADS",
    "WORKLOAD_NAMES",
    "CountryHalfWorkload",
    "CountryWorkload",
    "DynamicWorkload",
    "EpsSwitchWorkload",
    "EventChunk",
    "TraceWorkload",
    "Workload",
    "ZipfWorkload",
    "parse_workload",
]

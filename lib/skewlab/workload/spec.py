"""Workload spec strings: ``name[:args]`` -> a workload config, and back via ``spec()``.

Grammar: ``name`` is a registry name (case and ``_``/``-`` insensitive);
``args`` are comma-separated ``param=value`` pairs, plus the positional
``R<percent>`` of the country workloads and the bare file path of ``trace``::

    zipf:s=1.1,v=2.72,keys=1000      country:R80         country-half:R80
    eps-switch                       dynamic:shift=5     trace:/path/file.csv

DKG's dataset names are accepted as aliases: ``COUNTRY_SKEW_R80`` is
``country:R80`` and ``COUNTRY_HALF_SKEW_R80`` is ``country-half:R80``. For
every workload ``w``: ``parse_workload(w.spec(), seed=w.seed) == w``.
"""

from __future__ import annotations

import re

from skewlab.errors import ConfigError
from skewlab.registry import normalize, resolve
from skewlab.workload.country import CountryHalfWorkload, CountryWorkload
from skewlab.workload.dynamic import DynamicWorkload
from skewlab.workload.switching import EpsSwitchWorkload
from skewlab.workload.trace import TraceWorkload
from skewlab.workload.zipf import ZipfWorkload

AnyWorkload = (
    ZipfWorkload
    | CountryWorkload
    | CountryHalfWorkload
    | EpsSwitchWorkload
    | DynamicWorkload
    | TraceWorkload
)
"""Every config in :data:`WORKLOADS` (each satisfies the :class:`Workload` protocol at runtime;
mypy sees frozen fields as read-only, so the union is the static type)."""

_WorkloadClass = (
    type[ZipfWorkload]
    | type[CountryWorkload]
    | type[CountryHalfWorkload]
    | type[EpsSwitchWorkload]
    | type[DynamicWorkload]
    | type[TraceWorkload]
)


WORKLOADS: dict[str, _WorkloadClass] = {
    "zipf": ZipfWorkload,
    "country": CountryWorkload,
    "country-half": CountryHalfWorkload,
    "eps-switch": EpsSwitchWorkload,
    "dynamic": DynamicWorkload,
    "trace": TraceWorkload,
}
"""Workload configs by registry name."""

WORKLOAD_NAMES: tuple[str, ...] = tuple(WORKLOADS)
"""The registry names, in registry order."""

_DKG_ALIAS = re.compile(r"^country-(half-)?skew-r(\d+)$")

_EXAMPLES = (
    "zipf:s=1.1,v=2.72,keys=10000, country:R80, country-half:R80, eps-switch, "
    "dynamic, trace:/path/file.csv"
)


def parse_workload(spec: str, seed: int = 0) -> AnyWorkload:
    """Parse ``spec`` into a validated workload config with ``seed``.

    Raises :class:`~skewlab.errors.ConfigError` with one line saying what is
    allowed: unknown names list :data:`WORKLOAD_NAMES`, unknown parameters list
    the workload's parameters.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(
            f"workload spec must be a non-empty string like {_EXAMPLES}; got {spec!r}"
        )
    name, _, rest = spec.strip().partition(":")
    key = normalize(name)
    alias = _DKG_ALIAS.match(key)
    args = rest.split(",") if rest else []
    if alias is not None:
        key = "country-half" if alias.group(1) else "country"
        args = [f"R{alias.group(2)}", *args]
    cls = resolve(WORKLOADS, key, "workload")
    if key == "trace":
        args = [rest] if not rest.lower().startswith("path=") else args
    return cls.from_args(args, seed)


def workload_spec(workload: AnyWorkload) -> str:
    """The spec string of a workload config (same as ``workload.spec()``)."""
    return workload.spec()

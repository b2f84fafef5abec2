"""Hot-key rebalancing: SMALOPS best fit, DLB-H / DLB-L, LPTF, and the static baseline.

Frozen configs whose ``build(state=None)`` returns a working object with
``decide(now, loads) -> Decision`` (contract: :class:`skewlab.rebalance.base.Rebalancer`).
Names: ``smalops``, ``dlb-h``, ``dlb-l``, ``lptf``, ``none`` / ``kg``; look one up with
:func:`make_rebalancer`. How each policy reads its paper: docs/rebalance.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from skewlab.errors import ConfigError
from skewlab.rebalance.base import (
    Decision,
    LoadSnapshot,
    Move,
    Rebalancer,
    RebalancerConfig,
    imbalance,
)
from skewlab.rebalance.dlb import (
    DLBConfig,
    DLBRebalancer,
    MapSnapshot,
    StaticConfig,
    StaticRebalancer,
    dlb_pass,
)
from skewlab.rebalance.lptf import LPTFConfig, LPTFRebalancer, lpt_pack
from skewlab.rebalance.smalops import (
    SmalopsConfig,
    SmalopsRebalancer,
    SmalopsSnapshot,
    eq3_target,
    eq4_holds,
)
from skewlab.registry import normalize, resolve

REBALANCERS: dict[str, tuple[type, dict[str, Any]]] = {
    "smalops": (SmalopsConfig, {}),
    "dlb-h": (DLBConfig, {"pick": "heavy"}),
    "dlb-l": (DLBConfig, {"pick": "light"}),
    "lptf": (LPTFConfig, {}),
    "none": (StaticConfig, {}),
    "kg": (StaticConfig, {}),
}
"""Registry name -> (config class, fixed parameters of that name)."""

REBALANCER_NAMES: tuple[str, ...] = ("none", "smalops", "dlb-h", "dlb-l", "lptf")
"""Canonical names, one per policy (for CLIs and sweeps)."""


def make_rebalancer(name: str, workers: int, **params: Any) -> RebalancerConfig:
    """A validated rebalancer config: ``make_rebalancer("dlb-l", workers=5, theta=15.0)``.

    An unknown name raises :class:`~skewlab.errors.UnknownNameError` listing the
    valid names; an unknown parameter a :class:`~skewlab.errors.ConfigError`.
    """
    cls, fixed = resolve(REBALANCERS, name, "rebalancer")
    allowed = [f.name for f in dataclasses.fields(cls) if f.init and f.name != "workers"]
    allowed = [a for a in allowed if a not in fixed]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ConfigError(
            f"rebalancer {normalize(name)!r} has no parameter {', '.join(unknown)}; "
            f"valid: {', '.join(['workers', *allowed])}"
        )
    factory: Callable[..., RebalancerConfig] = cls
    return factory(workers=workers, **fixed, **params)


__all__ = [
    "REBALANCERS",
    "REBALANCER_NAMES",
    "DLBConfig",
    "DLBRebalancer",
    "Decision",
    "LPTFConfig",
    "LPTFRebalancer",
    "LoadSnapshot",
    "MapSnapshot",
    "Move",
    "Rebalancer",
    "RebalancerConfig",
    "SmalopsConfig",
    "SmalopsRebalancer",
    "SmalopsSnapshot",
    "StaticConfig",
    "StaticRebalancer",
    "dlb_pass",
    "eq3_target",
    "eq4_holds",
    "imbalance",
    "lpt_pack",
    "make_rebalancer",
]

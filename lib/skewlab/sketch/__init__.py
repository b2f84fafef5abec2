"""Heavy-hitter sketches: lossy counting (SMALOPS) and space saving (DKG's related work).

Frozen configs whose ``build(state=None)`` returns the working sketch (contract:
:class:`skewlab.sketch.base.Sketch`); :data:`SKETCHES` is the registry, :func:`sketch_config`
builds one by name. Algorithms, bounds and batched updates: docs/sketch.md.
"""

from __future__ import annotations

from typing import Any

from skewlab.errors import ConfigError
from skewlab.registry import resolve
from skewlab.sketch.base import Sketch, SketchConfig, Threshold, WindowReport
from skewlab.sketch.lossy_counting import LossyCounter, LossyCountingConfig, LossyCountingSnapshot
from skewlab.sketch.space_saving import SpaceSaving, SpaceSavingConfig, SpaceSavingSnapshot

SKETCHES: dict[str, type[LossyCountingConfig] | type[SpaceSavingConfig]] = {
    "lossy-counting": LossyCountingConfig,
    "space-saving": SpaceSavingConfig,
}
"""Sketch configs by registry name."""

_PARAMS = {"lossy-counting": ("epsilon", "threshold"), "space-saving": ("capacity", "threshold")}


def sketch_config(name: str, **params: Any) -> SketchConfig:
    """``SKETCHES[name](**params)``; unknown names or parameters raise ConfigError."""
    cls = resolve(SKETCHES, name, "sketch")
    allowed = _PARAMS[cls.name]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ConfigError(
            f"{cls.name}: unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}"
        )
    config: SketchConfig = cls(**params)
    return config


__all__ = [
    "SKETCHES",
    "LossyCounter",
    "LossyCountingConfig",
    "LossyCountingSnapshot",
    "Sketch",
    "SketchConfig",
    "SpaceSaving",
    "SpaceSavingConfig",
    "SpaceSavingSnapshot",
    "Threshold",
    "WindowReport",
    "sketch_config",
]

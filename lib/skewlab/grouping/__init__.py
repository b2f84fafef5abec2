"""Groupings: which worker processes each event (one module per strategy).

Every grouping is a frozen config whose ``build(state=None, clock=None)`` returns the working
router (contract: :class:`skewlab.grouping.base.Grouping`). Names: ``shuffle``, ``key``,
``pkg`` (partial-key), ``dkg`` (dynamic-key), ``d-choices``, ``w-choices``; look one up with
:func:`make_grouping`. Sources and deviations from the references: docs/grouping.md.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from skewlab.errors import ConfigError
from skewlab.grouping.base import Grouping, GroupingConfig, Snapshot
from skewlab.grouping.dchoices import ChoicesRouter, DChoicesConfig, WChoicesConfig
from skewlab.grouping.dkg import DKGConfig, DKGRouter
from skewlab.grouping.key import KeyConfig, KeyRouter
from skewlab.grouping.pkg import PKGConfig, PKGRouter
from skewlab.grouping.shuffle import ShuffleConfig, ShuffleRouter
from skewlab.registry import normalize, resolve

GROUPINGS: dict[str, type] = {
    "shuffle": ShuffleConfig,
    "key": KeyConfig,
    "pkg": PKGConfig,
    "partial-key": PKGConfig,
    "dkg": DKGConfig,
    "dynamic-key": DKGConfig,
    "d-choices": DChoicesConfig,
    "w-choices": WChoicesConfig,
}
"""Registry name (normalized: lower case, '-' for '_') -> config class."""

GROUPING_NAMES: tuple[str, ...] = (
    "shuffle",
    "key",
    "pkg",
    "dkg",
    "d-choices",
    "w-choices",
)
"""Canonical names, one per strategy (for CLIs and sweeps)."""


def make_grouping(
    name_or_cfg: str | GroupingConfig, workers: int | None = None, **params: Any
) -> GroupingConfig:
    """A validated grouping config from a registry name (or an existing config).

    ``make_grouping("DYNAMIC_KEY", workers=10, warmup=30.0)`` builds a
    :class:`DKGConfig`; an unknown name raises
    :class:`~skewlab.errors.UnknownNameError` listing the valid names, an
    unknown or bad parameter a one-line :class:`~skewlab.errors.ConfigError`.
    Given a config, ``workers`` and ``params`` replace its fields.
    """
    if not isinstance(name_or_cfg, str):
        cfg = name_or_cfg
        changes = dict(params)
        if workers is not None:
            changes["workers"] = workers
        if not changes:
            return cfg
        cls: type = type(cfg)
        kind = cfg.name
        base = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls)}
        params = {**base, **changes}
        workers = params.pop("workers")
    else:
        cls = resolve(GROUPINGS, name_or_cfg, "grouping")
        kind = normalize(name_or_cfg)
    if workers is None:
        raise ConfigError(f"grouping {kind!r} needs workers (an integer >= 1)")
    allowed = [f.name for f in dataclasses.fields(cls) if f.name != "workers"]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ConfigError(
            f"grouping {kind!r} has no parameter {', '.join(unknown)}; "
            f"valid: {', '.join(['workers', *allowed])}"
        )
    out: GroupingConfig = cls(workers=workers, **params)
    return out


__all__ = [
    "GROUPINGS",
    "GROUPING_NAMES",
    "ChoicesRouter",
    "DChoicesConfig",
    "DKGConfig",
    "DKGRouter",
    "Grouping",
    "GroupingConfig",
    "KeyConfig",
    "KeyRouter",
    "PKGConfig",
    "PKGRouter",
    "ShuffleConfig",
    "ShuffleRouter",
    "Snapshot",
    "WChoicesConfig",
    "make_grouping",
]

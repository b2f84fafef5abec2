"""Registries are literal dicts; :func:`resolve` is the one lookup (STYLE.md rule 2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from skewlab.errors import UnknownNameError

T = TypeVar("T")


def normalize(name: str) -> str:
    """Registry keys are lower case with '-' for '_' (``PARTIAL_KEY`` -> ``partial-key``)."""
    return name.strip().lower().replace("_", "-")


def resolve(registry: Mapping[str, T], name: str, kind: str) -> T:
    """Return ``registry[name]`` (normalized) or raise :class:`UnknownNameError` listing names."""
    key = normalize(name)
    try:
        return registry[key]
    except KeyError:
        raise UnknownNameError(kind, name, list(registry)) from None

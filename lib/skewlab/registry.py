"""Registries are literal dicts; :func:`resolve` is the one lookup (STYLE.md rule 2)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TypeVar

from skewlab.errors import UnknownNameError

T = TypeVar("T")

SUGGEST_CUTOFF = 0.6
"""How alike a misspelt name and a registered one must be (difflib's ratio) to be suggested:
``dgk`` -> ``dkg`` (0.67) and ``cuntry`` -> ``country`` (0.92) are; ``bogus`` -> nothing."""


def normalize(name: str) -> str:
    """Registry keys are lower case with '-' for '_' (``PARTIAL_KEY`` -> ``partial-key``)."""
    return name.strip().lower().replace("_", "-")


def closest(name: str, names: Iterable[str]) -> str | None:
    """The registered name ``name`` most likely misspells (normalized), or None."""
    found = difflib.get_close_matches(normalize(name), list(names), n=1, cutoff=SUGGEST_CUTOFF)
    return found[0] if found else None


def resolve(registry: Mapping[str, T], name: str, kind: str) -> T:
    """Return ``registry[name]`` (normalized) or raise :class:`UnknownNameError` listing the
    names, with the closest one as a "did you mean" (:func:`closest`)."""
    key = normalize(name)
    try:
        return registry[key]
    except KeyError:
        raise UnknownNameError(kind, name, list(registry), closest(key, registry)) from None


def known(name: str, names: Iterable[str], kind: str) -> str:
    """The registered spelling of ``name`` among ``names`` (normalized), or
    :class:`UnknownNameError` with the same "did you mean" as :func:`resolve`.

    For flags whose allowed values are a tuple of names rather than a registry dict
    (``--rebalance``, ``--scale-out``): an argparse ``type`` built on it answers a typo
    as every registry does, where argparse's ``choices`` only lists the names."""
    return resolve({n: n for n in names}, name, kind)

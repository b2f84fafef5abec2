"""A paper's claim beside our measured value, and the rule that decides whether it holds.

A :class:`Claim` never stores a verdict: :attr:`Claim.holds` applies its
:class:`Rule` to the measured value every time it is read, so a report, a test
and the ``skewlab reproduce`` table all decide the same way from the same number.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Claim",
    "Rule",
    "at_least",
    "at_most",
    "band",
    "exactly",
    "near",
    "ordered",
    "true",
]


@dataclass(frozen=True)
class Rule:
    """How a measured value is judged: ``check(value) -> bool`` and its text ("in [a, b]")."""

    text: str
    check: Callable[[Any], bool]

    def __call__(self, value: Any) -> bool:
        if isinstance(value, float) and math.isnan(value):
            return False
        return bool(self.check(value))


def band(lo: float, hi: float, unit: str = "") -> Rule:
    """Holds when ``lo <= value <= hi``."""
    return Rule(f"in [{lo:g}, {hi:g}]{unit}", lambda v: lo <= float(v) <= hi)


def near(target: float, tol: float, *, relative: bool = False, unit: str = "") -> Rule:
    """Holds within ``tol`` of ``target``: absolute points, or a fraction of it (``relative``)."""
    width = abs(target) * tol if relative else tol
    text = f"within {tol:.0%} of {target:g}{unit}" if relative else f"{target:g} ± {tol:g}{unit}"
    return Rule(text, lambda v: abs(float(v) - target) <= width)


def at_most(limit: float, unit: str = "") -> Rule:
    """Holds when ``value <= limit``."""
    return Rule(f"<= {limit:g}{unit}", lambda v: float(v) <= limit)


def at_least(limit: float, unit: str = "") -> Rule:
    """Holds when ``value >= limit``."""
    return Rule(f">= {limit:g}{unit}", lambda v: float(v) >= limit)


def exactly(expected: Any) -> Rule:
    """Holds when the value equals ``expected`` (a count, or a tuple such as a set of names)."""
    shown = ", ".join(map(str, expected)) if isinstance(expected, tuple) else str(expected)
    return Rule(f"= {shown}", lambda v: (tuple(v) if isinstance(v, list) else v) == expected)


def true(text: str) -> Rule:
    """Holds when the measured value (a bool computed from measurements) is true."""
    return Rule(text, bool)


def ordered(labels: Sequence[str], *, strict: bool = True) -> Rule:
    """Holds when a mapping ``label -> value`` is ascending in the order of ``labels``.

    ``ordered(["ab", "cp", "restart"])`` reads "ab < cp < restart".
    """
    sign = " < " if strict else " <= "

    def check(values: Mapping[str, float]) -> bool:
        seq = [float(values[label]) for label in labels]
        pairs = itertools.pairwise(seq)
        return all((a < b) if strict else (a <= b) for a, b in pairs)

    return Rule(sign.join(labels), check)


@dataclass(frozen=True)
class Claim:
    """One row of a reproduction: what the paper says, what we measured, the rule between.

    ``value`` is what the rule is applied to (a number, a bool or a mapping for
    :func:`ordered`); ``ours`` is how it is shown. ``why`` says, for a claim that
    does not hold for us, what we know of the reason (empty when unknown).
    """

    seed: str
    claim: str
    paper: str
    value: Any
    rule: Rule
    ours: str = ""
    figure: str = ""
    why: str = ""

    @property
    def holds(self) -> bool:
        """The rule applied to the measured value, now."""
        return self.rule(self.value)

    @property
    def shown(self) -> str:
        """The measured value as printed (``ours``, else the value itself)."""
        if self.ours:
            return self.ours
        if isinstance(self.value, float):
            return f"{self.value:.3g}"
        return str(self.value)

    def row(self) -> dict[str, str]:
        """The claims-table row: seed | claim (figure) | paper | ours | rule | holds?"""
        label = f"{self.claim} ({self.figure})" if self.figure else self.claim
        verdict = "holds" if self.holds else "does not hold" + (f": {self.why}" if self.why else "")
        return {
            "seed": self.seed,
            "claim": label,
            "paper": self.paper,
            "ours": self.shown,
            "rule": self.rule.text,
            "holds?": verdict,
        }

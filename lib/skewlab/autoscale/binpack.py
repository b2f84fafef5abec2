"""The classic any-fit heuristics (NF, FF, BF, WF and their decreasing versions, Sec. II-B),
adapted to consecutive iterations with ``h(j, k)`` (Sec. VI-A, Eq. 14).

The adaptation changes *which* bins open, never *how many*; details in docs/autoscale.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from skewlab.autoscale.base import Assignment, Bins, check_speeds, decreasing
from skewlab.errors import ConfigError

__all__ = ["FITS", "AnyFit", "Fit"]

Fit = Literal["next", "first", "best", "worst"]
FITS: tuple[Fit, ...] = ("next", "first", "best", "worst")


def choose(bins: Bins, fit: Fit, j: int) -> int:
    """The open bin ``fit`` picks for partition ``j``, or -1 when none fits."""
    if fit == "first":
        return bins.first_fit(j)
    if fit == "best":
        return bins.best_fit(j)
    if fit == "worst":
        return bins.worst_fit(j)
    if bins.last >= 0 and bins.fits(bins.last, j):
        return bins.last
    return -1


@dataclass(frozen=True)
class AnyFit:
    """One of NF, NFD, FF, FFD, BF, BFD, WF, WFD with the ``h(j, k)`` adaptation."""

    fit: Fit
    decreasing: bool = False

    def __post_init__(self) -> None:
        if self.fit not in FITS:
            raise ConfigError(f"fit must be one of {', '.join(FITS)}, got {self.fit!r}")

    @property
    def name(self) -> str:
        """The paper's abbreviation in lower case, e.g. ``bfd``."""
        return self.fit[0] + "f" + ("d" if self.decreasing else "")

    def assign(
        self,
        speeds: ArrayLike,
        previous: Assignment | None,
        capacity: float,
        rng: np.random.Generator | None = None,
    ) -> Assignment:
        """Pack ``speeds``; online versions in ``rng``'s permutation (index order without one).

        Per partition (largest first for the decreasing ``*D`` versions): NF tries only the
        last opened bin, FF the lowest-id open bin that fits, BF the tightest, WF the one with
        most slack; when none fits, the bin opened is ``h(j, k)`` (Eq. 14): the partition's
        previous consumer if not yet in use, else the lowest unused id (Eq. 12).
        """
        s = check_speeds(speeds)
        bins = Bins(s, previous, capacity)
        if self.decreasing:
            order = decreasing(s)
        elif rng is not None:
            order = rng.permutation(len(s))
        else:
            order = np.arange(len(s))
        for j in order.tolist():
            c = choose(bins, self.fit, j)
            if c < 0:
                bins.open_new(j)
            else:
                bins.put(c, j)
        return bins.result()

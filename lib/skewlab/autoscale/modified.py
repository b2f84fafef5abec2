"""The modified any-fit algorithms MWF, MBF, MWFP, MBFP (Landau et al. Algorithm 1, Table II).

They sort *consumers* instead of items, so most partitions stay put and the ones that move
are the slow ones (low Rscore). Steps on :meth:`ModifiedAnyFit.assign`; notes in
docs/autoscale.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from skewlab.autoscale.base import Assignment, Bins, check_speeds, decreasing
from skewlab.autoscale.binpack import choose
from skewlab.errors import ConfigError

__all__ = ["ModifiedAnyFit", "SortStrategy"]

SortStrategy = Literal["cumulative", "max-partition"]


@dataclass(frozen=True)
class ModifiedAnyFit:
    """Algorithm 1 with ``fit`` in {worst, best} and ``sort`` in {cumulative, max-partition}."""

    fit: Literal["worst", "best"]
    sort: SortStrategy = "cumulative"

    def __post_init__(self) -> None:
        if self.fit not in ("worst", "best"):
            raise ConfigError(f"fit must be 'worst' or 'best', got {self.fit!r}")
        if self.sort not in ("cumulative", "max-partition"):
            raise ConfigError(f"sort must be 'cumulative' or 'max-partition', got {self.sort!r}")

    @property
    def name(self) -> str:
        """``mwf``, ``mbf``, ``mwfp`` or ``mbfp`` (Table II)."""
        return "m" + self.fit[0] + "f" + ("p" if self.sort == "max-partition" else "")

    def _sorted_consumers(self, groups: dict[int, list[int]], s: np.ndarray) -> list[int]:
        """Step 1: consumers biggest first by the sort strategy, ties by id."""
        if self.sort == "cumulative":
            key = {c: float(s[ps].sum()) for c, ps in groups.items()}
        else:
            key = {c: float(s[ps].max()) for c, ps in groups.items()}
        return sorted(groups, key=lambda c: (-key[c], c))

    def assign(
        self,
        speeds: ArrayLike,
        previous: Assignment | None,
        capacity: float,
        rng: np.random.Generator | None = None,
    ) -> Assignment:
        """Algorithm 1 (deterministic: ``rng`` is accepted and unused); line numbers in brackets.

        1. (2) Consumers of ``X(t_{k-1})`` biggest first, by cumulative speed (MWF, MBF) or
           fastest partition (MWFP, MBFP) at ``t_k``; ties: lower id.
        2. (3-13) Each consumer's partitions, smallest first, go into an already open bin by
           the fit strategy; stop at the first that fits none.
        3. (14-17) If partitions remain, open the consumer itself.
        4. (18-24) Put the rest into it, largest first; stop at the first that does not fit.
        5. (25) What is left joins the unassigned ``U``.
        6. (27-30) ``U`` largest first into an open bin by the fit strategy, or a new bin
           ``h(j, k)`` (Eq. 14) when none fits.
        """
        s = check_speeds(speeds)
        bins = Bins(s, previous, capacity)
        prev = bins.prev
        groups: dict[int, list[int]] = {}
        unassigned: list[int] = []
        for j, c in enumerate(prev.tolist()):
            if c < 0:
                unassigned.append(j)
            else:
                groups.setdefault(c, []).append(j)
        for c in self._sorted_consumers(groups, s):
            ps = groups[c]
            pset = [ps[i] for i in decreasing(s[ps]).tolist()]
            while pset:  # step 2: smallest first into already open bins
                j = pset[-1]
                target = choose(bins, self.fit, j)
                if target < 0:
                    break
                bins.put(target, j)
                pset.pop()
            if not pset:
                continue
            bins.open(c)  # step 3
            kept = 0
            for j in pset:  # step 4: largest first into c itself
                if not bins.fits(c, j):
                    break
                bins.put(c, j)
                kept += 1
            unassigned.extend(pset[kept:])  # step 5
        rest = np.asarray(unassigned, dtype=np.int64)
        for j in rest[decreasing(s[rest])].tolist():  # step 6
            target = choose(bins, self.fit, j)
            if target < 0:
                bins.open_new(j)
            else:
                bins.put(target, j)
        return bins.result()

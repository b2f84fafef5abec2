"""The exactness check: merged results against a plain count of the input, per (window, key)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Counts = Mapping[tuple[float, str], tuple[int, int]]
"""(window_start, key) -> (count, sum)."""


class InputCounts(dict[tuple[float, str], tuple[int, int]]):
    """:data:`Counts` of the input that also know how many of its events were ``foreign``:
    not sent by the run's own producer (written into its topic from outside the run)."""

    def __init__(self, counts: Counts, foreign: int) -> None:
        super().__init__(counts)
        if foreign < 0:
            raise ValueError(f"foreign events must be >= 0, got {foreign}")
        self.foreign = foreign


@dataclass(frozen=True, slots=True)
class ExactnessReport:
    """The outcome of one check; ``exact`` is the verdict."""

    expected_events: int
    actual_events: int
    lost: int
    doubled: int
    sum_mismatches: int
    examples: tuple[str, ...] = field(default=())
    foreign_events: int | None = None
    """Expected events not sent by the run's own producer (None: origin not counted)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExactnessReport:
        """The report saved as ``dataclasses.asdict`` (the run handle's ``exactness``)."""
        return cls(**{**data, "examples": tuple(data.get("examples", ()))})

    @property
    def exact(self) -> bool:
        """True when nothing was lost or doubled and every sum agrees."""
        return self.lost == 0 and self.doubled == 0 and self.sum_mismatches == 0

    def summary(self) -> str:
        """One line: the verdict, both event totals (and where the input came from, when
        counted) and the three error counts."""
        verdict = "EXACT" if self.exact else "NOT EXACT"
        origin = ""
        if self.foreign_events is not None:
            own = self.expected_events - self.foreign_events
            origin = f" (input: {own} from the run's producer, {self.foreign_events} foreign)"
        return (
            f"{verdict}: expected {self.expected_events} events, merged {self.actual_events}"
            f"{origin}; "
            f"lost {self.lost}, doubled {self.doubled}, sum mismatches {self.sum_mismatches}"
        )


def check(expected: Counts, actual: Counts, max_examples: int = 5) -> ExactnessReport:
    """Compare merged results with the plain count, per (window, key).

    ``expected`` is counted straight from the input (minus quarantined records), ``actual`` is
    what the workers' partials merge to (an :class:`InputCounts` also gives the report
    its ``foreign_events``). A (window, key) whose count is lower is *lost*, higher
    *doubled*; equal counts with different sums are sum mismatches. Up to ``max_examples``
    offending slots are described in ``examples``.
    """
    lost = doubled = bad_sums = 0
    examples: list[str] = []
    for slot in sorted(set(expected) | set(actual)):
        ec, es = expected.get(slot, (0, 0))
        ac, as_ = actual.get(slot, (0, 0))
        if ac < ec:
            lost += ec - ac
        elif ac > ec:
            doubled += ac - ec
        elif es != as_:
            bad_sums += 1
        if (ac != ec or es != as_) and len(examples) < max_examples:
            examples.append(
                f"window {slot[0]:g} key {slot[1]!r}: expected {ec}/{es}, got {ac}/{as_}"
            )
    return ExactnessReport(
        expected_events=sum(c for c, _ in expected.values()),
        actual_events=sum(c for c, _ in actual.values()),
        lost=lost,
        doubled=doubled,
        sum_mismatches=bad_sums,
        examples=tuple(examples),
        foreign_events=expected.foreign if isinstance(expected, InputCounts) else None,
    )

"""Plain-text tables for terminals (drawn by ``tabulate``): one row per run, aligned columns."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from skewlab.sim.result import SimResult

__all__ = ["SIM_COLUMNS", "format_table", "sim_rows", "sim_table"]


def format_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, align: str | None = None
) -> str:
    """Align ``rows`` under ``headers``: first column left-aligned, the others right
    (``align="left"``: every column left-aligned, for text).

    Cells are printed as given (no number parsing or reformatting); a rule of
    dashes separates the header from the rows (tabulate's ``simple`` format).
    Every row must have as many cells as there are headers.
    """
    from tabulate import tabulate

    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row {list(row)!r} has {len(row)} cells, expected {len(headers)}")
    if align not in (None, "left"):
        raise ValueError(f"align must be None or 'left', got {align!r}")
    rest = "left" if align == "left" else "right"
    colalign = ["left", *([rest] * (len(headers) - 1))]
    return tabulate(
        [[str(c) for c in r] for r in rows],
        headers=[str(h) for h in headers],
        tablefmt="simple",
        disable_numparse=True,
        colalign=colalign,
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


SIM_COLUMNS: tuple[tuple[str, Callable[[SimResult], str]], ...] = (
    ("strategy", lambda r: r.strategy),
    ("events", lambda r: f"{r.events:,}"),
    ("throughput/s", lambda r: f"{r.throughput:,.0f}"),
    ("STD_DEV%", lambda r: f"{r.std_dev:.3f}"),
    ("DIST_COST", lambda r: f"{r.dist_cost:.3f}"),
    ("imbScore%", lambda r: f"{r.imb_score:.2f}"),
    ("p50 ms", lambda r: _ms(r.queue_delay.p50)),
    ("p99 ms", lambda r: _ms(r.queue_delay.p99)),
    ("max ms", lambda r: _ms(r.queue_delay.max)),
    ("merge", lambda r: f"{r.merge_cost:.3f}"),
)
"""The simulate table: (header, cell formatter). Delays are queueing delays."""


def sim_rows(results: Sequence[SimResult]) -> list[list[str]]:
    """One row of :data:`SIM_COLUMNS` cells per result."""
    return [[fmt(r) for _, fmt in SIM_COLUMNS] for r in results]


def sim_table(results: Sequence[SimResult]) -> str:
    """The simulate table: one row per strategy.

    Columns: events, throughput (events / makespan), DKG STD_DEV (%), DKG
    DIST_COST, DLB imbScore (%), queueing-delay p50 / p99 / max in ms, and the
    merge cost (partial aggregates per (window, key)).
    """
    return format_table([h for h, _ in SIM_COLUMNS], sim_rows(results))

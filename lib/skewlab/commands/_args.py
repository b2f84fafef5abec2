"""argparse value types shared by the commands: one line of error, what is allowed."""

from __future__ import annotations

import argparse
import math


def count(text: str) -> int:
    """A positive event count: ``5e6``, ``5000000`` or ``5_000_000``."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a count like 5e6 or 5000000, got {text!r}"
        ) from None
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(value)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def names(text: str) -> tuple[str, ...]:
    """A comma-separated list of names (``key,pkg,dkg``), blanks dropped."""
    return tuple(n.strip() for n in text.split(",") if n.strip())

"""argparse value types shared by the commands: one line of error, what is allowed."""

from __future__ import annotations

import argparse
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skewlab.errors import ConfigError, UnknownNameError
from skewlab.registry import known, normalize
from skewlab.services.datadir import resolve_home
from skewlab.spec import Setting
from skewlab.workload.spec import parse_workload


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
    """An integer >= 1 (``8``); anything else is an ``ArgumentTypeError`` (one line)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (``0.5``, ``1e-3``); anything else is an ``ArgumentTypeError``."""
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


SKEWED_WORKLOADS = ("country", "country-half")
"""Workloads whose skew R is the point of choosing them: the flag must say it."""
_SKEW_ARG = re.compile(r"[Rr][0-9]+|r=.*")


def workload(text: str) -> str:
    """A workload spec the parser accepts (``country:R80``); a country workload without its
    skew (``country``) is refused rather than silently run at the library's default R."""
    try:
        parse_workload(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    name, _, rest = text.strip().partition(":")
    if normalize(name) in SKEWED_WORKLOADS and not any(
        _SKEW_ARG.fullmatch(a.strip()) for a in rest.split(",")
    ):
        raise argparse.ArgumentTypeError(
            f"{name} needs its skew R (the percent of events on the hot key): "
            f"{name}:R<percent>, e.g. {name}:R80 (R0 uniform .. R100 one key), got {text!r}"
        )
    return text


def flag_type(s: Setting) -> Any:
    """The argparse type of setting ``s``: its kind, with the shared one-line checks."""
    if s.name == "events":
        return count
    if s.name == "workload" and s.part == "workload":  # a grouping run's workload spec
        return workload
    if s.choices is not None and all(isinstance(c, str) for c in s.choices):
        return one_of(s.choices, s.name.replace("_", "-"))
    if s.kind == "integer":
        return positive_int if s.minimum is not None and s.minimum >= 1 else int
    if s.kind == "number":
        return positive_float if s.exclusive_minimum == 0 else float
    return str


def one_of(names: tuple[str, ...], kind: str) -> Any:
    """The argparse type of a flag with allowed names: the registered spelling of the value,
    or the registries' one line with its "did you mean" (:func:`skewlab.registry.known`)."""

    def check(text: str) -> str:
        try:
            return known(text, names, kind)
        except UnknownNameError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return check


def flag_dest(s: Setting) -> str:
    """The argparse attribute of setting ``s``'s flag (``--max-instances`` -> max_instances)."""
    assert s.flag is not None
    return s.flag.removeprefix("--").replace("-", "_")


def flag_help(s: Setting) -> str:
    """The flag's help: the setting's help (its allowed values) and its default, once."""
    text = s.help
    if s.default is not None and s.name != "home":
        shown = f"{s.default:g}" if isinstance(s.default, float) else str(s.default)
        text = f"{text} (default: {shown})"
    return text.replace("%", "%%")  # argparse %-formats help texts


def add_flag(parser: argparse.ArgumentParser, s: Setting) -> None:
    """Add setting ``s``'s flag: repeated ``NAME=VALUE`` for an object, ``--no-X`` /
    ``--X`` for a boolean, else typed with its default and choices (``--home``: none,
    resolved by :func:`flag_value`)."""
    if s.flag is None:
        return
    if s.repeat:
        parser.add_argument(s.flag, action="append", default=[], metavar="NAME=VALUE", help=s.help)
    elif s.kind == "boolean":
        parser.add_argument(s.flag, action="store_true", help=s.help)
    else:
        parser.add_argument(
            s.flag,
            type=flag_type(s),
            default=None if s.name == "home" else s.default,  # None: $SKEWLAB_HOME
            choices=s.choices,
            help=flag_help(s),
        )


def flag_value(args: argparse.Namespace, s: Setting) -> Any:
    """Setting ``s``'s value from the parsed flags (``--home``: else ``$SKEWLAB_HOME``,
    else ./.skewlab; ``--no-X``: the setting is the negation; repeated: a dict)."""
    given = getattr(args, flag_dest(s), [] if s.repeat else s.default)
    if s.name == "home":
        return str(resolve_home(None if given is None else str(given)))
    if s.repeat:
        return name_values(given)
    if s.kind == "boolean":
        return not given
    return given


def flag_values(args: argparse.Namespace, settings: tuple[Setting, ...]) -> dict[str, Any]:
    """:func:`flag_value` of every setting of ``settings`` that has a flag, by name."""
    return {s.name: flag_value(args, s) for s in settings if s.flag is not None}


def name_values(items: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` flags -> a dict; values parsed as JSON when they are JSON (15, 0.1, false)."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"a -param flag must be NAME=VALUE, got {item!r}")
        try:
            out[name] = json.loads(raw)
        except ValueError:
            out[name] = raw
    return out


def out_dir(out: Path | None, home: Path, prefix: str) -> Path:
    """``out`` (made if missing), else a new ``<home>/runs/<prefix>-<UTC time>``: where an
    offline command (``simulate``, ``advise``) writes its plots and figures."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        return out
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = home / "runs" / f"{prefix}-{stamp}"
    path.mkdir(parents=True, exist_ok=False)
    return path

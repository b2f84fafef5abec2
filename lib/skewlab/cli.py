"""The ``skewlab`` command: ``skewlab <command> [options]``, one module per command.

:data:`COMMANDS` registers the command modules (each gives ``HELP``, ``configure(parser)`` and
``run(args) -> int``, heavy imports inside ``run``). Results go to stdout, logs to stderr; a bad
flag or :class:`~skewlab.errors.ConfigError` is one line and exit 2, another
:class:`~skewlab.errors.SkewlabError` exit 1, anything else one line plus a traceback file.
The contract in full: docs/cli.md.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError, SettingError, SkewlabError
from skewlab.services.datadir import resolve_home

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS: dict[str, str] = {
    "simulate": "skewlab.commands.simulate",
    "run": "skewlab.commands.run",
    "advise": "skewlab.commands.advise",
    "experiment": "skewlab.commands.experiment",
    "reproduce": "skewlab.commands.reproduce",
    "up": "skewlab.commands.services:up",
    "down": "skewlab.commands.services:down",
    "status": "skewlab.commands.services:status",
    "airflow": "skewlab.commands.airflow",
    "autoscale": "skewlab.commands.autoscale",
    "compare": "skewlab.commands.compare",
    "doctor": "skewlab.commands.doctor",
    "stop": "skewlab.commands.stop",
    "gc": "skewlab.commands.gc",
    "resume": "skewlab.commands.resume",
    "cluster": "skewlab.commands.cluster",
}
"""Subcommand name -> module implementing it, ``module:function`` when the run
function of that command is not called ``run`` (docs/cli.md, "Command modules")."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
DEBUG_ENV = "SKEWLAB_DEBUG"

log = logging.getLogger("skewlab")


class UsageError(Exception):
    """A command line argparse rejected; ``prog`` names the (sub)command."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)


def _load(name: str) -> tuple[ModuleType, Callable[[argparse.Namespace], int]]:
    path, _, func = COMMANDS[name].partition(":")
    module = importlib.import_module(path)
    return module, getattr(module, func or "run")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command."""
    parser = _Parser(
        prog="skewlab",
        description="Keyed streams under skew: groupings, rebalancing, autoscaling, scale-out.",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv: debug)"
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"show the full traceback of an unexpected error (also: {DEBUG_ENV}=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module, run = _load(name)
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(cmd)
        cmd.set_defaults(_run=run)
    return parser


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _write_details(args: argparse.Namespace, text: str) -> Path | None:
    """Write ``text`` (a traceback) to a new file under the data dir's ``logs/`` when the
    data dir exists, else to a temp file; None when neither can be written."""
    dirs: list[Path | None] = []
    try:
        home = resolve_home(getattr(args, "home", None))
        if home.is_dir():
            dirs.append(home / "logs")
    except Exception:  # a bad --home must not hide the error being reported
        pass
    dirs.append(None)  # the system temp dir
    for d in dirs:
        try:
            if d is not None:
                d.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix="skewlab-error-", suffix=".log", dir=d)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            return Path(name)
        except OSError:
            continue
    return None


def _unexpected(args: argparse.Namespace, argv: Sequence[str], exc: Exception) -> int:
    """Report an exception that is not a SkewlabError: one line, the traceback in a file."""
    text = "".join(traceback.format_exception(exc))
    if getattr(args, "debug", False) or env_settings().debug:
        sys.stderr.write(text)
    path = _write_details(args, f"skewlab {' '.join(argv)}\n{text}")
    where = f" (details: {path})" if path is not None else ""
    print(f"skewlab: {type(exc).__name__}: {_one_line(str(exc))}{where}", file=sys.stderr)
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``skewlab`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
    except UsageError as exc:
        print(f"{exc.prog}: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help / --version exit through argparse
        return int(exc.code or 0) if not isinstance(exc.code, str) else EXIT_USAGE
    level = logging.WARNING - 10 * min(int(args.verbose), 2)
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("skewlab").setLevel(level)
    try:
        code: int = args._run(args)
        return code
    except ConfigError as exc:
        what = str(exc)
        if isinstance(exc, SettingError) and exc.flag is not None:  # name what was typed
            what = f"argument {exc.flag}: {exc.detail}"
        print(f"skewlab {args.command}: error: {_one_line(what)}", file=sys.stderr)
        return EXIT_USAGE
    except SkewlabError as exc:
        print(f"skewlab {args.command}: failed: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"skewlab {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the CLI edge: any other error is one line + a details file
        return _unexpected(args, args_list, exc)


if __name__ == "__main__":
    raise SystemExit(main())

"""``skewlab up`` / ``down`` / ``status``: the embedded services under one data dir."""

from __future__ import annotations

import argparse

from skewlab.services import SERVICES, get_service

HELP = "start (up), stop (down) or show (status) the embedded services"

ACTIONS = ("up", "down", "status")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--home", default=None, help="data directory (default $SKEWLAB_HOME or .skewlab)"
    )
    parser.add_argument("--port", type=int, help="broker port (up only; default: a free one)")


def _act(action: str, args: argparse.Namespace) -> int:

    for name in SERVICES:
        svc = get_service(name, args.home)
        if action == "up":
            st = svc.start(port=args.port)
            print(f"{name}: running at {st.url} (pid {st.pid})")
        elif action == "down":
            stopped = svc.stop()
            print(f"{name}: {'stopped' if stopped else 'was not running'}")
        else:
            print(f"{name}: {svc.status().describe()}")
    return 0


def up(args: argparse.Namespace) -> int:
    return _act("up", args)


def down(args: argparse.Namespace) -> int:
    return _act("down", args)


def status(args: argparse.Namespace) -> int:
    return _act("status", args)

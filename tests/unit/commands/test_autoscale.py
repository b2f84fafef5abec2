"""``skewlab autoscale``: its help lists the registry's algorithms and shows the defaults used."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from skewlab.autoscale import ALGORITHMS, make_algorithm
from skewlab.commands import autoscale as cmd
from skewlab.live.autoscale.settings import AutoscaleSettings

pytestmark = pytest.mark.unit


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skewlab autoscale")
    cmd.configure(parser)
    return parser


def _helps() -> dict[str, str]:
    actions = _parser()._actions
    return {a.option_strings[0]: " ".join((a.help or "").split()) for a in actions}


def test_help_lists_every_algorithm_of_the_registry_and_each_is_accepted(tmp_path: Path) -> None:
    listed = _helps()["--algorithm"].split("one of ", 1)[1].split(" (default")[0].split(", ")
    assert [s.partition(":")[0] for s in listed] == list(ALGORITHMS)
    text = _parser().format_help()
    for spec in listed:
        assert f"\n  {spec} " in text  # one line of the epilog each
        name = spec.replace(":N", ":3")
        args = _parser().parse_args(["--algorithm", name, "--home", str(tmp_path)])
        (s,) = cmd.settings_list(args)
        assert make_algorithm(s.algorithm).name == name


def test_help_shows_each_default_and_the_shown_value_is_the_default(tmp_path: Path) -> None:
    home = ["--home", str(tmp_path)]
    (plain,) = cmd.settings_list(_parser().parse_args(home))
    fields = ("algorithm", "partitions", "capacity", "bin_capacity", "workload", "duration_s",
              "iteration_s", "window_s", "record_bytes", "client")  # fmt: skip
    assert {k: getattr(plain, k) for k in fields} == {
        k: getattr(AutoscaleSettings(), k) for k in fields
    }
    shown = 0
    for flag, text in _helps().items():
        if "(default: " not in text or flag in ("--bin-capacity", "--home"):
            continue
        value = text.rsplit("(default: ", 1)[1].removesuffix(")")
        (given,) = cmd.settings_list(_parser().parse_args([flag, value, *home]))
        assert given == plain, flag  # the value shown, given, is the value used without it
        shown += 1
    assert shown == 9


def test_home_defaults_to_the_data_dir_of_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKEWLAB_HOME", str(tmp_path / "env-home"))
    (s,) = cmd.settings_list(_parser().parse_args([]))
    assert Path(s.home) == (tmp_path / "env-home").resolve()

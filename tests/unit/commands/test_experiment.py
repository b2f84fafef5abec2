"""``skewlab experiment``: --list one line each, names in --help, unknown names refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab import cli
from skewlab.experiments import registry
from skewlab.experiments.reproduce import REPRODUCE_SCALES

pytestmark = pytest.mark.unit


def test_list_is_one_line_per_experiment_with_its_reproduce_scale(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["experiment", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()[2:]  # header, rule
    known = registry()
    assert sorted(ln.split()[0] for ln in lines) == sorted(known)
    for line in lines:
        name, *_, scale = line.split()
        assert scale == (f"{REPRODUCE_SCALES[name]:g}" if name in REPRODUCE_SCALES else "-")
        assert len(line.split()) > 2  # a description between the name and the scale


def test_help_names_every_experiment_and_the_defaults(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    assert cli.main(["experiment", "--help"]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in registry())
    assert text.count("(default:") >= 3


@pytest.mark.parametrize("argv", [["experiment", "no-such-thing"], ["experiment"]])
def test_unknown_or_missing_name_is_one_line_listing_the_valid_ones_exit_2(
    argv: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKEWLAB_HOME", str(tmp_path / "home"))
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    listed = {n.strip() for n in line.rsplit("valid: ", 1)[1].split(",")}
    assert listed == set(registry())
    assert not (tmp_path / "home").exists() and not (tmp_path / ".skewlab").exists()

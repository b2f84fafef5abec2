"""``skewlab reproduce NAME``: a misspelt experiment is one did-you-mean line, exit 2,
before anything runs; a name in another spelling is the registered one."""

from __future__ import annotations

import argparse

import pytest

from skewlab import cli
from skewlab.commands import reproduce as reproduce_cmd

pytestmark = pytest.mark.unit


def test_a_misspelt_claim_is_one_did_you_mean_line_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["reproduce", "dkg-contry", "--no-mlflow"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == ""
    assert len(err.splitlines()) == 1, err
    assert "did you mean 'dkg-country'?" in err and "Traceback" not in err


def test_an_unlike_name_lists_the_valid_ones_without_a_guess(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["reproduce", "bogus", "--no-mlflow"]) == 2
    err = capsys.readouterr().err.strip()
    assert "did you mean" not in err and "smalops-latency" in err


def test_names_parse_to_the_registered_spelling() -> None:
    parser = argparse.ArgumentParser()
    reproduce_cmd.configure(parser)
    args = parser.parse_args(["DKG_Country", "dlb-switch"])
    assert args.names == ["dkg-country", "dlb-switch"]

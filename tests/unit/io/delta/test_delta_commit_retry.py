"""The Delta append's retry policy (tenacity): conflicts are retried, other errors are not."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake.exceptions import CommitFailedError
from tenacity import RetryError

from skewlab.io.delta import store as store_mod
from skewlab.io.delta.store import DeltaStore, DeltaStoreError, commit_retrying

pytestmark = pytest.mark.unit

ROWS = {"version": [1], "key": ["k"], "worker": [0], "reason": ["test"]}


def _run(policy, fn):
    for attempt in policy:
        with attempt:
            return fn()
    raise AssertionError("unreachable")


def test_a_conflict_is_retried_until_the_commit_lands() -> None:
    calls = []

    def commit() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise CommitFailedError("lost the race")
        return "committed"

    assert _run(commit_retrying(5), commit) == "committed"
    assert len(calls) == 3


def test_conflicts_stop_after_the_attempts_and_keep_the_last_error() -> None:
    calls = []

    def commit() -> None:
        calls.append(1)
        raise CommitFailedError(f"conflict {len(calls)}")

    with pytest.raises(RetryError) as info:
        _run(commit_retrying(4), commit)
    assert len(calls) == 4
    assert str(info.value.last_attempt.exception()) == "conflict 4"


def test_another_error_is_not_retried() -> None:
    calls = []

    def commit() -> None:
        calls.append(1)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        _run(commit_retrying(4), commit)
    assert len(calls) == 1


def test_append_names_the_table_after_max_attempts_conflicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DeltaStore(tmp_path / "delta", max_attempts=3)
    calls = []

    def conflicting(*args, **kwargs) -> None:
        calls.append(1)
        raise CommitFailedError("concurrent append")

    monkeypatch.setattr(store_mod, "write_deltalake", conflicting)
    with pytest.raises(DeltaStoreError, match=r"'assignments'.*after 3 attempts: concurrent"):
        store.append("assignments", ROWS, app_id="a", version=0, run_id="r")
    assert len(calls) == 3


def test_append_commits_once_and_skips_a_replay(tmp_path: Path) -> None:
    store = DeltaStore(tmp_path / "delta")
    assert store.append("assignments", ROWS, app_id="a", version=0, run_id="r") is True
    assert store.append("assignments", ROWS, app_id="a", version=0, run_id="r") is False
    assert store.committed_version("assignments", "a") == 0

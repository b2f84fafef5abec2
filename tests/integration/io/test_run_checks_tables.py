"""A live run checks its data dir's Delta tables before it starts any service: a
damaged table fails phase 1 at once, naming the table and its repair command."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.io.delta import DeltaStore
from skewlab.io.delta.store import DamagedTableError
from skewlab.live.driver.experiment import BOOTSTRAP_ENV
from skewlab.live.driver.run import Run
from skewlab.rundir import DELTA_ROOT_ENV
from skewlab.runsettings import ExperimentSettings
from skewlab.services import get_service

pytestmark = pytest.mark.integration


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for env in (BOOTSTRAP_ENV, DELTA_ROOT_ENV):
        monkeypatch.delenv(env, raising=False)
    return tmp_path / "home"


def _quarantine(root: Path, commits: int) -> None:
    store = DeltaStore(root)
    for v in range(commits):
        row = {"raw": b"x", "topic": "t", "partition": 0, "offset": v, "reason": "empty", "ts": 1}
        store.append("quarantine", [row], app_id="route:r", version=v, run_id="r")


def test_a_damaged_table_fails_the_run_before_the_broker_starts(home: Path) -> None:
    _quarantine(home / "delta", 3)
    last = home / "delta" / "quarantine" / "_delta_log" / f"{3:020d}.json"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])  # a truncated commit

    run = Run.new(ExperimentSettings(home=str(home), workers=2), run_id="r-damaged")
    with pytest.raises(DamagedTableError) as info:
        run.services()
    err = info.value
    assert err.table == "quarantine"
    assert err.command.endswith("--repair quarantine") and err.command in str(err)
    broker = get_service("broker", home)
    assert broker.state() is None and not broker.status().running  # nothing was started
    assert run.handle.bootstrap is None and not run.handle.phases


def test_healthy_tables_pass_the_check(home: Path) -> None:
    _quarantine(home / "delta", 2)
    run = Run.new(
        ExperimentSettings(home=str(home), workers=2, bootstrap="127.0.0.1:1"), run_id="r-ok"
    )
    assert run.services() == "127.0.0.1:1"  # a given broker: nothing to start
    assert run.handle.phases

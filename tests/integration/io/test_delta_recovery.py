"""Damaged Delta tables (real deltalake tables in tmp_path, damaged by hand) are named,
checked and repaired: rolled back to their last readable version or moved aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab import cli
from skewlab.errors import SkewlabError
from skewlab.io.delta import DeltaStore
from skewlab.io.delta.recovery import (
    check_table,
    check_tables,
    isolate_table,
    repair_table,
    scan_tables,
)
from skewlab.io.delta.store import DamagedTableError
from skewlab.testing import FakeClock

pytestmark = pytest.mark.integration

APP = "route:r"


def row(offset: int) -> dict:
    return {"raw": b"x", "topic": "t", "partition": 0, "offset": offset, "reason": "empty", "ts": 1}


def filled(root: Path, batches: int = 4) -> DeltaStore:
    """A store whose ``quarantine`` has ``batches`` commits (one row each) after creation."""
    store = DeltaStore(root)
    for v in range(batches):
        store.append("quarantine", [row(v)], app_id=APP, version=v, run_id="r")
    store.append("key_loads", [], app_id=APP, version=0, run_id="r")
    return store


def commit(root: Path, version: int, table: str = "quarantine") -> Path:
    return root / table / "_delta_log" / f"{version:020d}.json"


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGE = {
    "truncated last commit": lambda root: truncate(commit(root, 4)),
    "corrupt middle commit": lambda root: commit(root, 2).write_bytes(b"\x00garbage\n"),
    "stray commit after a gap": lambda root: commit(root, 99).write_text('{"commitInfo":{}}\n'),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_reads_and_writes_of_a_damaged_table_name_it_and_its_repair_command(
    tmp_path: Path, damage: str
) -> None:
    filled(tmp_path)
    DAMAGE[damage](tmp_path)
    fresh = DeltaStore(tmp_path)  # a later run opening the data dir
    for attempt in (
        lambda: fresh.read("quarantine"),
        lambda: fresh.append("quarantine", [row(9)], app_id=APP, version=9, run_id="r"),
    ):
        with pytest.raises(DamagedTableError) as info:
            attempt()
        err = info.value
        assert isinstance(err, SkewlabError)
        assert err.table == "quarantine" and Path(err.path) == tmp_path / "quarantine"
        assert "quarantine" in str(err) and str(tmp_path / "quarantine") in str(err)
        assert err.command.endswith("--repair quarantine")
    # the undamaged table of the same root still works
    assert fresh.read("key_loads").num_rows == 0


def test_a_store_that_had_the_table_open_reports_damage_on_its_next_use(tmp_path: Path) -> None:
    store = filled(tmp_path)
    assert store.read("quarantine").num_rows == 4
    commit(tmp_path, 99).write_text('{"commitInfo":{}}\n')
    with pytest.raises(DamagedTableError, match="quarantine"):
        store.read("quarantine")


def test_check_tables_fails_naming_every_damaged_table(tmp_path: Path) -> None:
    filled(tmp_path)
    assert [h.table for h in check_tables(tmp_path)] == ["quarantine", "key_loads"]
    truncate(commit(tmp_path, 4))
    truncate(commit(tmp_path, 1, "key_loads"))
    health = {h.table: h for h in scan_tables(tmp_path)}
    assert not health["quarantine"].ok and not health["key_loads"].ok
    assert "Truncated" in (health["quarantine"].damage or "")
    with pytest.raises(DamagedTableError) as info:
        check_tables(tmp_path)
    assert info.value.table == "quarantine" and "also damaged: key_loads" in str(info.value)


@pytest.mark.parametrize(
    ("damage", "version"),
    [("truncated last commit", 3), ("corrupt middle commit", 1), ("stray commit after a gap", 4)],
)
def test_repair_rolls_back_to_the_last_readable_version_and_writers_resume(
    tmp_path: Path, damage: str, version: int
) -> None:
    filled(tmp_path)
    DAMAGE[damage](tmp_path)
    result = repair_table(tmp_path, "quarantine", FakeClock(1_700_000_000.0))
    assert (result.action, result.version) == ("rolled-back", version)
    moved = Path(result.moved_to or "")
    assert moved.name == "quarantine.damaged-20231114T221320Z"
    assert (moved / "_delta_log").is_dir()  # kept, not deleted
    health = check_table(tmp_path, "quarantine")
    assert health is not None and health.ok and health.version == version
    store = DeltaStore(tmp_path)
    # version v holds batches 0..v-1 (version 0 is the creation)
    assert sorted(store.read("quarantine").column("offset").to_pylist()) == list(range(version))
    assert store.committed_version("quarantine", APP) == version - 1
    # the writer replays the batches the rollback removed: each lands exactly once
    for v in range(4):
        store.append("quarantine", [row(v)], app_id=APP, version=v, run_id="r")
    assert sorted(store.read("quarantine").column("offset").to_pylist()) == [0, 1, 2, 3]


def test_repair_rolls_back_a_checkpointed_table_whose_early_commits_were_cleaned_up(
    tmp_path: Path,
) -> None:
    from deltalake import DeltaTable

    filled(tmp_path, batches=6)
    DeltaTable(str(tmp_path / "quarantine"), version=3).create_checkpoint()
    for v in range(3):  # what log cleanup leaves: the checkpoint at 3, commits 3..6
        commit(tmp_path, v).unlink()
    truncate(commit(tmp_path, 6))
    result = repair_table(tmp_path, "quarantine", FakeClock(0.0))
    assert (result.action, result.version) == ("rolled-back", 5)
    assert sorted(DeltaStore(tmp_path).read("quarantine").column("offset").to_pylist()) == [
        0,
        1,
        2,
        3,
        4,
    ]


def test_repair_isolates_a_table_with_no_readable_version_and_the_next_run_starts_fresh(
    tmp_path: Path,
) -> None:
    filled(tmp_path)
    commit(tmp_path, 0).unlink()  # no metadata, no protocol
    with pytest.raises(DamagedTableError):
        DeltaStore(tmp_path).read("quarantine")
    result = repair_table(tmp_path, "quarantine", FakeClock(1_700_000_000.0))
    assert result.action == "isolated" and result.version is None
    assert Path(result.moved_to or "").is_dir() and not (tmp_path / "quarantine").exists()
    store = DeltaStore(tmp_path)
    assert store.read("quarantine").num_rows == 0
    store.append("quarantine", [row(0)], app_id=APP, version=0, run_id="r2")
    assert store.read("quarantine").num_rows == 1
    assert check_tables(tmp_path)  # healthy again


def test_a_missing_data_file_is_damage_and_repair_isolates_it(tmp_path: Path) -> None:
    filled(tmp_path)
    next((tmp_path / "quarantine").rglob("*.parquet")).unlink()
    health = check_table(tmp_path, "quarantine")
    assert health is not None and "missing" in (health.damage or "")
    with pytest.raises(DamagedTableError, match="quarantine"):
        DeltaStore(tmp_path).read("quarantine")
    # every version from the first append on references the lost file: nothing to roll to
    # but version 0, which has no data; the rollback keeps that
    result = repair_table(tmp_path, "quarantine", FakeClock(0.0))
    assert result.action in ("rolled-back", "isolated")
    assert check_tables(tmp_path)


def test_a_corrupt_data_file_is_found_by_a_deep_check(tmp_path: Path) -> None:
    filled(tmp_path)
    next((tmp_path / "quarantine").rglob("*.parquet")).write_bytes(b"junk")
    shallow = check_table(tmp_path, "quarantine")
    assert shallow is not None and shallow.ok  # the log is fine
    deep = check_table(tmp_path, "quarantine", deep=True)
    assert deep is not None and "Parquet" in (deep.damage or "")
    with pytest.raises(DamagedTableError, match="quarantine"):
        DeltaStore(tmp_path).read("quarantine")


def test_healthy_and_missing_tables_are_left_alone(tmp_path: Path) -> None:
    filled(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert repair_table(tmp_path, "quarantine").action == "healthy"
    assert repair_table(tmp_path, "partials").action == "healthy"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    iso = isolate_table(tmp_path, "key_loads", FakeClock(0.0))
    assert iso.action == "isolated"
    assert Path(iso.moved_to or "").name.startswith("key_loads.damaged-")


def test_doctor_command_reports_damage_then_repairs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filled(tmp_path)
    assert cli.main(["doctor", "--delta-root", str(tmp_path)]) == 0
    truncate(commit(tmp_path, 4))
    assert cli.main(["doctor", "--delta-root", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert "quarantine" in out.out and "--repair quarantine" in out.err
    assert cli.main(["doctor", "--delta-root", str(tmp_path), "--repair", "quarantine"]) == 0
    assert check_tables(tmp_path)
    assert cli.main(["doctor", "--delta-root", str(tmp_path), "--repair", "nope"]) == 2

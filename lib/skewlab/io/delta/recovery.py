"""Finding and repairing damaged Delta tables of a store root.

:func:`scan_tables` / :func:`check_table` name the damage, :func:`check_tables` raises one
error listing it with repair commands, :func:`repair_table` rolls back or isolates (steps on
it). Nothing is deleted; local roots only. Why one damaged commit matters: docs/io.md.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from skewlab.clock import Clock, EpochClock
from skewlab.errors import ConfigError
from skewlab.io.delta.schemas import TABLES, table_spec
from skewlab.io.delta.store import DamagedTableError

log = logging.getLogger(__name__)

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d+\.\d+)?\.parquet$")


@dataclass(frozen=True, slots=True)
class TableHealth:
    """One table's state: ``damage`` is ``None`` when it reads, else delta-rs's cause."""

    table: str
    path: str
    version: int | None
    damage: str | None = None

    @property
    def ok(self) -> bool:
        """True when no damage was found."""
        return self.damage is None

    def error(self, detail: str = "") -> DamagedTableError:
        """The error a reader of this (damaged) table gets (``detail`` appended)."""
        return DamagedTableError(self.table, self.path, self.damage or "unreadable", detail)


@dataclass(frozen=True, slots=True)
class RepairResult:
    """What :func:`repair_table` did: ``action`` is ``healthy``, ``rolled-back`` or
    ``isolated``; ``version`` the table's version after it (``None``: no table);
    ``moved_to`` where the damaged part went."""

    table: str
    action: str
    version: int | None
    moved_to: str | None = None
    cause: str | None = None


def _local_root(root: str | Path) -> Path:
    if "://" in str(root):
        raise ConfigError(f"table repair works on local delta roots only, got {root}")
    return Path(root).resolve()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _files_present(dt: DeltaTable, deep: bool) -> str | None:
    """``None`` if every data file of ``dt`` exists (and, ``deep``, has a Parquet footer)."""
    import pyarrow.parquet as pq

    for uri in dt.file_uris():
        path = Path(uri.removeprefix("file://"))
        if not path.is_file():
            return f"data file {path} is missing"
        if deep:
            try:
                pq.read_metadata(path)
            except (OSError, ValueError) as exc:
                return f"data file {path} is not readable Parquet: {_first_line(exc)}"
    return None


def check_table(root: str | Path, table: str, deep: bool = False) -> TableHealth | None:
    """The health of ``table`` under ``root`` (``None``: the table does not exist)."""
    spec = table_spec(table)
    path = _local_root(root) / spec.name
    if not path.exists():
        return None
    try:
        dt = DeltaTable(str(path))
    except TableNotFoundError:
        if (path / "_delta_log").is_dir():
            return TableHealth(spec.name, str(path), None, "the log has no readable version")
        return None
    except DeltaError as exc:
        return TableHealth(spec.name, str(path), None, _first_line(exc))
    return TableHealth(spec.name, str(path), dt.version(), _files_present(dt, deep))


def scan_tables(root: str | Path, deep: bool = False) -> list[TableHealth]:
    """The health of every skewlab table that exists under ``root``, in TABLES order."""
    out = []
    for name in TABLES:
        health = check_table(root, name, deep)
        if health is not None:
            out.append(health)
    return out


def check_tables(root: str | Path, deep: bool = False) -> list[TableHealth]:
    """Every existing table's health; raises :class:`DamagedTableError` if one is damaged.

    The error names the first damaged table and its repair command; the others (if
    any) are listed after it, so one message says everything to fix before a run.
    """
    health = scan_tables(root, deep)
    damaged = [h for h in health if not h.ok]
    if damaged:
        others = ", ".join(f"{h.table} ({h.damage})" for h in damaged[1:])
        raise damaged[0].error(f"; also damaged: {others}" if others else "")
    return health


def _stamp(clock: Clock) -> str:
    return datetime.fromtimestamp(clock.now(), UTC).strftime("%Y%m%dT%H%M%SZ")


def _aside(path: Path, clock: Clock) -> Path:
    base = path.with_name(f"{path.name}.damaged-{_stamp(clock)}")
    target, n = base, 1
    while target.exists():
        target = base.with_name(f"{base.name}-{n}")
        n += 1
    return target


def _readable_version(path: Path, versions: list[int]) -> int | None:
    """The newest version ``k`` of the first contiguous run of commits (from 0, or from
    the oldest kept commit after a checkpoint and log cleanup) that loads with its files."""
    contiguous: list[int] = []
    for v in versions:
        if contiguous and v != contiguous[-1] + 1:
            break
        contiguous.append(v)
    for k in reversed(contiguous):
        try:
            dt = DeltaTable(str(path), version=k)
        except DeltaError:  # TableNotFoundError included
            continue
        if _files_present(dt, deep=False) is None:
            return k
    return None


def _roll_back(path: Path, k: int, target: Path) -> int:
    """Move the log files above version ``k`` to ``target/_delta_log``; returns their count."""
    log_dir = path / "_delta_log"
    dest = target / "_delta_log"
    moved = 0
    for f in sorted(log_dir.iterdir()):
        m = _COMMIT.match(f.name) or _CHECKPOINT.match(f.name)
        stray = f.name == "_last_checkpoint" and not _checkpoint_at_most(f, k)
        if (m is not None and int(m.group(1)) > k) or stray:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.move(str(f), str(dest / f.name))
            moved += 1
    return moved


def _checkpoint_at_most(f: Path, k: int) -> bool:

    try:
        return int(json.loads(f.read_text())["version"]) <= k
    except (OSError, ValueError, KeyError, TypeError):
        return False


def repair_table(root: str | Path, table: str, clock: Clock | None = None) -> RepairResult:
    """Roll ``table`` back to its newest readable version, else move it aside.

    1. A healthy table is left alone.
    2. **Roll back**: if the log replays up to some version ``k`` (the newest readable one,
       every data file present), the commits (and checkpoints) above ``k`` move to
       ``<name>.damaged-<stamp>/_delta_log``; writers whose batches were in them see them as
       not committed (app transactions) and write them again on replay.
    3. Otherwise **isolate**: the table directory moves to ``<root>/<name>.damaged-<stamp>``
       and the next write creates a fresh table. Nothing is deleted.

    ``clock`` (default :class:`~skewlab.clock.EpochClock`) stamps the ``.damaged-``
    name. Raises :class:`~skewlab.errors.ConfigError` for a remote root.
    """
    clock = clock or EpochClock()
    health = check_table(root, table)
    spec = table_spec(table)
    if health is None:
        return RepairResult(spec.name, "healthy", None)
    if health.ok:
        return RepairResult(spec.name, "healthy", health.version)
    path = Path(health.path)
    target = _aside(path, clock)
    log_dir = path / "_delta_log"
    versions = sorted(
        int(m.group(1))
        for f in (log_dir.iterdir() if log_dir.is_dir() else ())
        if (m := _COMMIT.match(f.name))
    )
    k = _readable_version(path, versions)
    if k is not None:
        moved = _roll_back(path, k, target)
        after = check_table(root, table)
        if after is not None and after.ok and moved:
            log.warning(
                "delta table %s: rolled back to version %d (%d log files moved to %s): %s",
                spec.name,
                k,
                moved,
                target,
                health.damage,
            )
            return RepairResult(spec.name, "rolled-back", k, str(target), health.damage)
        if moved:  # the rollback did not heal it: put the log back, then isolate
            for f in (target / "_delta_log").iterdir():
                shutil.move(str(f), str(log_dir / f.name))
            shutil.rmtree(target)
    shutil.move(str(path), str(target))
    log.warning("delta table %s: moved aside to %s: %s", spec.name, target, health.damage)
    return RepairResult(spec.name, "isolated", None, str(target), health.damage)


def isolate_table(root: str | Path, table: str, clock: Clock | None = None) -> RepairResult:
    """Move ``table`` (damaged or not) to ``<name>.damaged-<stamp>``; the next run starts
    a fresh one. A table that does not exist is reported as ``healthy``."""
    clock = clock or EpochClock()
    spec = table_spec(table)
    path = _local_root(root) / spec.name
    if not path.exists():
        return RepairResult(spec.name, "healthy", None)
    target = _aside(path, clock)
    shutil.move(str(path), str(target))
    log.warning("delta table %s: moved aside to %s", spec.name, target)
    return RepairResult(spec.name, "isolated", None, str(target))

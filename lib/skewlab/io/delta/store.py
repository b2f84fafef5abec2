"""``DeltaStore``: idempotent appends to, and reads from, skewlab's Delta tables.

Appends are exactly-once per ``(app_id, version)`` through Delta app transactions recorded
in the same commit as the data; the protocol step by step is on :meth:`DeltaStore.append`.
"""

from __future__ import annotations

import logging
import shlex
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, QueryBuilder, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.schema import Field as DeltaField
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt

from skewlab.errors import ConfigError, SkewlabError
from skewlab.io.delta.convert import to_arrow
from skewlab.io.delta.query import Filter, ident, literal, select_sql
from skewlab.io.delta.schemas import ASSIGNMENTS, TableSpec, table_spec

log = logging.getLogger(__name__)

_ALIAS = "t"


def commit_retrying(attempts: int) -> Retrying:
    """The retry policy of an append: again at once after a :class:`CommitFailedError` (a
    concurrent writer won the commit), at most ``attempts`` times; then a ``RetryError``
    holding the last conflict. Any other error ends the append at once."""
    return Retrying(
        retry=retry_if_exception_type(CommitFailedError), stop=stop_after_attempt(attempts)
    )


class DeltaStoreError(SkewlabError):
    """A Delta operation failed after its retries; the message names the table."""


class DamagedTableError(DeltaStoreError):
    """A table's log or data files cannot be read (a corrupt, truncated or missing commit,
    a missing or corrupt data file). The message names the table, its path, delta-rs's
    cause and the command that repairs or isolates it
    (:func:`skewlab.io.delta.recovery.repair_table`)."""

    def __init__(self, table: str, path: str, cause: str, detail: str = "") -> None:
        path = path.removeprefix("file://").rstrip("/")
        first = cause.strip().splitlines()[0] if cause.strip() else "unreadable"
        self.table, self.path = table, path
        self.cause = first if len(first) <= 200 else first[:197] + "..."
        root = path.rsplit("/", 1)[0]
        self.command = f"skewlab doctor --delta-root {shlex.quote(root)} --repair {table}"
        super().__init__(
            f"delta table {table!r} at {path} is damaged ({self.cause}); repair it "
            f"(roll back to its last readable version, or move it aside so the next run "
            f"starts a fresh table) with: {self.command}{detail}"
        )


_DATA_DAMAGE = ("parquet", "not found", "no such file")
"""Words of a read error that mean a data file is missing or corrupt (not a bad query)."""


def _check_txn(app_id: str, version: int) -> None:
    if not isinstance(app_id, str) or not app_id.strip():
        raise ConfigError(f"app_id must be a non-empty string, got {app_id!r}")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ConfigError(f"version must be an int >= 0 (a batch id), got {version!r}")


class DeltaStore:
    """The Delta tables of skewlab under one root directory (or object-store URI).

    Invariants: a table's schema is exactly its :class:`TableSpec` schema; for a
    given ``(table, app_id)`` each ``version`` is committed at most once, and
    the committed versions only grow. Several processes may append to the same
    table at once. One instance caches open tables and is meant for one thread;
    it pickles without its caches (send it to workers, they reopen).

    Args:
        root: directory (or ``s3://...`` style URI) holding one folder per table.
        storage_options: passed to delta-rs for object stores.
        max_attempts: commit attempts per append before :class:`DeltaStoreError`.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        storage_options: dict[str, str] | None = None,
        max_attempts: int = 10,
    ) -> None:
        if not str(root):
            raise ConfigError("DeltaStore root must not be empty")
        if max_attempts < 1:
            raise ConfigError(f"max_attempts must be >= 1, got {max_attempts}")
        self.root = str(root) if "://" in str(root) else str(Path(root).resolve())
        self.storage_options = dict(storage_options) if storage_options else None
        self.max_attempts = max_attempts
        self._tables: dict[str, DeltaTable] = {}
        self._latest: dict[str, tuple[int, pa.Table]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "storage_options": self.storage_options,
            "max_attempts": self.max_attempts,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.root = state["root"]
        self.storage_options = state["storage_options"]
        self.max_attempts = state["max_attempts"]
        self._tables = {}
        self._latest = {}

    def __repr__(self) -> str:
        return f"DeltaStore({self.root!r})"

    # ------------------------------------------------------------------ paths

    def path(self, table: str) -> str:
        """Location of ``table`` (validated name) under the root."""
        spec = table_spec(table)
        if "://" in self.root:
            return self.root.rstrip("/") + "/" + spec.name
        return str(Path(self.root) / spec.name)

    def exists(self, table: str) -> bool:
        """Whether ``table`` has been created (by any process)."""
        return self._open(table_spec(table), create=False) is not None

    def table_version(self, table: str) -> int | None:
        """The Delta log version of ``table`` (``None`` if it does not exist yet)."""
        dt = self._open(table_spec(table), create=False)
        return None if dt is None else dt.version()

    # ------------------------------------------------------------------ open

    def _open(self, spec: TableSpec, *, create: bool) -> DeltaTable | None:
        """The cached table refreshed to its newest version, opened or created if needed."""
        dt = self._tables.get(spec.name)
        uri = self.path(spec.name)
        if dt is not None:
            try:
                dt.update_incremental()
            except DeltaError as exc:
                raise DamagedTableError(spec.name, uri, str(exc)) from exc
            return dt
        try:
            dt = DeltaTable(uri, storage_options=self.storage_options)
        except TableNotFoundError:
            if not create:
                return None
            dt = self._create(spec, uri)
        except DeltaError as exc:
            raise DamagedTableError(spec.name, uri, str(exc)) from exc
        self._check_schema(spec, dt)
        self._tables[spec.name] = dt
        return dt

    def _create(self, spec: TableSpec, uri: str) -> DeltaTable:
        try:
            dt = DeltaTable.create(
                uri,
                spec.schema,
                mode="ignore",
                partition_by=list(spec.partition_by),
                name=spec.name,
                description=f"skewlab {spec.name}: {spec.grain}",
                storage_options=self.storage_options,
            )
            log.info("created delta table %s at %s", spec.name, uri)
            return dt
        except DeltaError as exc:
            # Another process committed version 0 first; its table is ours too.
            if DeltaTable.is_deltatable(uri, storage_options=self.storage_options):
                log.debug("lost the creation race for %s (%s); opening it", spec.name, exc)
                return DeltaTable(uri, storage_options=self.storage_options)
            raise DeltaStoreError(
                f"cannot create delta table {spec.name!r} at {uri}: {exc}"
            ) from exc

    @staticmethod
    def _check_schema(spec: TableSpec, dt: DeltaTable) -> None:
        """The table has the spec's columns; optional columns added to a spec since the
        table was created are added to it (older rows read them as null)."""
        found = pa.schema(dt.schema().to_arrow()).names
        missing = [f for f in spec.schema if f.name not in found]
        if missing and set(found) <= set(spec.schema.names) and all(f.nullable for f in missing):
            dt.alter.add_columns([DeltaField.from_arrow(f) for f in missing])
            log.info("delta table %s: added columns %s", spec.name, [f.name for f in missing])
            return
        if sorted(found) != sorted(spec.schema.names):
            raise ConfigError(
                f"delta table {spec.name!r} at {dt.table_uri} has columns {found}, "
                f"skewlab expects {spec.schema.names}"
            )

    # ------------------------------------------------------------------ write

    def append(
        self,
        table: str,
        data: Any,
        *,
        app_id: str,
        version: int,
        run_id: str | None = None,
    ) -> bool:
        """Append ``data`` to ``table`` once per ``(app_id, version)``.

        1. Validate and cast the data to the table schema (a bad batch fails before any I/O).
        2. Open the table, creating it if missing (losing a creation race is not an error).
        3. Refresh the snapshot and read ``transaction_version(app_id)``; if
           ``version <= committed`` the batch is a replay: skip it, return ``False``.
        4. Commit the files together with ``Transaction(app_id, version)`` in one log entry.
           delta-rs rebases blind appends over other app ids' commits; a concurrent commit of
           the *same* app id fails ours and we go back to step 3 (two racing writers of one
           batch produce exactly one copy).
        5. Return ``True``.

        Args:
            table: a name of :data:`~skewlab.io.delta.schemas.TABLES`.
            data: pyarrow Table / RecordBatch, list of row dicts, or dict of columns.
            app_id: the writer's identity, e.g. ``"route:<run_id>"`` or
                ``"worker-3:<run_id>"``; one writer per app_id at a time.
            version: the batch id, increasing per app_id.
            run_id: fills a missing ``run_id`` column (present values must match).

        Returns:
            ``True`` if committed, ``False`` if ``version`` was already committed
            for ``app_id`` (a replay; nothing written). An empty batch still
            commits its transaction, marking the batch done.

        Raises:
            ConfigError: bad data (names the table and column), app_id or version.
            DeltaStoreError: the commit kept conflicting for ``max_attempts``.
        """
        spec = table_spec(table)
        _check_txn(app_id, version)
        arrow = to_arrow(spec, data, run_id)
        dt = self._open(spec, create=True)
        assert dt is not None
        try:
            for attempt in commit_retrying(self.max_attempts):
                with attempt:
                    return self._append_once(dt, spec, arrow, app_id, version)
        except RetryError as exc:
            raise DeltaStoreError(
                f"append to {spec.name!r} (app_id={app_id!r}, version={version}) failed after "
                f"{self.max_attempts} attempts: {exc.last_attempt.exception()}"
            ) from exc.last_attempt.exception()
        raise AssertionError("unreachable")

    @staticmethod
    def _append_once(
        dt: DeltaTable, spec: TableSpec, arrow: pa.Table, app_id: str, version: int
    ) -> bool:
        """One attempt of :meth:`append`: skip a committed ``version``, else commit; on a
        conflict, refresh ``dt`` to the winner's version and raise it for the retry."""
        done = dt.transaction_version(app_id)
        if done is not None and version <= done:
            log.debug(
                "skip %s app_id=%s version=%d (committed %d)", spec.name, app_id, version, done
            )
            return False
        try:
            write_deltalake(
                dt,
                arrow,
                mode="append",
                commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]),
            )
        except CommitFailedError as exc:
            log.debug("commit conflict on %s: %s", spec.name, exc)
            dt.update_incremental()
            raise
        log.debug(
            "appended %d rows to %s app_id=%s version=%d",
            arrow.num_rows,
            spec.name,
            app_id,
            version,
        )
        return True

    def committed_version(self, table: str, app_id: str) -> int | None:
        """The last batch version committed for ``app_id`` (``None``: none or no table)."""
        dt = self._open(table_spec(table), create=False)
        return None if dt is None else dt.transaction_version(app_id)

    # ------------------------------------------------------------------ read

    def read(
        self,
        table: str,
        run_id: str | None = None,
        columns: Sequence[str] | None = None,
        filters: Sequence[Filter] | None = None,
    ) -> pa.Table:
        """Rows of ``table`` (of one run if ``run_id``), with the table's column types.

        ``filters`` are ``(column, op, value)`` tuples combined with AND, op one
        of ``= == != < <= > >= in, not in``. Row order is unspecified. A table
        that does not exist yet reads as an empty table with the schema.
        """
        spec = table_spec(table)
        sql = select_sql(spec, _ALIAS, run_id, columns, filters)
        target = self._target_schema(spec, columns)
        dt = self._open(spec, create=False)
        if dt is None:
            return target.empty_table()
        return self._query(spec, dt, sql, target)

    def read_new(self, table: str, run_id: str, columns: Sequence[str], read: set[str]) -> pa.Table:
        """Rows of ``run_id`` in the data files of ``table`` not in ``read`` (the files a
        caller's earlier calls returned; the ones read now are added to it), with the
        table's column types. For a caller that accumulates what an append-only table
        holds (the state manager's keys seen): one step reads the files written since
        the last, not the whole run's rows again (230k ``key_loads`` rows at the end of
        the README's scale-out run, 0.1-0.4 s a step). A file rewritten by compaction
        comes again as a new file: its rows were seen, and an accumulated set is the
        same. Object stores read the whole run each time (the same rows, and more)."""
        spec = table_spec(table)
        target = self._target_schema(spec, columns)
        dt = self._open(spec, create=False)
        if dt is None:
            return target.empty_table()
        uris = dt.file_uris(file_pruning_predicate=[("run_id", "=", run_id)])
        if not all(u.startswith("/") for u in uris):  # an object store: the whole run
            return self.read(table, run_id=run_id, columns=columns)
        new = [u for u in uris if u not in read]
        if not new:
            return target.empty_table()
        try:
            cols = list(columns)
            parts = [pq.ParquetFile(u).read(columns=cols).select(cols).cast(target) for u in new]
        except (pa.ArrowException, OSError) as exc:  # as :meth:`_query` tells them apart
            if any(word in str(exc).lower() for word in _DATA_DAMAGE):
                raise DamagedTableError(spec.name, dt.table_uri, str(exc)) from exc
            raise DeltaStoreError(f"reading new files of {spec.name!r} failed: {exc}") from exc
        read.update(new)
        return pa.concat_tables(parts)

    def latest_assignments(self, run_id: str) -> pa.Table:
        """The rows of the newest ``assignments`` version of ``run_id``, ordered by key.

        Made for the route job, which asks every micro-batch: when the table's
        Delta version has not moved since the last call (a log listing, well
        under a millisecond locally), the cached answer is returned without a
        scan. Empty (with the schema) if the run has no assignments yet.
        """
        spec = ASSIGNMENTS
        dt = self._open(spec, create=False)
        if dt is None:
            return spec.schema.empty_table()
        cached = self._latest.get(run_id)
        if cached is not None and cached[0] == dt.version():
            return cached[1]
        version = ident("version")
        sql = (
            select_sql(spec, _ALIAS, run_id)
            + f" AND {version} = (SELECT max({version}) FROM {ident(_ALIAS)}"
            + f" WHERE {ident('run_id')} = {literal(run_id)}) ORDER BY {ident('key')}"
        )
        result = self._query(spec, dt, sql, spec.schema)
        self._latest[run_id] = (dt.version(), result)
        return result

    @staticmethod
    def _target_schema(spec: TableSpec, columns: Sequence[str] | None) -> pa.Schema:
        if columns is None:
            return spec.schema
        return pa.schema([spec.schema.field(c) for c in columns])

    @staticmethod
    def _query(spec: TableSpec, dt: DeltaTable, sql: str, target: pa.Schema) -> pa.Table:
        try:
            reader = QueryBuilder().register(_ALIAS, dt).execute(sql)
            result = pa.table(reader)
        except (DeltaError, pa.ArrowException, OSError) as exc:
            if any(word in str(exc).lower() for word in _DATA_DAMAGE):
                raise DamagedTableError(spec.name, dt.table_uri, str(exc)) from exc
            raise DeltaStoreError(f"query on {spec.name!r} failed: {exc}; sql: {sql}") from exc
        # DataFusion answers with string_view / binary_view; give callers the schema types.
        return result.cast(target)


def warm_up_queries(scratch: str | Path) -> float:
    """Pay the first query's one-off cost now: a one-row table written under
    ``scratch`` (a new folder, removed again) and read back through the same query
    path as :meth:`DeltaStore.read`. Returns the seconds it took.

    A process's first query sets up delta-rs' query engine: with the worker's
    imports done, a 138k-row read of ``operator_state`` took 0.21 s as a process's
    first query and 0.10 s after this (0.02 s), measured on this project's machine.
    A warm spare instance (``skewlab.live.worker.warm``) calls this while it waits, before
    the restore after its release."""
    t0 = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="skewlab-warm-", dir=scratch))
    try:
        write_deltalake(str(folder), pa.table({"x": pa.array([1], pa.int64())}))
        reader = (
            QueryBuilder()
            .register(_ALIAS, DeltaTable(str(folder)))
            .execute(f"SELECT x FROM {ident(_ALIAS)} WHERE x >= 0")
        )
        pa.table(reader)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return time.perf_counter() - t0

"""Delta Lake tables of skewlab through ``deltalake`` (delta-rs).

:class:`DeltaStore` appends idempotently per micro-batch (Delta app
transactions) and reads tables back as pyarrow; :data:`TABLES` holds one
schema per table of ARCHITECTURE.md (conventions in
:mod:`skewlab.io.delta.schemas`). A table that cannot be read raises
:class:`DamagedTableError` naming it; :mod:`skewlab.io.delta.recovery` checks and
repairs tables.
"""

from skewlab.io.delta.convert import to_arrow
from skewlab.io.delta.query import Filter
from skewlab.io.delta.schemas import TABLES, TableSpec, table_spec
from skewlab.io.delta.store import DamagedTableError, DeltaStore, DeltaStoreError

__all__ = [
    "TABLES",
    "DamagedTableError",
    "DeltaStore",
    "DeltaStoreError",
    "Filter",
    "TableSpec",
    "table_spec",
    "to_arrow",
]

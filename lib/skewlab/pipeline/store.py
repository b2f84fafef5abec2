"""What the control steps need from a table store (a protocol; io.delta implements it).

Decision steps read loads and write decisions through :class:`Store`; the
Delta adapter (:class:`skewlab.io.delta.DeltaStore`) is the one
implementation today, and a test or a cluster backend may supply another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Filter", "Store"]

Filter = tuple[str, str, Any]
"""``(column, op, value)``; op one of ``= == != < <= > >= in, not in``."""


@runtime_checkable
class Store(Protocol):
    """Append-once tables keyed by run id, as the control steps use them.

    Contract: :meth:`append` writes ``data`` to ``table`` at most once per
    ``(app_id, version)`` and returns whether it wrote; :meth:`committed_version`
    is the last version committed for ``app_id`` (``None`` if none); :meth:`read`
    returns an Arrow table with the table's schema (empty if the table does not
    exist yet); :meth:`latest_assignments` is the newest ``assignments``
    version of a run, ordered by key; :attr:`root` names where the tables live
    (a directory or an object-store URI).
    """

    root: str

    def append(
        self, table: str, data: Any, *, app_id: str, version: int, run_id: str | None = None
    ) -> bool:
        """Append ``data`` to ``table`` once per ``(app_id, version)``."""
        ...

    def committed_version(self, table: str, app_id: str) -> int | None:
        """The last version committed for ``app_id`` in ``table``."""
        ...

    def read(
        self,
        table: str,
        run_id: str | None = None,
        columns: Sequence[str] | None = None,
        filters: Sequence[Filter] | None = None,
    ) -> Any:
        """Rows of ``table`` (of one run if ``run_id``) as an Arrow table."""
        ...

    def latest_assignments(self, run_id: str) -> Any:
        """The rows of the newest ``assignments`` version of ``run_id``."""
        ...

"""Step 4 of the state manager: the routing sweep and the switch's ``assignments`` version.

A mixin of :class:`~skewlab.control.scaleout.manager.StateManager` (details: docs/control.md,
section ``skewlab.control.scaleout.manager``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewlab.control.scaleout.events import Move
from skewlab.control.scaleout.settings import Group
from skewlab.control.scaleout.state import Placement, VersionRows
from skewlab.rundir import app_id

__all__ = ["Sweeping"]

log = logging.getLogger(__name__)


class Sweeping:
    """Mixin of :class:`~skewlab.control.scaleout.manager.StateManager`: where each key goes."""

    s: Any
    store: Any
    groups: list[Group]
    map: dict[str, tuple[int, int]]
    group_keys: list[int]
    version: int
    effective_ms: int
    wall: Callable[[], float]
    _placement: Placement
    _unmarked: list[Move]
    _prepared: VersionRows | None
    _newest_window: int | None
    _loads_read: set[str]
    _keys_read: bool

    def _version_rows(self, seen: list[str], sig: tuple[tuple[int, ...], ...]) -> VersionRows:
        """The rows of a version for ``seen`` (and the mapped keys) with each group's
        instances ``sig`` (:meth:`VersionRows.build`); changes nothing."""
        return VersionRows.build(self._placement, seen, sig, self.map)

    def _prepare_switch(self, grp: Group, instances: list[int]) -> None:
        """Build the version of the switch that will route ``grp`` to ``instances`` now,
        while the replacements start (their start takes longer): the switch then only
        writes it, unless the map, the groups' instances or the keys seen changed by
        then (:meth:`_sweep` builds it again)."""
        sig = tuple(tuple(instances) if g is grp else tuple(g.active) for g in self.groups)
        t0 = time.perf_counter()
        self._prepared = self._version_rows(self._placement.seen(), sig)
        log.debug("switch version prepared in %.3f s", time.perf_counter() - t0)

    def _sweep(self, read: bool = True) -> list[tuple[str, int]]:
        """Write a version moving every seen key whose instance changed; returns (key, set).

        The version takes effect at the route job's event-time frontier (the newest
        window it routed) or ``lead_s`` from now, whichever comes first: a splitter
        applies it from its first event at or after ``effective_ms``, so a route job
        behind the input switches at its next micro-batch instead of when it reaches
        the events produced after the decision (which a busy machine's route job
        does a backlog later, or never: the input ended).

        ``read=False`` (the routing switch): the keys seen by the last step's sweep,
        without reading ``key_loads`` again (at 100k keys that read was a third of the
        switch). A key first routed since then is still on its old instance; the next
        step's sweep moves it like any key (its set ends there, its state is handed on).
        A manager that has not read ``key_loads`` yet (a resumed driver's, finishing the
        switch the dead one's was about to make) reads it all the same: else its switch
        would move no key, and the keys it moves the step after would belong to no event."""
        where = self._placement
        new: list[str] = []
        if read or not self._keys_read:  # key_loads files written since (DeltaStore.read_new)
            self._keys_read = True
            loads = self.store.read_new(
                "key_loads", self.s.run_id, ["key", "window_start"], self._loads_read
            )
            if loads.num_rows:
                newest = pc.max(loads["window_start"]).as_py()
                self._newest_window = max(self._newest_window or newest, newest)
            new = pc.unique(loads["key"]).to_pylist()
            where.hash_new(new)  # keys first read: hashed in one call each, not per key
        newest = self._newest_window
        sig = tuple(tuple(g.active) for g in self.groups)

        def want(k: str) -> int:
            active = self.groups[where.group(k)].active
            return active[where.part(k, len(active))]

        fresh = where.unseen(new, sig, self.map)  # None: instances or the map changed
        if fresh is not None and all(want(k) == where.group(k) for k in fresh):
            for k in fresh:
                self.group_keys[where.group(k)] += 1
            where.saw(fresh)
            return []
        seen = where.seen(new)  # every key read so far
        prep, self._prepared = self._prepared, None
        if prep is not None and prep.fits(sig, self.map, len(seen)):
            rows = prep  # built at the decision for this switch (:meth:`_prepare_switch`)
        else:
            rows = self._version_rows(seen, sig)
        every, moved, group_keys = rows.every, list(rows.moved), rows.group_keys
        keys, workers, sets, is_move = rows.keys, rows.instances, rows.sets, rows.is_move
        self._unmarked.extend(rows.unmarked)
        self.group_keys = group_keys
        if not moved:
            where.swept(every, sig, self.map)
            return []
        self.version += 1
        effective = round((self.wall() + self.s.lead_s) * 1000)
        if newest is not None:
            effective = min(effective, int(newest))
        self.effective_ms = max(self.effective_ms, effective)
        n = len(keys)
        # columns, not row dicts: 100k keys write in ~0.1 s instead of ~0.5 s (the switch)
        version = pa.table(
            {
                "version": pa.array(np.full(n, self.version, dtype=np.int64)),
                "key": pa.array(keys, pa.string()),
                "worker": pa.array(np.asarray(workers, dtype=np.int64)),
                "set_id": pa.array(np.asarray(sets, dtype=np.int64)),
                "reason": pc.if_else(
                    pa.array(is_move, pa.bool_()), pa.scalar("scale-out"), pa.scalar("kept")
                ),
                "effective_ms": pa.array(np.full(n, self.effective_ms, dtype=np.int64)),
            }
        )
        self.store.append(
            "assignments",
            version,
            app_id=app_id("scaleout", self.s.run_id),
            version=self.version,
            run_id=self.s.run_id,
        )
        self.map = dict(zip(keys, zip(workers, sets)))
        where.swept(every, sig, self.map)
        log.info("assignments v%d: %d keys moved", self.version, len(moved))
        return moved

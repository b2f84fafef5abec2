"""The old instance's side of the cut: a worker of a scale-out run watches ``decisions``
for a switch that moves hash parts of its keys to instances shadowing it, and stops
those keys at the routed offset it reached. Details: docs/scaleout.md, "The cut".

:class:`SwitchWatch` decides *when* to look and *what* to cut; the worker (its caller)
owns the offset and commits the cut at once (:mod:`skewlab.live.worker.process`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from skewlab.clock import Clock
from skewlab.io.delta.store import DeltaStore
from skewlab.live.worker.cut import CutSpec, cuts_of, read_decisions, switches, write_cut
from skewlab.pipeline.handoff import KeySets
from skewlab.state.operator_state import SplitHashes

log = logging.getLogger(__name__)

__all__ = ["SwitchWatch"]


class SwitchWatch:
    """What one old instance knows of the switches and plans that name it."""

    POLL_S = (0.05, 0.2)
    """Seconds between two looks at ``decisions``: while followed by a shadow that has no
    cut yet, otherwise. A look reads the table only when its Delta version moved
    (~2 ms, against ~10-40 ms for the read)."""

    def __init__(
        self,
        store: DeltaStore,
        run_id: str,
        worker: int,
        clock: Clock,
        wall_ms: Callable[[], int],
    ) -> None:
        self.store, self.run_id, self.worker = store, run_id, worker
        self.clock, self.wall_ms = clock, wall_ms
        self.poll_s = self.POLL_S
        self._polled = float("-inf")
        self._seen: int | None = None
        """The ``decisions`` version of the last look."""
        self.followers: dict[int, int] = {}
        """Instances whose newest plan shadows this worker: plan epoch (from ``decisions``)."""
        self.split = SplitHashes()
        """The split hash of each key held once followed (taken off the cut's path)."""
        self.due: int | None = None
        """The offset of a cut promised by a dead process of this worker: read up to it."""
        self.read_s = 0.0
        """Seconds of the last look that read ``decisions`` (logged with a cut)."""

    def followed(self, sets: KeySets) -> bool:
        """Some instance's newest plan shadows this worker and no cut was made for it."""
        if not self.followers:
            return False
        done = {(w, e) for c in sets.cuts for w, e in c.get("plans", {}).items()}
        return any((str(w), e) not in done for w, e in self.followers.items())

    def look(self, sets: KeySets, offset: int) -> list[tuple[CutSpec, bool]]:
        """The switches to cut now at ``offset``, oldest first, each with whether a dead
        process of this worker promised it already. Looks at ``decisions`` at most every
        :attr:`poll_s` (at once when reading reached a dead process's promise) and reads
        it only when its version moved. A promise further on than ``offset`` is not cut
        yet: :attr:`due` is set to it (and the switches after it wait for it too)."""
        now = self.clock.now()
        due = self.due is not None and offset >= self.due
        if not due and now - self._polled < self.poll_s[0 if self.followed(sets) else 1]:
            return []
        self._polled = now
        seen = self.store.table_version("decisions")
        if not due and seen is not None and seen == self._seen:
            return []  # no decision since the last look
        self._seen = seen
        table = read_decisions(self.store, self.run_id)  # one read for switches and cuts
        self.followers, specs = switches(self.store, self.run_id, self.worker, table)
        self.read_s = self.clock.now() - now
        if self.followed(sets):
            self.split.add(sets.sets)  # the keys a cut would look at, hashed before it
        done = {int(c["v"]) for c in sets.cuts}
        todo = [spec for spec in specs if spec.version not in done]
        self.due = None
        if not todo:
            return []
        promised = cuts_of(self.store, self.run_id, self.worker, table)
        out: list[tuple[CutSpec, bool]] = []
        for spec in todo:
            p = promised.get(spec.version)
            at = offset if p is None else int(p["at"])
            if at > offset:  # a dead process promised it further on: read up to it
                self.due = at
                break
            if at < offset:  # a commit after a promise always carries the cut
                raise RuntimeError(
                    f"worker {self.worker}: cut v{spec.version} promised at {at}, "
                    f"the state is at {offset} without it"
                )
            out.append((spec, p is not None))
        return out

    def cut(self, sets: KeySets, spec: CutSpec, offset: int, promised: bool) -> None:
        """Stop ``spec``'s keys at ``offset``: the promise first (a ``Cut`` decision row,
        unless a dead process of this worker wrote it), then the state. The promise names
        the offset, which is all the new instance waits for: which keys stop follows from
        the state there, by the rule both sides apply (``KeySets.cuttable``,
        ``shadow_go_live``), so they are looked at after it, off the new instance's path.
        The caller commits the cut at once."""
        t0 = self.clock.now()
        if not promised:
            write_cut(self.store, self.run_id, self.worker, spec.entry(offset), self.wall_ms())
        t1 = self.clock.now()
        keys = sets.cuttable(lambda ks: spec.takes_many(ks, self.split))
        sets.cut_keys(keys)
        sets.cuts.append(spec.entry(offset, len(keys)))
        log.info(
            "worker %d: cut %d keys of parts %s/%d at routed offset %d (v%d%s); "
            "decisions read %.2f s, promise %.2f s, keys %.2f s",
            self.worker,
            len(keys),
            sorted(spec.moved),
            spec.parts,
            offset,
            spec.version,
            ", promised by a dead process" if promised else "",
            self.read_s,
            t1 - t0,
            self.clock.now() - t1,
        )

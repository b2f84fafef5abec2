"""A replacement restores the checkpoint its plan names, waiting for its write (issue 15).

The checkpointing policy takes one more checkpoint at the scale-out decision and the
manager writes it while the replacement's process starts; the plan names it
(``checkpoint_id``), so the restore waits for it instead of taking the older one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skewlab.io.delta import DeltaStore
from skewlab.live.worker.shadow import CHECKPOINT_WAIT_S, Shadow
from skewlab.pipeline.handoff import KeySets
from skewlab.testing import FakeClock


class Written:
    """Checkpoints ``have`` stored; each look may complete the pending write of ``next_id``."""

    def __init__(self, have: list[int], lands_after: int | None, next_id: int) -> None:
        self.have, self.lands_after, self.next_id, self.looks = list(have), lands_after, next_id, 0

    def checkpoints(self) -> list[int]:
        self.looks += 1
        if self.lands_after is not None and self.looks > self.lands_after:
            self.have = sorted({*self.have, self.next_id})
        return list(self.have)

    def latest(self) -> int | None:
        return max(self.checkpoints(), default=None)


def _shadow(tmp_path: Path, clock: FakeClock) -> Shadow:
    return Shadow(
        KeySets(1, 1), DeltaStore(str(tmp_path)), "run", wall=clock.now, sleep=clock.advance
    )


def test_the_named_checkpoint_is_waited_for(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    cps = Written(have=[3], lands_after=4, next_id=4)  # 3 stored, 4 lands at the 5th look
    got = _shadow(tmp_path, clock)._checkpoint_for(cps, {"checkpoint_id": 4})  # type: ignore[arg-type]
    assert got == 4 and cps.looks == 5 and 0 < clock.now() < CHECKPOINT_WAIT_S


def test_without_a_named_checkpoint_the_newest_is_taken_at_once(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    cps = Written(have=[2, 3], lands_after=None, next_id=4)
    plan: dict[str, Any] = {"checkpoint": True}
    assert _shadow(tmp_path, clock)._checkpoint_for(cps, plan) == 3  # type: ignore[arg-type]
    assert cps.looks == 1 and clock.now() == 0.0


def test_a_checkpoint_never_written_falls_back_to_the_newest_older_one(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    cps = Written(have=[2, 3, 6], lands_after=None, next_id=4)
    got = _shadow(tmp_path, clock)._checkpoint_for(cps, {"checkpoint_id": 4})  # type: ignore[arg-type]
    assert got == 3 and clock.now() >= CHECKPOINT_WAIT_S


def test_a_checkpoint_newer_than_the_plans_is_never_restored(tmp_path: Path) -> None:
    """An instance restarted before its first commit restores again; by then the manager
    may have written later checkpoints (after the old instance's cut: the moved keys gone,
    tau past the cut). It must take the plan's checkpoint, as its first start did."""
    clock = FakeClock(0.0)
    cps = Written(have=[3, 4, 5, 6], lands_after=None, next_id=7)
    got = _shadow(tmp_path, clock)._checkpoint_for(cps, {"checkpoint_id": 4})  # type: ignore[arg-type]
    assert got == 4 and clock.now() == 0.0

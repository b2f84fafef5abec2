"""The crash matrix (issue 18): the ``crash`` marker and ``live_refs`` (runs driven by
drivers that die and resume, :mod:`tests.integration.crash.driver`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.fixtures.live import RunRefs


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "crash: the crash matrix (live runs with crash points armed; -m crash)"
    )


@pytest.fixture
def live_refs(broker: Any, tmp_path: Path) -> Iterator[Any]:
    """``refs(strategy, **settings) -> RunRefs`` of a run to drive; topics deleted after."""
    from skewlab.io.delta import DeltaStore
    from skewlab.io.kafka import KafkaSettings, connect
    from skewlab.live.driver.experiment import new_run_id
    from skewlab.runsettings import ExperimentSettings

    home = (tmp_path / "home").resolve()
    client = connect(KafkaSettings(broker.bootstrap))
    made: list[RunRefs] = []

    def refs(strategy: str, **settings: Any) -> RunRefs:
        s = ExperimentSettings(
            strategy=strategy, home=str(home), bootstrap=broker.bootstrap, keep_topics=True,
            **{"quality": False, **settings},  # the matrix checks exactness, not GX suites
        )  # fmt: skip
        run_id = new_run_id(strategy)
        r = RunRefs(s, run_id, home / "runs" / run_id, DeltaStore(home / "delta"), client,
                    f"events-{run_id}", f"routed-{run_id}")  # fmt: skip
        made.append(r)
        return r

    try:
        yield refs
    finally:
        for r in made:
            _kill_children(r.run_dir)
            for t in (r.events_topic, r.routed_topic):
                client.delete_topic(t, missing_ok=True)
        client.close()


def _kill_children(run_dir: Path) -> None:
    """Whatever a failed test left running of the run (each child in its own session; a
    route query on the shared route host is cancelled, the host never signalled)."""
    from skewlab.live.driver.handle import RunHandle
    from skewlab.live.driver.route_host import attach_any

    with contextlib.suppress(Exception):
        for rec in RunHandle.load(run_dir).procs.values():
            attach_any(rec).kill()

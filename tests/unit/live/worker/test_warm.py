"""A warm instance process waits for its release or its run's stop, on an injected sleep."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.io.kafka.base import KafkaSettings
from skewlab.live.driver.settings import warm_spares
from skewlab.live.worker import warm
from skewlab.live.worker.settings import WorkerSettings, settings_to_json
from skewlab.runsettings import StateManagerSettings


def test_released_when_its_go_file_appears(tmp_path: Path) -> None:
    go, stop = tmp_path / "worker-2.go", tmp_path / "spares.stop"
    naps: list[float] = []

    def sleep(s: float) -> None:
        naps.append(s)
        if len(naps) == 3:
            go.touch()

    assert warm.wait_for_release(go, stop, sleep) is True
    assert len(naps) == 3 and set(naps) == {warm.POLL_S}


def test_never_released_when_the_run_stops_first(tmp_path: Path) -> None:
    go, stop = tmp_path / "worker-2.go", tmp_path / "spares.stop"
    naps: list[float] = []

    def sleep(s: float) -> None:
        naps.append(s)
        stop.touch()

    assert warm.wait_for_release(go, stop, sleep) is False
    settings = WorkerSettings("r", 2, "routed-r", KafkaSettings("127.0.0.1:1"), str(tmp_path))
    assert warm.main([str(go), str(stop), settings_to_json(settings)]) == 0  # no worker ran
    assert warm.main([str(go)]) == 2  # usage


def test_the_first_spare_of_each_operator_is_warmed(monkeypatch: pytest.MonkeyPatch) -> None:
    sm = StateManagerSettings("r", "/tmp/d", "checkpoint", workers=3, service_us=100.0)
    assert sm.max_instances >= 2
    assert warm_spares(sm) == [sm.spares(g)[0] for g in range(3)]
    assert len(set(warm_spares(sm))) == 3 and min(warm_spares(sm)) >= 3  # spare partitions
    assert warm_spares(None) == []  # no scale-out
    monkeypatch.setenv("SKEWLAB_WARM_SPARES", "0")
    assert warm_spares(sm) == []


def test_a_wrong_argument_count_prints_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    """Both entry points of an instance process: exit 2 with one line each, naming the
    arguments each takes."""
    from skewlab.live.worker import process as worker

    assert worker.main([]) == 2
    assert warm.main(["a", "b"]) == 2
    worker_line, warm_line = capsys.readouterr().err.splitlines()
    assert "SETTINGS_JSON" in worker_line and "GO_FILE" not in worker_line
    assert all(a in warm_line for a in ("GO_FILE", "STOP_FILE", "SETTINGS_JSON"))


def test_the_query_warm_up_reads_a_table_and_leaves_nothing(tmp_path: Path) -> None:
    """The throwaway Delta query a warm process runs while it waits (its restore's first
    read would pay the query engine's set-up): written, read, removed again."""
    from skewlab.io.delta.store import warm_up_queries

    secs = warm_up_queries(tmp_path)
    assert secs > 0.0
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileNotFoundError):
        warm_up_queries(tmp_path / "missing")  # a scratch folder that is not there

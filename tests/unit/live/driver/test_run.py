"""Run: the phases of one live run as methods, guarded by the phases done."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.live.driver.handle import HandleError, Phase, RunHandle
from skewlab.live.driver.run import Run
from skewlab.runsettings import ExperimentSettings

pytestmark = pytest.mark.unit


def test_a_phase_before_its_predecessor_is_refused_and_stop_is_always_safe(
    tmp_path: Path,
) -> None:
    run = Run.new(ExperimentSettings(home=str(tmp_path), mlflow=False), run_id="key-t1")
    assert run.phase is None and run.files.handle.is_file() and run.run_id == "key-t1"
    order = [(run.start, "topics"), (run.drain, "produced"), (run.aggregate, "drained"),
             (run.summarize, "aggregated")]  # fmt: skip
    for phase_method, needs in order:
        with pytest.raises(HandleError) as info:
            phase_method()
        assert needs in str(info.value) and "\n" not in str(info.value)
    assert run.stop() == []  # nothing was started: nothing to kill
    assert run.phase is Phase.STOPPED
    again = Run.resume(run.files.path)
    assert again.phase is Phase.STOPPED
    assert RunHandle.load(run.files.path).phases == [Phase.STOPPED.value]


def test_leaving_the_with_block_stops_the_run(tmp_path: Path) -> None:
    with Run.new(ExperimentSettings(home=str(tmp_path), mlflow=False)) as run:
        pass
    assert run.phase is Phase.STOPPED


def test_a_failure_inside_the_run_is_recorded_once_with_its_reason(tmp_path: Path) -> None:
    from skewlab.errors import SkewlabError
    from skewlab.live.driver.handle import Status

    run = Run.new(ExperimentSettings(home=str(tmp_path), mlflow=False), run_id="key-f1")
    assert RunHandle.load(run.files.path).status == Status.RUNNING.value
    with pytest.raises(SkewlabError), run:
        raise SkewlabError("worker 1 failed after 3 restart(s):\nexit 1")
    h = RunHandle.load(run.files.path)
    assert h.status == Status.FAILED.value
    assert h.error == "worker 1 failed after 3 restart(s): exit 1"
    assert h.phases == [Phase.STOPPED.value]
    h.finish(Status.DONE)  # the first end stays
    assert RunHandle.load(run.files.path).status == Status.FAILED.value


def test_an_interrupt_is_recorded_as_such(tmp_path: Path) -> None:
    import signal

    from skewlab.live.driver.lifecycle import Interrupted

    run = Run.new(ExperimentSettings(home=str(tmp_path), mlflow=False), run_id="key-i1")
    with pytest.raises(KeyboardInterrupt), run:
        raise Interrupted(signal.SIGTERM)
    h = RunHandle.load(run.files.path)
    assert (h.status, h.error) == ("failed", "interrupted by SIGTERM")


def test_run_all_says_what_each_phase_does_before_it_runs(tmp_path: Path) -> None:
    from types import SimpleNamespace

    seen: list[str] = []
    run = Run.new(ExperimentSettings(home=str(tmp_path), mlflow=False, events=500),
                  run_id="key-s1", say=lambda line: seen.append(f"say {line}"))  # fmt: skip
    h = run.ctx.handle

    def phase(name: str, result: object = None) -> object:
        def call() -> object:
            seen.append(name)
            if name == "start":  # what the real phase records for the start-up line
                h.startup.update({"services": 4.5, "route": {"total": 12.0}})
                h.spark_ui = "http://127.0.0.1:4040"
            return result

        return call

    run.services = phase("services", "127.0.0.1:9092")  # type: ignore[method-assign]
    run.topics = phase("topics")  # type: ignore[method-assign]
    run.start = phase("start")  # type: ignore[method-assign]
    run.produce = phase("produce")  # type: ignore[method-assign]
    run.drain = phase("drain")  # type: ignore[method-assign]
    run.aggregate = phase("aggregate", SimpleNamespace(exact=True))  # type: ignore[method-assign]
    run.summarize = phase("summarize", "the summary")  # type: ignore[method-assign]
    assert run.run_all() == "the summary"
    phases = ["services", "topics", "start", "produce", "drain", "aggregate", "summarize"]
    assert [e for e in seen if not e.startswith("say ")] == phases
    # every phase is announced before it runs, and nothing runs unannounced
    for name in phases:
        if name != "topics":  # announced with its outcome, right after (it takes ms)
            assert seen[seen.index(name) - 1].startswith("say "), name
    said = [e for e in seen if e.startswith("say ")]
    assert said[0].startswith("say connecting to the broker")
    assert "say broker 127.0.0.1:9092" in said
    assert any("500 events" in line for line in said)
    startup = next(line for line in said if "start-up:" in line)
    assert "Spark UI http://127.0.0.1:4040" in startup and "route job 12.0 s" in startup
    assert seen.index(startup) < seen.index("produce")  # the UI link while the run runs
    assert "say verdict: EXACT" in said

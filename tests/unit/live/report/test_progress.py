"""Progress line (terminal: in place; otherwise periodic plain lines) and the producer's
resume: a second producer after a crash sends each partition's missing events once."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from typing import Any, cast

import pytest

from skewlab.live.driver.producer import ProduceSettings, produce
from skewlab.live.report.watch import ProgressLine, progress_text
from skewlab.runsettings import ExperimentSettings
from skewlab.spec import n_events
from skewlab.workload import parse_workload

pytestmark = pytest.mark.unit


def _p(produced: float, processed: float) -> dict[str, float]:
    return {"produced": produced, "total": 100.0, "routed": produced, "processed": processed,
            "lag": produced - processed, "rate": 12.0, "imbalance": 5.0}  # fmt: skip


def test_plain_lines_come_every_ten_seconds_and_the_last_state_at_close() -> None:
    out = io.StringIO()
    now = [0.0]
    line = ProgressLine("dkg", out, tty=False, clock=lambda: now[0])
    for t in range(0, 25):
        now[0] = float(t)
        line(_p(4 * t, 2 * t))
    line.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4  # t = 0, 10, 20, and the last state (t = 24) at close
    assert lines[1] == progress_text("dkg", _p(40, 20))
    assert "produced 96/100" in lines[-1] and "lag 48" in lines[-1]
    assert "\r" not in out.getvalue()


def test_a_terminal_line_is_redrawn_in_place() -> None:
    out = io.StringIO()
    line = ProgressLine("key", out, tty=True)
    for t in range(5):
        line(_p(10 * t, 5 * t))
    line.close()
    text = out.getvalue()
    assert text.count("\n") <= 2  # one line, redrawn; a newline when it ends
    assert "produced 40/100" in text.splitlines()[-1] or "produced 40/100" in text


class Recorder:
    def __init__(self, drop_after: dict[int, int] | None = None) -> None:
        self.parts: dict[int, list[int]] = defaultdict(list)
        self.drop_after = drop_after or {}

    def produce(self, topic: str, value: bytes, key: bytes | None = None,
                partition: int = 0, headers: Any = None) -> None:  # fmt: skip
        if len(self.parts[partition]) < self.drop_after.get(partition, 1 << 30):
            self.parts[partition].append(json.loads(value)["seq"])

    def flush(self) -> None:
        pass


def test_a_resumed_producer_sends_each_partitions_missing_events_once() -> None:
    s = ProduceSettings("events", 3, 1000, 1e9, chunk=128)
    first = Recorder(drop_after={0: 100, 1: 40, 2: 333})  # a crash left unequal prefixes
    produce(first, parse_workload("zipf:s=1.1,keys=50", seed=3), s, sleep=lambda dt: None)
    present = {p: len(v) for p, v in first.parts.items()}
    second = Recorder()
    report = produce(
        second, parse_workload("zipf:s=1.1,keys=50", seed=3), s, sleep=lambda dt: None,
        present=present,
    )  # fmt: skip
    assert report.events == 1000
    for p in range(3):
        together = first.parts[p] + second.parts[p]
        assert together == list(range(p, 1000, 3)), f"partition {p}"


class RawProducer:
    """librdkafka-shaped: ``produce(topic, value, key, partition, headers=)``, ``poll``."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.seqs: list[int] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.calls.append(f"list_topics {topic}")

    def produce(
        self, topic: str, value: bytes, key: Any, partition: int, headers: Any = None
    ) -> None:
        self.calls.append("produce")
        self.seqs.append(json.loads(value)["seq"])

    def poll(self, timeout: float) -> int:
        return 0


class DirectClient(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.producer = RawProducer()


def test_the_producer_is_connected_before_the_first_event_and_called_directly() -> None:
    client = DirectClient()
    s = ProduceSettings("events", 2, 300, 1e9, chunk=64)
    report = produce(client, parse_workload("zipf:s=1.1,keys=20", seed=1), s, sleep=lambda dt: None)
    assert report.events == 300
    assert client.producer.calls[0] == "list_topics events"
    assert client.producer.seqs == list(range(300)) and not client.parts


@pytest.mark.parametrize("label", ["dkg", "partial-key", "w-choices"])
@pytest.mark.parametrize("scale", [1, 1_000, 1_000_000, 1_000_000_000])
def test_the_progress_line_fits_80_columns_and_keeps_the_core_counts(
    label: str, scale: int
) -> None:
    p = {"produced": 0.96 * scale * 99, "total": 99.0 * scale, "routed": 0.95 * scale * 99,
         "processed": 0.9 * scale * 99, "lag": 0.06 * scale * 99, "rate": 5.5 * scale,
         "imbalance": 100.0}  # fmt: skip
    line = progress_text(label, p)
    assert len(line) <= 80, line
    for word in ("produced", "processed", "/s", "imbScore"):
        assert word in line


def test_a_watcher_in_a_later_task_counts_what_an_earlier_task_produced(tmp_path: Any) -> None:
    """A DAG's drain task did not produce: its watcher starts from the produced count the
    handle holds, not 0 (MLflow's ``produced`` series must not drop to 0 at the end)."""
    from skewlab.live.report.watch import Watcher

    class Ends:
        def end_offsets(self, topic: str) -> dict[int, int]:
            return {0: 600, 1: 400}

    seen: list[dict[str, float]] = []
    w = Watcher(Ends(), "events", "routed", str(tmp_path), "run-1", seen.append,
                sent=1_000, total=1_000)  # fmt: skip
    w.tick(None, None)
    assert seen[-1]["produced"] == 1_000 and seen[-1]["routed"] == 1_000
    assert seen[-1]["lag"] == 1_000 - seen[-1]["processed"]


def test_a_resumed_run_context_seeds_its_watcher_from_the_handle(tmp_path: Any) -> None:
    """The drain task resumes the run after ``produce`` ran in another process."""
    import dataclasses

    from skewlab.live.driver.context import RunContext
    from skewlab.live.driver.handle import RunHandle

    class Ends:
        def end_offsets(self, topic: str) -> dict[int, int]:
            return {0: 10}

    s = ExperimentSettings(home=str(tmp_path), mlflow=False, events=1_000)
    h = RunHandle("run-1", str(tmp_path), str(tmp_path / "run-1"), str(tmp_path / "delta"),
                  dataclasses.asdict(s), bootstrap="127.0.0.1:1",
                  produced={"events": 1_000, "seconds": 2.0})  # fmt: skip
    seen: list[dict[str, float]] = []
    ctx = RunContext(h, s, detached=True, progress=seen.append, client=cast(Any, Ends()))
    ctx.watcher().tick(None, None)
    assert seen[-1]["produced"] == 1_000 and seen[-1]["total"] == n_events(s.spec.workload)


def test_say_writes_a_line_of_its_own_and_keeps_the_progress_line() -> None:
    plain = io.StringIO()
    line = ProgressLine("key", plain, tty=False)
    line.say("starting the route job")
    assert plain.getvalue() == "key: starting the route job\n"

    term = io.StringIO()
    live = ProgressLine("key", term, tty=True)
    counters = {"produced": 10.0, "total": 100.0, "routed": 8.0, "processed": 5.0, "lag": 5.0}
    live({**counters, "rate": 1.0, "imbalance": 0.0})
    live.say("draining")
    live.close()
    out = term.getvalue()
    assert "key: draining" in out and "produced" in out
    assert out.index("key: draining") < out.rindex("produced")  # the line stays below


def _drawn_lines(text: str) -> list[str]:
    """Every state a terminal shows: the text split at carriage returns and newlines."""
    import re

    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    return [part for part in re.split(r"[\r\n]", plain) if part.strip()]


@pytest.mark.parametrize("label", ["dkg", "a-very-long-label-" * 6])
def test_the_terminal_line_never_draws_past_80_columns(label: str) -> None:
    out = io.StringIO()
    line = ProgressLine(label, out, tty=True)
    big = 10**9
    for t in range(1, 4):
        line({"produced": 0.3 * t * big, "total": 99.0 * big, "routed": 0.2 * t * big,
              "processed": 0.1 * t * big, "lag": 0.1 * t * big, "rate": 5.5e8,
              "imbalance": 100.0})  # fmt: skip
    line.say("draining")
    line.close()
    drawn = [d for d in _drawn_lines(out.getvalue()) if not d.endswith(": draining")]
    assert any("processed" in d for d in drawn)  # the redrawn line, "draining" is a message
    assert max(len(d) for d in drawn) <= 80, max(drawn, key=len)

"""What the live autoscaler's processes share: settings, topics, messages, evidence.

The four topics of a run and what their records mean, and why the evidence is the resume point
(:func:`resume_offset`): docs/autoscale.md, "Topics and evidence".
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.autoscale.algorithms import AutoscalerConfig
from skewlab.autoscale.streams import MeasurementStream
from skewlab.errors import ConfigError
from skewlab.io.kafka.base import KafkaClient, KafkaSettings
from skewlab.live.driver.spark_launcher import ENGINES
from skewlab.rundir import RunDir
from skewlab.spec import AUTOSCALE_DEFAULTS, AUTOSCALE_SETTINGS

__all__ = [
    "CONTROLLER_INBOX",
    "GroupSettings",
    "LiveSettings",
    "Measurement",
    "Message",
    "Processed",
    "Topics",
    "evidence_counts",
    "inbox",
    "resume_offset",
    "speed_plan",
]

CONTROLLER_INBOX = 0
"""Partition of ``consumer.metadata`` the controller reads."""

DOWN_OPS = ("start", "stop", "query", "exit")
UP_OPS = ("ready", "ack", "report")


def inbox(consumer: int) -> int:
    """The ``consumer.metadata`` partition consumer ``consumer`` (ids from 0) reads."""
    return consumer + 1


@dataclass(frozen=True)
class Topics:
    """The run's topic names."""

    data: str
    monitor: str
    metadata: str
    processed: str

    @classmethod
    def of(cls, run_id: str) -> Topics:
        """The topics of run ``run_id``: ``autoscale-``, ``monitor-``, ``consumer.metadata-``
        and ``processed-<run_id>``."""
        return cls(
            f"autoscale-{run_id}",
            f"monitor-{run_id}",
            f"consumer.metadata-{run_id}",
            f"processed-{run_id}",
        )

    def all(self) -> tuple[str, ...]:
        """The four names: data, monitor, metadata, processed."""
        return (self.data, self.monitor, self.metadata, self.processed)


def _d(name: str) -> Any:
    return AUTOSCALE_DEFAULTS[name]


@dataclass(frozen=True, kw_only=True)
class GroupSettings:
    """What the driver and every process of an autoscale run share (validated here).

    Capacities are bytes/s: ``capacity`` is ``C_bar`` (a consumer processes at
    most this much), ``bin_capacity`` the bin capacity ``C`` (default 5/6
    ``C_bar``). ``iteration_s`` is the controller's Sentinel timeout (a
    reassignment at least this often). The monitor samples every ``sample_s``
    and publishes speeds over a sliding ``window_s`` every ``publish_s`` once
    the window spans more than ``min_span_s``. Defaults:
    :data:`skewlab.spec.AUTOSCALE_SETTINGS`.
    """

    algorithm: str = _d("algorithm")
    partitions: int = _d("partitions")
    capacity: float = _d("capacity")
    bin_capacity: float | None = _d("bin_capacity")
    client: str = _d("client")
    iteration_s: float = _d("iteration_s")
    window_s: float = _d("window_s")
    min_span_s: float = _d("min_span_s")
    sample_s: float = _d("sample_s")
    publish_s: float = _d("publish_s")
    record_bytes: int = _d("record_bytes")

    def __post_init__(self) -> None:
        names = {f.name for f in fields(GroupSettings)}
        for setting in AUTOSCALE_SETTINGS:  # bounds and allowed values, as declared
            if setting.name in names:
                setting.check(getattr(self, setting.name))
        AutoscalerConfig(self.algorithm, self.capacity, self.bin_capacity)
        if not self.min_span_s < self.window_s:
            raise ConfigError(f"min_span_s must be in [0, window_s), got {self.min_span_s!r}")

    def shared(self) -> dict[str, Any]:
        """The :class:`GroupSettings` fields of this object, by name."""
        return {f.name: getattr(self, f.name) for f in fields(GroupSettings)}


@dataclass(frozen=True, kw_only=True)
class LiveSettings(GroupSettings):
    """One live autoscaling run, as every process of it sees it: the shared
    :class:`GroupSettings` plus where the run lives and the processes' own timing."""

    run_id: str
    bootstrap: str
    run_dir: str
    delta_root: str
    max_consumers: int = 0
    batch_s: float = 0.5
    poll_s: float = 0.1
    engine: str = "local"
    """Where the consumers run: ``local`` processes or ``spark`` tasks (:mod:`.instances`)."""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.engine not in ENGINES:
            raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        for name in ("batch_s", "poll_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0 s, got {getattr(self, name)!r}")
        if self.max_consumers == 0:
            object.__setattr__(self, "max_consumers", self.partitions + 1)
        elif self.max_consumers < 1:
            raise ConfigError(f"max_consumers must be >= 1, got {self.max_consumers}")

    @property
    def topics(self) -> Topics:
        """The run's topic names."""
        return Topics.of(self.run_id)

    @property
    def group(self) -> str:
        """The consumer group whose committed offsets hold every consumer's position."""
        return f"autoscale-{self.run_id}"

    @property
    def kafka(self) -> KafkaSettings:
        """The run's broker and Kafka client."""
        return KafkaSettings(self.bootstrap, self.client)

    @property
    def stop_file(self) -> Path:
        """Created by the driver: the controller stops its consumers, everyone exits."""
        return RunDir.of(self.run_dir).stop

    @property
    def state_file(self) -> Path:
        """The controller's persisted group state (snapshot and consumer pids)."""
        return RunDir.of(self.run_dir).controller_state

    def to_json(self) -> str:
        """These settings as the JSON of ``settings.json`` (:meth:`from_file` reads it)."""
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_file(cls, path: str | Path) -> LiveSettings:
        """The settings saved at ``path`` by :meth:`to_json`, validated again."""
        return cls(**json.loads(Path(path).read_text()))


@dataclass(frozen=True)
class Message:
    """One record of ``consumer.metadata``.

    Down (to consumer inboxes): ``start`` / ``stop`` a partition, ``query``
    the assignment, ``exit``. Up (to the controller inbox): ``ready`` (a new
    consumer reads its inbox), ``ack`` (``started`` says of which), ``report``
    (the partitions read now). ``t`` is the sender's wall time.
    """

    op: str
    consumer: int
    partition: int = -1
    partitions: tuple[int, ...] = ()
    started: bool = False
    t: float = 0.0

    def __post_init__(self) -> None:
        if self.op not in DOWN_OPS + UP_OPS:
            raise ConfigError(f"message op must be one of {DOWN_OPS + UP_OPS}, got {self.op!r}")

    def encode(self) -> bytes:
        """The message as JSON bytes (a record value); :meth:`decode` reads it back."""
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Message:
        """The message :meth:`encode` wrote; raises :class:`~skewlab.errors.ConfigError` on an
        unknown ``op`` (and ``TypeError`` / JSON errors on a malformed record)."""
        d = json.loads(raw or b"{}")
        d["partitions"] = tuple(d.get("partitions", ()))
        return cls(**d)


@dataclass(frozen=True)
class Measurement:
    """One monitor publication: write speed (bytes/s) per partition over ``span_s``."""

    seq: int
    t: float
    span_s: float
    speeds: tuple[float, ...]

    def encode(self) -> bytes:
        """The measurement as JSON bytes (a ``monitor`` record value)."""
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Measurement:
        """The measurement :meth:`encode` wrote (``speeds`` as a tuple)."""
        d = json.loads(raw or b"{}")
        d["speeds"] = tuple(d["speeds"])
        return cls(**d)


@dataclass(frozen=True)
class Processed:
    """Evidence of one consumer about one data partition (a ``processed`` record).

    ``kind`` ``start`` / ``stop``: ownership began / ended at offset ``end``
    at wall time ``t0`` (= ``t1``). ``batch``: offsets ``[start, end)`` were
    fetched at ``t0`` and done (processed, before the offset commit) at
    ``t1``; ``latency_ms`` holds each record's end-to-end latency.
    """

    kind: str
    consumer: int
    partition: int
    start: int
    end: int
    t0: float
    t1: float
    latency_ms: tuple[int, ...] = ()

    def encode(self) -> bytes:
        """The evidence as compact JSON bytes (a ``processed`` record value)."""
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Processed:
        """The evidence :meth:`encode` wrote (``latency_ms`` as a tuple)."""
        d = json.loads(raw or b"{}")
        d["latency_ms"] = tuple(d.get("latency_ms", ()))
        return cls(**d)


def read_new(
    client: KafkaClient, topic: str, partition: int, start: int, end: int | None = None
) -> tuple[list[bytes | None], int]:
    """Values of ``topic[partition]`` from ``start`` to its true end, and that end."""
    if end is None:
        end = client.end_offsets(topic).get(partition, 0)
    if end <= start:
        return [], start
    return [r.value for r in client.fetch(topic, partition, start, end, timeout_s=10)], end


def resume_offset(client: KafkaClient, s: LiveSettings, partition: int) -> int:
    """Where a new owner of ``partition`` starts: committed offset or newer evidence.

    The last ``processed`` record of the partition (written before the commit)
    wins when a consumer died between the two; otherwise both agree.
    """
    committed = client.committed(s.group, s.topics.data).get(partition, 0)
    end = client.end_offsets(s.topics.processed).get(partition, 0)
    if end == 0:
        return committed
    values, _ = read_new(client, s.topics.processed, partition, end - 1, end)
    return max(committed, Processed.decode(values[-1]).end) if values else committed


# -- workloads ------------------------------------------------------------------------


def speed_plan(spec: str, partitions: int, iterations: int, capacity: float) -> np.ndarray:
    """Write speed (bytes/s) per iteration and partition, ``(iterations, partitions)``.

    ``spec`` is one of:

    * ``stream:delta=5[,start=uniform|0..100][,seed=1]`` -- a measurement
      stream (Sec. VI-B, Eq. 15) in units of the bin capacity ``C``;
    * ``step:lo=0.1,hi=0.45,up=2,down=6`` -- every partition at ``lo * C``,
      at ``hi * C`` for iterations ``up <= k < down`` (forces scale-out, then
      scale-in);
    * ``const:level=0.5`` -- every partition at ``level * C``.
    """
    name, _, rest = spec.partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"workload parameter {item!r} must be key=value (in {spec!r})")
        params[key.strip()] = value.strip()
    allowed = {"stream": {"delta", "start", "seed"}, "step": {"lo", "hi", "up", "down"}}
    allowed["const"] = {"level"}
    if name not in allowed:
        raise ConfigError(f"unknown autoscale workload {name!r}; valid: const, step, stream")
    unknown = set(params) - allowed[name]
    if unknown:
        raise ConfigError(f"{name} workload takes {sorted(allowed[name])}, got {sorted(unknown)}")
    try:
        if name == "stream":
            start_raw = params.get("start", "uniform")
            start: str | float = start_raw if start_raw == "uniform" else float(start_raw)
            return MeasurementStream(
                partitions=partitions,
                measurements=iterations,
                delta=float(params.get("delta", 5)),
                start=start,
                capacity=capacity,
                seed=int(params.get("seed", 1)),
            ).generate()
        if name == "const":
            return np.full((iterations, partitions), float(params.get("level", 0.5)) * capacity)
        lo, hi = float(params.get("lo", 0.1)), float(params.get("hi", 0.45))
        up, down = int(params.get("up", 2)), int(params.get("down", 6))
    except ValueError as exc:
        raise ConfigError(f"bad number in workload {spec!r}: {exc}") from None
    if not (lo >= 0 and hi >= 0 and 0 <= up <= down):
        raise ConfigError(f"step workload needs lo, hi >= 0 and 0 <= up <= down, got {spec!r}")
    out = np.full((iterations, partitions), lo * capacity)
    out[up:down] = hi * capacity
    return out


def percentiles(values: list[int] | np.ndarray) -> dict[str, float]:
    """p50 / p90 / p99 / max of latencies (ms); NaN when there are none."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return {k: math.nan for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms")}
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return {"p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "max_ms": float(arr.max())}


# -- checks over the evidence -----------------------------------------------------------


def evidence_counts(
    evidence: list[Processed], ends: dict[int, int]
) -> tuple[dict[tuple[float, str], tuple[int, int]], dict[tuple[float, str], tuple[int, int]]]:
    """The data topic and the consumers' batches as counts for the shared exactness check.

    Returns ``(expected, actual)`` for :func:`skewlab.pipeline.exactness.check`:
    every offset ``[0, end)`` of partition ``p`` is expected once; each ``batch``
    evidence counts the offsets ``[start, end)`` it processed (past the true end
    too: those are doubled). A slot is a maximal range of offsets of one
    partition that the batches cover alike, keyed ``(first offset, "partition
    <p>")``, valued ``(offsets, sum of offsets)`` times the cover, so the check's
    lost / doubled are exact offset counts and an exact run has one slot per
    partition.
    """
    expected: dict[tuple[float, str], tuple[int, int]] = {}
    actual: dict[tuple[float, str], tuple[int, int]] = {}
    batches: dict[int, list[Processed]] = {}
    for e in evidence:
        if e.kind == "batch" and e.end > e.start:
            batches.setdefault(e.partition, []).append(e)
    for p in sorted(set(ends) | set(batches)):
        end = ends.get(p, 0)
        mine = batches.get(p, [])
        top = max([end, *(e.end for e in mine)])
        if top == 0:
            continue
        diff = np.zeros(top + 1, dtype=np.int64)
        np.add.at(diff, [e.start for e in mine], 1)
        np.add.at(diff, [e.end for e in mine], -1)
        cover = np.cumsum(diff[:top])
        want = (np.arange(top) < end).astype(np.int64)
        cuts = np.flatnonzero((cover[1:] != cover[:-1]) | (want[1:] != want[:-1])) + 1
        bounds = [0, *cuts.tolist(), top]
        for a, b in itertools.pairwise(bounds):
            n, total, slot = b - a, (a + b - 1) * (b - a) // 2, (float(a), f"partition {p}")
            if want[a]:
                expected[slot] = (n, total)
            if cover[a]:
                actual[slot] = (int(cover[a]) * n, int(cover[a]) * total)
    return expected, actual


@dataclass(frozen=True)
class Ownership:
    """Consumer ``consumer`` read ``partition`` during ``[t0, t1]`` (wall seconds)."""

    partition: int
    consumer: int
    t0: float
    t1: float


def ownerships(evidence: list[Processed]) -> list[Ownership]:
    """Intervals of ownership: ``start`` opens, ``batch`` extends, ``stop`` closes.

    A consumer killed while owning a partition has no ``stop``: its interval
    ends with its last batch (nothing it did later can be observed).
    """
    out: list[Ownership] = []
    open_: dict[tuple[int, int], list[float]] = {}
    for e in sorted(evidence, key=lambda e: (e.t0, e.kind != "start")):
        key = (e.partition, e.consumer)
        if e.kind == "start":
            if key in open_:
                out.append(Ownership(*key, *open_.pop(key)))
            open_[key] = [e.t0, e.t0]
        elif e.kind == "batch":
            span = open_.setdefault(key, [e.t0, e.t0])
            span[1] = max(span[1], e.t1)
        elif key in open_:
            span = open_.pop(key)
            out.append(Ownership(*key, span[0], max(span[1], e.t1)))
    out.extend(Ownership(*key, *span) for key, span in open_.items())
    return sorted(out, key=lambda o: (o.partition, o.t0))


def overlaps(owned: list[Ownership]) -> list[tuple[Ownership, Ownership]]:
    """Pairs of intervals of different consumers on one partition that intersect."""
    bad = []
    by_part: dict[int, list[Ownership]] = {}
    for o in owned:
        by_part.setdefault(o.partition, []).append(o)
    for items in by_part.values():
        items.sort(key=lambda o: o.t0)
        for i, a in enumerate(items):
            for b in items[i + 1 :]:
                if b.t0 >= a.t1:
                    break
                if b.consumer != a.consumer:
                    bad.append((a, b))
    return bad


def downtimes(handoffs: list[dict[str, Any]], evidence: list[Processed]) -> list[dict[str, float]]:
    """Per moved partition: stop sent -> new owner's start, and -> its first record.

    ``handoffs`` come from the controller's decisions (``partition``, ``to``,
    ``stop_sent``); the new owner's ``start`` and first ``batch`` after
    ``stop_sent`` from the evidence. Handoffs whose new owner never read
    (the run ended first) are left out.
    """
    out = []
    for h in handoffs:
        p, new, sent = int(h["partition"]), int(h["to"]), float(h["stop_sent"])
        mine = [e for e in evidence if e.partition == p and e.consumer == new and e.t0 >= sent]
        starts = [e.t0 for e in mine if e.kind == "start"]
        firsts = [e.t0 for e in mine if e.kind == "batch" and e.end > e.start]
        if starts and firsts:
            out.append(
                {
                    "partition": p,
                    "start_s": min(starts) - sent,
                    "first_record_s": min(firsts) - sent,
                }
            )
    return out

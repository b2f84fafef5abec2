"""Trace validation: every kind of bad row named by file:line, before anything starts."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.runsettings import ExperimentSettings
from skewlab.workload import TraceWorkload, parse_workload
from skewlab.workload.trace_check import (
    LISTED,
    MAX_KEY_BYTES,
    MAX_SPAN_S,
    TraceError,
    validate_trace,
)

pytestmark = pytest.mark.unit


def _write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _keys(w: TraceWorkload, n: int) -> tuple[list[str], np.ndarray]:
    keys: list[str] = []
    ts = []
    for c in w.events(n, chunk=4, rate=10.0):
        keys.extend(c.keys.keys())
        ts.append(c.ts)
    return keys, np.concatenate(ts)


# One CSV with every row-level problem; (line, reason fragment) of each bad row.
CSV_ROWS: list[tuple[bytes, str | None]] = [
    (b"key,ts,size", None),  # header
    (b"a,1.0,10", None),
    (b"b\xff,1.5,10", "not valid UTF-8 (byte 0xff at column 2)"),
    (b"x" * 1_000_000 + b",2.0,10", "not valid CSV (field larger than field limit"),
    (b"y" * (MAX_KEY_BYTES + 1) + b",2.0,10", f"key is {MAX_KEY_BYTES + 1} bytes"),
    (b"c,2.0", "2 fields, expected 3"),
    (b"d,soon,10", "timestamp must be a number of seconds, got 'soon'"),
    (b"e,inf,10", "timestamp must be finite"),
    (b"f,nan,10", "timestamp must be finite"),
    (b"g,1e400,10", "timestamp must be finite"),
    (b"h,0.5,10", "timestamp 0.5 is before the previous row's 1.0"),
    (b"i,2.0,-1", "size must be an integer"),
    (b"j,2.0,99999999999999999999", "size must be an integer"),
    (b",2.0,10", "key is empty"),
    (b"k,3.0,7", None),
    (b"l,1e12,7", f"more than {MAX_SPAN_S:.0f} s after"),  # 1e12 - 1.0 > MAX_SPAN_S
    (b"m,4.0,8", None),
]


def test_every_bad_csv_row_is_named_by_line_and_reason(tmp_path):
    path = _write(tmp_path, "t.csv", b"\n".join(r for r, _ in CSV_ROWS) + b"\n")
    check = validate_trace(path)
    want = [(i, why) for i, (_, why) in enumerate(CSV_ROWS, start=1) if why is not None]
    assert [(b.line, b.path) for b in check.bad] == [(i, path) for i, _ in want]
    for b, (_, why) in zip(check.bad, want):
        assert why in b.reason, (b, why)
    assert check.rows == 3 and check.bad_rows == len(want) and not check.ok


def test_bad_rows_refuse_in_one_line_or_are_skipped(tmp_path):
    path = _write(tmp_path, "t.csv", b"\n".join(r for r, _ in CSV_ROWS) + b"\n")
    with pytest.raises(TraceError) as err:
        TraceWorkload(path=path)
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 1_000  # the 1 MB key is not echoed
    assert f"{path}:3: not valid UTF-8" in msg and "bad=skip" in msg
    keys, ts = _keys(TraceWorkload(path=path, bad="skip"), 3)
    assert keys == ["a", "k", "m"]
    assert ts.tolist() == [0.0, 2.0, 3.0]
    with pytest.raises(ConfigError, match="3 events but 4"):
        _keys(TraceWorkload(path=path, bad="skip"), 4)


JSONL_BAD = [
    (b'{"key": "p", "ts": Infinity}', "timestamp must be finite"),
    (b'{"key": "p", "ts": NaN}', "timestamp must be finite"),
    (b'{"key": "p", "ts": 1' + b"0" * 400 + b"}", "timestamp must be a number"),
    (b'{"key": 1' + b"0" * 5000 + b', "ts": 3}', "not valid JSON (ValueError"),
    (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    (b'{"key": "\\ud800", "ts": 3}', "lone surrogate"),
    (b'{"key": "p", "ts": 3, "size": ' + str(2**70).encode() + b"}", "size must be"),
    (b'{"key": "p\xc3", "ts": 3}', "not valid UTF-8"),
    (b'{"key": "p"}', "timestamp missing"),
    (b'{"key": "p", "ts": 3, "seq": 1}', "unknown field(s) 'seq'"),
    (b'"p"', "expected a JSON object, got str"),
    (b'{"ts": 3}', 'missing "key"'),
]


def test_every_bad_jsonl_row_is_named_and_the_good_ones_replay(tmp_path):
    lines = [b'{"key": "a", "ts": 1}', *(r for r, _ in JSONL_BAD), b'{"key": 5, "ts": 4}']
    path = _write(tmp_path, "t.jsonl", b"\n".join(lines) + b"\n")
    check = validate_trace(path)
    assert [b.line for b in check.bad] == list(range(2, 2 + len(JSONL_BAD)))
    for b, (_, why) in zip(check.bad, JSONL_BAD):
        assert why in b.reason, (b, why)
    assert check.rows == 2
    keys, ts = _keys(TraceWorkload(path=path, bad="skip"), 2)
    assert keys == ["a", "5"] and ts.tolist() == [0.0, 3.0]


def test_files_that_cannot_be_used_at_all(tmp_path):
    with pytest.raises(TraceError, match="not found"):
        validate_trace(str(tmp_path))  # a directory
    with pytest.raises(TraceError, match="empty"):
        validate_trace(_write(tmp_path, "e.csv", b"\n \n"))
    only_bad = _write(tmp_path, "b.csv", b"a,x\nb,inf\n")
    with pytest.raises(TraceError, match=r"b.csv: 2 bad row\(s\) of 2: .*b.csv:1: .*no valid row"):
        validate_trace(only_bad)
    with pytest.raises(TraceError, match="no valid row"):
        TraceWorkload(path=only_bad, bad="skip")
    with pytest.raises(TraceError, match=r"w\.csv:1: 4 fields"):
        validate_trace(_write(tmp_path, "w.csv", b"a,1,2,3\nb,2,3,4\n"))
    if os.geteuid() != 0:  # root reads anything
        locked = _write(tmp_path, "l.csv", b"a\n")
        os.chmod(locked, 0)
        with pytest.raises(TraceError, match="cannot read"):
            validate_trace(locked)


def test_only_the_first_rows_are_listed_but_all_are_counted(tmp_path):
    n = LISTED + 50
    path = _write(tmp_path, "t.csv", b"a,1\n" + b"b,x\n" * n)
    check = validate_trace(path)
    assert check.bad_rows == n and len(check.bad) == LISTED and check.rows == 1
    assert check.describe().endswith(f"and {n - 3} more")


def test_a_utf8_bom_header_is_a_header(tmp_path):
    path = _write(tmp_path, "t.csv", b"\xef\xbb\xbfkey,size\nq,3\n")
    check = validate_trace(path)
    assert check.ok and check.rows == 1


def test_the_check_follows_the_file(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,1\nb,2\n")
    assert TraceWorkload(path=str(path)).check().rows == 2
    path.write_bytes(b"a,1\nb,2\nc,x\n")
    with pytest.raises(TraceError, match=r"t\.csv:3"):
        TraceWorkload(path=str(path))


def test_check_length_says_up_front_that_the_trace_is_short(tmp_path):
    path = _write(tmp_path, "t.csv", b"a\nb\n")
    TraceWorkload(path=path).check_length(2)
    TraceWorkload(path=path, loop=True).check_length(5)
    with pytest.raises(TraceError, match="2 valid events but 3"):
        TraceWorkload(path=path).check_length(3)


def test_a_live_run_refuses_a_bad_trace_when_its_settings_are_built(tmp_path):
    path = _write(tmp_path, "t.jsonl", json.dumps({"key": "a", "ts": 1}).encode() + b"\n{\n")
    with pytest.raises(TraceError, match=r"t\.jsonl:2: not valid JSON"):
        ExperimentSettings(workload=f"trace:{path}", home=str(tmp_path / "home"))
    assert not (tmp_path / "home").exists()
    s = ExperimentSettings(
        workload=f"trace:path={path},bad=skip", events=1, home=str(tmp_path / "home")
    )
    assert parse_workload(s.workload).check().rows == 1

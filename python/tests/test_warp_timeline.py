"""Warp timelines of the channel benchmark: loading and checking, the per-run summary, the trace."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import write_csv
from typer.testing import CliRunner

from warpvm import warp_timeline
from warpvm.cli import app
from warpvm.results import ResultsError

HEADER = ",".join(warp_timeline.SPAN_COLUMNS) + "\n"
ROWS = (
    "tiles-33792-channel,0,3,1,life,0,10000\n"
    "tiles-33792-channel,0,3,1,wait,1000,4000\n"
    "tiles-33792-channel,0,3,1,wait,5000,6000\n"
    "tiles-33792-channel,9,3,0,life,0,8000\n"
    "tiles-33792-naive,0,3,1,life,0,5000\n"
    "tiles-33792-naive,0,3,1,wait,0,500\n"
)


@pytest.fixture
def spans_file(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "warps.csv", HEADER, ROWS)


def test_load_and_summarise(spans_file: Path) -> None:
    spans = warp_timeline.load_spans(spans_file)
    assert [s.kind for s in spans] == ["life", "wait", "wait", "life", "life", "wait"]
    assert spans[1].consumer and not spans[3].consumer and spans[1].duration_ns == 3000
    rows = {row[0]: row for row in warp_timeline.summary_table(spans).rows}
    channel = rows["tiles-33792-channel"]
    # one consumer warp (warp 9 is not one), two waits of 3 and 1 us, 4 us of a 10 us life
    assert channel[1:] == ("1", "2", "3.00", "3.00", "0.400", "0.006")
    assert rows["tiles-33792-naive"][1:] == ("1", "1", "0.50", "0.50", "0.100", "0.001")


def test_chrome_trace_has_a_track_per_warp_with_its_waits_inside_its_life(spans_file: Path) -> None:
    trace = warp_timeline.chrome_trace(warp_timeline.load_spans(spans_file))["traceEvents"]
    processes = [e["args"]["name"] for e in trace if e["name"] == "process_name"]
    assert processes == ["tiles-33792-channel", "tiles-33792-naive"]
    threads = {(e["pid"], e["args"]["name"]) for e in trace if e["name"] == "thread_name"}
    assert threads == {
        (1, "SM 3 warp 0 (consumer)"),
        (1, "SM 3 warp 9 (other)"),
        (2, "SM 3 warp 0 (consumer)"),
    }
    slices = [e for e in trace if e["ph"] == "X" and e["pid"] == 1]
    assert [(e["name"], e["tid"], e["ts"], e["dur"]) for e in slices] == [
        ("consumer", 0, 0.0, 10.0),
        ("busy", 9, 0.0, 8.0),
        ("wait", 0, 1.0, 3.0),
        ("wait", 0, 5.0, 1.0),
    ]
    naive = [e for e in trace if e["ph"] == "X" and e["pid"] == 2]
    assert [e["name"] for e in naive] == ["consumer", "wait"]  # the life opens first at an equal start


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("r,0,1,2,life,0,5\n", "consumer must be 0 or 1"),
        ("r,0,1,1,sleep,0,5\n", "kind 'sleep'"),
        ("r,0,1,1,wait,9,5\n", "end_ns 5 before start_ns 9"),
        ("r,0,1,1,wait,-3,5\n", "start_ns -3 is negative"),
        ("r,0,1,1,wait,0\n", "fewer fields"),
        ("r,0,1,1,wait,,5\n", "empty start_ns"),
        ("r,0,1,1,wait,0,5,7\n", "more fields"),
    ],
)
def test_bad_rows_are_refused_with_their_line(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(ResultsError, match=message) as error:
        warp_timeline.load_spans(write_csv(tmp_path / "bad.csv", HEADER, body))
    assert "bad.csv:2" in str(error.value)


def test_missing_columns_are_named(tmp_path: Path) -> None:
    old = write_csv(tmp_path / "old.csv", "run,warp,sm,kind,start_ns,end_ns\n", "r,0,1,life,0,5\n")
    with pytest.raises(ResultsError, match="missing columns consumer"):
        warp_timeline.load_spans(old)


def test_cli_prints_the_summary_and_writes_the_trace(spans_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    result = CliRunner().invoke(app, ["warp-timeline", str(spans_file), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Consumer waits per run" in result.output and f"wrote {out}" in result.output
    assert len([e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]) == 6


def test_cli_refuses_an_empty_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["warp-timeline", str(write_csv(tmp_path / "empty.csv", HEADER, ""))])
    assert result.exit_code != 0
    assert "no warp stamps" in result.output


def test_a_compressed_file_is_refused_with_a_reason(tmp_path: Path) -> None:
    packed = tmp_path / "warps.csv.gz"
    packed.write_bytes(gzip.compress((HEADER + ROWS).encode()))
    with pytest.raises(ResultsError, match="not a UTF-8 text CSV"):
        warp_timeline.load_spans(packed)


def test_two_invocations_appended_to_one_file_are_refused(tmp_path: Path) -> None:
    twice = write_csv(tmp_path / "twice.csv", HEADER, ROWS + ROWS)
    with pytest.raises(ResultsError, match="two lives of warp 0"):
        warp_timeline.load_spans(twice)


def test_the_trace_goes_into_a_new_directory(spans_file: Path, tmp_path: Path) -> None:
    out = warp_timeline.write_chrome_trace(warp_timeline.load_spans(spans_file), tmp_path / "new" / "t.json")
    assert json.loads(out.read_text())["displayTimeUnit"] == "ns"

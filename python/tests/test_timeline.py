"""Fault events: loading and checking, the per-run summary, the Perfetto trace and Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_csv
from typer.testing import CliRunner

from warpvm import timeline
from warpvm.cli import app
from warpvm.results import ResultsError

HEADER = ",".join(timeline.EVENT_COLUMNS) + "\n"
ROWS = (
    "stream/warpvm/0.25,0,5000,0,7,3,12,32,fill,0,0\n"
    "stream/warpvm/0.25,1000,5200,0,7,9,12,32,wait,0,0\n"
    "stream/warpvm/0.25,2000,9000,0,8,3,40,16,fill,1,2\n"
    "stream/warpvm/0.25,2500,3500,0,9,4,40,32,fill,0,1\n"
    "stream/warpvm_uvm/1,0,300000,0,1,0,5,32,host,0,3\n"
)


@pytest.fixture
def events_file(tmp_path: Path) -> Path:
    return write_csv(tmp_path / "events.csv", HEADER, ROWS)


def test_load_and_summarise(events_file: Path) -> None:
    events = timeline.load_events(events_file)
    assert [e.kind for e in events] == ["fill", "wait", "fill", "fill", "host"]
    assert events[2].write and events[2].duration_ns == 7000
    table = timeline.summary_table(events)
    rows = {row[0]: row for row in table.rows}
    stream = rows["stream/warpvm/0.25"]
    assert stream[1:6] == ("4", "3", "1", "0", "25.0%")  # faults, fills, waits, host, duplicates
    assert stream[6] == "28.0"  # lanes per fault: (32 + 32 + 16 + 32) / 4
    assert stream[7] == "5.00"  # median fill wait: 1000, 5000, 7000 ns
    assert stream[10:12] == ("66.7%", "33.3%")  # fills evicting, writing back
    uvm = rows["stream/warpvm_uvm/1"]
    assert uvm[4] == "1" and uvm[9] == "300.00" and uvm[12] == "3.00"


def test_chrome_trace_has_a_track_per_sm_and_a_slice_per_fault(events_file: Path) -> None:
    trace = timeline.chrome_trace(timeline.load_events(events_file))["traceEvents"]
    processes = [e["args"]["name"] for e in trace if e["name"] == "process_name"]
    assert processes == ["stream/warpvm/0.25", "stream/warpvm_uvm/1"]
    threads = {(e["pid"], e["args"]["name"]) for e in trace if e["name"] == "thread_name"}
    assert threads == {(1, "SM 12"), (1, "SM 40"), (2, "SM 5")}
    slices = [e for e in trace if e["ph"] == "X"]
    assert len(slices) == 5
    wait = next(e for e in slices if e["name"] == "wait")
    assert (wait["ts"], wait["dur"], wait["tid"]) == (1.0, 4.2, 12)
    assert wait["args"]["warp"] == 9


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("r,10,5,0,1,0,0,32,fill,0,0", "end_ns 5 before start_ns 10"),
        ("r,0,5,0,1,0,0,33,fill,0,0", "lanes 33 outside 1..32"),
        ("r,0,5,0,1,0,0,32,miss,0,0", "kind 'miss'"),
        ("r,0,5,0,1,0,0,32,fill,2,0", "write must be 0 or 1"),
        ("r,0,5,0,1,0,0,32,fill,0", "fewer fields than the header"),
        ("r,0,5,0,1,0,0,32,fill,0,0,9", "more fields than the header"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    path = write_csv(tmp_path / "bad.csv", HEADER, "r,0,5,0,1,0,0,32,fill,0,0\n" + row + "\n")
    with pytest.raises(ResultsError, match=rf"bad\.csv:3: bad row: {message}"):
        timeline.load_events(path)


def test_missing_columns(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="missing columns end_ns"):
        timeline.load_events(write_csv(tmp_path / "m.csv", "workload,start_ns\n", "r,0\n"))


def test_cli_writes_the_timeline_and_parquet(events_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    out, table = tmp_path / "t.json", tmp_path / "e.parquet"
    result = CliRunner().invoke(
        app, ["timeline", str(events_file), "--out", str(out), "--parquet", str(table)]
    )
    assert result.exit_code == 0, result.output
    assert "Fault events per run" in result.output
    assert len([e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]) == 5
    read = pq.read_table(table)
    assert read.num_rows == 5
    assert read.column("kind").to_pylist() == ["fill", "wait", "fill", "fill", "host"]


def test_cli_rejects_an_empty_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["timeline", str(write_csv(tmp_path / "e.csv", HEADER, ""))])
    assert result.exit_code == 1
    assert "no events" in result.output

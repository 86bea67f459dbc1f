"""Reading batch traces, the `warpvm trace` command, and traces from the real simulator."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import SWEEP_TRACE, TRACE_HEADER, UNTIMED_TRACE, with_durations, write_trace
from typer.testing import CliRunner

from warpvm import runner, trace
from warpvm.cli import app
from warpvm.results import ResultsError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALL_PLOTS = (
    "batch_sizes.png",
    "migration_per_batch.png",
    "blocks_per_batch.png",
    "transfer_share.png",
    "batch_size_sweep.png",
    "prefetch.png",
    "eviction_cost.png",
)


# --- loading ----------------------------------------------------------------------------------


def test_untimed_rows_have_no_timings(trace_file: Path) -> None:
    batches = trace.load_trace(trace_file)
    first = batches[0]
    assert first.run == trace.Run("stream", 1.0, 256, True)
    assert (first.start_ns, first.duration_ns, first.transfer_ns, first.management_ns) == (
        None,
        None,
        None,
        None,
    )
    assert not trace.timed(batches[:2])
    assert batches[2].pages_migrated == 500 and batches[2].pages_moved == 800


def test_timed_rows_parse(timed_file: Path) -> None:
    batches = trace.load_trace(timed_file)
    b = batches[1]
    assert (b.start_ns, b.duration_ns, b.transfer_ns, b.management_ns) == (60000, 70000, 20000, 50000)
    assert trace.timed(batches) and trace.transfer_timed(batches) and trace.start_timed(batches)
    assert trace.total_ns(batches) == 1_130_000


def test_timing_columns_may_be_absent(tmp_path: Path) -> None:
    header = ",".join(trace.COLUMNS[:12]) + "\n"
    batches = trace.load_trace(
        write_trace(tmp_path / "short.csv", "stream,1,256,0,0,8,8,1,8,0,0,0\n", header)
    )
    assert batches[0].duration_ns is None and not batches[0].prefetch


def test_extra_columns_are_ignored(tmp_path: Path) -> None:
    body = "stream,1,256,1,0,8,8,1,8,0,0,0,5,100,40,3,0,0,x\nstream,1,256,1,1,8,8,1,8,0,0,0,,,,,,,y\n"
    batches = trace.load_trace(write_trace(tmp_path / "extra.csv", body, TRACE_HEADER.strip() + ",note\n"))
    assert [b.duration_ns for b in batches] == [100, None]
    assert [b.faults_flushed for b in batches] == [3, None]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("stream,1,256,1,1,many,1,1,1,1,1,1,,,", "invalid literal"),
        ("stream,1,256,yes,1,1,1,1,1,1,1,1,,,", "prefetch must be 1 or 0"),
        ("stream,1,256,1,1,300,1,1,1,1,1,1,,,", "faults 300 > batch_limit 256"),
        ("stream,1,256,1,1,10,11,1,1,1,1,1,,,", "unique_faults 11 > faults 10"),
        ("stream,1,256,1,1,10,10,1,1,1,1,1,0,100,101", "transfer_ns 101 > duration_ns 100"),
        ("stream,1,256,1,1,10,10,1,1,1,1,-1,,,", "negative count -1"),
        ("stream,1,256,1,1,10,10,1,1,1,1,1,,,,,,,7", "more fields than the header"),
        ("stream,1,256,1,1,10", "fewer fields than the header"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    path = write_trace(tmp_path / "bad.csv", "stream,1,256,1,0,256,128,1,128,0,0,0,,,\n" + row + "\n")
    with pytest.raises(ResultsError, match=rf"bad\.csv:3: bad row: .*{message}"):
        trace.load_trace(path)


def test_missing_columns(tmp_path: Path) -> None:
    missing = write_trace(tmp_path / "missing.csv", "stream,0\n", "workload,batch\n")
    with pytest.raises(ResultsError, match="missing columns cache_fraction, batch_limit, prefetch, faults"):
        trace.load_trace(missing)


def test_a_run_may_not_span_two_files(trace_file: Path, tmp_path: Path) -> None:
    other = write_trace(tmp_path / "again.csv", "stream,1,256,1,0,1,1,1,1,0,0,0,,,\n")
    with pytest.raises(
        ResultsError, match=r"stream, cache 100%, 256/batch, prefetch is in both .*batches\.csv"
    ):
        trace.load_traces([trace_file, other])
    different = write_trace(tmp_path / "nopf.csv", "stream,1,256,0,0,1,1,1,1,0,0,0,,,\n")
    assert len(trace.load_traces([trace_file, different])) == 4


def test_eviction_columns_are_read_and_split_management(tmp_path: Path) -> None:
    path = tmp_path / "evict.csv"
    path.write_text(
        TRACE_HEADER
        + "rmw,0.25,256,1,0,10,10,2,10,0,1,512,0,1000,300,0,200,500\n"
        + "rmw,0.25,256,1,1,10,10,2,10,0,0,0,1000,400,100,0,0,0\n"
    )
    first, second = trace.load_trace(path)
    assert (first.pages_written_back, first.eviction_ns) == (200, 500)
    assert first.management_ns == 1000 - 300 - 500
    assert second.management_ns == 300
    assert [c.run for c in trace.eviction_costs([first, second])] == [first.run]


def test_eviction_time_beyond_the_batch_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(TRACE_HEADER + "rmw,0.25,256,1,0,10,10,2,10,0,1,512,0,1000,600,0,0,500\n")
    with pytest.raises(ResultsError, match="eviction_ns"):
        trace.load_trace(path)


# --- the command ------------------------------------------------------------------------------


def test_cli_untimed_trace_skips_what_needs_time(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["trace", str(trace_file), "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = ("batch_sizes.png", "migration_per_batch.png", "blocks_per_batch.png", "eviction_cost.png")
    for name in written:
        assert (out / name).read_bytes().startswith(PNG_MAGIC)
        assert f"wrote {out / name}" in result.output
    assert f"wrote {out / 'summary.md'}" in result.output
    for name in ("transfer_share.png", "batch_size_sweep.png", "prefetch.png"):
        assert not (out / name).exists()
    assert (
        "skipped transfer_share.png (Fig. 7): needs a run with duration_ns and transfer_ns" in result.output
    )
    assert "skipped batch_size_sweep.png (Fig. 9)" in result.output
    assert "skipped prefetch.png (Fig. 14)" in result.output
    assert "Fault batches per run" in result.output and "Table 3" in result.output
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| random_page | 50% | 256 | on |" in summary
    assert "- skipped transfer_share.png (Fig. 7)" in summary


def test_cli_several_files_give_every_plot(timed_file: Path, tmp_path: Path) -> None:
    sweep = write_trace(tmp_path / "sweep.csv", with_durations(SWEEP_TRACE, {64: 1000, 128: 1500, 256: 3000}))
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["trace", str(timed_file), str(sweep), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "skipped" not in result.output
    for name in ALL_PLOTS:
        assert (out / name).stat().st_size > 10_000, name
    summary = (out / "summary.md").read_text(encoding="utf-8")
    for title in ("Fig. 6", "Table 3", "Fig. 7", "Fig. 9", "Fig. 14", "Figs. 12-13"):
        assert f"## {title}" in summary
    assert "Not shown" not in summary


def test_cli_rejects_a_run_split_over_files(trace_file: Path, tmp_path: Path) -> None:
    copy = write_trace(tmp_path / "copy.csv", UNTIMED_TRACE)
    result = CliRunner().invoke(app, ["trace", str(trace_file), str(copy), "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert "is in both" in result.output


# --- the real simulator -----------------------------------------------------------------------


@pytest.fixture
def warpvm_sim() -> Path:
    """The built warpvm-sim (--build-dir rules: $WARPVM_BUILD_DIR, else the checkout's build/);
    skips when it is missing or older than its source."""
    try:
        binary = runner.find_binary(runner.resolve_build_dir(None), runner.SIM)
    except runner.MissingBinaryError as error:
        pytest.skip(str(error))
    source = Path(__file__).resolve().parents[2] / "tools" / "sim" / "warpvm_sim.cpp"
    if source.is_file() and os.path.getmtime(source) > os.path.getmtime(binary):
        pytest.skip(f"{binary} is older than {source}: rebuild it")
    return binary


def test_simulator_batch_size_sweep_and_prefetch(warpvm_sim: Path, tmp_path: Path) -> None:
    def sim(name: str, *args: str) -> Path:
        path = tmp_path / name
        command = [str(warpvm_sim), "--model", "uvm", "--cache-fractions", "1", *args, "--trace", str(path)]
        subprocess.run(command, check=True, capture_output=True)
        return path

    stream = ["--workloads", "stream", "--bytes", "4MiB", "--no-prefetch"]
    files = [sim(f"b{limit}.csv", *stream, "--batch-size", str(limit)) for limit in (64, 256, 1024)]
    vadd = ["--workloads", "vadd", "--bytes", "6MiB"]
    files += [sim("vadd.csv", *vadd), sim("vadd-nopf.csv", *vadd, "--no-prefetch")]
    # The simulator writes the current format: every column, the later ones included.
    assert (
        files[0].read_text(encoding="utf-8").startswith(",".join(trace.COLUMNS + trace.LATER_COLUMNS) + "\n")
    )
    batches = trace.load_traces(files)
    assert not any(trace.timed(group) for group in trace.runs(batches).values())
    (sweep,) = trace.batch_size_sweeps(batches)
    # 1024 pages streamed once without prefetching: every batch is full and free of duplicates.
    assert not sweep.prefetch
    assert [(p.batch_limit, p.batches, p.mean_unique_faults) for p in sweep.points] == [
        (64, 16, 64.0),
        (256, 4, 256.0),
        (1024, 1, 1024.0),
    ]
    # vadd over three 2 MB objects: half of each block faulted, the prefetcher brings the other half.
    (c,) = trace.prefetch_comparisons(batches)
    assert (c.workload, c.batch_limit) == ("vadd", 256)
    assert (c.off.batches, c.off.faults, c.off.pages_migrated) == (6, 1536, 1536)
    assert (c.on.batches, c.on.faults, c.on.pages_migrated, c.on.pages_prefetched) == (3, 768, 1536, 768)
    assert c.batch_reduction == 0.5

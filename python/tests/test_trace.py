from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from warpvm import runner, trace
from warpvm.cli import app
from warpvm.results import ResultsError

HEADER = ",".join(trace.COLUMNS) + "\n"
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

# Simulator-style rows (timings empty): workload,cache_fraction,batch_limit,prefetch,batch,faults,
# unique_faults,blocks,pages_faulted,pages_prefetched,chunks_evicted,pages_evicted,start_ns,duration_ns,
# transfer_ns
UNTIMED = """\
stream,1,256,1,0,256,128,1,128,0,0,0,,,
stream,1,256,1,1,256,256,2,200,56,0,0,,,
random_page,0.5,256,1,0,100,100,50,100,400,2,300,,,
"""

# A GPU-style run with timings: two batches without eviction, three evicting one chunk each, of which
# one is cheap (a lower cost level, as in the study's Fig. 13).
TIMED = """\
sgemm,0.5,256,1,0,256,128,2,128,128,0,0,0,50000,5000
sgemm,0.5,256,1,1,256,256,4,256,256,0,0,60000,70000,20000
sgemm,0.5,256,1,2,200,64,1,64,192,1,512,150000,400000,40000
sgemm,0.5,256,1,3,256,64,1,64,192,1,512,600000,190000,19000
sgemm,0.5,256,1,4,100,100,1,100,0,1,256,800000,420000,42000
"""

# Runs differing only in batch_limit (64, 128, 256 with prefetch) and only in prefetch (256).
SWEEP = """\
stream,1,64,1,0,64,60,1,60,0,0,0,,,
stream,1,64,1,1,64,60,1,60,0,0,0,,,
stream,1,64,1,2,64,60,1,60,0,0,0,,,
stream,1,64,1,3,64,60,1,60,0,0,0,,,
stream,1,128,1,0,128,120,1,100,0,0,0,,,
stream,1,128,1,1,128,120,1,100,0,0,0,,,
stream,1,256,1,0,256,200,1,200,312,0,0,,,
stream,1,256,0,0,256,200,1,200,0,0,0,,,
stream,1,256,0,1,56,56,1,56,0,0,0,,,
"""


def write_trace(path: Path, body: str, header: str = HEADER) -> Path:
    path.write_text(header + body, encoding="utf-8")
    return path


def with_durations(body: str, ns: dict[int, int]) -> str:
    """SWEEP rows with timings: every batch of limit L takes ns[L], a quarter of it transfer."""
    rows = []
    for line in body.splitlines():
        cells = line.split(",")
        duration = ns[int(cells[2])]
        rows.append(",".join([*cells[:12], str(1000 * int(cells[4])), str(duration), str(duration // 4)]))
    return "\n".join(rows) + "\n"


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "batches.csv", UNTIMED)


@pytest.fixture
def timed_file(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "timed.csv", TIMED)


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "sweep.csv", SWEEP)


def load(body: str, tmp_path: Path) -> list[trace.Batch]:
    return trace.load_trace(write_trace(tmp_path / "t.csv", body))


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
    batches = trace.load_trace(write_trace(tmp_path / "extra.csv", body, HEADER.strip() + ",note\n"))
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


# --- per-run summary --------------------------------------------------------------------------


def test_summary_per_run(trace_file: Path) -> None:
    summaries = {s.workload: s for s in trace.summarize(trace.load_trace(trace_file))}
    stream = summaries["stream"]
    assert stream.batches == 2
    assert stream.mean_faults == 256
    assert stream.mean_unique_faults == 192
    assert stream.duplicate_share == pytest.approx(128 / 512)
    assert stream.mean_blocks == 1.5
    assert stream.faults_per_block == pytest.approx(384 / 3)
    assert stream.prefetched_share == pytest.approx(56 / 384)
    assert stream.total_ns is None
    random = summaries["random_page"]
    assert random.cache_fraction == 0.5
    assert random.prefetched_share == pytest.approx(400 / 500)
    assert random.pages_evicted == 300


def test_runs_are_ordered_by_workload_cache_limit_prefetch(sweep_file: Path) -> None:
    order = list(trace.runs(trace.load_trace(sweep_file)))
    assert [(r.batch_limit, r.prefetch) for r in order] == [
        (64, True),
        (128, True),
        (256, False),
        (256, True),
    ]


def test_markdown_has_a_row_per_run(trace_file: Path) -> None:
    text = trace.markdown_summary(trace.load_trace(trace_file))
    rows = [line for line in text.splitlines() if line.startswith(("| stream", "| random_page"))]
    assert "| stream | 100% | 256 | on | 2 | 256.0 | 192.0 | 25.0% | 1.50 | 128.0 | 14.6% | 0 | - |" in rows
    assert "## Table 3: 2 MB VA blocks per batch" in text
    assert "Fig. 7" not in text  # no timed run: no transfer table


# --- Table 3 ----------------------------------------------------------------------------------


def test_blocks_per_batch_and_faults_per_block(timed_file: Path) -> None:
    (stats,) = trace.block_stats(trace.load_trace(timed_file))
    assert (stats.mean_blocks, stats.median_blocks, stats.max_blocks) == (1.8, 1, 4)
    assert stats.mean_faults_per_block == pytest.approx(612 / 9)
    assert stats.median_faults_per_block == 64
    assert stats.max_faults_per_block == 100
    row = trace.block_table([stats]).rows[0]
    assert row == ("sgemm", "50%", "256", "on", "1.80", "1", "4", "68.00", "64.00", "100.00")


# --- Fig. 6 -----------------------------------------------------------------------------------


def test_fit_against_data_migrated(tmp_path: Path) -> None:
    # 1, 2 and 3 MiB migrated; batch size 100 + 50 per MiB; time 20 us + 30 us per MiB.
    body = "".join(
        f"app,1,256,1,{i},256,{100 + 50 * mib},1,{256 * mib},0,0,0,{i * 10**6},{20000 + 30000 * mib},1000\n"
        for i, mib in enumerate((1, 2, 3))
    )
    (fit,) = trace.migration_fits(load(body, tmp_path))
    assert (fit.mean_mib, fit.max_mib) == (2.0, 3.0)
    assert fit.size_fit is not None and fit.time_fit is not None
    assert (fit.size_fit.slope, fit.size_fit.intercept) == pytest.approx((50.0, 100.0))
    assert (fit.time_fit.slope, fit.time_fit.intercept) == pytest.approx((30000.0, 20000.0))
    assert trace.migration_table([fit]).rows[0][-4:] == ("50.0", "100.0", "30.0", "20.0")


def test_fit_needs_two_sizes_and_timings(trace_file: Path) -> None:
    fits = {f.run.workload: f for f in trace.migration_fits(trace.load_trace(trace_file))}
    assert fits["stream"].size_fit is not None and fits["stream"].time_fit is None
    assert fits["random_page"].size_fit is None  # one batch: no line


# --- Fig. 7 -----------------------------------------------------------------------------------


def test_transfer_share(timed_file: Path, trace_file: Path) -> None:
    (share,) = trace.transfer_shares(trace.load_trace(timed_file))
    assert share.shares == pytest.approx([0.1, 20000 / 70000, 0.1, 0.1, 0.1])
    assert share.median == pytest.approx(0.1)
    assert share.max == pytest.approx(20000 / 70000)
    assert share.under_mark == 0.8
    assert share.management_share == pytest.approx(1_004_000 / 1_130_000)
    assert trace.transfer_shares(trace.load_trace(trace_file)) == []
    assert trace.transfer_figure(trace.load_trace(trace_file)) is None


# --- Fig. 8 -----------------------------------------------------------------------------------


def test_batch_sizes_over_time_or_batch_index(timed_file: Path, trace_file: Path) -> None:
    figure = trace.batch_sizes_figure(trace.load_trace(timed_file))
    assert figure is not None
    raw, unique = figure.axes
    assert unique.get_xlabel() == "time since the first batch (ms)"
    assert list(raw.lines[0].get_xdata()) == [0.0, 0.06, 0.15, 0.6, 0.8]
    assert list(raw.lines[0].get_ydata()) == [256, 256, 200, 256, 100]
    assert list(unique.lines[0].get_ydata()) == [128, 256, 64, 64, 100]
    figure = trace.batch_sizes_figure(trace.load_trace(trace_file))
    assert figure is not None and figure.axes[1].get_xlabel() == "batch"
    assert list(figure.axes[0].lines[0].get_xdata()) == [0.0, 1.0]


# --- Fig. 9 -----------------------------------------------------------------------------------


def test_batch_size_sweep(sweep_file: Path) -> None:
    (sweep,) = trace.batch_size_sweeps(trace.load_trace(sweep_file))
    assert (sweep.workload, sweep.cache_fraction, sweep.prefetch, sweep.timed) == ("stream", 1.0, True, False)
    assert [(p.batch_limit, p.batches, p.mean_unique_faults) for p in sweep.points] == [
        (64, 4, 60.0),
        (128, 2, 120.0),
        (256, 1, 200.0),
    ]
    assert sweep.points[0].duplicate_share == pytest.approx(4 / 64)
    assert trace.sweep_table([sweep]).rows[1] == ("stream", "100%", "on", "128", "2", "120.0", "6.2%", "-")


def test_timed_sweep_totals_service_time(tmp_path: Path) -> None:
    batches = load(with_durations(SWEEP, {64: 1000, 128: 1500, 256: 3000}), tmp_path)
    (sweep,) = trace.batch_size_sweeps(batches)
    assert sweep.timed
    assert [p.total_ns for p in sweep.points] == [4000, 3000, 3000]
    figure = trace.sweep_figure(batches)
    assert figure is not None and len(figure.axes) == 3  # batches, unique faults, service time


def test_no_sweep_without_two_batch_limits(trace_file: Path) -> None:
    assert trace.batch_size_sweeps(trace.load_trace(trace_file)) == []
    assert trace.sweep_figure(trace.load_trace(trace_file)) is None


# --- Fig. 14 ----------------------------------------------------------------------------------


def test_prefetch_comparison(sweep_file: Path) -> None:
    (c,) = trace.prefetch_comparisons(trace.load_trace(sweep_file))
    assert (c.workload, c.cache_fraction, c.batch_limit) == ("stream", 1.0, 256)
    assert (c.off.batches, c.off.faults, c.off.unique_faults, c.off.pages_migrated) == (2, 312, 256, 256)
    assert (c.on.batches, c.on.faults, c.on.pages_migrated, c.on.pages_prefetched) == (1, 256, 512, 312)
    assert c.batch_reduction == 0.5
    off, on = trace.prefetch_table([c]).rows
    assert off[3:6] == ("off", "2", "312") and on[3:5] == ("on", "1") and on[-1] == "50.0%"


# --- Figs. 12-13 ------------------------------------------------------------------------------


def test_cost_levels_split_at_jumps() -> None:
    assert trace.cost_levels([10, 11, 30, 12, 31, 100]) == [[10, 11, 12], [30, 31], [100]]
    assert trace.cost_levels([0, 0, 5, 6]) == [[0, 0], [5, 6]]
    assert trace.cost_levels([]) == []


def test_eviction_cost_levels_timed(timed_file: Path) -> None:
    (e,) = trace.eviction_costs(trace.load_trace(timed_file))
    assert e.timed and e.unit == "us"
    assert sorted(e.without) == [50000, 70000]
    assert sorted(e.with_eviction) == [190000, 400000, 420000]
    assert [(lv.chunks_evicted, lv.batches, lv.low, lv.median, lv.high) for lv in e.levels] == [
        (0, 2, 50000, 60000, 70000),
        (1, 1, 190000, 190000, 190000),
        (1, 2, 400000, 410000, 420000),
    ]
    split = trace.eviction_split_table([e]).rows[0]
    assert split[4:] == ("service time", "2", "60.0 us", "3", "400.0 us", "6.67x")
    levels = trace.level_table([e]).rows
    assert [row[4:7] for row in levels] == [("0", "1", "2"), ("1", "1", "1"), ("1", "2", "2")]


def test_eviction_cost_untimed_counts_pages_moved(trace_file: Path) -> None:
    (e,) = trace.eviction_costs(trace.load_trace(trace_file))  # only random_page evicted
    assert e.run.workload == "random_page" and not e.timed
    assert e.without == [] and e.with_eviction == [800.0]
    assert [(lv.chunks_evicted, lv.median) for lv in e.levels] == [(2, 800.0)]
    assert trace.eviction_split_table([e]).rows[0][-3:] == ("1", "800 pages", "-")


# --- the command ------------------------------------------------------------------------------


def test_cli_untimed_trace_skips_what_needs_time(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = CliRunner(env={"COLUMNS": "250"}).invoke(app, ["trace", str(trace_file), "--out", str(out)])
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
    sweep = write_trace(tmp_path / "sweep.csv", with_durations(SWEEP, {64: 1000, 128: 1500, 256: 3000}))
    out = tmp_path / "report"
    result = CliRunner(env={"COLUMNS": "250"}).invoke(
        app, ["trace", str(timed_file), str(sweep), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "skipped" not in result.output
    for name in ALL_PLOTS:
        assert (out / name).stat().st_size > 10_000, name
    summary = (out / "summary.md").read_text(encoding="utf-8")
    for title in ("Fig. 6", "Table 3", "Fig. 7", "Fig. 9", "Fig. 14", "Figs. 12-13"):
        assert f"## {title}" in summary
    assert "Not shown" not in summary


def test_cli_rejects_a_run_split_over_files(trace_file: Path, tmp_path: Path) -> None:
    copy = write_trace(tmp_path / "copy.csv", UNTIMED)
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
    source = Path(__file__).resolve().parents[2] / "src" / "sim" / "warpvm_sim.cpp"
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


def test_eviction_columns_are_read_and_split_management(tmp_path: Path) -> None:
    path = tmp_path / "evict.csv"
    path.write_text(
        HEADER
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
    path.write_text(HEADER + "rmw,0.25,256,1,0,10,10,2,10,0,1,512,0,1000,600,0,0,500\n")
    with pytest.raises(ResultsError, match="eviction_ns"):
        trace.load_trace(path)

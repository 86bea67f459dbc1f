"""The analyses of batch traces, one section per table or figure of the study."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SWEEP_TRACE, with_durations, write_trace

from warpvm import trace


def load(body: str, tmp_path: Path) -> list[trace.Batch]:
    return trace.load_trace(write_trace(tmp_path / "t.csv", body))


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
    batches = load(with_durations(SWEEP_TRACE, {64: 1000, 128: 1500, 256: 3000}), tmp_path)
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

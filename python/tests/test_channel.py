"""Channel cases (warpvm-channel-bench records): grouping, the comparisons, report output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import record, write_jsonl
from typer.testing import CliRunner

from warpvm.channel import channel_cases, channel_markdown
from warpvm.cli import app
from warpvm.plots import channel_figure
from warpvm.results import load_records


def channel_record(workload: str, mode: str, seconds: float, **fields: Any) -> dict[str, Any]:
    base = record(
        suite="channel",
        workload=workload,
        mode=mode,
        policy="-",
        cache_fraction=1.0,
        seconds=seconds,
        consumer_threads=33792.0,
        compute_iters=500000,
        producer_cpu=-1,
        overlap_efficiency=0.5,
        wait_share=0.9,
        compute_slowdown=1.01,
        publish_us=0.05,
    )
    return base | fields


def tiles_run(**fields: Any) -> list[dict[str, Any]]:
    times = {"channel": 0.0099, "pinned_flag": 0.0115, "naive": 0.0110, "atomic_wait": 0.0120}
    return [channel_record("tiles", mode, s, **fields) for mode, s in times.items()]


def load(tmp_path: Path, rows: list[dict[str, Any]]):
    return load_records([write_jsonl(tmp_path / "channel.jsonl", rows)])


def test_cases_split_by_configuration_and_keep_each_modes_latest_record(tmp_path: Path) -> None:
    rows = [
        *tiles_run(),
        *tiles_run(consumer_threads=1024.0),
        channel_record("tiles", "channel", 0.0105),  # a later run of the first case's channel
        channel_record("tiles", "channel", 0.0093, producer_cpu=2, monitor_cpu=6),
    ]
    cases = channel_cases(load(tmp_path, rows))
    assert [c.label for c in cases] == [
        "tiles on NVIDIA H200 (consumer_threads 33792, compute_iters 500000, producer_cpu -1)",
        "tiles on NVIDIA H200 (consumer_threads 1024, compute_iters 500000, producer_cpu -1)",
        "tiles on NVIDIA H200 (consumer_threads 33792, compute_iters 500000, producer_cpu 2)",
    ]
    assert cases[0].seconds("channel") == 0.0105
    assert cases[0].best_baseline() == ("naive", 0.0110)
    assert cases[2].best_baseline() is None  # only the channel ran with the threads pinned


def test_gpu_pair_workloads_split_by_their_size(tmp_path: Path) -> None:
    def pair_run(workload: str, **size: float) -> list[dict[str, Any]]:
        times = {"channel_direct": 0.0016, "peer_flag": 0.0015, "naive": 0.0100}
        return [channel_record(workload, mode, s, gpus=2, **size) for mode, s in times.items()]

    rows = [
        *pair_run("gemm2gpu", gemm_side=2048),
        *pair_run("gemm2gpu", gemm_side=4096),
        *pair_run("bfs2gpu", bfs_scale=21),
        *pair_run("bfs2gpu", bfs_scale=14),
        *pair_run("bitonic2gpu", bitonic_keys=1 << 24),
        *pair_run("bitonic2gpu", bitonic_keys=1 << 27),
    ]
    cases = channel_cases(load(tmp_path, rows))
    size_fields = ("gemm_side", "bfs_scale", "bitonic_keys")
    sizes = [(c.workload, [v for k, v in c.settings if k in size_fields]) for c in cases]
    assert sizes == [
        ("gemm2gpu", [2048]),
        ("gemm2gpu", [4096]),
        ("bfs2gpu", [21]),
        ("bfs2gpu", [14]),
        ("bitonic2gpu", [1 << 24]),
        ("bitonic2gpu", [1 << 27]),
    ]
    assert all(list(c.records) == ["channel_direct", "peer_flag", "naive"] for c in cases)


def test_a_pinned_monitor_is_a_row_of_its_own_beside_the_os_placed_one(tmp_path: Path) -> None:
    rows = [*tiles_run(), channel_record("tiles", "channel", 0.0093, monitor_cpu=6)]
    rows[0] |= {"monitor_cpu": -1}  # the bench records -1 for a monitor the OS placed
    (case,) = channel_cases(load(tmp_path, rows))
    assert list(case.records) == [
        "channel",
        "pinned_flag",
        "naive",
        "atomic_wait",
        "channel (monitor on CPU 6)",
    ]
    assert case.seconds("channel") == 0.0099
    assert case.records["channel (monitor on CPU 6)"].seconds == 0.0093
    assert case.best_baseline() == ("naive", 0.0110)


def test_the_library_modes_are_never_the_best_baseline(tmp_path: Path) -> None:
    rows = [
        *tiles_run(),
        channel_record("tiles", "channel_direct", 0.0050),
        channel_record("tiles", "channel_warp", 0.0060),
    ]
    (case,) = channel_cases(load(tmp_path, rows))
    assert case.seconds("channel_direct") == 0.0050
    assert case.seconds("channel_warp") == 0.0060
    assert case.best_baseline() == ("naive", 0.0110)


def test_case_table_compares_with_naive_and_the_best_baseline(tmp_path: Path) -> None:
    rows = tiles_run()
    rows[0] |= {"monitor_cpu": 6}
    markdown = channel_markdown(load(tmp_path, rows))
    heading = "### tiles on NVIDIA H200 (consumer_threads 33792, compute_iters 500000, producer_cpu -1)"
    assert f"{heading}: best baseline naive" in markdown
    lines = {
        line.split(" | ")[0].lstrip("| "): line for line in markdown.splitlines() if line.startswith("| ")
    }
    channel = lines["channel (monitor on CPU 6)"]
    assert "| 9.90 | 1.11x | 0.90x |" in channel  # 11.0 / 9.9 over naive; 9.9 / 11.0 of the best
    assert "| 0.50 | 0.90 | 1.010 | 0.050 | yes |" in channel
    assert "| 1.00x | 1.00x |" in lines["naive"]
    assert "| 12.00 | 0.92x | 1.09x |" in lines["atomic_wait"]  # 11.0 / 12.0; 12.0 / 11.0


def test_no_channel_records_no_section(tmp_path: Path) -> None:
    assert channel_markdown(load(tmp_path, [record()])) == ""


def test_report_includes_the_channel_section(tmp_path: Path) -> None:
    rows = [*tiles_run(), *tiles_run(consumer_threads=1024.0), *tiles_run(monitor_cpu=6)]
    results = write_jsonl(tmp_path / "channel.jsonl", rows)
    result = CliRunner().invoke(app, ["report", str(results), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "## Producer/consumer channels (warpvm-channel-bench)" in summary
    assert "12 points from 12 records" in summary, "configurations are points of their own in the summary"
    assert summary.count("| tiles | channel |") == 3


def test_channel_figure_has_a_bar_per_mode_of_each_case_and_none_without_a_baseline(tmp_path: Path) -> None:
    rows = [*tiles_run(), channel_record("tiles", "channel_direct", 0.0050, consumer_threads=1024.0)]
    figure = channel_figure(load(tmp_path, rows))
    assert figure is not None
    (ax,) = figure.axes
    heights = sorted(round(p.get_height(), 4) for p in ax.patches)
    best = 0.0110  # naive, the fastest polling baseline of the first case
    assert heights == sorted(round(s / best, 4) for s in (0.0099, 0.0115, 0.0110, 0.0120))
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "tiles\n(consumer_threads 33792, compute_iters 500000, producer_cpu -1)"
    ]
    only_library = load(tmp_path, [channel_record("tiles", "channel", 0.0099)])
    assert channel_figure(only_library) is None

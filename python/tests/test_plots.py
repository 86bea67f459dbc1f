"""Plots written from sample records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import record, sample_records, sim_record, write_jsonl

from warpvm import plots
from warpvm.results import Record, load_records

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
Plot = Callable[[list[Record], Path], Path | None]
ALL_PLOTS = [
    plots.plot_bandwidth,
    plots.plot_cache_sweep,
    plots.plot_bytes_moved,
    plots.plot_speedup,
    plots.plot_oversubscription,
]


def _records(tmp_path: Path, raw: list[dict]) -> list[Record]:
    return load_records([write_jsonl(tmp_path / "r.jsonl", raw)])


@pytest.mark.parametrize("plot", ALL_PLOTS)
def test_plot_writes_a_png(plot: Plot, tmp_path: Path) -> None:
    path = tmp_path / "plot.png"
    assert plot(_records(tmp_path, sample_records()), path) == path
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


@pytest.mark.parametrize("plot", ALL_PLOTS)
def test_plot_with_several_devices(plot: Plot, tmp_path: Path) -> None:
    raw = sample_records() + [
        record(device="NVIDIA H100", useful_gbps=30.0),
        record(device="NVIDIA H100", mode="uvm"),
    ]
    path = tmp_path / "plot.png"
    assert plot(_records(tmp_path, raw), path) == path
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_simulated_records_give_only_the_bytes_moved_plot(tmp_path: Path) -> None:
    sim = _records(tmp_path, [sim_record(), sim_record(cache_fraction=0.5, bytes_moved=2**31)])
    assert plots.plot_bandwidth(sim, tmp_path / "a.png") is None
    assert plots.plot_cache_sweep(sim, tmp_path / "b.png") is None
    assert plots.plot_bytes_moved(sim, tmp_path / "c.png") == tmp_path / "c.png"
    assert not (tmp_path / "a.png").exists() and not (tmp_path / "b.png").exists()


def test_no_bytes_moved_plot_without_bytes_moved(tmp_path: Path) -> None:
    timed = _records(tmp_path, [record(mode="uvm", bytes_moved=None, faults=None)])
    assert plots.plot_bytes_moved(timed, tmp_path / "c.png") is None
    assert plots.plot_cache_sweep(timed, tmp_path / "b.png") is None
    assert plots.plot_bandwidth(timed, tmp_path / "a.png") == tmp_path / "a.png"


def test_bandwidth_figure_labels(tmp_path: Path) -> None:
    figure = plots.bandwidth_figure(_records(tmp_path, sample_records()))
    assert figure is not None
    ax = figure.axes[0]
    assert "NVIDIA H200" in ax.get_title()
    assert ax.get_ylabel() == "useful bandwidth (GB/s)" and ax.get_xlabel() == "workload"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["stream", "random_page", "sparse_read"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["explicit", "zero_copy", "uvm", "warpvm", "warpvm_remote"]
    heights = sorted(round(bar.get_height(), 2) for bar in ax.patches)
    assert 52.0 in heights and 51.1 not in heights  # warpvm at its largest cache only


def test_cache_sweep_figure_lines(tmp_path: Path) -> None:
    figure = plots.cache_sweep_figure(_records(tmp_path, sample_records()))
    assert figure is not None
    ax = figure.axes[0]
    assert "NVIDIA H200" in ax.get_title()
    assert ax.get_xlabel() == "cache = % of data" and "GB/s" in ax.get_ylabel()
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert sorted(lines) == ["random_page: warpvm", "stream: explicit", "stream: warpvm", "stream: zero_copy"]
    assert list(lines["stream: warpvm"].get_xdata()) == [25.0, 50.0, 100.0]
    assert list(lines["stream: zero_copy"].get_ydata()) == [42.95, 42.95]
    assert lines["stream: zero_copy"].get_linestyle() == "--"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["25%", "50%", "100%"]


def test_bytes_moved_figure_amplification(tmp_path: Path) -> None:
    figure = plots.bytes_moved_figure(_records(tmp_path, sample_records()))
    assert figure is not None
    assert "NVIDIA H200" in figure.get_suptitle() and "cpu-simulator" in figure.get_suptitle()
    by_workload = {ax.get_ylabel(): ax for ax in figure.axes}
    assert list(by_workload) == ["stream", "random_page", "sparse_read"]
    random_page = by_workload["random_page"]
    assert [t.get_text() for t in random_page.get_yticklabels()] == ["warpvm 100%", "warpvm 50%"]
    assert [bar.get_width() for bar in random_page.patches] == [1.0, 2.0]
    assert "bytes moved / useful bytes" in figure.axes[-1].get_xlabel()
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend == [
        "explicit (NVIDIA H200)",
        "warpvm (NVIDIA H200)",
        "warpvm_remote (NVIDIA H200)",
        "warpvm_sim (cpu-simulator)",
    ]


def _app_records() -> list[dict]:
    """BFS from two roots (the median time counts) and a CC point, in UVM and two warpvm caches."""
    bfs = {"suite": "graph", "workload": "bfs", "dataset_bytes": 8 * 2**30, "useful_bytes": 8 * 2**30}
    cc = bfs | {"workload": "cc"}
    return [
        record(**bfs, mode="uvm", cache_fraction=0.0, seconds=1.2, root=1),
        record(**bfs, mode="uvm", cache_fraction=0.0, seconds=1.6, root=2),
        record(**bfs, mode="warpvm", cache_fraction=1.0, seconds=0.4, root=1),
        record(**bfs, mode="warpvm", cache_fraction=1.0, seconds=0.4, root=2),
        record(**bfs, mode="warpvm", cache_fraction=0.25, seconds=1.0, root=1),
        record(**bfs, mode="warpvm", cache_fraction=0.25, seconds=1.0, root=2),
        record(**cc, mode="uvm", cache_fraction=0.0, seconds=3.0),
        record(**cc, mode="zero_copy", cache_fraction=0.0, seconds=1.5),
    ]


def test_speedup_figure_uses_median_times_and_the_largest_cache(tmp_path: Path) -> None:
    figure = plots.speedup_figure(_records(tmp_path, _app_records()))
    assert figure is not None
    ax = figure.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["bfs", "cc"]
    assert "speed-up over UVM" in ax.get_ylabel()
    heights = [round(bar.get_height(), 3) for bar in ax.patches]
    assert heights == [3.5, 2.0]  # bfs: median UVM 1.4 s / 0.4 s at cache 100%; cc: 3.0 / 1.5
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["warpvm", "zero_copy"]


def test_oversubscription_figure_slowdown_per_mode(tmp_path: Path) -> None:
    figure = plots.oversubscription_figure(_records(tmp_path, _app_records()))
    assert figure is not None
    ax = figure.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("2x")}
    assert list(lines) == ["bfs warpvm"]
    assert list(lines["bfs warpvm"].get_xdata()) == [1.0, 4.0]
    assert list(lines["bfs warpvm"].get_ydata()) == [1.0, 2.5]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1x", "4x"]


def test_no_app_plots_without_a_baseline_or_a_sweep(tmp_path: Path) -> None:
    only_warpvm = _records(tmp_path, [record(cache_fraction=1.0)])
    assert plots.plot_speedup(only_warpvm, tmp_path / "s.png") is None
    assert plots.plot_oversubscription(only_warpvm, tmp_path / "o.png") is None

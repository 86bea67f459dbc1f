"""Placement cases (warpvm-placement-bench records): grouping, the issue's targets, report output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import GiB, record, write_jsonl

from warpvm import plots
from warpvm.placement import arithmetic_and_geometric_mean, placement_cases, placement_markdown, scale_of
from warpvm.results import load_records, parse_line

# Seconds per (workload, policy) of one made-up 4-GPU run: OASIS wins gemm, trails conv2d by 10%.
SECONDS = {
    "gemm": {"on_touch": 5.0, "access_counter": 5.0, "duplication": 4.0, "oasis": 1.0},
    "conv2d": {"on_touch": 0.4, "access_counter": 0.5, "duplication": 0.15, "oasis": 0.2},
}


def placement_record(workload: str, mode: str, seconds: float, **fields: Any) -> dict[str, Any]:
    base = record(
        suite="placement",
        workload=workload,
        mode=mode,
        policy=mode,
        cache_fraction=1.0,
        dataset_bytes=GiB - 2**20,
        seconds=seconds,
        gpus=4,
        counter_threshold=256,
    )
    return base | fields


def run_records(**fields: Any) -> list[dict[str, Any]]:
    return [placement_record(w, p, s, **fields) for w, times in SECONDS.items() for p, s in times.items()]


def test_scale_is_the_requested_size_or_the_nearest_power_of_two() -> None:
    def scale(**fields: Any) -> int:
        return scale_of(parse_line(json.dumps(placement_record("gemm", "oasis", 1.0, **fields)), "x", 1))

    assert scale() == GiB  # 1 GiB - 1 MiB: a tiled shape just under --bytes
    assert scale(dataset_bytes=int(1.13 * GiB)) == GiB  # an R-MAT scale over it
    assert scale(requested_mib=1536.0) == 3 * GiB // 2


def test_cases_split_by_gpu_count_size_and_counter_threshold(tmp_path: Path) -> None:
    raw = run_records() + run_records(gpus=2) + run_records(dataset_bytes=2 * GiB)
    raw += [placement_record("gemm", "oasis", 0.9, counter_threshold=1024)]
    raw += [placement_record("gemm", "oasis", 7.0, policy="oasis_reset4")]  # a sensitivity point: left out
    cases = placement_cases(load_records([write_jsonl(tmp_path / "r.jsonl", raw)]))
    assert [(c.gpus, c.scale_bytes, c.counter_threshold) for c in cases] == [
        (4, GiB, 256),
        (2, GiB, 256),
        (4, 2 * GiB, 256),
        (4, GiB, 1024),
    ]
    assert cases[0].seconds == SECONDS
    assert cases[3].oasis_speedup_over("on_touch") == {}


def test_runs_placed_on_the_gpus_form_cases_of_their_own(tmp_path: Path) -> None:
    placed = [r | {"policy": f"{r['mode']}_gpu_interleaved"} for r in run_records()]
    placed[0]["seconds"] = 9.0  # gemm on_touch, placed: not the host case's 5.0
    uvm = [uvm_record("gemm", "uvm", 3.0)]
    raw = run_records() + placed + uvm + [placement_record("gemm", "oasis", 7.0, policy="oasis_gpu_rows")]
    records = load_records([write_jsonl(tmp_path / "r.jsonl", raw)])
    cases = placement_cases(records)
    assert [c.initial_placement for c in cases] == ["host", "gpu_interleaved"]
    host, interleaved = cases
    assert host.seconds["gemm"]["on_touch"] == 5.0 and host.seconds["gemm"]["uvm"] == 3.0
    # No uvm column: real UVM always starts on the host.
    assert interleaved.seconds["gemm"] == SECONDS["gemm"] | {"on_touch": 9.0}
    assert interleaved.oasis_speedup_over("on_touch") == pytest.approx({"gemm": 9.0, "conv2d": 2.0})
    text = placement_markdown(records)
    assert "### NVIDIA H200 x4, 1.00 GiB per workload, counter threshold 256\n" in text
    interleaved_heading = "counter threshold 256, pages first on the GPUs (interleaved)"
    assert f"### NVIDIA H200 x4, 1.00 GiB per workload, {interleaved_heading}\n" in text


def test_the_latest_record_of_a_point_wins(tmp_path: Path) -> None:
    raw = run_records() + [placement_record("conv2d", "oasis", 0.1)]
    (case,) = placement_cases(load_records([write_jsonl(tmp_path / "r.jsonl", raw)]))
    assert case.seconds["conv2d"]["oasis"] == 0.1


def test_targets_against_on_touch_and_the_best_uniform_policy(tmp_path: Path) -> None:
    (case,) = placement_cases(load_records([write_jsonl(tmp_path / "r.jsonl", run_records())]))
    assert case.oasis_speedup_over("on_touch") == pytest.approx({"gemm": 5.0, "conv2d": 2.0})
    assert case.oasis_against_best_uniform() == {
        "gemm": ("duplication", pytest.approx(4.0)),
        "conv2d": ("duplication", pytest.approx(0.75)),
    }
    arithmetic, geometric = arithmetic_and_geometric_mean([5.0, 2.0])
    assert arithmetic == pytest.approx(3.5) and geometric == pytest.approx(10**0.5)


def test_markdown_has_a_table_and_the_verdicts(tmp_path: Path) -> None:
    text = placement_markdown(load_records([write_jsonl(tmp_path / "r.jsonl", run_records())]))
    assert "### NVIDIA H200 x4, 1.00 GiB per workload, counter threshold 256" in text
    assert "| gemm | 1023.00 MiB | 5.0000 | 5.0000 | 4.0000 | 1.0000 | 5.00x | 4.000 (duplication) |" in text
    assert "OASIS over on-touch, 2 workloads: 3.50x arithmetic mean (+250%), 3.16x geometric mean." in text
    assert "Worst against the best uniform policy: conv2d, OASIS at 0.750x of duplication's speed" in text
    assert "(25.0% below it; its time 1.333x)" in text


def uvm_record(workload: str, mode: str, seconds: float, **fields: Any) -> dict[str, Any]:
    """A real-UVM point: the bench records no counter threshold for it."""
    base = placement_record(workload, mode, seconds, **fields)
    del base["counter_threshold"]
    return base


def test_uvm_runs_join_every_case_of_their_point_as_extra_columns(tmp_path: Path) -> None:
    raw = run_records() + run_records(counter_threshold=1024) + run_records(gpus=2)
    raw += [uvm_record("gemm", "uvm", 8.0), uvm_record("gemm", "uvm_read_mostly", 2.0)]
    raw += [uvm_record("gemm", "uvm_accessed_by", 9.0, gpus=8)]  # no warpvm case at 8 GPUs: one of its own
    records = load_records([write_jsonl(tmp_path / "r.jsonl", raw)])
    cases = placement_cases(records)
    assert [(c.gpus, c.counter_threshold) for c in cases] == [(4, 256), (4, 1024), (2, 256), (8, None)]
    for case in cases[:2]:
        assert case.seconds["gemm"] == SECONDS["gemm"] | {"uvm": 8.0, "uvm_read_mostly": 2.0}
        assert case.policies[-2:] == ("uvm", "uvm_read_mostly")
        assert case.oasis_speedup_over("on_touch") == pytest.approx({"gemm": 5.0, "conv2d": 2.0})
    assert cases[2].policies == ("on_touch", "access_counter", "duplication", "oasis")
    assert cases[3].seconds == {"gemm": {"uvm_accessed_by": 9.0}}
    text = placement_markdown(records)
    uvm_columns = "| uvm s | uvm_read_mostly s | oasis vs on_touch |"
    assert uvm_columns in text
    assert "| gemm | 1023.00 MiB | 5.0000 | 5.0000 | 4.0000 | 1.0000 | 8.0000 | 2.0000 | 5.00x |" in text
    assert "| conv2d | 1023.00 MiB | 0.4000 | 0.5000 | 0.1500 | 0.2000 | - | - | 2.00x |" in text
    assert "| gemm | 1023.00 MiB | - | - | - | - | 9.0000 | - | - |" in text
    figure = plots.placement_figure(records)
    assert figure is not None and len(figure.axes) == 3  # the 8-GPU case timed no on-touch


def test_no_placement_section_or_plot_without_placement_records(tmp_path: Path) -> None:
    records = load_records([write_jsonl(tmp_path / "r.jsonl", [record()])])
    assert placement_markdown(records) == ""
    assert plots.plot_placement(records, tmp_path / "p.png") is None


def test_placement_plot_has_a_panel_per_case(tmp_path: Path) -> None:
    raw = run_records() + run_records(gpus=2)
    figure = plots.placement_figure(load_records([write_jsonl(tmp_path / "r.jsonl", raw)]))
    assert figure is not None
    assert [ax.get_title() for ax in figure.axes] == [
        "NVIDIA H200 x4, 1.00 GiB per workload, counter threshold 256",
        "NVIDIA H200 x2, 1.00 GiB per workload, counter threshold 256",
    ]
    path = tmp_path / "p.png"
    assert plots.plot_placement(load_records([tmp_path / "r.jsonl"]), path) == path

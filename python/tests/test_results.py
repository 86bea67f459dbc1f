"""Loading, validating and summarising records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import GiB, record, sample_records, sim_record, write_jsonl

from warpvm.results import (
    ResultsError,
    format_bytes,
    format_fraction,
    format_rate,
    group_by_device,
    latest_points,
    load_records,
    markdown_summary,
    measured_rows,
    measured_table,
    parse_line,
    simulated_table,
    summary_tables,
    write_parquet,
)


def test_load_valid_lines_skipping_blank_ones(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("\n" + json.dumps(record()) + "\n   \n" + json.dumps(sim_record()) + "\n\n")
    first, second = load_records([path])
    assert (first.workload, first.mode, first.cache_fraction) == ("stream", "warpvm", 0.5)
    assert first.dataset_bytes == 4 * GiB and isinstance(first.dataset_bytes, int)
    assert first.seconds == pytest.approx(0.0841) and first.useful_gbps == pytest.approx(51.10)
    assert first.verified is True and not first.simulated
    assert first.extra["seconds_all"] == [0.0841, 0.0842, 0.0840]
    assert first.amplification == 1.0
    assert second.simulated and second.seconds is None and second.verified is True


def test_records_from_several_files_keep_order(tmp_path: Path) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [record(mode="uvm")])
    b = write_jsonl(tmp_path / "b.jsonl", [record(mode="explicit"), record(mode="zero_copy")])
    assert [r.mode for r in load_records([a, b])] == ["uvm", "explicit", "zero_copy"]


def test_malformed_json_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record()) + "\n\n" + '{"suite": "paging", "workload":\n')
    with pytest.raises(ResultsError, match=rf"^{path}:3: malformed JSON"):
        load_records([path])


def test_missing_field_error_names_line_and_fields(tmp_path: Path) -> None:
    incomplete = record()
    del incomplete["device"], incomplete["useful_bytes"]
    path = write_jsonl(tmp_path / "r.jsonl", [record(), incomplete])
    with pytest.raises(ResultsError) as error:
        load_records([path])
    assert str(error.value) == f"{path}:2: missing required field(s): useful_bytes, device"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("faults", "many", "field 'faults' should be int"),
        ("dataset_bytes", 1.5, "field 'dataset_bytes' should be an integer"),
        ("device", None, "field 'device' is null"),
        ("cache_fraction", True, "field 'cache_fraction' should be number"),
    ],
)
def test_wrongly_typed_field(field: str, value: object, message: str) -> None:
    with pytest.raises(ResultsError, match=rf"^x.jsonl:7: {message}"):
        parse_line(json.dumps(record(**{field: value})), "x.jsonl", 7)


def test_not_an_object() -> None:
    with pytest.raises(ResultsError, match="x:1: expected a JSON object, got list"):
        parse_line("[1, 2]", "x", 1)


def test_integral_floats_are_accepted_as_counts() -> None:
    assert parse_line(json.dumps(record(faults=12.0)), "x", 1).faults == 12


def test_speedup_over_uvm_of_the_same_workload_and_size() -> None:
    raw = [
        record(mode="uvm", useful_gbps=10.0),
        record(mode="explicit", useful_gbps=20.0),
        record(mode="warpvm", useful_gbps=25.0),
        record(mode="warpvm_remote", useful_gbps=5.0),
        record(workload="vadd", mode="warpvm", useful_gbps=30.0),  # no uvm point for vadd
        record(mode="warpvm", useful_gbps=30.0, dataset_bytes=GiB),  # another size
        record(mode="warpvm", useful_gbps=40.0, device="NVIDIA H100"),  # another device
    ]
    records = [parse_line(json.dumps(r), "x", i) for i, r in enumerate(raw, 1)]
    speedups = [(row.record.workload, row.record.mode, row.speedup_vs_uvm) for row in measured_rows(records)]
    assert speedups == [
        ("stream", "uvm", None),
        ("stream", "explicit", None),
        ("stream", "warpvm", pytest.approx(2.5)),
        ("stream", "warpvm_remote", pytest.approx(0.5)),
        ("stream", "warpvm", None),
        ("stream", "warpvm", None),
        ("vadd", "warpvm", None),
    ]


def test_measured_table_cells(records_file: Path) -> None:
    table = measured_table(load_records([records_file]), "t")
    rows = {(row[0], row[1], row[2]): row for row in table.rows}
    assert len(rows) == len(table.rows) == 10  # the simulated records are left out
    assert rows["stream", "uvm", "-"][4:] == ("10.00", "-", "-", "yes")
    assert rows["stream", "warpvm", "50%"][4:] == ("51.10", "-", "5.11x", "yes")
    assert rows["random_page", "warpvm", "100%"][4:] == ("10.00", "2.50 M pages/s", "20.00x", "yes")
    assert rows["random_page", "uvm", "-"][5] == "120.00 k pages/s"
    assert rows["stream", "uvm", "-"][3] == "-"  # no policy
    assert rows["sparse_read", "warpvm_remote", "-"][4:] == ("0.80", "100.00 M reads/s", "-", "NO")
    assert [row[0] for row in table.rows] == ["stream"] * 6 + ["random_page"] * 3 + ["sparse_read"]


def test_simulated_table_cells(records_file: Path) -> None:
    table = simulated_table(load_records([records_file]), "t")
    assert table.rows == [
        ("stream", "warpvm_sim", "100%", "clock", "262,144", "0", "1.00 GiB", "1.00x"),
        ("stream", "warpvm_sim", "50%", "clock", "524,288", "262,144", "2.00 GiB", "2.00x"),
    ]


def test_group_by_device_keeps_first_seen_order() -> None:
    records = [
        parse_line(json.dumps(record(device=d, mode=m)), "x", 1)
        for d, m in [("B", "uvm"), ("A", "uvm"), ("B", "warpvm")]
    ]
    groups = group_by_device(records)
    assert list(groups) == ["B", "A"]
    assert [r.mode for r in groups["B"]] == ["uvm", "warpvm"]


def test_summary_tables_per_device_and_kind(records_file: Path) -> None:
    titles = [t.title for t in summary_tables(load_records([records_file]))]
    assert titles == [
        "NVIDIA H200: measured (useful GB/s, median of repeats)",
        "cpu-simulator: simulated (counts, no timings)",
    ]


def test_latest_points_keeps_the_last_record_of_each_point() -> None:
    records = [
        parse_line(json.dumps(record(mode=m, useful_gbps=g)), "x", 1)
        for m, g in [("uvm", 1.0), ("warpvm", 2.0), ("uvm", 3.0)]
    ]
    assert [(r.mode, r.useful_gbps) for r in latest_points(records)] == [("uvm", 3.0), ("warpvm", 2.0)]


def test_frontier_order_and_object_placements_make_points_of_their_own() -> None:
    fields: list[dict[str, int]] = [
        {},
        {"frontier_vertex_order": 0},
        {"frontier_vertex_order": 1},
        {"frontier_vertex_order": 1, "resident_values": 1},
        {"frontier_vertex_order": 1, "migrate_offsets": 1},
        {"frontier_vertex_order": 1, "resident_values": 1},
        {"frontier_vertex_order": 1, "resident_values": 1, "page_bytes": 1024},
        {"frontier_vertex_order": 1, "resident_values": 1, "page_bytes": 1024, "pages_held_per_thread": 1},
        {"frontier_vertex_order": 1, "page_bytes": 4096},  # as the third, which does not say
    ]
    raw = [
        record(workload="cc", mode="warpvm_auto", useful_gbps=float(g), **f) for g, f in enumerate(fields, 1)
    ]
    records = [parse_line(json.dumps(r), "x", i) for i, r in enumerate(raw, 1)]
    points = latest_points(records)
    assert [r.useful_gbps for r in points] == [1.0, 2.0, 9.0, 6.0, 5.0, 7.0, 8.0]
    assert [r.variant for r in points] == [
        "warpvm_auto",
        "warpvm_auto (arrival order)",
        "warpvm_auto",
        "warpvm_auto (resident values)",
        "warpvm_auto (migrate offsets)",
        "warpvm_auto (1 KiB pages, resident values)",
        "warpvm_auto (1 KiB pages, 1 held, resident values)",
    ]
    assert "| cc | warpvm_auto (resident values) |" in markdown_summary(records)


def test_column_products_make_points_of_their_own_and_uvm_baselines_run_the_same_kernels() -> None:
    fields: list[dict[str, int]] = [
        {},  # before c10dedb: one band
        {"column_bands": 9},  # c10dedb
        {"column_tiles": 0, "column_bands": 9},  # the same point, saying so
        {"column_tiles": 1},
    ]
    raw = [
        record(workload="mvt", mode=mode, useful_gbps=float(g), **f)
        for mode in ("uvm", "warpvm")
        for g, f in enumerate(fields, 1)
    ]
    points = latest_points([parse_line(json.dumps(r), "x", i) for i, r in enumerate(raw, 1)])
    assert [(r.variant, r.useful_gbps) for r in points if r.mode == "warpvm"] == [
        ("warpvm", 1.0),
        ("warpvm (9 bands)", 3.0),
        ("warpvm (column tiles)", 4.0),
    ]
    # Each warpvm point over the uvm run of its own kernels: the same rate, so 1x each.
    assert [row.speedup_vs_uvm for row in measured_rows(points) if row.record.mode == "warpvm"] == [
        1.0,
        1.0,
        1.0,
    ]


def test_latest_points_keeps_the_newest_record_whatever_the_file_order() -> None:
    newer = record(mode="warpvm", useful_gbps=2.0, date="2026-11-28T15:54:00Z")
    older = record(mode="warpvm", useful_gbps=1.0, date="2026-11-28T15:40:00Z")
    records = [parse_line(json.dumps(r), "x", i) for i, r in enumerate([newer, older], 1)]
    assert [r.useful_gbps for r in latest_points(records)] == [2.0]


def test_each_bfs_root_is_a_point_with_its_teps() -> None:
    raw = [
        record(workload="bfs", mode="warpvm", useful_gbps=g, root=root, teps=t)
        for g, root, t in [(1.0, 5, 2e9), (2.0, 9, 3e9), (4.0, 5, 4e9)]
    ]
    records = [parse_line(json.dumps(r), "x", i) for i, r in enumerate(raw, 1)]
    points = latest_points(records)
    assert [(r.extra["root"], r.useful_gbps) for r in points] == [(5, 4.0), (9, 2.0)]
    assert [row.rate for row in measured_rows(points)] == [(4e9, "TEPS"), (3e9, "TEPS")]


def test_markdown_summary_grouped_by_device(tmp_path: Path) -> None:
    h100 = [record(device="NVIDIA H100", mode="uvm", useful_gbps=8.0), record(device="NVIDIA H100")]
    path = write_jsonl(tmp_path / "r.jsonl", [*sample_records(), *h100])
    text = markdown_summary(load_records([path]))
    h200_part, h100_part = text.split("## NVIDIA H100")
    assert "## NVIDIA H200" in h200_part and "## cpu-simulator" in h200_part
    assert "| stream | warpvm | 50% | clock | 51.10 | - | 5.11x | yes |" in h200_part
    assert "| sparse_read | warpvm_remote | - | clock | 0.80 | 100.00 M reads/s | - | NO |" in h200_part
    assert "| stream | warpvm | 50% | clock | 51.10 | - | 6.39x | yes |" in h100_part
    assert "|---|---|---:|---|---:|---:|---:|---|" in text
    assert "| stream | warpvm_sim | 50% | clock | 524,288 | 262,144 | 2.00 GiB | 2.00x |" in text
    assert text.startswith("# warpvm results\n\n14 points from 14 records")


def test_formatting() -> None:
    assert format_bytes(3 * 2**29) == "1.50 GiB"
    assert format_bytes(512) == "512 B"
    assert format_fraction(0.125) == "12.5%"
    assert format_fraction(0.0) == "-"
    assert format_rate((2.5e9, "reads/s")) == "2.50 G reads/s"


def test_parquet_needs_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ResultsError, match=r"pip install 'warpvm\[parquet\]'"):
        write_parquet([], tmp_path / "r.parquet")


def test_parquet_round_trip(records_file: Path, tmp_path: Path) -> None:
    parquet = pytest.importorskip("pyarrow.parquet")
    records = load_records([records_file])
    table = parquet.read_table(write_parquet(records, tmp_path / "r.parquet"))
    assert table.num_rows == len(records)
    assert table.column("useful_gbps").to_pylist()[2] == 10.0
    assert table.column("simulated").to_pylist()[-1] is True

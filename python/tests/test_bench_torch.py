"""warpvm bench torch without torch or a GPU: the grid, the ids, the records, the command line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from warpvm import bench_torch, cli, cli_torch, runner
from warpvm.bench_torch import (
    QUICK,
    Context,
    Measurement,
    Point,
    Settings,
    VerificationError,
    batch_ids,
    expand_grid,
    make_record,
    scatter_multiplier,
    zipf_ranks,
)
from warpvm.results import REQUIRED_FIELDS, load_records, parse_line

GiB = 2**30
CONTEXT = Context(device="NVIDIA H100", driver="580.1", commit="abc1234", cache_bytes=GiB, page_bytes=4096)


@pytest.mark.parametrize("exponent", [1.0, 1.2, 0.7])
def test_zipf_ranks_follow_the_zipf_law(exponent: float) -> None:
    rows, count = 40, 400_000
    ranks = zipf_ranks(rows, count, exponent, np.random.default_rng(7))
    law = 1 / np.arange(1, rows + 1) ** exponent
    law /= law.sum()
    seen = np.bincount(ranks, minlength=rows) / count
    assert ranks.min() >= 0 and ranks.max() < rows
    # Four standard deviations of a binomial frequency at the hottest rank.
    assert np.abs(seen - law).max() < 4 * np.sqrt(law[0] * (1 - law[0]) / count)


@pytest.mark.parametrize("rows", [1, 2, 3, 10, 1000, 4096, 999_983])
def test_scatter_is_a_bijection(rows: int) -> None:
    multiplier = scatter_multiplier(rows)
    ranks = np.arange(min(rows, 5000), dtype=np.int64)
    mapped = (ranks * multiplier + 3) % rows
    assert len(np.unique(mapped)) == len(ranks)


def test_zipf_ids_scatter_the_hot_rows() -> None:
    rows = 1 << 20
    ids = batch_ids("zipf1.2", rows, 200_000, seed=3)
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < rows
    values, counts = np.unique(ids, return_counts=True)
    hottest = np.sort(values[np.argsort(counts)[-8:]])
    # The eight hottest rows are spread over the table, not packed at its start.
    assert np.diff(hottest).min() > 1000
    assert counts.max() > 20 * counts.mean()


def test_batches_of_a_table_share_their_hot_rows() -> None:
    hottest = []
    for seed in (1, 2, 3):
        values, counts = np.unique(batch_ids("zipf1.2", 100_000, 50_000, seed), return_counts=True)
        hottest.append(int(values[np.argmax(counts)]))
    assert hottest[0] == hottest[1] == hottest[2]


def test_ids_follow_their_seed() -> None:
    for distribution in ("uniform", "zipf1.0", "zipf1.2"):
        first = batch_ids(distribution, 10_000, 5000, seed=1)
        assert np.array_equal(first, batch_ids(distribution, 10_000, 5000, seed=1))
        assert not np.array_equal(first, batch_ids(distribution, 10_000, 5000, seed=2))


def test_uniform_ids_cover_the_table() -> None:
    ids = batch_ids("uniform", 100, 100_000, seed=5)
    counts = np.bincount(ids, minlength=100)
    assert counts.min() > 800 and counts.max() < 1200


@pytest.mark.parametrize("name", ["zipf", "zipf-1", "zipfx", "normal", "zipf0"])
def test_unknown_distributions_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="unknown id distribution"):
        batch_ids(name, 100, 10, seed=1)


def test_grid_keeps_in_core_modes_in_core_and_groups_tables() -> None:
    points = expand_grid(Settings())
    assert all(p.oversubscription == 0 for p in points if p.mode in ("managed", "device"))
    assert not any(p.mode == "zero_copy" and p.workload == "index_add" for p in points)
    assert all(p.dtype == "float32" for p in points if p.workload != "gather")
    assert {p.oversubscription for p in points if p.workload == "graphsage"} == {0, 4}
    assert {p.op for p in points if p.workload == "call_overhead"} == {"gather", "embedding_bag", "index_add"}
    # Each table's points are together, the in-core table first.
    keys = [p.table_key for p in points]
    assert keys == sorted(keys, key=lambda key: keys.index(key))
    assert len(set(keys)) == len([k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k])
    assert keys[0][0] == 0
    assert len(points) == len(set(points))


def test_gather_grid_has_every_combination() -> None:
    points = expand_grid(Settings(workloads=("gather",)))
    assert len(points) == 2 * 3 * (3 * 3 + 2)  # dtypes x ids x (sizes x 3 modes + 2 in-core modes)


def test_quick_grid_is_smaller() -> None:
    quick = expand_grid(QUICK)
    assert 0 < len(quick) < len(expand_grid(Settings())) / 2
    assert max(p.table_bytes(QUICK.cache_bytes) for p in quick) == 4 * GiB


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"workloads": ("scan",)}, "unknown workload scan"),
        ({"modes": ()}, "unknown mode"),
        ({"ids": ("zipf2",)}, "unknown ids zipf2"),
        ({"dtypes": ("int8",)}, "unknown dtype int8"),
        ({"oversubscriptions": (-1,)}, "oversubscriptions"),
        ({"batch": 1000}, "multiple of the pooling"),
        ({"dim": 6, "dtypes": ("float16",)}, "multiple of 16 bytes"),
    ],
)
def test_settings_refuse_bad_values(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings(**changes)  # type: ignore[arg-type]


def test_table_sizes_follow_the_cache() -> None:
    point = Point("gather", "warpvm", "uniform", 4, "float16", 128, 1 << 20)
    assert point.row_bytes == 256
    assert point.table_bytes(GiB) == 4 * GiB
    in_core = Point("gather", "warpvm", "uniform", 0, "float32", 128, 1 << 20)
    assert in_core.table_bytes(GiB) == GiB // 2


def _measurement(**changes: object) -> Measurement:
    fields: dict[str, object] = {
        "seconds_all": [0.004, 0.002, 0.003],
        "verified": True,
        "useful_bytes": (1 << 20) * 512,
        "rows": 1 << 20,
    }
    return Measurement(**(fields | changes))  # type: ignore[arg-type]


def test_records_carry_the_suite_fields_and_parse_back() -> None:
    point = Point("gather", "warpvm", "zipf1.2", 4, "float32", 128, 1 << 20)
    record = make_record(
        point, _measurement(faults=1000, bytes_moved=4096000), CONTEXT, date="2026-12-07T00:00:00Z"
    )
    data = record.to_dict()
    assert set(REQUIRED_FIELDS) <= set(data)
    assert parse_line(json.dumps(data), "test", 1) == record
    assert data["suite"] == "torch" and data["mode"] == "warpvm"
    assert data["seconds"] == pytest.approx(0.003)
    assert data["time_ms"] == pytest.approx(3.0)
    assert data["useful_gbps"] == pytest.approx((1 << 20) * 512 / 0.003 / 1e9)
    assert data["rows_per_s"] == pytest.approx((1 << 20) / 0.003)
    assert data["cache_fraction"] == pytest.approx(0.25)
    assert data["dataset_bytes"] == 4 * GiB
    assert data["policy"] == "clock-automatic"
    assert (data["ids"], data["oversubscription"], data["dtype"], data["dim"], data["batch"]) == (
        "zipf1.2",
        4,
        "float32",
        128,
        1 << 20,
    )
    assert data["verified"] is True and data["faults"] == 1000
    assert record.variant == "warpvm (zipf1.2, float32, table 4x cache)"


def test_baseline_and_call_overhead_records() -> None:
    cpu = make_record(
        Point("gather", "cpu_gather", "uniform", 0, "float16", 128, 1 << 20), _measurement(), CONTEXT
    )
    assert (cpu.policy, cpu.cache_fraction, cpu.faults) == ("-", 0.0, None)
    assert cpu.variant == "cpu_gather (uniform, float16, in core)"
    call = make_record(
        Point("call_overhead", "warpvm", "uniform", 0, "float32", 128, 64, op="gather"),
        _measurement(seconds_all=[8e-6, 7e-6, 9e-6]),
        CONTEXT,
    )
    assert call.extra["op"] == "gather"
    assert call.extra["call_us"] == pytest.approx(8.0)
    assert call.extra["calls_per_s"] == pytest.approx(125_000)


def test_point_lines() -> None:
    point = Point("gather", "warpvm", "zipf1.2", 4, "float32", 128, 1 << 20)
    record = make_record(point, _measurement(), CONTEXT)
    assert bench_torch.point_line(point, record) == (
        "gather warpvm zipf1.2 float32 4x      3.000 ms    178.96 GB/s  verified"
    )
    call = Point("call_overhead", "device", "uniform", 0, "float32", 128, 64, op="index_add")
    record = make_record(call, _measurement(seconds_all=[6e-6], verified=False), CONTEXT)
    assert (
        bench_torch.point_line(call, record)
        == "call_overhead:index_add device uniform float32 in core      6.00 us/call  NOT VERIFIED"
    )
    assert bench_torch.point_line(call, None).endswith("in core  skipped")


class FakeBench:
    """Measures every point at 1 ms, skips zero_copy, fails a chosen mode's verification."""

    def __init__(self, wrong_mode: str | None = None, unverified_mode: str | None = None) -> None:
        self.context = CONTEXT
        self.closed = False
        self.wrong_mode, self.unverified_mode = wrong_mode, unverified_mode
        self.points: list[Point] = []

    def measure(self, point: Point) -> Measurement | str:
        self.points.append(point)
        if point.mode == "zero_copy":
            return "zero_copy needs cupy, which is not installed"
        if point.mode == self.wrong_mode:
            raise VerificationError("features of node 3 differ from the host's")
        return _measurement(seconds_all=[0.001] * 5, verified=point.mode != self.unverified_mode)

    def close(self) -> None:
        self.closed = True


def test_run_writes_a_record_per_point(tmp_path: Path) -> None:
    points = expand_grid(Settings(workloads=("gather",), ids=("uniform",), dtypes=("float32",)))
    out = tmp_path / "out" / "torch.jsonl"
    outcome = bench_torch.run(points, FakeBench(), out)
    measured = [p for p in points if p.mode != "zero_copy"]
    assert len(outcome.records) == len(measured)
    assert [r.mode for r in load_records([out])] == [p.mode for p in measured]
    assert len(outcome.skipped) == len(points) - len(measured)
    assert outcome.skipped[0].endswith("zero_copy needs cupy, which is not installed")


def test_run_stops_at_its_time_limit(tmp_path: Path) -> None:
    points = expand_grid(Settings(workloads=("gather",)))
    outcome = bench_torch.run(points, FakeBench(), tmp_path / "t.jsonl", timeout=0)
    assert outcome.timed_out and not outcome.records


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[FakeBench]:
    """The command sees a GPU and runs FakeBench; the list gets each bench made."""
    made: list[FakeBench] = []

    def factory(settings: Settings) -> FakeBench:
        made.append(FakeBench())
        made[-1].settings = settings  # type: ignore[attr-defined]
        return made[-1]

    monkeypatch.setattr(runner, "gpu_visible", lambda load=None: True)
    monkeypatch.setattr(cli_torch, "_torch_bench", factory)
    return made


def invoke(*args: str) -> object:
    return CliRunner().invoke(cli.app, ["bench", "torch", *args, "--commit", "abc1234"])


def test_command_runs_the_grid_and_prints_tables(tmp_path: Path, fake_gpu: list[FakeBench]) -> None:
    out = tmp_path / "torch.jsonl"
    result = invoke("--workloads", "gather", "--ids", "zipf1.2", "--dtypes", "float16", "--out", str(out))
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    settings = fake_gpu[0].settings  # type: ignore[attr-defined]
    assert (settings.workloads, settings.ids, settings.dtypes, settings.commit) == (
        ("gather",),
        ("zipf1.2",),
        ("float16",),
        "abc1234",
    )
    assert fake_gpu[0].closed
    records = load_records([out])
    assert {r.workload for r in records} == {"gather"} and len(records) == 3 * 2 + 2
    output = result.output  # type: ignore[attr-defined]
    assert "warpvm (zipf1.2, float16, table 16x cache)" in output
    assert f"{len(records)} records appended to {out}" in output
    assert "skipped gather zero_copy zipf1.2 float16 in core: zero_copy needs cupy" in output
    assert "gather warpvm zipf1.2 float16 16x      1.000 ms" in output


def test_quick_and_sizes_options(tmp_path: Path, fake_gpu: list[FakeBench]) -> None:
    result = invoke(
        "--quick", "--sizes", "4", "--cache", "512MiB", "--repeats", "7", "--out", str(tmp_path / "q")
    )
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    settings = fake_gpu[0].settings  # type: ignore[attr-defined]
    assert settings.oversubscriptions == (4,)
    assert settings.cache_bytes == 512 << 20
    assert settings.repeats == 7
    assert settings.ids == QUICK.ids and settings.dtypes == QUICK.dtypes


def test_unverified_points_fail_the_command(
    tmp_path: Path, fake_gpu: list[FakeBench], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        cli_torch, "_torch_bench", lambda settings: FakeBench(wrong_mode="device", unverified_mode="managed")
    )
    result = invoke("--workloads", "gather", "--sizes", "0", "--ids", "uniform", "--out", str(tmp_path / "u"))
    assert result.exit_code == 1
    assert "error: gather device uniform float32 in core: features of node 3 differ" in result.output  # type: ignore[attr-defined]
    assert "points not verified" in result.output  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sizes", "0,x"], "not a list of whole numbers"),
        (["--sizes", "-4"], "give ratios >= 0"),
        (["--modes", "uvm"], "unknown mode uvm"),
        (["--cache", "2 GiB"], "bad size"),
        (["--batch", "1000"], "multiple of the pooling factor"),
    ],
)
def test_bad_options_are_usage_errors(args: list[str], message: str, fake_gpu: list[FakeBench]) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.output  # type: ignore[attr-defined]
    assert not fake_gpu


def test_without_a_gpu_the_command_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "gpu_visible", lambda load=None: False)
    result = invoke("--out", str(tmp_path / "n.jsonl"))
    assert result.exit_code == runner.NO_GPU_EXIT
    assert "no CUDA GPU visible" in result.output  # type: ignore[attr-defined]
    assert not (tmp_path / "n.jsonl").exists()


class SlowBench(FakeBench):
    def measure(self, point: Point) -> Measurement | str:
        time.sleep(0.2)
        return super().measure(point)


def test_a_run_past_its_time_limit_keeps_its_records(
    tmp_path: Path, fake_gpu: list[FakeBench], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_torch, "_torch_bench", lambda settings: SlowBench())
    out = tmp_path / "t.jsonl"
    result = invoke("--workloads", "gather", "--modes", "warpvm", "--timeout", "0.1", "--out", str(out))
    assert result.exit_code == cli.TIMEOUT_EXIT
    assert "passed its time limit" in result.output  # type: ignore[attr-defined]
    assert len(load_records([out])) == 1


def test_importing_warpvm_imports_no_torch() -> None:
    import subprocess
    import sys

    code = "import sys, warpvm, warpvm.cli, warpvm.bench_torch; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"

"""Finding the binaries, detecting a GPU and streaming a binary's output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import record, write_script

from warpvm import runner
from warpvm.results import Record, ResultsError


def test_check_size() -> None:
    assert runner.check_size("16GiB") == "16GiB"
    assert runner.check_size("1.5MiB") == "1.5MiB"
    assert runner.check_size("4096") == "4096"
    for bad in ("16 GiB", "GiB", "16GB", "-1K"):
        with pytest.raises(ValueError, match="bad size"):
            runner.check_size(bad)


def test_build_dir_from_option_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARPVM_BUILD_DIR", str(tmp_path / "env"))
    assert runner.resolve_build_dir(tmp_path / "opt") == tmp_path / "opt"
    assert runner.resolve_build_dir(None) == tmp_path / "env"
    monkeypatch.delenv("WARPVM_BUILD_DIR")
    assert runner.resolve_build_dir(None).name == "build"


def test_find_binary(tmp_path: Path) -> None:
    script = write_script(tmp_path / "bench" / "warpvm-bench", "exit 0\n")
    assert runner.find_binary(tmp_path, runner.BENCH) == script
    script.chmod(0o644)
    with pytest.raises(runner.MissingBinaryError) as error:
        runner.find_binary(tmp_path, runner.BENCH)
    assert (
        str(error.value) == f"{script} not found: build first (cmake --preset default && cmake --build build)"
    )
    with pytest.raises(runner.MissingBinaryError, match="tools/sim/warpvm-sim not found"):
        runner.find_binary(tmp_path, runner.SIM)


def test_bench_arguments_and_expected_points() -> None:
    full = runner.BenchSettings(size="4GiB", commit="abc1234", driver="580.159.04")
    args = full.args()
    assert args[args.index("--bytes") + 1] == "4GiB"
    assert args[args.index("--cache-fractions") + 1] == "1,0.5,0.25,0.125"
    assert args[args.index("--workloads") + 1] == "stream,vadd,random_page,sparse_read,resident"
    assert args[-2:] == ["--out", "-"]
    # The 45 records of bench/results/h200/paging-16GiB-a5a0fae.jsonl, plus warpvm_auto: stream,
    # vadd and random_page at each of the 4 cache sizes, sparse_read once.
    assert full.expected_points() == 45 + 3 * 4 + 1
    subset = runner.BenchSettings(
        workloads=("stream", "sparse_read"), modes=("uvm", "warpvm"), cache_fractions=(1, 0.5)
    )
    assert subset.expected_points() == (1 + 2) + (1 + 1)


def test_sim_arguments() -> None:
    assert runner.SimSettings().args() == [
        *("--workloads", "stream,vadd,random_page,hotset"),
        *("--bytes", "1GiB"),
        *("--cache-fractions", "1,0.5,0.25,0.125"),
        *("--eviction", "clock"),
        *("--model", "warpvm"),
        *("--out", "-"),
    ]


def test_gpu_visible_from_nvidia_smi(fake_path: Path) -> None:
    smi = write_script(fake_path / "nvidia-smi", 'echo "GPU 0: NVIDIA H200 (UUID: GPU-1234)"\n')
    assert runner.gpu_visible()
    write_script(smi, 'echo "No devices were found"\nexit 6\n')
    assert not runner.gpu_visible()
    write_script(smi, "echo\n")
    assert not runner.gpu_visible()


def test_no_gpu_without_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not runner.gpu_visible()
    assert runner.driver_version() == "unknown"


def test_driver_version_and_commit(fake_path: Path, tmp_path: Path) -> None:
    write_script(fake_path / "nvidia-smi", "echo 580.159.04\n")
    write_script(fake_path / "git", 'echo "git $*" > "$(dirname "$0")/git-args"\necho 5560665\n')
    assert runner.driver_version() == "580.159.04"
    assert runner.git_commit(tmp_path) == "5560665"
    assert (fake_path / "git-args").read_text() == "git rev-parse --short HEAD\n"
    write_script(fake_path / "git", "exit 128\n")
    assert runner.git_commit(tmp_path) == "unknown"


def test_run_binary_streams_records_progress_and_messages(tmp_path: Path) -> None:
    line = json.dumps(record(mode="uvm", useful_gbps=10.0))
    binary = write_script(
        tmp_path / "fake-bench",
        f"echo 'starting up' >&2\n"
        f"echo '{line}'\n"
        "echo 'stream       uvm            cache=0.000     0.4295 s     10.00 GB/s useful  verified' >&2\n"
        f"echo '{line}'\n"
        "exit 0\n",
    )
    out = tmp_path / "out" / "results.jsonl"
    out.parent.mkdir()
    out.write_text("previous\n")
    seen: list[Record] = []
    points: list[str] = []
    result = runner.run_binary(binary, [], out=out, on_record=seen.append, on_point=points.append)
    assert result.returncode == 0
    assert [r.useful_gbps for r in result.records] == [10.0, 10.0] and seen == result.records
    assert result.messages == ["starting up"]
    assert len(points) == 1 and runner.point_description(points[0]) == "stream uvm cache=0.000"
    assert out.read_text() == f"previous\n{line}\n{line}\n"


def test_run_binary_exit_code_and_no_output_file(tmp_path: Path) -> None:
    binary = write_script(
        tmp_path / "fake-bench", "echo 'warpvm-bench: no CUDA device visible' >&2\nexit 3\n"
    )
    out = tmp_path / "results.jsonl"
    result = runner.run_binary(binary, ["--out", "-"], out=out)
    assert (result.returncode, result.records, result.messages) == (
        3,
        [],
        ["warpvm-bench: no CUDA device visible"],
    )
    assert not out.exists()


def test_run_binary_rejects_a_bad_record(tmp_path: Path) -> None:
    binary = write_script(tmp_path / "fake-sim", 'echo "note"\necho \'{"suite": "paging"}\'\nexec sleep 30\n')
    with pytest.raises(ResultsError, match="^fake-sim output:2: missing required field"):
        runner.run_binary(binary, [])


def test_single_workload_suite_passes_options_and_refuses_workloads() -> None:
    walk = runner.SUITES["walk"]
    settings = runner.SuiteSettings(
        suite=walk, modes=("device", "warpvm_aligned"), repeats=2, extra=("--scale", "18")
    )
    assert settings.args() == [
        *("--modes", "device,warpvm_aligned"),
        *("--repeats", "2"),
        *("--commit", "unknown", "--driver", "unknown"),
        *("--scale", "18"),
        *("--out", "-"),
    ]
    with pytest.raises(ValueError, match="warpvm bench walk has one workload"):
        runner.SuiteSettings(suite=walk, workloads=("random_walk",)).args()

"""`warpvm fuzz`: its settings, the summary of fuzz records, and the command driving a fake
warpvm-fuzz."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import record, write_script
from typer.testing import CliRunner

from warpvm import fuzz
from warpvm.cli import TIMEOUT_EXIT, app
from warpvm.results import parse_line


def fuzz_record(**fields: Any) -> dict[str, Any]:
    """A warpvm-fuzz record: one exact GPU seed at 4 KiB pages, 16x, 256 threads holding 2 pages."""
    return (
        record(
            suite="fuzz",
            workload="fuzz",
            mode="gpu",
            cache_fraction=1 / 16,
            dataset_bytes=8 * 2**20,
            useful_bytes=20 * 2**20,
            bytes_moved=20 * 2**20,
            seconds=0.01,
            useful_gbps=2.097152,
            faults=5120,
            seeds=1,
            seed=3,
            grid="full",
            cell=7,
            exact=True,
            verified=True,
            failure="",
            reproduce="build/tools/fuzz/warpvm-fuzz --backend gpu --grid full --seed 3",
            page_bytes=4096,
            oversubscription=16,
            threads=256,
            pages_held_per_thread=2,
            link_gbps=25.0,
        )
        | fields
    )


def parsed(records: list[dict[str, Any]]) -> list:
    return [parse_line(json.dumps(r), "test", n) for n, r in enumerate(records, 1)]


def test_settings_pass_the_seeds_or_the_one_seed() -> None:
    args = fuzz.FuzzSettings(seeds=50, first_seed=100, jobs=4, time_limit=200).args()
    assert args[args.index("--seeds") + 1] == "50"
    assert args[args.index("--first-seed") + 1] == "100"
    assert args[args.index("--jobs") + 1] == "4"
    assert args[args.index("--time-limit") + 1] == "200"
    assert args[-2:] == ["--out", "-"]
    one = fuzz.FuzzSettings(seed=1234, backend="sim", grid="ci")
    assert "--seeds" not in one.args() and one.args()[one.args().index("--seed") + 1] == "1234"
    assert one.expected_seeds() == 1
    with pytest.raises(ValueError, match="unknown backend"):
        fuzz.FuzzSettings(backend="tpu")
    with pytest.raises(ValueError, match="unknown grid"):
        fuzz.FuzzSettings(grid="huge")


def test_summary_counts_failures_and_ranks_the_slowest_configurations_against_the_link() -> None:
    slow = fuzz_record(seed=5, page_bytes=2 * 2**20, oversubscription=2, seconds=2.0, bytes_moved=5 * 10**9)
    failed = fuzz_record(
        seed=9, exact=False, verified=False, failure="launch 1: 3 of 256 threads saw other values"
    )
    summary = fuzz.summarize(parsed([fuzz_record(), fuzz_record(seed=4, seconds=0.03), slow, failed]))
    assert (summary.seeds, summary.exact) == (4, 3)
    assert [(f.seed, f.failure) for f in summary.failures] == [
        (9, "launch 1: 3 of 256 threads saw other values")
    ]
    assert summary.failures[0].reproduce.endswith("--seed 3")  # the record's own reproducer
    first, second = summary.slowest.rows
    # 2 MiB pages: 2 s for 5 GB, 2.5 GB/s, a tenth of the link.
    assert first == ("2 MiB clock 2x 256t x2", "gpu", "1", "2000.0", "4.66 GiB", "2.50", "25.0", "10%")
    # The 4 KiB configuration's three seeds: 50 ms and 60 MiB in all.
    assert second[:4] == ("4 KiB clock 16x 256t x2", "gpu", "3", "16.7")


def test_summary_of_simulator_records_has_no_timings() -> None:
    sim = fuzz_record(mode="sim", seconds=None, useful_gbps=None, simulated=True, link_gbps=None)
    summary = fuzz.summarize(parsed([sim]))
    assert (summary.seeds, summary.exact, summary.slowest.rows) == (1, 1, [])


def fake_fuzz(build: Path, records: list[dict[str, Any]], exit_code: int = 0, tail: str = "") -> Path:
    """A warpvm-fuzz that logs its arguments and prints `records`."""
    lines = "".join(f"echo '{json.dumps(r)}'\n" for r in records)
    body = 'echo "$@" > "$(dirname "$0")/args"\n' + lines + tail + f"exit {exit_code}\n"
    return write_script(build / fuzz.FUZZ, body)


def test_fuzz_command_runs_the_binary_and_summarises(cli: CliRunner, tmp_path: Path) -> None:
    build = tmp_path / "build"
    fake_fuzz(build, [fuzz_record(), fuzz_record(seed=4)])
    out = tmp_path / "fuzz.jsonl"
    result = cli.invoke(
        app,
        [
            "fuzz",
            "--seeds",
            "2",
            "--backend",
            "sim",
            "--grid",
            "ci",
            "--build-dir",
            str(build),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    args = (build / "tools" / "fuzz" / "args").read_text().split()
    assert args[args.index("--backend") + 1] == "sim" and args[args.index("--grid") + 1] == "ci"
    assert "2 seeds: 2 exact, 0 failed" in result.output
    assert f"records appended to {out}" in result.output
    assert "Slowest configurations" in result.output
    assert len(out.read_text().splitlines()) == 2


def test_fuzz_command_fails_with_the_reproducer(cli: CliRunner, tmp_path: Path) -> None:
    build = tmp_path / "build"
    bad = fuzz_record(seed=77, exact=False, verified=False, failure="after launch 0: page in two frames")
    fake_fuzz(build, [fuzz_record(), bad], exit_code=1)
    result = cli.invoke(app, ["fuzz", "--build-dir", str(build), "--out", str(tmp_path / "f.jsonl")])
    assert result.exit_code == 1
    assert "FAILED seed 77: after launch 0: page in two frames" in result.output
    assert "reproduce: build/tools/fuzz/warpvm-fuzz --backend gpu --grid full --seed 3" in result.output


def test_fuzz_command_without_a_gpu_suggests_the_simulator(cli: CliRunner, tmp_path: Path) -> None:
    build = tmp_path / "build"
    fake_fuzz(build, [], exit_code=3, tail="echo 'warpvm-fuzz: no CUDA device visible' >&2\n")
    result = cli.invoke(app, ["fuzz", "--build-dir", str(build), "--out", str(tmp_path / "f.jsonl")])
    assert result.exit_code == 3
    assert "--backend sim runs the simulator instead" in result.output


def test_fuzz_command_stops_a_hang_at_its_timeout(cli: CliRunner, tmp_path: Path) -> None:
    build = tmp_path / "build"
    fake_fuzz(build, [fuzz_record()], tail="exec sleep 30\n")
    out = tmp_path / "f.jsonl"
    result = cli.invoke(app, ["fuzz", "--timeout", "0.5", "--build-dir", str(build), "--out", str(out)])
    assert result.exit_code == TIMEOUT_EXIT
    assert "warpvm-fuzz ran past its time limit of 0.5 s" in result.output
    assert "1 seeds: 1 exact, 0 failed" in result.output


def test_fuzz_summary_reads_records_from_elsewhere(cli: CliRunner, tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(fuzz_record()) + "\n", encoding="utf-8")
    result = cli.invoke(app, ["fuzz-summary", str(good)])
    assert result.exit_code == 0, result.output
    assert "1 seeds: 1 exact, 0 failed" in result.output and "4 KiB clock 16x 256t x2" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(fuzz_record(seed=8, exact=False, failure="lost write")) + "\n", encoding="utf-8"
    )
    result = cli.invoke(app, ["fuzz-summary", str(good), str(bad)])
    assert result.exit_code == 1
    assert "FAILED seed 8: lost write" in result.output

"""The command line, driving fake binaries in a fake build directory."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import GiB, record, sim_record, write_jsonl, write_script
from rich.console import Console
from typer.testing import CliRunner

from warpvm import runner
from warpvm.cli import NO_GPU_MESSAGE, TIMEOUT_EXIT, Eviction, _console, _print_table, app
from warpvm.results import TextTable
from warpvm.runner import BENCH_MODES

SIM_LINES = [
    sim_record(workload="stream", cache_fraction=0.5, faults=262144, evictions=131072, bytes_moved=GiB),
    sim_record(
        workload="random_page",
        cache_fraction=0.25,
        faults=4096,
        evictions=3072,
        bytes_moved=16 * 2**20,
        useful_bytes=8 * 2**20,
    ),
]
BENCH_POINTS = [
    (
        record(
            mode="uvm",
            policy="-",
            cache_fraction=0.0,
            seconds=0.4295,
            useful_gbps=10.0,
            faults=None,
            bytes_moved=None,
        ),
        "stream       uvm            cache=0.000     0.4295 s     10.00 GB/s useful  verified",
    ),
    (record(), "stream       warpvm         cache=0.500     0.0841 s     51.10 GB/s useful  verified"),
    (
        record(
            workload="random_page",
            mode="uvm",
            policy="-",
            cache_fraction=0.0,
            useful_gbps=0.25,
            pages_per_s=6.1e4,
            faults=None,
            bytes_moved=None,
        ),
        "random_page  uvm            cache=0.000     8.5899 s      0.25 GB/s useful  verified",
    ),
    (
        record(
            workload="random_page",
            mode="warpvm",
            cache_fraction=0.125,
            useful_gbps=3.0,
            pages_per_s=7.3e5,
            verified=False,
        ),
        "random_page  warpvm         cache=0.125     0.7158 s      3.00 GB/s useful  NOT VERIFIED",
    ),
]


def fake_gpu(bin_dir: Path, present: bool) -> None:
    """An nvidia-smi that lists one H200, or that finds no device."""
    body = 'case "$1" in -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)";; *) echo 580.159.04;; esac\n'
    write_script(bin_dir / "nvidia-smi", body if present else "echo 'No devices were found'\nexit 6\n")


def fake_bench(build: Path, exit_code: int = 0) -> Path:
    """A warpvm-bench that logs its arguments, then prints BENCH_POINTS as the real one does."""
    body = [
        'echo "$@" > "$(dirname "$0")/args"',
        'out=-; while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done',
    ]
    if exit_code == 3:
        body += ["echo 'warpvm-bench: no CUDA device visible; nothing measured' >&2", "exit 3"]
    for point, line in BENCH_POINTS:
        body += [
            f"""line='{json.dumps(point)}'""",
            'if [ "$out" = - ]; then echo "$line"; else echo "$line" >> "$out"; fi',
            f"echo '{line}' >&2",
        ]
    body.append(f"exit {exit_code}")
    return write_script(build / "bench" / "warpvm-bench", "\n".join(body) + "\n")


def fake_sim(build: Path) -> Path:
    """A warpvm-sim that logs its arguments and prints two records."""
    lines = "".join(f"echo '{json.dumps(r)}'\n" for r in SIM_LINES)
    return write_script(
        build / "tools" / "sim" / "warpvm-sim", 'echo "$@" > "$(dirname "$0")/args"\n' + lines
    )


def table_rows(output: str) -> list[list[str]]:
    """The body rows of the rich tables in `output`, as stripped cells; blank workloads filled in."""
    rows: list[list[str]] = []
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[1] != "mode":
            rows.append([cells[0] or rows[-1][0], *cells[1:]])
    return rows


def column_text(output: str) -> list[str]:
    """Each body column of the rich table in `output`, top to bottom, without spaces: what its
    cells read once their wrapped or folded lines are joined again."""
    columns: list[str] = []
    for line in output.splitlines():
        cells = line.split("│")[1:-1]
        columns = columns or [""] * len(cells)
        for i, cell in enumerate(cells):
            columns[i] += cell.replace(" ", "")
    return columns


SIM_ROWS = [
    ["stream", "warpvm_sim", "50%", "clock", "262,144", "131,072", "1.00 GiB", "1.00x"],
    ["random_page", "warpvm_sim", "25%", "clock", "4,096", "3,072", "16.00 MiB", "2.00x"],
]

# Wider than 80 columns, with cells longer than a narrow terminal's columns; a workload per row, so
# that no first cell is left blank.
WIDE_TABLE = TextTable(
    "A table wider than the terminal",
    ("workload", "mode", "cache", "policy", "useful GB/s", "rate", "speed-up over uvm", "verified"),
    [
        ("random_page", "warpvm_remote", "12.5%", "clock", "51.10", "730.00 k pages/s", "12.00x", "NO"),
        ("sparse_read", "uvm_prefetch", "-", "-", "0.25", "61.00 k pages/s", "-", "yes"),
        ("hotset", "warpvm_auto", "100%", "fifo", "1234.56", "1.20 G reads/s", "123.45x", "yes"),
    ],
)


def test_quick_without_gpu_runs_the_simulator(cli: CliRunner, fake_path: Path, tmp_path: Path) -> None:
    fake_gpu(fake_path, present=False)
    build = tmp_path / "build"
    fake_bench(build)
    fake_sim(build)
    out = tmp_path / "quick.jsonl"
    result = cli.invoke(app, ["bench", "quick", "--build-dir", str(build), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == NO_GPU_MESSAGE
    assert not (build / "bench" / "args").exists()  # no GPU: the benchmark is not started
    args = (build / "tools" / "sim" / "args").read_text().split()
    expected = (
        "--workloads stream,vadd,random_page,hotset --bytes 1GiB "
        "--cache-fractions 1,0.5,0.25,0.125 --eviction clock --model warpvm"
    )
    assert args == [*expected.split(), "--out", "-"]
    assert "cpu-simulator: simulated (counts, no timings)" in result.output
    assert table_rows(result.output) == SIM_ROWS
    assert [json.loads(line)["workload"] for line in out.read_text().splitlines()] == [
        "stream",
        "random_page",
    ]


def test_quick_falls_back_when_the_benchmark_sees_no_gpu(
    cli: CliRunner, fake_path: Path, tmp_path: Path
) -> None:
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    fake_bench(build, exit_code=3)
    fake_sim(build)
    result = cli.invoke(
        app, ["bench", "quick", "--build-dir", str(build), "--out", str(tmp_path / "r.jsonl")]
    )
    assert result.exit_code == 0, result.output
    assert (build / "bench" / "args").exists()  # the benchmark ran and exited 3
    assert result.output.splitlines()[0] == NO_GPU_MESSAGE
    assert "no CUDA device visible" not in result.output
    assert [row[:3] for row in table_rows(result.output)] == [
        ["stream", "warpvm_sim", "50%"],
        ["random_page", "warpvm_sim", "25%"],
    ]


def test_quick_on_a_gpu_shows_the_benchmark_table(cli: CliRunner, fake_path: Path, tmp_path: Path) -> None:
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    fake_bench(build)
    out = tmp_path / "bench.jsonl"
    result = cli.invoke(
        app, ["bench", "quick", "--build-dir", str(build), "--out", str(out), "--bytes", "2GiB"]
    )
    assert result.exit_code == 0, result.output
    assert NO_GPU_MESSAGE not in result.output
    args = (build / "bench" / "args").read_text().split()
    assert args[args.index("--bytes") + 1] == "2GiB"
    assert args[args.index("--modes") + 1] == ",".join(BENCH_MODES)
    assert args[args.index("--workloads") + 1] == "stream,vadd,random_page,sparse_read,resident"
    assert args[args.index("--repeats") + 1] == "3"
    assert args[args.index("--driver") + 1] == "580.159.04"
    assert "NVIDIA H200: measured (useful GB/s, median of repeats)" in result.output
    assert table_rows(result.output) == [
        ["stream", "uvm", "-", "-", "10.00", "-", "-", "yes"],
        ["stream", "warpvm", "50%", "clock", "51.10", "-", "5.11x", "yes"],
        ["random_page", "uvm", "-", "-", "0.25", "61.00 k pages/s", "-", "yes"],
        ["random_page", "warpvm", "12.5%", "clock", "3.00", "730.00 k pages/s", "12.00x", "NO"],
    ]
    assert f"4 records appended to {out}" in result.output
    assert len(out.read_text().splitlines()) == 4


def test_bench_run_passes_options_through(cli: CliRunner, fake_path: Path, tmp_path: Path) -> None:
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    fake_bench(build)
    out = tmp_path / "run.jsonl"
    out.write_text(json.dumps(record(mode="explicit")) + "\n")
    options = (
        "--workloads stream,random_page --modes uvm,warpvm --bytes 512MiB --cache-fractions 0.5,0.125 "
        "--repeats 5 --eviction fifo --commit abc1234"
    ).split()
    result = cli.invoke(app, ["bench", "run", *options, "--out", str(out), "--build-dir", str(build)])
    assert result.exit_code == 0, result.output
    assert (build / "bench" / "args").read_text().split() == [
        *options,
        "--driver",
        "580.159.04",
        "--out",
        "-",
    ]
    modes = [json.loads(line)["mode"] for line in out.read_text().splitlines()]
    assert modes == ["explicit", "uvm", "warpvm", "uvm", "warpvm"]  # appended after the existing record
    assert "stream       warpvm         cache=0.500" in result.output  # the benchmark's own lines


def test_bench_run_reports_no_gpu(cli: CliRunner, tmp_path: Path) -> None:
    build = tmp_path / "build"
    fake_bench(build, exit_code=3)
    result = cli.invoke(app, ["bench", "run", "--build-dir", str(build), "--out", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 3
    assert "warpvm-bench: no CUDA device visible; nothing measured" in result.output
    assert "error: warpvm-bench failed (exit code 3)" in result.output


def test_bench_run_rejects_unknown_modes(cli: CliRunner, tmp_path: Path) -> None:
    result = cli.invoke(app, ["bench", "run", "--modes", "warpvm,turbo", "--build-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "unknown turbo" in result.output


@pytest.mark.parametrize(("gpu", "missing"), [(True, "bench/warpvm-bench"), (False, "tools/sim/warpvm-sim")])
def test_missing_binary(cli: CliRunner, fake_path: Path, tmp_path: Path, gpu: bool, missing: str) -> None:
    fake_gpu(fake_path, present=gpu)
    build = tmp_path / "empty-build"
    result = cli.invoke(
        app, ["bench", "quick", "--build-dir", str(build), "--out", str(tmp_path / "r.jsonl")]
    )
    assert result.exit_code == 2
    hint = "build first (cmake --preset default && cmake --build build)"
    assert f"error: {build / missing} not found: {hint}" in result.output


def test_build_dir_from_environment(cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = tmp_path / "env-build"
    fake_sim(build)
    monkeypatch.setenv("WARPVM_BUILD_DIR", str(build))
    result = cli.invoke(app, ["sim", "--workloads", "stream", "--bytes", "64MiB", "--eviction", "fifo"])
    assert result.exit_code == 0, result.output
    args = (build / "tools" / "sim" / "args").read_text().split()
    assert args[:4] == ["--workloads", "stream", "--bytes", "64MiB"] and "fifo" in args
    assert "records appended" not in result.output  # no --out: nothing written
    assert table_rows(result.output)[0][4] == "262,144"


@pytest.mark.parametrize("columns", ["80", "30"])
def test_piped_tables_keep_every_cell_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], columns: str
) -> None:
    """Output that is not a terminal gets each table at its own width, whatever $COLUMNS says."""
    build = tmp_path / "build"
    fake_sim(build)
    monkeypatch.setenv("WARPVM_BUILD_DIR", str(build))
    result = CliRunner(env={"COLUMNS": columns}).invoke(app, ["sim"])
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    assert table_rows(result.output) == SIM_ROWS
    monkeypatch.setenv("COLUMNS", columns)
    _print_table(_console(), WIDE_TABLE)
    output = capsys.readouterr().out
    assert "…" not in output
    assert table_rows(output) == [list(row) for row in WIDE_TABLE.rows]


@pytest.mark.parametrize(("width", "fits"), [(60, True), (20, False)])
def test_narrow_terminal_wraps_cells_without_cutting_them(width: int, fits: bool) -> None:
    """A terminal narrower than the table wraps or folds its cells to fit; one too narrow even for
    that gets lines past its edge, never a cell cut."""
    output = io.StringIO()
    # The height too, so that rich keeps the width even where TERM is dumb.
    terminal = Console(file=output, force_terminal=True, width=width, height=25, color_system=None)
    _print_table(terminal, WIDE_TABLE)
    text = output.getvalue()
    assert "…" not in text
    assert (max(len(line) for line in text.splitlines()) <= width) == fits
    columns = zip(*WIDE_TABLE.rows, strict=True)
    assert column_text(text) == ["".join(column).replace(" ", "") for column in columns]


def test_sim_model_is_passed_through(cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = tmp_path / "build"
    fake_sim(build)
    monkeypatch.setenv("WARPVM_BUILD_DIR", str(build))
    result = cli.invoke(app, ["sim", "--model", "uvm"])
    assert result.exit_code == 0, result.output
    args = (build / "tools" / "sim" / "args").read_text().split()
    assert args[args.index("--model") + 1] == "uvm"


def test_messages_print_brackets_as_they_are(
    cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build = tmp_path / "build"
    fake_sim(build)
    monkeypatch.setenv("WARPVM_BUILD_DIR", str(build))
    out = tmp_path / "results[dim]" / "sim.jsonl"
    result = cli.invoke(app, ["sim", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"2 records appended to {out}" in result.output


def test_report_writes_summary_and_plots(cli: CliRunner, records_file: Path, tmp_path: Path) -> None:
    extra = write_jsonl(tmp_path / "more.jsonl", [record(device="NVIDIA H100", mode="uvm", useful_gbps=8.0)])
    out = tmp_path / "report"
    result = cli.invoke(app, ["report", str(records_file), str(extra), "--out", str(out)])
    assert result.exit_code == 0, result.output
    names = [
        "summary.md",
        "bandwidth.png",
        "cache_sweep.png",
        "bytes_moved.png",
        "speedup_over_uvm.png",
        "oversubscription.png",
    ]
    assert [line for line in result.output.splitlines() if line.startswith("wrote ")] == [
        f"wrote {out / name}" for name in names
    ]
    for name in names[1:]:
        assert (out / name).read_bytes().startswith(b"\x89PNG") and (out / name).stat().st_size > 10_000
    summary = (out / "summary.md").read_text()
    assert "## NVIDIA H200" in summary and "## NVIDIA H100" in summary and "## cpu-simulator" in summary
    assert "| stream | warpvm | 50% | clock | 51.10 | - | 5.11x | yes |" in summary


def test_report_of_simulated_records_skips_timing_plots(cli: CliRunner, tmp_path: Path) -> None:
    results = write_jsonl(tmp_path / "sim.jsonl", SIM_LINES)
    result = cli.invoke(app, ["report", str(results), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "skipped bandwidth.png: no timed records" in result.output
    assert "skipped cache_sweep.png: no timed warpvm records" in result.output
    assert (tmp_path / "r" / "bytes_moved.png").exists() and not (tmp_path / "r" / "bandwidth.png").exists()


def test_report_names_the_bad_line(cli: CliRunner, tmp_path: Path) -> None:
    results = tmp_path / "bad.jsonl"
    results.write_text(json.dumps(record()) + "\n{not json\n")
    result = cli.invoke(app, ["report", str(results), "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert f"error: {results}:2: malformed JSON" in result.output
    assert not (tmp_path / "r").exists()


def fake_suite_binary(build: Path, relative: str, records: list[dict], exit_code: int = 0) -> Path:
    """A suite benchmark that logs its arguments and prints `records` to stdout."""
    lines = "".join(f"echo '{json.dumps(r)}'\n" for r in records)
    body = 'echo "$@" > "$(dirname "$0")/args"\n' + lines + f"exit {exit_code}\n"
    return write_script(build / relative, body)


def test_bench_suite_passes_the_grid_and_extra_options(
    cli: CliRunner, fake_path: Path, tmp_path: Path
) -> None:
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    points = [
        record(suite="graph", workload="bfs", mode="uvm", cache_fraction=0.0, root=3),
        record(suite="graph", workload="bfs", mode="warpvm", cache_fraction=1.0, root=3),
    ]
    fake_suite_binary(build, "bench/warpvm-graph-bench", points)
    out = tmp_path / "graph.jsonl"
    options = (
        "--workloads bfs,cc --modes uvm,warpvm --cache-fractions 1,0.25 --repeats 2 --commit abc1234".split()
    )
    result = cli.invoke(
        app, ["bench", "graph", *options, "--out", str(out), "--build-dir", str(build), "--", "--scale", "20"]
    )
    assert result.exit_code == 0, result.output
    assert (build / "bench" / "args").read_text().split() == [
        *"--apps bfs,cc --modes uvm,warpvm --cache-fractions 1,0.25 --repeats 2 --commit abc1234".split(),
        *("--driver", "580.159.04", "--scale", "20", "--out", "-"),
    ]
    assert len(out.read_text().splitlines()) == 2
    assert "records not verified" not in result.output


def test_bench_suite_defaults_and_unverified_records(cli: CliRunner, fake_path: Path, tmp_path: Path) -> None:
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    bound = record(suite="placement", workload="transpose", mode="ideal", verified=False, ideal_bound=1)
    fake_suite_binary(build, "bench/warpvm-placement-bench", [bound])
    result = cli.invoke(
        app, ["bench", "placement", "--build-dir", str(build), "--out", str(tmp_path / "p.jsonl")]
    )
    assert result.exit_code == 0, result.output
    args = (build / "bench" / "args").read_text().split()
    assert args[:4] == ["--commit", args[1], "--driver", "580.159.04"] and args[-2:] == ["--out", "-"]
    assert "1 records not verified (bounds, unchecked modes): transpose ideal" in result.output


def test_bench_suite_failures(cli: CliRunner, fake_path: Path, tmp_path: Path) -> None:
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    fake_suite_binary(build, "bench/warpvm-alloc-bench", [record(suite="alloc")], exit_code=1)
    out = tmp_path / "a.jsonl"
    failed = cli.invoke(app, ["bench", "alloc", "--build-dir", str(build), "--out", str(out)])
    assert failed.exit_code == 1 and "error: warpvm-alloc-bench failed (exit code 1)" in failed.output
    no_cache = cli.invoke(app, ["bench", "alloc", "--cache-fractions", "0.5", "--build-dir", str(build)])
    assert no_cache.exit_code == 2 and "has no cache sizes" in no_cache.output
    missing = cli.invoke(app, ["bench", "apps", "--build-dir", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "warpvm-apps-bench not found" in missing.output


def test_version(cli: CliRunner) -> None:
    result = cli.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == "warpvm 0.1.0\n"


def fake_slow_sim(build: Path) -> Path:
    """A warpvm-sim that logs its arguments, prints the first of SIM_LINES, then hangs."""
    return write_script(
        build / "tools" / "sim" / "warpvm-sim",
        f'echo "$@" > "$(dirname "$0")/args"\necho \'{json.dumps(SIM_LINES[0])}\'\nexec sleep 30\n',
    )


def test_sim_timeout_keeps_the_records_and_names_binary_and_limit(cli: CliRunner, tmp_path: Path) -> None:
    build = tmp_path / "build"
    fake_slow_sim(build)
    out = tmp_path / "sim.jsonl"
    started = time.monotonic()
    result = cli.invoke(app, ["sim", "--timeout", "0.5", "--build-dir", str(build), "--out", str(out)])
    assert time.monotonic() - started < 10
    assert result.exit_code == TIMEOUT_EXIT == 124
    assert (
        "error: warpvm-sim ran past its time limit of 0.5 s and was stopped "
        f"(--timeout or $WARPVM_TIMEOUT sets the limit, 0 for none); 1 records kept in {out}"
    ) in result.output
    assert table_rows(result.output) == SIM_ROWS[:1]  # what it wrote before, shown
    assert [json.loads(line) for line in out.read_text().splitlines()] == SIM_LINES[:1]


def test_timeout_from_the_environment_and_the_default(
    cli: CliRunner, fake_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    write_script(build / "bench" / "warpvm-walk-bench", "exec sleep 30\n")
    monkeypatch.setenv("WARPVM_TIMEOUT", "0.3")
    result = cli.invoke(app, ["bench", "walk", "--build-dir", str(build), "--out", str(tmp_path / "w.jsonl")])
    assert result.exit_code == TIMEOUT_EXIT
    assert "error: warpvm-walk-bench ran past its time limit of 0.3 s" in result.output
    assert (
        "0.3 s and was stopped (--timeout or $WARPVM_TIMEOUT sets the limit, 0 for none); no records written"
        in (result.output)
    )
    monkeypatch.setenv("WARPVM_TIMEOUT", "soon")
    refused = cli.invoke(app, ["bench", "walk", "--build-dir", str(build)])
    assert refused.exit_code == 2
    assert "Invalid value for '--timeout' (env var: 'WARPVM_TIMEOUT')" in refused.output
    # Neither given: the command's default.
    monkeypatch.delenv("WARPVM_TIMEOUT")
    monkeypatch.setattr(runner, "SIM_TIMEOUT_S", 0.3)
    fake_slow_sim(build)
    defaulted = cli.invoke(app, ["sim", "--build-dir", str(build)])
    assert defaulted.exit_code == TIMEOUT_EXIT
    assert "error: warpvm-sim ran past its time limit of 0.3 s" in defaulted.output
    assert "1 records shown above" in defaulted.output


@pytest.mark.parametrize(
    ("command", "default"),
    [(["sim"], "600"), (["bench", "run"], "3600"), (["bench", "graph"], "3600"), (["bench", "walk"], "1800")],
)
def test_timeout_help_names_the_default_and_the_variable(
    cli: CliRunner, command: list[str], default: str
) -> None:
    result = cli.invoke(app, [*command, "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    assert f"Default: $WARPVM_TIMEOUT, else {default}." in result.output
    assert "env var: WARPVM_TIMEOUT" in result.output


def test_quick_stops_at_the_time_limit_without_falling_back(
    cli: CliRunner, fake_path: Path, tmp_path: Path
) -> None:
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    write_script(build / "bench" / "warpvm-bench", f"echo '{json.dumps(record())}'\nexec sleep 30\n")
    fake_sim(build)
    out = tmp_path / "q.jsonl"
    result = cli.invoke(
        app, ["bench", "quick", "--timeout", "0.5", "--build-dir", str(build), "--out", str(out)]
    )
    assert result.exit_code == TIMEOUT_EXIT
    assert "warpvm-bench ran past its time limit of 0.5 s and was stopped" in result.output
    assert NO_GPU_MESSAGE not in result.output and not (build / "tools" / "sim" / "args").exists()
    assert len(out.read_text().splitlines()) == 1


def test_live_run_reports_malformed_records_and_keeps_the_good(cli: CliRunner, tmp_path: Path) -> None:
    build = tmp_path / "build"
    lines = [json.dumps(SIM_LINES[0]), '{"suite": "sim", "workload": "stream",', json.dumps(SIM_LINES[1])]
    write_script(build / "tools" / "sim" / "warpvm-sim", "".join(f"echo '{line}'\n" for line in lines))
    out = tmp_path / "sim.jsonl"
    result = cli.invoke(app, ["sim", "--build-dir", str(build), "--out", str(out)])
    assert result.exit_code == 1
    assert table_rows(result.output) == SIM_ROWS
    assert (
        "error: warpvm-sim stdout:2: malformed JSON (Expecting property name enclosed in double quotes "
        'at column 39): {"suite": "sim", "workload": "stream",'
    ) in result.output
    assert f"error: warpvm-sim wrote 1 malformed record line, left out; the 2 records kept in {out}" in (
        result.output
    )
    assert [json.loads(line) for line in out.read_text().splitlines()] == SIM_LINES
    assert "Traceback" not in result.output


def test_live_run_reports_a_record_missing_fields(cli: CliRunner, fake_path: Path, tmp_path: Path) -> None:
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    partial = record(suite="alloc")
    del partial["seconds"], partial["mode"]
    fake_suite_binary(build, "bench/warpvm-alloc-bench", [record(suite="alloc"), partial])
    result = cli.invoke(
        app, ["bench", "alloc", "--build-dir", str(build), "--out", str(tmp_path / "a.jsonl")]
    )
    assert result.exit_code == 1
    assert "error: warpvm-alloc-bench stdout:2: missing required field(s): mode, seconds: {" in result.output
    assert "the 1 records kept in" in result.output


def test_report_refuses_a_record_missing_fields_and_a_binary_file(cli: CliRunner, tmp_path: Path) -> None:
    partial = record()
    del partial["workload"]
    results = write_jsonl(tmp_path / "partial.jsonl", [record(), record(), partial])
    result = cli.invoke(app, ["report", str(results), "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert f"error: {results}:3: missing required field(s): workload" in result.output
    packed = tmp_path / "results.jsonl.gz"
    packed.write_bytes(json.dumps(record()).encode() + b"\n\x1f\x8b\x08\x00")
    result = cli.invoke(app, ["report", str(packed), "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert f"error: {packed}:2: not UTF-8 text (byte 0x8b; compressed? decompress it first)" in result.output
    assert not (tmp_path / "r").exists() and "Traceback" not in result.output


def test_eviction_accepts_clock_and_fifo_only(cli: CliRunner, fake_path: Path, tmp_path: Path) -> None:
    assert [policy.value for policy in Eviction] == list(runner.EVICTION_POLICIES) == ["clock", "fifo"]
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    fake_sim(build)
    fake_bench(build)
    fake_suite_binary(build, "bench/warpvm-graph-bench", [record(suite="graph")])
    for command in (["sim"], ["bench", "run"]):
        for name in ("lru", "CLOCK", ""):
            result = cli.invoke(app, [*command, "--eviction", name, "--build-dir", str(build)])
            assert result.exit_code == 2
            assert (
                f"Invalid value for '--eviction': Value error, '{name}' is not one of 'clock', 'fifo'."
                in (" ".join(result.output.replace("│", " ").split()))
            )
    for extra in (["--eviction", "lru"], ["--eviction=lru"]):
        result = cli.invoke(app, ["bench", "graph", "--build-dir", str(build), "--", *extra])
        assert result.exit_code == 2
        assert "unknown eviction policy 'lru' (choose from clock, fifo)" in result.output
    assert not any((build / where / "args").exists() for where in ("bench", "tools/sim"))  # none started
    passed = cli.invoke(
        app,
        [
            "bench",
            "graph",
            "--build-dir",
            str(build),
            "--out",
            str(tmp_path / "g.jsonl"),
            "--",
            "--eviction",
            "fifo",
        ],
    )
    assert passed.exit_code == 0, passed.output
    assert (build / "bench" / "args").read_text().split()[-4:] == ["--eviction", "fifo", "--out", "-"]


def test_a_binary_refusing_its_arguments_is_a_usage_error(cli: CliRunner, tmp_path: Path) -> None:
    build = tmp_path / "build"
    write_script(
        build / "tools" / "sim" / "warpvm-sim",
        "echo '--eviction: lru not in {clock,fifo}' >&2\n"
        "echo 'Run with --help for more information.' >&2\n"
        "exit 2\n",
    )
    result = cli.invoke(app, ["sim", "--workloads", "stream", "--build-dir", str(build)])
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[:2] == ["--eviction: lru not in {clock,fifo}", "Run with --help for more information."]
    assert lines[2] == (
        "error: warpvm-sim refused its arguments (exit code 2: a usage error, its message above): "
        "--workloads stream --bytes 1GiB --cache-fractions 1,0.5,0.25,0.125 --eviction clock --model warpvm "
        "--out -"
    )


def test_a_real_simulator_refuses_an_unknown_eviction(tmp_path: Path) -> None:
    """The built warpvm-sim (WARPVM_BUILD_DIR), where there is one, exits 2 as the CLI expects."""
    build = os.environ.get("WARPVM_BUILD_DIR")
    sim = Path(build or "/nonexistent") / "tools" / "sim" / "warpvm-sim"
    if not (build and os.access(sim, os.X_OK)):
        pytest.skip("no built warpvm-sim (set WARPVM_BUILD_DIR)")
    refused = runner.run_binary(sim, ["--eviction", "lru", "--out", "-"], timeout=60)
    assert refused.returncode == runner.USAGE_EXIT and any("lru" in m for m in refused.messages)
    ran = runner.run_binary(sim, ["--workloads", "stream", "--bytes", "16MiB", "--out", "-"], timeout=60)
    assert ran.returncode == 0 and ran.records and not ran.bad_lines and not ran.timed_out


def test_quick_asks_cuda_before_nvidia_smi(
    cli: CliRunner, fake_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvidia-smi lists a GPU that CUDA does not see (CUDA_VISIBLE_DEVICES, say): the simulator runs."""
    fake_gpu(fake_path, present=True)
    build = tmp_path / "build"
    fake_bench(build)
    fake_sim(build)

    def no_device(name: str) -> SimpleNamespace:
        def cudaGetDeviceCount(pointer: Any) -> int:  # noqa: N802 (the C name)
            pointer.contents.value = 0
            return 100  # cudaErrorNoDevice

        return SimpleNamespace(cudaGetDeviceCount=cudaGetDeviceCount)

    monkeypatch.setattr(runner, "_load_library", no_device)
    result = cli.invoke(
        app, ["bench", "quick", "--build-dir", str(build), "--out", str(tmp_path / "q.jsonl")]
    )
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == NO_GPU_MESSAGE
    assert not (build / "bench" / "args").exists()

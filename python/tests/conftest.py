"""Shared test data: sample records, batch traces and fake executables."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from warpvm import runner, trace

GiB = 2**30


def record(**fields: Any) -> dict[str, Any]:
    """A valid warpvm-bench record (a stream point on an H200) with `fields` overridden."""
    base: dict[str, Any] = {
        "suite": "paging",
        "workload": "stream",
        "mode": "warpvm",
        "policy": "clock",
        "cache_fraction": 0.5,
        "dataset_bytes": 4 * GiB,
        "useful_bytes": 4 * GiB,
        "seconds": 0.0841,
        "useful_gbps": 51.10,
        "faults": 1048576,
        "bytes_moved": 4 * GiB,
        "verified": True,
        "repeats": 3,
        "seconds_all": [0.0841, 0.0842, 0.0840],
        "evictions": 524288,
        "cache_bytes": 2 * GiB,
        "device": "NVIDIA H200",
        "driver": "580.159.04",
        "commit": "5560665",
        "date": "2026-11-21T23:47:00Z",
    }
    return base | fields


def sim_record(**fields: Any) -> dict[str, Any]:
    """A simulator record: counts but no timings."""
    return (
        record(
            mode="warpvm_sim",
            dataset_bytes=GiB,
            useful_bytes=GiB,
            seconds=None,
            useful_gbps=None,
            simulated=True,
            device="cpu-simulator",
            bytes_moved=GiB,
            faults=262144,
            evictions=0,
            cache_fraction=1.0,
        )
        | fields
    )


def sample_records() -> list[dict[str, Any]]:
    """A small but complete benchmark run plus two simulated points."""
    no_counts = {"faults": None, "bytes_moved": None, "policy": "-", "cache_fraction": 0.0}
    return [
        record(
            mode="explicit",
            seconds=0.2,
            useful_gbps=21.47,
            faults=None,
            bytes_moved=4 * GiB,
            policy="-",
            cache_fraction=0.0,
        ),
        record(mode="zero_copy", seconds=0.1, useful_gbps=42.95, **no_counts),
        record(mode="uvm", seconds=0.4295, useful_gbps=10.0, **no_counts),
        record(mode="warpvm", cache_fraction=1.0, useful_gbps=52.0, evictions=0, bytes_moved=4 * GiB),
        record(mode="warpvm", cache_fraction=0.5, useful_gbps=51.10, bytes_moved=4 * GiB),
        record(mode="warpvm", cache_fraction=0.25, useful_gbps=48.0, bytes_moved=4 * GiB),
        record(
            workload="random_page",
            mode="uvm",
            useful_bytes=GiB // 2,
            useful_gbps=0.5,
            pages_per_s=1.2e5,
            **no_counts,
        ),
        record(
            workload="random_page",
            mode="warpvm",
            cache_fraction=1.0,
            useful_bytes=GiB // 2,
            useful_gbps=10.0,
            pages_per_s=2.5e6,
            bytes_moved=GiB // 2,
        ),
        record(
            workload="random_page",
            mode="warpvm",
            cache_fraction=0.5,
            useful_bytes=GiB // 2,
            useful_gbps=9.0,
            pages_per_s=2.2e6,
            bytes_moved=GiB,
        ),
        record(
            workload="sparse_read",
            mode="warpvm_remote",
            cache_fraction=0.0,
            useful_bytes=8 * 2**20,
            useful_gbps=0.8,
            reads_per_s=1.0e8,
            bytes_moved=8 * 2**20,
            verified=False,
        ),
        sim_record(workload="stream", cache_fraction=1.0),
        sim_record(
            workload="stream", cache_fraction=0.5, faults=524288, evictions=262144, bytes_moved=2 * GiB
        ),
    ]


def write_csv(path: Path, header: str, body: str) -> Path:
    """Writes a CSV: `header` (a line), then `body` (lines)."""
    path.write_text(header + body, encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    """Writes records as JSON Lines."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_script(path: Path, body: str) -> Path:
    """An executable /bin/sh script at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A runner with a wide terminal, so typer's own error panels are not cut (warpvm's tables are
    whole at any width: the output is not a terminal)."""
    monkeypatch.delenv("WARPVM_BUILD_DIR", raising=False)
    return CliRunner(env={"COLUMNS": "200"})


@pytest.fixture
def records_file(tmp_path: Path) -> Path:
    """sample_records() in a JSON Lines file."""
    return write_jsonl(tmp_path / "results.jsonl", sample_records())


@pytest.fixture(autouse=True)
def no_cuda_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CUDA library loads, whatever this machine has: runner.gpu_visible() then asks nvidia-smi,
    which the tests fake (fake_path); a test of the CUDA path passes gpu_visible a loader of its own."""

    def refuse(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file (the tests load no CUDA library)")

    monkeypatch.setattr(runner, "_load_library", refuse)


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory put first on PATH, for fake nvidia-smi and git."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


# --- batch traces (warpvm trace) ---------------------------------------------------------------

TRACE_HEADER = ",".join(trace.COLUMNS) + "\n"

# Simulator-style rows (timings empty): workload,cache_fraction,batch_limit,prefetch,batch,faults,
# unique_faults,blocks,pages_faulted,pages_prefetched,chunks_evicted,pages_evicted,start_ns,duration_ns,
# transfer_ns
UNTIMED_TRACE = """\
stream,1,256,1,0,256,128,1,128,0,0,0,,,
stream,1,256,1,1,256,256,2,200,56,0,0,,,
random_page,0.5,256,1,0,100,100,50,100,400,2,300,,,
"""

# A GPU-style run with timings: two batches without eviction, three evicting one chunk each, of which
# one is cheap (a lower cost level, as in the study's Fig. 13).
TIMED_TRACE = """\
sgemm,0.5,256,1,0,256,128,2,128,128,0,0,0,50000,5000
sgemm,0.5,256,1,1,256,256,4,256,256,0,0,60000,70000,20000
sgemm,0.5,256,1,2,200,64,1,64,192,1,512,150000,400000,40000
sgemm,0.5,256,1,3,256,64,1,64,192,1,512,600000,190000,19000
sgemm,0.5,256,1,4,100,100,1,100,0,1,256,800000,420000,42000
"""

# Runs differing only in batch_limit (64, 128, 256 with prefetch) and only in prefetch (256).
SWEEP_TRACE = """\
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


def write_trace(path: Path, body: str, header: str = TRACE_HEADER) -> Path:
    """A batch trace: `header` (the trace columns unless given), then `body`."""
    return write_csv(path, header, body)


def with_durations(body: str, ns: dict[int, int]) -> str:
    """SWEEP_TRACE rows with timings: every batch of limit L takes ns[L], a quarter of it transfer."""
    rows = []
    for line in body.splitlines():
        cells = line.split(",")
        duration = ns[int(cells[2])]
        rows.append(",".join([*cells[:12], str(1000 * int(cells[4])), str(duration), str(duration // 4)]))
    return "\n".join(rows) + "\n"


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "batches.csv", UNTIMED_TRACE)


@pytest.fixture
def timed_file(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "timed.csv", TIMED_TRACE)


@pytest.fixture
def sweep_file(tmp_path: Path) -> Path:
    return write_trace(tmp_path / "sweep.csv", SWEEP_TRACE)

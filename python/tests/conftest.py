"""Shared test data: sample records and fake executables."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

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
def records_file(tmp_path: Path) -> Path:
    """sample_records() in a JSON Lines file."""
    return write_jsonl(tmp_path / "results.jsonl", sample_records())


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory put first on PATH, for fake nvidia-smi and git."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir

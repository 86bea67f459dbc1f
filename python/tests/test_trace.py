from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from warpvm import trace
from warpvm.cli import app
from warpvm.results import ResultsError

HEADER = (
    "workload,cache_fraction,batch,faults,unique_faults,blocks,pages_faulted,pages_prefetched,"
    "chunks_evicted,pages_evicted\n"
)


def write_trace(path: Path, rows: list[str]) -> Path:
    path.write_text(HEADER + "".join(row + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    return write_trace(
        tmp_path / "batches.csv",
        [
            "stream,1,0,256,128,1,128,0,0,0",
            "stream,1,1,256,256,2,200,56,0,0",
            "random_page,0.5,0,100,100,50,100,400,2,300",
        ],
    )


def test_summary_per_run(trace_file: Path) -> None:
    summaries = {s.workload: s for s in trace.summarize(trace.load_trace(trace_file))}
    stream = summaries["stream"]
    assert stream.batches == 2
    assert stream.mean_faults == 256
    assert stream.mean_unique_faults == 192
    assert stream.duplicate_share == pytest.approx(128 / 512)
    assert stream.mean_blocks == 1.5
    assert stream.faults_per_block == pytest.approx(384 / 3)
    assert stream.prefetched_share == pytest.approx(56 / 384)
    random = summaries["random_page"]
    assert random.cache_fraction == 0.5
    assert random.prefetched_share == pytest.approx(400 / 500)
    assert random.pages_evicted == 300


def test_markdown_has_a_row_per_run(trace_file: Path) -> None:
    text = trace.markdown_summary(trace.summarize(trace.load_trace(trace_file)))
    rows = [
        line for line in text.splitlines() if line.startswith("| stream") or line.startswith("| random_page")
    ]
    assert len(rows) == 2
    assert "| stream | 100% | 2 | 256.0 | 192.0 | 25.0% | 1.50 | 128.0 | 14.6% | 0 |" in rows


def test_bad_rows_name_file_and_line(tmp_path: Path) -> None:
    path = write_trace(
        tmp_path / "bad.csv", ["stream,1,0,256,128,1,128,0,0,0", "stream,1,1,many,1,1,1,1,1,1"]
    )
    with pytest.raises(ResultsError, match=r"bad\.csv:3: bad row"):
        trace.load_trace(path)
    missing = tmp_path / "missing.csv"
    missing.write_text("workload,batch\nstream,0\n", encoding="utf-8")
    with pytest.raises(ResultsError, match="missing columns cache_fraction"):
        trace.load_trace(missing)


def test_cli_writes_summary_and_plots(trace_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["trace", str(trace_file), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for name in ("summary.md", "batch_sizes.png", "blocks_per_batch.png", "migration_per_batch.png"):
        assert (out / name).stat().st_size > 1000 if name.endswith(".png") else (out / name).exists()
        assert f"wrote {out / name}" in result.output
    assert "| random_page | 50% |" in (out / "summary.md").read_text(encoding="utf-8")

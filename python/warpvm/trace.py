"""Fault-batch traces analysed the way the SC21 UVM study does (docs/tracing.md).

A trace is a CSV with one row per serviced batch: workload, cache_fraction, batch, faults,
unique_faults, blocks, pages_faulted, pages_prefetched, chunks_evicted, pages_evicted.
`warpvm-sim --model uvm --trace FILE` writes one; the GPU transports will write the same
columns (plus timings).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from statistics import fmean

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from warpvm.plots import save_png
from warpvm.results import ResultsError, format_fraction


@dataclass(frozen=True)
class Batch:
    """One serviced fault batch."""

    workload: str
    cache_fraction: float
    batch: int
    faults: int
    unique_faults: int
    blocks: int
    pages_faulted: int
    pages_prefetched: int
    chunks_evicted: int
    pages_evicted: int

    @property
    def run(self) -> tuple[str, float]:
        """The run this batch belongs to: (workload, cache fraction)."""
        return (self.workload, self.cache_fraction)


_COLUMNS = [f.name for f in fields(Batch)]


def load_trace(path: Path) -> list[Batch]:
    """Reads a batch trace; raises ResultsError naming the file and line of a bad row."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ResultsError(f"{path}: missing columns {', '.join(missing)}")
        batches = []
        for row in reader:
            try:
                batches.append(
                    Batch(
                        workload=row["workload"],
                        cache_fraction=float(row["cache_fraction"]),
                        **{c: int(row[c]) for c in _COLUMNS[2:]},
                    )
                )
            except (TypeError, ValueError) as error:
                raise ResultsError(f"{path}:{reader.line_num}: bad row: {error}") from None
    return batches


@dataclass(frozen=True)
class RunSummary:
    """The study's per-run numbers: batch sizes, duplicates, VA blocks, prefetch and eviction."""

    workload: str
    cache_fraction: float
    batches: int
    mean_faults: float
    mean_unique_faults: float
    duplicate_share: float
    mean_blocks: float
    faults_per_block: float
    prefetched_share: float
    pages_evicted: int


def runs(batches: Iterable[Batch]) -> dict[tuple[str, float], list[Batch]]:
    """Batches grouped by run, in order of appearance."""
    grouped: dict[tuple[str, float], list[Batch]] = {}
    for b in batches:
        grouped.setdefault(b.run, []).append(b)
    return grouped


def summarize(batches: Iterable[Batch]) -> list[RunSummary]:
    """One summary per run."""
    out = []
    for (workload, fraction), group in runs(batches).items():
        faults = sum(b.faults for b in group)
        unique = sum(b.unique_faults for b in group)
        blocks = sum(b.blocks for b in group)
        migrated = sum(b.pages_faulted + b.pages_prefetched for b in group)
        out.append(
            RunSummary(
                workload=workload,
                cache_fraction=fraction,
                batches=len(group),
                mean_faults=fmean(b.faults for b in group),
                mean_unique_faults=fmean(b.unique_faults for b in group),
                duplicate_share=(faults - unique) / faults if faults else 0.0,
                mean_blocks=fmean(b.blocks for b in group),
                faults_per_block=unique / blocks if blocks else 0.0,
                prefetched_share=sum(b.pages_prefetched for b in group) / migrated if migrated else 0.0,
                pages_evicted=sum(b.pages_evicted for b in group),
            )
        )
    return out


def markdown_summary(summaries: Iterable[RunSummary]) -> str:
    """A markdown table of the run summaries."""
    lines = [
        "# Fault batches",
        "",
        "| workload | cache | batches | faults / batch | unique / batch | duplicates | VA blocks / batch "
        "| faults / block | prefetched share | pages evicted |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.workload} | {format_fraction(s.cache_fraction)} | {s.batches} | {s.mean_faults:.1f} "
            f"| {s.mean_unique_faults:.1f} | {s.duplicate_share:.1%} | {s.mean_blocks:.2f} "
            f"| {s.faults_per_block:.1f} | {s.prefetched_share:.1%} | {s.pages_evicted} |"
        )
    return "\n".join(lines) + "\n"


def _label(run: tuple[str, float]) -> str:
    return f"{run[0]}, cache {format_fraction(run[1])}"


def _chart(path: Path, title: str, xlabel: str, ylabel: str, draw: Callable[[Axes], None]) -> Path:
    """One set of axes drawn by `draw`, titled, labelled, with a legend and a grid, saved as PNG."""
    figure = Figure(layout="constrained", figsize=(8.5, 4.5))
    ax = figure.add_subplot()
    draw(ax)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    save_png(figure, path)
    return path


def plot_batch_sizes(batches: Iterable[Batch], path: Path) -> Path:
    """Raw and deduplicated batch sizes over the run (the study's Fig. 8)."""

    def draw(ax: Axes) -> None:
        for index, (run, group) in enumerate(runs(batches).items()):
            color = f"C{index % 10}"
            x = [b.batch for b in group]
            ax.plot(x, [b.faults for b in group], color=color, label=f"{_label(run)}: raw")
            ax.plot(
                x,
                [b.unique_faults for b in group],
                color=color,
                linestyle="--",
                label=f"{_label(run)}: unique",
            )

    return _chart(path, "Fault batch sizes, raw and without duplicates", "batch", "faults in batch", draw)


def plot_blocks_per_batch(batches: Iterable[Batch], path: Path) -> Path:
    """How many 2 MB VA blocks each batch touches (the study's Table 3, as a histogram)."""

    def draw(ax: Axes) -> None:
        for run, group in runs(batches).items():
            blocks = [b.blocks for b in group]
            ax.hist(blocks, bins=range(1, max(blocks) + 2), histtype="step", label=_label(run))

    return _chart(path, "2 MB VA blocks per fault batch", "VA blocks in batch", "batches", draw)


def plot_migration_per_batch(batches: Iterable[Batch], path: Path) -> Path:
    """Pages migrated against unique faults per batch: what the prefetcher adds (Figs. 6 and 14)."""

    def draw(ax: Axes) -> None:
        for run, group in runs(batches).items():
            migrated = [b.pages_faulted + b.pages_prefetched for b in group]
            ax.scatter([b.unique_faults for b in group], migrated, s=8, alpha=0.6, label=_label(run))

    return _chart(
        path,
        "Pages migrated per batch (faulted + prefetched)",
        "unique faults in batch",
        "4 KB pages migrated",
        draw,
    )

"""The analyses `warpvm trace` runs, in the study's order, and what it makes of them: the tables,
summary.md and the plots."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from matplotlib.figure import Figure

from warpvm.plots import save_png
from warpvm.results import TextTable, markdown_table
from warpvm.trace.batches import Batch
from warpvm.trace.blocks import block_stats, block_table, blocks_figure
from warpvm.trace.eviction import eviction_costs, eviction_figure, eviction_split_table, level_table
from warpvm.trace.migration import migration_figure, migration_fits, migration_table
from warpvm.trace.prefetch import prefetch_comparisons, prefetch_figure, prefetch_table
from warpvm.trace.summary import batch_sizes_figure, summarize, summary_table
from warpvm.trace.sweep import batch_size_sweeps, sweep_figure, sweep_table
from warpvm.trace.transfer import transfer_figure, transfer_shares, transfer_table

T = TypeVar("T")


@dataclass(frozen=True)
class Analysis(Generic[T]):
    """One analysis: its results, the tables made of them (none without results), and the plot
    written when the data supports it (`figure` gives None when not)."""

    results: Callable[[Sequence[Batch]], list[T]]
    tables: tuple[Callable[[list[T]], TextTable], ...]
    plot: str  # the plot's file name
    figure: Callable[[Sequence[Batch]], Figure | None]
    what: str  # the study's figure or table the plot shows
    needs: str  # what the plot needs, said when it is skipped

    def tables_of(self, batches: Sequence[Batch]) -> list[TextTable]:
        results = self.results(batches)
        return [table(results) for table in self.tables] if results else []


ANALYSES: tuple[Analysis[Any], ...] = (
    Analysis(summarize, (summary_table,), "batch_sizes.png", batch_sizes_figure, "Fig. 8", "batches"),
    Analysis(
        migration_fits, (migration_table,), "migration_per_batch.png", migration_figure, "Fig. 6", "batches"
    ),
    Analysis(block_stats, (block_table,), "blocks_per_batch.png", blocks_figure, "Table 3", "batches"),
    Analysis(
        transfer_shares,
        (transfer_table,),
        "transfer_share.png",
        transfer_figure,
        "Fig. 7",
        "a run with duration_ns and transfer_ns in every batch (GPU traces; the simulator has no time)",
    ),
    Analysis(
        batch_size_sweeps,
        (sweep_table,),
        "batch_size_sweep.png",
        sweep_figure,
        "Fig. 9",
        "two or more runs differing only in batch_limit (warpvm-sim --batch-size N, one trace per N)",
    ),
    Analysis(
        prefetch_comparisons,
        (prefetch_table,),
        "prefetch.png",
        prefetch_figure,
        "Fig. 14",
        "two runs differing only in prefetch (warpvm-sim with and without --no-prefetch)",
    ),
    Analysis(
        eviction_costs,
        (eviction_split_table, level_table),
        "eviction_cost.png",
        eviction_figure,
        "Figs. 12-13",
        "a batch that evicted (cache_fraction below 1 and data larger than the cache)",
    ),
)


def tables(batches: Sequence[Batch]) -> list[TextTable]:
    """Every table the data supports, in the study's order."""
    return [table for analysis in ANALYSES for table in analysis.tables_of(batches)]


def markdown_summary(batches: Sequence[Batch], notes: Iterable[str] = ()) -> str:
    """summary.md: every table, then `notes` (e.g. plots skipped and why)."""
    lines = ["# Fault batches", ""]
    for table in tables(batches):
        lines += [f"## {table.title}", "", markdown_table(table), ""]
    notes = list(notes)
    if notes:
        lines += ["## Not shown", "", *(f"- {note}" for note in notes), ""]
    return "\n".join(lines)


def write_plots(batches: Sequence[Batch], out: Path) -> tuple[list[Path], list[str]]:
    """Writes every plot the data supports into `out`; returns the paths and, for each plot
    skipped, why."""
    written, skipped = [], []
    for analysis in ANALYSES:
        path = save_png(analysis.figure(batches), out / analysis.plot)
        if path is None:
            skipped.append(f"{analysis.plot} ({analysis.what}): needs {analysis.needs}")
        else:
            written.append(path)
    return written, skipped

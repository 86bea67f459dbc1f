"""Table 3: 2 MB VA blocks per batch and unique faults per block."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import fmean, median

from matplotlib.figure import Figure

from warpvm.results import TextTable
from warpvm.trace.analysis import finish_axes, new_figure, per_run, run_table
from warpvm.trace.batches import Batch, Run, runs


@dataclass(frozen=True)
class BlockStats:
    """Table 3 for one run. The trace has per-batch counts, not per-block ones: the mean faults per
    block is exact (all unique faults over all block visits); median and max are those of each
    batch's average (unique faults / blocks)."""

    run: Run
    mean_blocks: float
    median_blocks: float
    max_blocks: int
    mean_faults_per_block: float
    median_faults_per_block: float
    max_faults_per_block: float

    @classmethod
    def of(cls, run: Run, group: list[Batch]) -> BlockStats:
        blocks = [b.blocks for b in group]
        per_block = [b.unique_faults / b.blocks for b in group if b.blocks]
        total_blocks = sum(blocks)
        return cls(
            run=run,
            mean_blocks=fmean(blocks),
            median_blocks=median(blocks),
            max_blocks=max(blocks),
            mean_faults_per_block=sum(b.unique_faults for b in group) / total_blocks if total_blocks else 0,
            median_faults_per_block=median(per_block) if per_block else 0.0,
            max_faults_per_block=max(per_block, default=0.0),
        )


def block_stats(batches: Iterable[Batch]) -> list[BlockStats]:
    """Table 3 per run (batches touching no block are left out of faults per block)."""
    return per_run(batches, BlockStats.of)


def block_table(stats: Iterable[BlockStats]) -> TextTable:
    headers = (
        "blocks / batch: mean",
        "median",
        "max",
        "faults / block: mean",
        "median*",
        "max*",
    )
    rows = (
        (
            s.run,
            (
                f"{s.mean_blocks:.2f}",
                f"{s.median_blocks:g}",
                str(s.max_blocks),
                f"{s.mean_faults_per_block:.2f}",
                f"{s.median_faults_per_block:.2f}",
                f"{s.max_faults_per_block:.2f}",
            ),
        )
        for s in stats
    )
    return run_table(
        "Table 3: 2 MB VA blocks per batch, unique faults per block (* of each batch's average)",
        headers,
        rows,
    )


def blocks_figure(batches: Sequence[Batch]) -> Figure | None:
    """Table 3 as a histogram: how many 2 MB VA blocks each batch touches."""
    grouped = runs(batches)
    if not grouped:
        return None
    figure, (ax,) = new_figure()
    for run, group in grouped.items():
        blocks = [b.blocks for b in group]
        ax.hist(blocks, bins=range(0, max(blocks) + 2), histtype="step", label=run.label())
    finish_axes(ax, "Table 3: 2 MB VA blocks per fault batch", "VA blocks in batch", "batches")
    return figure

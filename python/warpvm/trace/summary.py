"""The per-run summary (batch sizes, duplicates, VA blocks, prefetch, eviction, time) and Fig. 8,
the batch sizes over a run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from matplotlib.figure import Figure

from warpvm.results import TextTable
from warpvm.trace.analysis import finish_axes, format_ms, new_figure, per_run, run_table, time_axis
from warpvm.trace.batches import Batch, Run, runs, total_ns


@dataclass(frozen=True)
class RunTotals:
    """A run's totals (the summary and the prefetch comparison are made of them)."""

    batches: int
    faults: int
    unique_faults: int
    pages_migrated: int
    pages_prefetched: int
    pages_evicted: int
    total_ns: int | None


def run_totals(group: Sequence[Batch]) -> RunTotals:
    """The totals of a run's batches."""
    return RunTotals(
        batches=len(group),
        faults=sum(b.faults for b in group),
        unique_faults=sum(b.unique_faults for b in group),
        pages_migrated=sum(b.pages_migrated for b in group),
        pages_prefetched=sum(b.pages_prefetched for b in group),
        pages_evicted=sum(b.pages_evicted for b in group),
        total_ns=total_ns(group),
    )


@dataclass(frozen=True)
class RunSummary:
    """The study's per-run numbers: batch sizes, duplicates, VA blocks, prefetch, eviction, time."""

    run: Run
    batches: int
    mean_faults: float
    mean_unique_faults: float
    duplicate_share: float
    mean_blocks: float
    faults_per_block: float
    prefetched_share: float
    pages_evicted: int
    total_ns: int | None

    @property
    def workload(self) -> str:
        return self.run.workload

    @property
    def cache_fraction(self) -> float:
        return self.run.cache_fraction

    @classmethod
    def of(cls, run: Run, group: list[Batch]) -> RunSummary:
        t = run_totals(group)
        blocks = sum(b.blocks for b in group)
        return cls(
            run=run,
            batches=t.batches,
            mean_faults=t.faults / t.batches,
            mean_unique_faults=t.unique_faults / t.batches,
            duplicate_share=(t.faults - t.unique_faults) / t.faults if t.faults else 0.0,
            mean_blocks=blocks / t.batches,
            faults_per_block=t.unique_faults / blocks if blocks else 0.0,
            prefetched_share=t.pages_prefetched / t.pages_migrated if t.pages_migrated else 0.0,
            pages_evicted=t.pages_evicted,
            total_ns=t.total_ns,
        )


def summarize(batches: Iterable[Batch]) -> list[RunSummary]:
    """One summary per run."""
    return per_run(batches, RunSummary.of)


def summary_table(summaries: Iterable[RunSummary]) -> TextTable:
    """Per run: batches, raw and unique faults per batch, duplicates, blocks, prefetch, eviction, time."""
    headers = (
        "batches",
        "faults / batch",
        "unique / batch",
        "duplicates",
        "VA blocks / batch",
        "faults / block",
        "prefetched share",
        "pages evicted",
        "service ms",
    )
    rows = (
        (
            s.run,
            (
                str(s.batches),
                f"{s.mean_faults:.1f}",
                f"{s.mean_unique_faults:.1f}",
                f"{s.duplicate_share:.1%}",
                f"{s.mean_blocks:.2f}",
                f"{s.faults_per_block:.1f}",
                f"{s.prefetched_share:.1%}",
                str(s.pages_evicted),
                format_ms(s.total_ns),
            ),
        )
        for s in summaries
    )
    return run_table("Fault batches per run", headers, rows)


def batch_sizes_figure(batches: Sequence[Batch]) -> Figure | None:
    """Fig. 8: raw (upper) and deduplicated (lower) batch sizes over the run."""
    grouped = runs(batches)
    if not grouped:
        return None
    x_of, xlabel = time_axis(grouped)
    figure, (raw, unique) = new_figure(2, 1, height=3.2)
    for run, group in grouped.items():
        x = [x_of(b) for b in group]
        raw.plot(x, [b.faults for b in group], marker=".", markersize=3, linewidth=0.8, label=run.label())
        unique.plot(x, [b.unique_faults for b in group], marker=".", markersize=3, linewidth=0.8)
    finish_axes(raw, "Fig. 8: faults per batch as taken from the buffer", "", "faults")
    finish_axes(unique, "... and with duplicate faults removed", xlabel, "unique faults", legend=False)
    return figure

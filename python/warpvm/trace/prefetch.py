"""Fig. 14: the same run with and without prefetching."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from matplotlib.figure import Figure

from warpvm.results import TextTable
from warpvm.trace.analysis import finish_axes, format_ms, new_figure, run_table
from warpvm.trace.batches import Batch, Run, run_label, runs
from warpvm.trace.summary import RunTotals, run_totals


@dataclass(frozen=True)
class PrefetchComparison:
    """Two runs differing only in `prefetch` (Fig. 14)."""

    workload: str
    cache_fraction: float
    batch_limit: int
    off: RunTotals
    on: RunTotals

    def label(self) -> str:
        return run_label(self.workload, self.cache_fraction, self.batch_limit)

    def run(self, prefetch: bool) -> Run:
        """The run of the pair with prefetching on or off."""
        return Run(self.workload, self.cache_fraction, self.batch_limit, prefetch)

    @property
    def batch_reduction(self) -> float:
        """Share of batches prefetching saved (the study: 93% for sgemm)."""
        return 1 - self.on.batches / self.off.batches if self.off.batches else 0.0


def prefetch_comparisons(batches: Iterable[Batch]) -> list[PrefetchComparison]:
    """Every pair of runs differing only in prefetch."""
    grouped = runs(batches)
    out = []
    for run, group in grouped.items():
        if not run.prefetch:
            continue
        off = grouped.get(replace(run, prefetch=False))
        if off is not None:
            out.append(
                PrefetchComparison(
                    run.workload, run.cache_fraction, run.batch_limit, run_totals(off), run_totals(group)
                )
            )
    return out


def prefetch_table(comparisons: Iterable[PrefetchComparison]) -> TextTable:
    headers = (
        "batches",
        "faults",
        "unique faults",
        "pages migrated",
        "pages prefetched",
        "pages evicted",
        "service ms",
        "batches saved",
    )
    rows = (
        (
            c.run(prefetch),
            (
                str(t.batches),
                str(t.faults),
                str(t.unique_faults),
                str(t.pages_migrated),
                str(t.pages_prefetched),
                str(t.pages_evicted),
                format_ms(t.total_ns),
                f"{c.batch_reduction:.1%}" if prefetch else "",
            ),
        )
        for c in comparisons
        for prefetch, t in ((False, c.off), (True, c.on))
    )
    return run_table("Fig. 14: batches with and without prefetching", headers, rows)


def _bar_value(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def prefetch_figure(batches: Sequence[Batch]) -> Figure | None:
    """Fig. 14: batches, faults and pages migrated (and, timed, service time) with prefetching
    off and on; None without runs differing only in prefetch."""
    comparisons = prefetch_comparisons(batches)
    if not comparisons:
        return None
    metrics: list[tuple[str, Callable[[RunTotals], float]]] = [
        ("batches", lambda t: float(t.batches)),
        ("faults", lambda t: float(t.faults)),
        ("pages migrated", lambda t: float(t.pages_migrated)),
    ]
    if all(c.on.total_ns is not None and c.off.total_ns is not None for c in comparisons):
        metrics.append(("service time (ms)", lambda t: (t.total_ns or 0) / 1e6))
    figure, axes = new_figure(
        1, len(metrics), height=4.5, width=max(9.0, 2.2 * len(metrics) + 0.5 * len(comparisons))
    )
    width = 0.4
    for ax, (name, value) in zip(axes, metrics, strict=True):
        for offset, (legend, pick, color) in enumerate(
            (("prefetch off", lambda c: c.off, "C7"), ("prefetch on", lambda c: c.on, "C0"))
        ):
            xs = [i + (offset - 0.5) * width for i in range(len(comparisons))]
            bars = ax.bar(xs, [value(pick(c)) for c in comparisons], width, color=color, label=legend)
            ax.bar_label(bars, fmt=_bar_value, fontsize=6, padding=2)
        ax.set_xticks(
            range(len(comparisons)), [c.label() for c in comparisons], rotation=30, ha="right", fontsize=7
        )
        finish_axes(ax, name, "", name, legend=ax is axes[0])
    figure.suptitle("Fig. 14: with and without prefetching")
    return figure

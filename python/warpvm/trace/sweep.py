"""Fig. 9: the batch-size sweep, runs that differ only in their batch limit."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from matplotlib.figure import Figure

from warpvm.plots import log2_x_axis
from warpvm.results import TextTable, format_fraction, group_by
from warpvm.trace.analysis import finish_axes, format_ms, new_figure
from warpvm.trace.batches import Batch, on_off, run_label
from warpvm.trace.summary import summarize


@dataclass(frozen=True)
class SweepPoint:
    """One batch limit of a sweep."""

    batch_limit: int
    batches: int
    mean_unique_faults: float
    duplicate_share: float
    total_ns: int | None


@dataclass(frozen=True)
class Sweep:
    """Runs that differ only in batch_limit (Fig. 9), ordered by batch limit."""

    workload: str
    cache_fraction: float
    prefetch: bool
    points: list[SweepPoint]

    def label(self) -> str:
        return run_label(self.workload, self.cache_fraction, prefetch=self.prefetch)

    @property
    def timed(self) -> bool:
        return all(p.total_ns is not None for p in self.points)


def batch_size_sweeps(batches: Iterable[Batch]) -> list[Sweep]:
    """Every set of two or more runs differing only in batch_limit."""
    families = group_by(summarize(batches), lambda s: (s.run.workload, s.run.cache_fraction, s.run.prefetch))
    out = []
    for (workload, fraction, prefetch), family in families.items():
        if len(family) < 2:
            continue
        points = [
            SweepPoint(s.run.batch_limit, s.batches, s.mean_unique_faults, s.duplicate_share, s.total_ns)
            for s in sorted(family, key=lambda s: s.run.batch_limit)
        ]
        out.append(Sweep(workload, fraction, prefetch, points))
    return out


def sweep_table(sweeps: Iterable[Sweep]) -> TextTable:
    # The sweep's own columns first, then the batch limit that varies along it.
    headers = (
        "workload",
        "cache",
        "prefetch",
        "batch limit",
        "batches",
        "unique / batch",
        "duplicates",
        "service ms",
    )
    rows = [
        (
            s.workload,
            format_fraction(s.cache_fraction),
            on_off(s.prefetch),
            str(p.batch_limit),
            str(p.batches),
            f"{p.mean_unique_faults:.1f}",
            f"{p.duplicate_share:.1%}",
            format_ms(p.total_ns),
        )
        for s in sweeps
        for p in s.points
    ]
    return TextTable("Fig. 9: batch-size sweep (runs differing only in batch limit)", headers, rows)


def sweep_figure(batches: Sequence[Batch]) -> Figure | None:
    """Fig. 9: batches, unique faults per batch and (timed) total service time against the batch
    limit; None without runs differing only in batch_limit."""
    sweeps = batch_size_sweeps(batches)
    if not sweeps:
        return None
    timed_sweeps = [s for s in sweeps if s.timed]
    figure, axes = new_figure(1, 3 if timed_sweeps else 2, height=4.2, width=15.0 if timed_sweeps else 11.0)
    limits = sorted({p.batch_limit for s in sweeps for p in s.points})
    metrics: list[tuple[str, list[Sweep], Callable[[SweepPoint], float]]] = [
        ("batches", sweeps, lambda p: float(p.batches)),
        ("mean unique faults per batch", sweeps, lambda p: p.mean_unique_faults),
    ]
    if timed_sweeps:
        metrics.append(("total service time (ms)", timed_sweeps, lambda p: (p.total_ns or 0) / 1e6))
    for ax, (ylabel, chosen, y_of) in zip(axes, metrics, strict=True):
        for s in chosen:
            ax.plot(
                [p.batch_limit for p in s.points], [y_of(p) for p in s.points], marker="o", label=s.label()
            )
        log2_x_axis(ax, limits, [str(n) for n in limits])
        finish_axes(ax, ylabel, "batch limit (faults)", ylabel, legend=ax is axes[0])
    figure.suptitle("Fig. 9: batch-size sweep")
    return figure

"""Fig. 6: batch size (and, timed, batch time) against the data a batch migrates."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from statistics import StatisticsError, fmean, linear_regression

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from warpvm.results import TextTable
from warpvm.trace.analysis import finish_axes, new_figure, per_run, run_table
from warpvm.trace.batches import MIB, PAGE_BYTES, Batch, Run, runs, timed


@dataclass(frozen=True)
class Fit:
    """A least-squares line y = slope * x + intercept."""

    slope: float
    intercept: float

    def __call__(self, x: float) -> float:
        return self.slope * x + self.intercept


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Fit | None:
    """The least-squares line through the points; None with fewer than two distinct x."""
    try:
        slope, intercept = linear_regression(xs, ys)
    except StatisticsError:
        return None
    return Fit(slope, intercept)


def mib_migrated(b: Batch) -> float:
    """MiB moved to the GPU by the batch."""
    return b.pages_migrated * PAGE_BYTES / MIB


@dataclass(frozen=True)
class MigrationFit:
    """Fig. 6 for one run: data migrated per batch, and the best-fit lines of batch size (unique
    faults) and, when timed, batch time (ns) against MiB migrated."""

    run: Run
    mean_mib: float
    max_mib: float
    size_fit: Fit | None
    time_fit: Fit | None

    @classmethod
    def of(cls, run: Run, group: list[Batch]) -> MigrationFit:
        xs = [mib_migrated(b) for b in group]
        time_fit = fit_line(xs, [float(b.duration_ns or 0) for b in group]) if timed(group) else None
        return cls(
            run=run,
            mean_mib=fmean(xs),
            max_mib=max(xs),
            size_fit=fit_line(xs, [float(b.unique_faults) for b in group]),
            time_fit=time_fit,
        )


def migration_fits(batches: Iterable[Batch]) -> list[MigrationFit]:
    """Fig. 6 per run (a run whose batches all migrate the same amount gets no lines)."""
    return per_run(batches, MigrationFit.of)


def migration_table(fits: Iterable[MigrationFit]) -> TextTable:
    headers = (
        "MiB / batch: mean",
        "max",
        "unique faults per MiB",
        "+ faults",
        "batch us per MiB",
        "+ us",
    )

    def pair(fit: Fit | None, scale: float) -> tuple[str, str]:
        return ("-", "-") if fit is None else (f"{fit.slope / scale:.1f}", f"{fit.intercept / scale:.1f}")

    rows = (
        (f.run, (f"{f.mean_mib:.3f}", f"{f.max_mib:.3f}", *pair(f.size_fit, 1.0), *pair(f.time_fit, 1e3)))
        for f in fits
    )
    return run_table(
        "Fig. 6: best-fit lines against MiB migrated per batch (slope, + intercept; '-': no fit or untimed)",
        headers,
        rows,
    )


def migration_figure(batches: Sequence[Batch]) -> Figure | None:
    """Fig. 6: batch size against MiB migrated per batch, and batch time when any run is timed,
    each run with its best-fit line."""
    grouped = runs(batches)
    if not grouped:
        return None
    timed_runs = {run: group for run, group in grouped.items() if timed(group)}
    figure, axes = new_figure(1, 2 if timed_runs else 1, width=13.0 if timed_runs else 8.5)
    panels: list[tuple[Axes, dict[Run, list[Batch]], Callable[[Batch], float]]] = [
        (axes[0], grouped, lambda b: float(b.unique_faults))
    ]
    if timed_runs:
        panels.append((axes[1], timed_runs, lambda b: (b.duration_ns or 0) / 1e3))
    for ax, chosen, y_of in panels:
        for index, (run, group) in enumerate(chosen.items()):
            color = f"C{index % 10}"
            xs = [mib_migrated(b) for b in group]
            ys = [y_of(b) for b in group]
            ax.scatter(xs, ys, s=8, alpha=0.5, color=color, label=run.label())
            if (fit := fit_line(xs, ys)) is not None:
                ends = [min(xs), max(xs)]
                ax.plot(ends, [fit(x) for x in ends], color=color, linewidth=1.2)
    finish_axes(
        axes[0], "Fig. 6: batch size against data migrated", "MiB migrated to the GPU", "unique faults"
    )
    if timed_runs:
        finish_axes(
            axes[1], "Fig. 6: batch time against data migrated", "MiB migrated to the GPU", "batch time (us)"
        )
    return figure

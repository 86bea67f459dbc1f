"""Figs. 12-13: what eviction adds to a batch's cost, and the levels batch costs fall into."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

from matplotlib.figure import Figure

from warpvm.results import TextTable, group_by
from warpvm.trace.analysis import finish_axes, new_figure, per_run, run_table, time_axis
from warpvm.trace.batches import Batch, Run, runs, timed

# Sorted batch costs start a new level where one is this many times the previous.
LEVEL_RATIO = 1.5


def batch_cost(b: Batch, use_time: bool) -> float:
    """A batch's cost: its service time in ns, or (untimed) the 4 KB pages it moved either way."""
    return float(b.duration_ns or 0) if use_time else float(b.pages_moved)


def cost_levels(costs: Iterable[float], ratio: float = LEVEL_RATIO) -> list[list[float]]:
    """Costs split into levels: sorted, a new level starts where a cost is `ratio` times the
    previous one or more (from zero, at any positive cost)."""
    levels: list[list[float]] = []
    for cost in sorted(costs):
        previous = levels[-1][-1] if levels else None
        if previous is not None and (cost < previous * ratio if previous > 0 else cost == 0):
            levels[-1].append(cost)
        else:
            levels.append([cost])
    return levels


@dataclass(frozen=True)
class CostLevel:
    """One level of batch cost among batches evicting the same number of chunks."""

    chunks_evicted: int
    batches: int
    low: float
    median: float
    high: float


@dataclass(frozen=True)
class EvictionCost:
    """Figs. 12-13 for one run with evictions: costs split by whether the batch evicted, and the
    cost levels per number of chunks evicted. `timed`: costs are ns, else pages moved."""

    run: Run
    timed: bool
    without: list[float]
    with_eviction: list[float]
    levels: list[CostLevel]

    @property
    def unit(self) -> str:
        return "us" if self.timed else "pages"

    def show(self, cost: float) -> str:
        """A cost in the run's unit (us or pages)."""
        return f"{cost / 1e3:.1f} us" if self.timed else f"{cost:g} pages"


def eviction_costs(batches: Iterable[Batch], ratio: float = LEVEL_RATIO) -> list[EvictionCost]:
    """Figs. 12-13 for every run in which some batch evicted."""

    def of(run: Run, group: list[Batch]) -> EvictionCost | None:
        if not any(b.chunks_evicted for b in group):
            return None
        use_time = timed(group)
        by_count = {
            count: [batch_cost(b, use_time) for b in evicting]
            for count, evicting in group_by(group, lambda b: b.chunks_evicted).items()
        }
        levels = [
            CostLevel(count, len(level), level[0], median(level), level[-1])
            for count in sorted(by_count)
            for level in cost_levels(by_count[count], ratio)
        ]
        return EvictionCost(
            run=run,
            timed=use_time,
            without=by_count.get(0, []),
            with_eviction=[c for count, costs in by_count.items() if count for c in costs],
            levels=levels,
        )

    return per_run(batches, of)


def eviction_split_table(costs: Iterable[EvictionCost]) -> TextTable:
    headers = (
        "cost",
        "batches without eviction",
        "median without",
        "batches evicting",
        "median evicting",
        "ratio",
    )

    def cells(e: EvictionCost) -> tuple[str, ...]:
        low = median(e.without) if e.without else None
        high = median(e.with_eviction)
        return (
            "service time" if e.timed else "pages moved",
            str(len(e.without)),
            "-" if low is None else e.show(low),
            str(len(e.with_eviction)),
            e.show(high),
            "-" if not low else f"{high / low:.2f}x",
        )

    return run_table(
        "Figs. 12-13: batch cost with and without eviction", headers, ((e.run, cells(e)) for e in costs)
    )


def level_table(costs: Iterable[EvictionCost]) -> TextTable:
    headers = ("chunks evicted", "level", "batches", "low", "median", "high")
    rows = (
        (
            e.run,
            (
                str(level.chunks_evicted),
                str(1 + sum(other.chunks_evicted == level.chunks_evicted for other in e.levels[:i])),
                str(level.batches),
                e.show(level.low),
                e.show(level.median),
                e.show(level.high),
            ),
        )
        for e in costs
        for i, level in enumerate(e.levels)
    )
    return run_table(
        f"Figs. 12-13: cost levels per number of chunks evicted (new level at a {LEVEL_RATIO:g}x jump)",
        headers,
        rows,
    )


def eviction_figure(batches: Sequence[Batch]) -> Figure | None:
    """Figs. 12-13, one row per run that evicted: batch cost over the run coloured by chunks
    evicted (left), and cost against chunks evicted with each level's median (right)."""
    costs = eviction_costs(batches)
    if not costs:
        return None
    grouped = runs(batches)
    x_of, xlabel = time_axis({e.run: grouped[e.run] for e in costs})
    figure, axes = new_figure(len(costs), 2, height=3.0, width=13.0)
    counts = sorted({b.chunks_evicted for e in costs for b in grouped[e.run]})
    color_of = {n: ("0.6" if n == 0 else f"C{i % 10}") for i, n in enumerate(counts)}
    for row, e in enumerate(costs):
        series, levels = axes[2 * row], axes[2 * row + 1]
        group = grouped[e.run]
        scale = 1e3 if e.timed else 1.0
        ylabel = "batch time (us)" if e.timed else "pages moved"
        present = sorted({b.chunks_evicted for b in group})
        position = {n: i for i, n in enumerate(present)}  # one column per eviction count
        for n in present:
            chosen = [b for b in group if b.chunks_evicted == n]
            ys = [batch_cost(b, e.timed) / scale for b in chosen]
            label = "no eviction" if n == 0 else f"{n} chunk{'s' if n > 1 else ''} evicted"
            series.scatter([x_of(b) for b in chosen], ys, s=8, alpha=0.6, color=color_of[n], label=label)
            levels.scatter([position[n]] * len(ys), ys, s=8, alpha=0.4, color=color_of[n])
        for level in e.levels:
            x = position[level.chunks_evicted]
            levels.hlines(level.median / scale, x - 0.3, x + 0.3, color="black")
        levels.set_xticks(range(len(present)), [str(n) for n in present])
        levels.set_xlim(-0.6, len(present) - 0.4)
        finish_axes(series, e.run.label(), xlabel if row == len(costs) - 1 else "", ylabel)
        finish_axes(levels, "cost levels (bars: level medians)", "2 MB chunks evicted", ylabel, legend=False)
    figure.suptitle("Figs. 12-13: batch cost under eviction")
    return figure

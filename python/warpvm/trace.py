"""Fault-batch traces analysed the way the SC21 UVM study does (docs/tracing.md is the contract).

A trace is a CSV with one row per serviced batch, columns `COLUMNS` in that order. A run is
identified by (workload, cache_fraction, batch_limit, prefetch). `warpvm-sim --model uvm --trace
FILE` writes traces without the GPU-only columns (start_ns, duration_ns, transfer_ns and
faults_flushed empty); the GPU transport (`warpvm-bench --modes warpvm_uvm --trace FILE`) fills
them. Every analysis works on counts; the ones that need time (Fig. 7, service times in Figs. 6,
9, 12-14) say so, or fall back to counts, when a run has none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import StatisticsError, fmean, linear_regression, median

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from warpvm.plots import log2_x_axis, save_png
from warpvm.results import ResultsError, TextTable, format_fraction, load_csv, markdown_table

COLUMNS = (
    "workload",
    "cache_fraction",
    "batch_limit",
    "prefetch",
    "batch",
    "faults",
    "unique_faults",
    "blocks",
    "pages_faulted",
    "pages_prefetched",
    "chunks_evicted",
    "pages_evicted",
    "start_ns",
    "duration_ns",
    "transfer_ns",
    "faults_flushed",
    "pages_written_back",
    "eviction_ns",
)
# Measured on a GPU only (empty in simulated traces, and may be absent altogether): the columns
# from start_ns on.
TIMING_COLUMNS = COLUMNS[COLUMNS.index("start_ns") :]
# Written after COLUMNS by newer GPU runs (read by name; older traces lack it).
LATER_COLUMNS = ("orders_cancelled",)
_COUNT_COLUMNS = COLUMNS[4:12]
_REQUIRED_COLUMNS = tuple(c for c in COLUMNS if c not in TIMING_COLUMNS)

PAGE_BYTES = 4096
MIB = 2**20
# Fig. 7: the study finds data transfer below this share of batch time for almost all batches.
TRANSFER_SHARE_MARK = 0.25
# Figs. 12-13: sorted batch costs start a new level where one is this many times the previous.
LEVEL_RATIO = 1.5


def _label(
    workload: str, cache_fraction: float, batch_limit: int | None = None, prefetch: bool | None = None
) -> str:
    """'workload, cache 50%[, 256/batch][, prefetch|no prefetch]': what names a run or a set of runs."""
    parts = [workload, f"cache {format_fraction(cache_fraction)}"]
    if batch_limit is not None:
        parts.append(f"{batch_limit}/batch")
    if prefetch is not None:
        parts.append("prefetch" if prefetch else "no prefetch")
    return ", ".join(parts)


def _on_off(prefetch: bool) -> str:
    return "on" if prefetch else "off"


@dataclass(frozen=True, order=True)
class Run:
    """What identifies a run: workload, cache size, batch limit and whether the prefetcher ran."""

    workload: str
    cache_fraction: float
    batch_limit: int
    prefetch: bool

    def label(self) -> str:
        """E.g. 'stream, cache 50%, 256/batch, prefetch'."""
        return _label(self.workload, self.cache_fraction, self.batch_limit, self.prefetch)

    def cells(self) -> tuple[str, str, str, str]:
        """The run's identifying table cells."""
        return (
            self.workload,
            format_fraction(self.cache_fraction),
            str(self.batch_limit),
            _on_off(self.prefetch),
        )


RUN_HEADERS = ("workload", "cache", "batch limit", "prefetch")


@dataclass(frozen=True)
class Batch:
    """One serviced fault batch; the timings are None in simulator traces."""

    workload: str
    cache_fraction: float
    batch_limit: int
    prefetch: bool
    batch: int
    faults: int
    unique_faults: int
    blocks: int
    pages_faulted: int
    pages_prefetched: int
    chunks_evicted: int
    pages_evicted: int
    start_ns: int | None = None
    duration_ns: int | None = None
    transfer_ns: int | None = None
    faults_flushed: int | None = None  # dropped from the buffer after the batch; they fault again
    pages_written_back: int | None = None  # evicted dirty pages copied back (GPU runs)
    eviction_ns: int | None = None  # waiting for the device's evictions and writing back (GPU runs)
    orders_cancelled: int | None = None  # evictions withdrawn: their chunk's pages stayed held (GPU runs)

    @property
    def run(self) -> Run:
        """The run this batch belongs to."""
        return Run(self.workload, self.cache_fraction, self.batch_limit, self.prefetch)

    @property
    def pages_migrated(self) -> int:
        """4 KB pages moved to the GPU: faulted plus prefetched."""
        return self.pages_faulted + self.pages_prefetched

    @property
    def pages_moved(self) -> int:
        """4 KB pages moved either way: migrated to the GPU plus evicted back to the host."""
        return self.pages_migrated + self.pages_evicted

    @property
    def transfer_share(self) -> float | None:
        """Share of the service time spent moving data (Fig. 7); None when untimed or of zero duration."""
        if not self.duration_ns or self.transfer_ns is None:
            return None
        return self.transfer_ns / self.duration_ns

    @property
    def management_ns(self) -> int | None:
        """Service time not spent moving data (duration - transfer - eviction), when known."""
        if self.duration_ns is None or self.transfer_ns is None:
            return None
        return self.duration_ns - self.transfer_ns - (self.eviction_ns or 0)


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"negative count {value}")
    return value


def _optional_count(text: str | None) -> int | None:
    return None if text is None or text.strip() == "" else _count(text)


def _parse_row(row: dict[str, str | None]) -> Batch:
    """One CSV row as a Batch (load_csv checked its field count); ValueError when it breaks the schema."""
    prefetch = row["prefetch"]
    if prefetch not in ("0", "1"):
        raise ValueError(f"prefetch must be 1 or 0, got {prefetch!r}")
    b = Batch(
        workload=row["workload"],  # type: ignore[arg-type]
        cache_fraction=float(row["cache_fraction"]),  # type: ignore[arg-type]
        batch_limit=_count(row["batch_limit"]),  # type: ignore[arg-type]
        prefetch=prefetch == "1",
        **{c: _count(row[c]) for c in _COUNT_COLUMNS},  # type: ignore[arg-type]
        **{c: _optional_count(row.get(c)) for c in TIMING_COLUMNS + LATER_COLUMNS},
    )
    if b.batch_limit < 1:
        raise ValueError("batch_limit must be at least 1")
    if b.faults > b.batch_limit:
        raise ValueError(f"faults {b.faults} > batch_limit {b.batch_limit}")
    if b.unique_faults > b.faults:
        raise ValueError(f"unique_faults {b.unique_faults} > faults {b.faults}")
    if b.transfer_ns is not None and b.duration_ns is not None and b.transfer_ns > b.duration_ns:
        raise ValueError(f"transfer_ns {b.transfer_ns} > duration_ns {b.duration_ns}")
    busy = (b.transfer_ns or 0) + (b.eviction_ns or 0)
    if b.eviction_ns is not None and b.duration_ns is not None and busy > b.duration_ns:
        raise ValueError(f"transfer_ns + eviction_ns {busy} > duration_ns {b.duration_ns}")
    return b


def load_trace(path: Path) -> list[Batch]:
    """Reads a batch trace; raises ResultsError naming the file and line of a bad row.

    The timing columns may be empty (simulator traces) or absent; all others are required.
    """
    return load_csv(path, _REQUIRED_COLUMNS, _parse_row)


def load_traces(paths: Sequence[Path]) -> list[Batch]:
    """Reads several traces; a run may not be split over two files (ResultsError naming both)."""
    batches: list[Batch] = []
    seen: dict[Run, Path] = {}
    for path in paths:
        ours = load_trace(path)
        for run in dict.fromkeys(b.run for b in ours):
            if run in seen:
                raise ResultsError(
                    f"run {run.label()} is in both {seen[run]} and {path}: analyse them separately"
                )
            seen[run] = path
        batches += ours
    return batches


def runs(batches: Iterable[Batch]) -> dict[Run, list[Batch]]:
    """Batches grouped by run, each run's batches in trace order. Runs are ordered by workload (in
    order of appearance), then largest cache first, batch limit, prefetch off before on."""
    grouped: dict[Run, list[Batch]] = {}
    for b in batches:
        grouped.setdefault(b.run, []).append(b)
    workloads = {w: i for i, w in enumerate(dict.fromkeys(run.workload for run in grouped))}
    order = sorted(
        grouped, key=lambda r: (workloads[r.workload], -r.cache_fraction, r.batch_limit, r.prefetch)
    )
    return {run: grouped[run] for run in order}


def timed(group: Sequence[Batch]) -> bool:
    """Whether every batch of the run has a service time (duration_ns)."""
    return bool(group) and all(b.duration_ns is not None for b in group)


def transfer_timed(group: Sequence[Batch]) -> bool:
    """Whether every batch of the run has both duration_ns and transfer_ns (Fig. 7)."""
    return timed(group) and all(b.transfer_ns is not None for b in group)


def start_timed(group: Sequence[Batch]) -> bool:
    """Whether every batch of the run has a start time."""
    return bool(group) and all(b.start_ns is not None for b in group)


def total_ns(group: Sequence[Batch]) -> int | None:
    """Total service time of the run's batches, None when any is untimed."""
    return sum(b.duration_ns or 0 for b in group) if timed(group) else None


# ---------------------------------------------------------------------------------------------
# Per-run summary


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


def summarize(batches: Iterable[Batch]) -> list[RunSummary]:
    """One summary per run."""
    out = []
    for run, group in runs(batches).items():
        t = run_totals(group)
        blocks = sum(b.blocks for b in group)
        out.append(
            RunSummary(
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
        )
    return out


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def summary_table(summaries: Iterable[RunSummary]) -> TextTable:
    """Per run: batches, raw and unique faults per batch, duplicates, blocks, prefetch, eviction, time."""
    headers = (
        *RUN_HEADERS,
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
    rows = [
        (
            *s.run.cells(),
            str(s.batches),
            f"{s.mean_faults:.1f}",
            f"{s.mean_unique_faults:.1f}",
            f"{s.duplicate_share:.1%}",
            f"{s.mean_blocks:.2f}",
            f"{s.faults_per_block:.1f}",
            f"{s.prefetched_share:.1%}",
            str(s.pages_evicted),
            _ms(s.total_ns),
        )
        for s in summaries
    ]
    return TextTable("Fault batches per run", headers, rows)


# ---------------------------------------------------------------------------------------------
# Table 3: 2 MB VA blocks per batch and faults per block


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


def block_stats(batches: Iterable[Batch]) -> list[BlockStats]:
    """Table 3 per run (batches touching no block are left out of faults per block)."""
    out = []
    for run, group in runs(batches).items():
        blocks = [b.blocks for b in group]
        per_block = [b.unique_faults / b.blocks for b in group if b.blocks]
        total_blocks = sum(blocks)
        out.append(
            BlockStats(
                run=run,
                mean_blocks=fmean(blocks),
                median_blocks=median(blocks),
                max_blocks=max(blocks),
                mean_faults_per_block=sum(b.unique_faults for b in group) / total_blocks
                if total_blocks
                else 0,
                median_faults_per_block=median(per_block) if per_block else 0.0,
                max_faults_per_block=max(per_block, default=0.0),
            )
        )
    return out


def block_table(stats: Iterable[BlockStats]) -> TextTable:
    headers = (
        *RUN_HEADERS,
        "blocks / batch: mean",
        "median",
        "max",
        "faults / block: mean",
        "median*",
        "max*",
    )
    rows = [
        (
            *s.run.cells(),
            f"{s.mean_blocks:.2f}",
            f"{s.median_blocks:g}",
            str(s.max_blocks),
            f"{s.mean_faults_per_block:.2f}",
            f"{s.median_faults_per_block:.2f}",
            f"{s.max_faults_per_block:.2f}",
        )
        for s in stats
    ]
    return TextTable(
        "Table 3: 2 MB VA blocks per batch, unique faults per block (* of each batch's average)",
        headers,
        rows,
    )


# ---------------------------------------------------------------------------------------------
# Fig. 6: batch size (and, timed, batch time) against data migrated


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


def migration_fits(batches: Iterable[Batch]) -> list[MigrationFit]:
    out = []
    for run, group in runs(batches).items():
        xs = [mib_migrated(b) for b in group]
        time_fit = fit_line(xs, [float(b.duration_ns or 0) for b in group]) if timed(group) else None
        out.append(
            MigrationFit(
                run=run,
                mean_mib=fmean(xs),
                max_mib=max(xs),
                size_fit=fit_line(xs, [float(b.unique_faults) for b in group]),
                time_fit=time_fit,
            )
        )
    return out


def migration_table(fits: Iterable[MigrationFit]) -> TextTable:
    headers = (
        *RUN_HEADERS,
        "MiB / batch: mean",
        "max",
        "unique faults per MiB",
        "+ faults",
        "batch us per MiB",
        "+ us",
    )

    def pair(fit: Fit | None, scale: float) -> tuple[str, str]:
        return ("-", "-") if fit is None else (f"{fit.slope / scale:.1f}", f"{fit.intercept / scale:.1f}")

    rows = [
        (
            *f.run.cells(),
            f"{f.mean_mib:.3f}",
            f"{f.max_mib:.3f}",
            *pair(f.size_fit, 1.0),
            *pair(f.time_fit, 1e3),
        )
        for f in fits
    ]
    return TextTable(
        "Fig. 6: best-fit lines against MiB migrated per batch (slope, + intercept; '-': no fit or untimed)",
        headers,
        rows,
    )


# ---------------------------------------------------------------------------------------------
# Fig. 7: share of batch time spent moving data


@dataclass(frozen=True)
class TransferShare:
    """Fig. 7 for one timed run: per-batch transfer_ns / duration_ns (batches of zero duration
    left out), and the share of the run's total service time that was management."""

    run: Run
    shares: list[float]
    management_share: float

    @property
    def mean(self) -> float:
        return fmean(self.shares) if self.shares else 0.0

    @property
    def median(self) -> float:
        return median(self.shares) if self.shares else 0.0

    @property
    def max(self) -> float:
        return max(self.shares, default=0.0)

    @property
    def under_mark(self) -> float:
        """Share of batches whose transfer share is below TRANSFER_SHARE_MARK."""
        return sum(s < TRANSFER_SHARE_MARK for s in self.shares) / len(self.shares) if self.shares else 0.0


def transfer_shares(batches: Iterable[Batch]) -> list[TransferShare]:
    """Fig. 7 for every run with duration and transfer times; untimed runs are left out."""
    out = []
    for run, group in runs(batches).items():
        if not transfer_timed(group):
            continue
        total = sum(b.duration_ns or 0 for b in group)
        management = sum(b.management_ns or 0 for b in group)
        out.append(
            TransferShare(
                run=run,
                shares=[share for b in group if (share := b.transfer_share) is not None],
                management_share=management / total if total else 0.0,
            )
        )
    return out


def transfer_table(shares: Iterable[TransferShare]) -> TextTable:
    headers = (
        *RUN_HEADERS,
        "transfer share: mean",
        "median",
        "max",
        f"batches under {TRANSFER_SHARE_MARK:.0%}",
        "management share of time",
    )
    rows = [
        (
            *t.run.cells(),
            f"{t.mean:.1%}",
            f"{t.median:.1%}",
            f"{t.max:.1%}",
            f"{t.under_mark:.1%}",
            f"{t.management_share:.1%}",
        )
        for t in shares
    ]
    return TextTable("Fig. 7: share of batch time spent moving data (timed runs)", headers, rows)


# ---------------------------------------------------------------------------------------------
# Fig. 9: batch-size sweep


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
        return _label(self.workload, self.cache_fraction, prefetch=self.prefetch)

    @property
    def timed(self) -> bool:
        return all(p.total_ns is not None for p in self.points)


def batch_size_sweeps(batches: Iterable[Batch]) -> list[Sweep]:
    """Every set of two or more runs differing only in batch_limit."""
    families: dict[tuple[str, float, bool], list[RunSummary]] = {}
    for s in summarize(batches):
        families.setdefault((s.run.workload, s.run.cache_fraction, s.run.prefetch), []).append(s)
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
            _on_off(s.prefetch),
            str(p.batch_limit),
            str(p.batches),
            f"{p.mean_unique_faults:.1f}",
            f"{p.duplicate_share:.1%}",
            _ms(p.total_ns),
        )
        for s in sweeps
        for p in s.points
    ]
    return TextTable("Fig. 9: batch-size sweep (runs differing only in batch limit)", headers, rows)


# ---------------------------------------------------------------------------------------------
# Fig. 14: with and without prefetching


@dataclass(frozen=True)
class PrefetchComparison:
    """Two runs differing only in `prefetch` (Fig. 14)."""

    workload: str
    cache_fraction: float
    batch_limit: int
    off: RunTotals
    on: RunTotals

    def label(self) -> str:
        return _label(self.workload, self.cache_fraction, self.batch_limit)

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
        off = grouped.get(Run(run.workload, run.cache_fraction, run.batch_limit, False))
        if off is not None:
            out.append(
                PrefetchComparison(
                    run.workload, run.cache_fraction, run.batch_limit, run_totals(off), run_totals(group)
                )
            )
    return out


def prefetch_table(comparisons: Iterable[PrefetchComparison]) -> TextTable:
    headers = (
        *RUN_HEADERS,
        "batches",
        "faults",
        "unique faults",
        "pages migrated",
        "pages prefetched",
        "pages evicted",
        "service ms",
        "batches saved",
    )
    rows = []
    for c in comparisons:
        for prefetch, t in ((False, c.off), (True, c.on)):
            rows.append(
                (
                    *Run(c.workload, c.cache_fraction, c.batch_limit, prefetch).cells(),
                    str(t.batches),
                    str(t.faults),
                    str(t.unique_faults),
                    str(t.pages_migrated),
                    str(t.pages_prefetched),
                    str(t.pages_evicted),
                    _ms(t.total_ns),
                    f"{c.batch_reduction:.1%}" if prefetch else "",
                )
            )
    return TextTable("Fig. 14: batches with and without prefetching", headers, rows)


# ---------------------------------------------------------------------------------------------
# Figs. 12-13: batch cost levels under eviction


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
    out = []
    for run, group in runs(batches).items():
        if not any(b.chunks_evicted for b in group):
            continue
        use_time = timed(group)
        by_count: dict[int, list[float]] = {}
        for b in group:
            by_count.setdefault(b.chunks_evicted, []).append(batch_cost(b, use_time))
        levels = [
            CostLevel(count, len(level), level[0], median(level), level[-1])
            for count in sorted(by_count)
            for level in cost_levels(by_count[count], ratio)
        ]
        out.append(
            EvictionCost(
                run=run,
                timed=use_time,
                without=by_count.get(0, []),
                with_eviction=[c for count, costs in by_count.items() if count for c in costs],
                levels=levels,
            )
        )
    return out


def eviction_split_table(costs: Iterable[EvictionCost]) -> TextTable:
    headers = (
        *RUN_HEADERS,
        "cost",
        "batches without eviction",
        "median without",
        "batches evicting",
        "median evicting",
        "ratio",
    )
    rows = []
    for e in costs:
        low = median(e.without) if e.without else None
        high = median(e.with_eviction)
        rows.append(
            (
                *e.run.cells(),
                "service time" if e.timed else "pages moved",
                str(len(e.without)),
                "-" if low is None else e.show(low),
                str(len(e.with_eviction)),
                e.show(high),
                "-" if not low else f"{high / low:.2f}x",
            )
        )
    return TextTable("Figs. 12-13: batch cost with and without eviction", headers, rows)


def level_table(costs: Iterable[EvictionCost]) -> TextTable:
    headers = (*RUN_HEADERS, "chunks evicted", "level", "batches", "low", "median", "high")
    rows = [
        (
            *e.run.cells(),
            str(level.chunks_evicted),
            str(1 + sum(other.chunks_evicted == level.chunks_evicted for other in e.levels[:i])),
            str(level.batches),
            e.show(level.low),
            e.show(level.median),
            e.show(level.high),
        )
        for e in costs
        for i, level in enumerate(e.levels)
    ]
    return TextTable(
        f"Figs. 12-13: cost levels per number of chunks evicted (new level at a {LEVEL_RATIO:g}x jump)",
        headers,
        rows,
    )


# ---------------------------------------------------------------------------------------------
# Tables and summary.md


def tables(batches: Sequence[Batch]) -> list[TextTable]:
    """Every table the data supports, in the study's order."""
    out = [
        summary_table(summarize(batches)),
        migration_table(migration_fits(batches)),
        block_table(block_stats(batches)),
    ]
    if shares := transfer_shares(batches):
        out.append(transfer_table(shares))
    if sweeps := batch_size_sweeps(batches):
        out.append(sweep_table(sweeps))
    if comparisons := prefetch_comparisons(batches):
        out.append(prefetch_table(comparisons))
    if costs := eviction_costs(batches):
        out += [eviction_split_table(costs), level_table(costs)]
    return out


def markdown_summary(batches: Sequence[Batch], notes: Iterable[str] = ()) -> str:
    """summary.md: every table, then `notes` (e.g. plots skipped and why)."""
    lines = ["# Fault batches", ""]
    for table in tables(batches):
        lines += [f"## {table.title}", "", markdown_table(table), ""]
    notes = list(notes)
    if notes:
        lines += ["## Not shown", "", *(f"- {note}" for note in notes), ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Plots: each returns None (writing nothing) when the data does not support it


def _finish(ax: Axes, title: str, xlabel: str, ylabel: str, legend: bool = True) -> None:
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="x-small")
    ax.grid(alpha=0.3)


def _figure(
    rows: int = 1, cols: int = 1, height: float = 4.5, width: float = 8.5
) -> tuple[Figure, list[Axes]]:
    figure = Figure(layout="constrained", figsize=(width, height * rows))
    axes = figure.subplots(rows, cols, squeeze=False)
    return figure, [ax for row in axes for ax in row]


def _time_axis(grouped: dict[Run, list[Batch]]) -> tuple[Callable[[Batch], float], str]:
    """x for time series: start time in ms when every batch has one, else the batch index."""
    if all(start_timed(group) for group in grouped.values()):
        return (lambda b: (b.start_ns or 0) / 1e6), "time since the first batch (ms)"
    return (lambda b: float(b.batch)), "batch"


def batch_sizes_figure(batches: Sequence[Batch]) -> Figure | None:
    """Fig. 8: raw (upper) and deduplicated (lower) batch sizes over the run."""
    grouped = runs(batches)
    if not grouped:
        return None
    x_of, xlabel = _time_axis(grouped)
    figure, (raw, unique) = _figure(2, 1, height=3.2)
    for run, group in grouped.items():
        x = [x_of(b) for b in group]
        raw.plot(x, [b.faults for b in group], marker=".", markersize=3, linewidth=0.8, label=run.label())
        unique.plot(x, [b.unique_faults for b in group], marker=".", markersize=3, linewidth=0.8)
    _finish(raw, "Fig. 8: faults per batch as taken from the buffer", "", "faults")
    _finish(unique, "... and with duplicate faults removed", xlabel, "unique faults", legend=False)
    return figure


def blocks_figure(batches: Sequence[Batch]) -> Figure | None:
    """Table 3 as a histogram: how many 2 MB VA blocks each batch touches."""
    grouped = runs(batches)
    if not grouped:
        return None
    figure, (ax,) = _figure()
    for run, group in grouped.items():
        blocks = [b.blocks for b in group]
        ax.hist(blocks, bins=range(0, max(blocks) + 2), histtype="step", label=run.label())
    _finish(ax, "Table 3: 2 MB VA blocks per fault batch", "VA blocks in batch", "batches")
    return figure


def migration_figure(batches: Sequence[Batch]) -> Figure | None:
    """Fig. 6: batch size against MiB migrated per batch, and batch time when any run is timed,
    each run with its best-fit line."""
    grouped = runs(batches)
    if not grouped:
        return None
    timed_runs = {run: group for run, group in grouped.items() if timed(group)}
    figure, axes = _figure(1, 2 if timed_runs else 1, width=13.0 if timed_runs else 8.5)
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
    _finish(axes[0], "Fig. 6: batch size against data migrated", "MiB migrated to the GPU", "unique faults")
    if timed_runs:
        _finish(
            axes[1], "Fig. 6: batch time against data migrated", "MiB migrated to the GPU", "batch time (us)"
        )
    return figure


def transfer_figure(batches: Sequence[Batch]) -> Figure | None:
    """Fig. 7: per-batch share of service time spent moving data; None without timed runs."""
    grouped = {run: group for run, group in runs(batches).items() if transfer_timed(group)}
    if not grouped:
        return None
    x_of, xlabel = _time_axis(grouped)
    figure, (ax,) = _figure()
    for run, group in grouped.items():
        kept = [(x_of(b), 100 * share) for b in group if (share := b.transfer_share) is not None]
        ax.scatter([x for x, _ in kept], [y for _, y in kept], s=8, alpha=0.6, label=run.label())
    ax.axhline(100 * TRANSFER_SHARE_MARK, color="black", linestyle=":", linewidth=1)
    ax.set_ylim(0, 100)
    _finish(ax, "Fig. 7: share of batch time spent moving data (rest: management)", xlabel, "transfer (%)")
    return figure


def sweep_figure(batches: Sequence[Batch]) -> Figure | None:
    """Fig. 9: batches, unique faults per batch and (timed) total service time against the batch
    limit; None without runs differing only in batch_limit."""
    sweeps = batch_size_sweeps(batches)
    if not sweeps:
        return None
    timed_sweeps = [s for s in sweeps if s.timed]
    figure, axes = _figure(1, 3 if timed_sweeps else 2, height=4.2, width=15.0 if timed_sweeps else 11.0)
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
        _finish(ax, ylabel, "batch limit (faults)", ylabel, legend=ax is axes[0])
    figure.suptitle("Fig. 9: batch-size sweep")
    return figure


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
    figure, axes = _figure(
        1, len(metrics), height=4.5, width=max(9.0, 2.2 * len(metrics) + 0.5 * len(comparisons))
    )
    width = 0.4
    for ax, (name, value) in zip(axes, metrics, strict=True):
        for offset, (label, pick, color) in enumerate(
            (("prefetch off", lambda c: c.off, "C7"), ("prefetch on", lambda c: c.on, "C0"))
        ):
            xs = [i + (offset - 0.5) * width for i in range(len(comparisons))]
            bars = ax.bar(xs, [value(pick(c)) for c in comparisons], width, color=color, label=label)
            ax.bar_label(bars, fmt=_bar_value, fontsize=6, padding=2)
        ax.set_xticks(
            range(len(comparisons)), [c.label() for c in comparisons], rotation=30, ha="right", fontsize=7
        )
        _finish(ax, name, "", name, legend=ax is axes[0])
    figure.suptitle("Fig. 14: with and without prefetching")
    return figure


def eviction_figure(batches: Sequence[Batch]) -> Figure | None:
    """Figs. 12-13, one row per run that evicted: batch cost over the run coloured by chunks
    evicted (left), and cost against chunks evicted with each level's median (right)."""
    costs = eviction_costs(batches)
    if not costs:
        return None
    grouped = runs(batches)
    x_of, xlabel = _time_axis({e.run: grouped[e.run] for e in costs})
    figure, axes = _figure(len(costs), 2, height=3.0, width=13.0)
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
        _finish(series, e.run.label(), xlabel if row == len(costs) - 1 else "", ylabel)
        _finish(levels, "cost levels (bars: level medians)", "2 MB chunks evicted", ylabel, legend=False)
    figure.suptitle("Figs. 12-13: batch cost under eviction")
    return figure


@dataclass(frozen=True)
class PlotSpec:
    """A plot `warpvm trace` writes when the data supports it."""

    name: str
    figure: Callable[[Sequence[Batch]], Figure | None]
    what: str
    needs: str


PLOTS = (
    PlotSpec("batch_sizes.png", batch_sizes_figure, "Fig. 8", "batches"),
    PlotSpec("migration_per_batch.png", migration_figure, "Fig. 6", "batches"),
    PlotSpec("blocks_per_batch.png", blocks_figure, "Table 3", "batches"),
    PlotSpec(
        "transfer_share.png",
        transfer_figure,
        "Fig. 7",
        "a run with duration_ns and transfer_ns in every batch (GPU traces; the simulator has no time)",
    ),
    PlotSpec(
        "batch_size_sweep.png",
        sweep_figure,
        "Fig. 9",
        "two or more runs differing only in batch_limit (warpvm-sim --batch-size N, one trace per N)",
    ),
    PlotSpec(
        "prefetch.png",
        prefetch_figure,
        "Fig. 14",
        "two runs differing only in prefetch (warpvm-sim with and without --no-prefetch)",
    ),
    PlotSpec(
        "eviction_cost.png",
        eviction_figure,
        "Figs. 12-13",
        "a batch that evicted (cache_fraction below 1 and data larger than the cache)",
    ),
)


def write_plots(batches: Sequence[Batch], out: Path) -> tuple[list[Path], list[str]]:
    """Writes every plot the data supports into `out`; returns the paths and, for each plot
    skipped, why."""
    written, skipped = [], []
    for spec in PLOTS:
        path = save_png(spec.figure(batches), out / spec.name)
        if path is None:
            skipped.append(f"{spec.name} ({spec.what}): needs {spec.needs}")
        else:
            written.append(path)
    return written, skipped

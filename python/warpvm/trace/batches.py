"""A trace's rows as batches: the schema, loading and checking, and grouping batches into runs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from warpvm.results import ResultsError, format_fraction, group_by, load_csv

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


def run_label(
    workload: str, cache_fraction: float, batch_limit: int | None = None, prefetch: bool | None = None
) -> str:
    """'workload, cache 50%[, 256/batch][, prefetch|no prefetch]': what names a run or a set of runs."""
    parts = [workload, f"cache {format_fraction(cache_fraction)}"]
    if batch_limit is not None:
        parts.append(f"{batch_limit}/batch")
    if prefetch is not None:
        parts.append("prefetch" if prefetch else "no prefetch")
    return ", ".join(parts)


def on_off(prefetch: bool) -> str:
    """A prefetch setting as a table cell."""
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
        return run_label(self.workload, self.cache_fraction, self.batch_limit, self.prefetch)

    def cells(self) -> tuple[str, str, str, str]:
        """The run's identifying table cells."""
        return (
            self.workload,
            format_fraction(self.cache_fraction),
            str(self.batch_limit),
            on_off(self.prefetch),
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
    grouped = group_by(batches, lambda b: b.run)
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

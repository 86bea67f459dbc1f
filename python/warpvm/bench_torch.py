"""`warpvm bench torch`: the PyTorch suite's grid, ids, records and run loop (docs/bench/torch.md).

This module needs neither torch nor a GPU: it expands the grid, draws the ids (numpy), and turns
measurements into records. The measurements themselves are warpvm.torch.bench's, imported when a
run starts.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from warpvm.results import Record

SUITE = "torch"

WORKLOADS = ("gather", "embedding_bag", "index_add", "call_overhead", "graphsage")
MODES = ("warpvm", "cpu_gather", "zero_copy", "managed", "device")
ID_DISTRIBUTIONS = ("uniform", "zipf1.0", "zipf1.2")
DTYPES = ("float32", "float16")
DTYPE_BYTES = {"float32": 4, "float16": 2}
# Table bytes / cache bytes; 0 is a table in core (half the cache: nothing is ever evicted).
OVERSUBSCRIPTIONS = (0, 4, 16)
IN_CORE_SHARE = 0.5

# Modes that hold a copy of the table in GPU memory: in core only.
IN_CORE_ONLY_MODES = ("managed", "device")
# What each workload runs in which mode (index_add: a GPU's atomics on pinned host memory over
# PCIe are not atomic, so zero_copy has none; graphsage: features from warpvm, from PyG's CPU
# loader, or on the GPU).
WORKLOAD_MODES: dict[str, tuple[str, ...]] = {
    "gather": MODES,
    "embedding_bag": MODES,
    "index_add": ("warpvm", "cpu_gather", "managed", "device"),
    "graphsage": ("warpvm", "cpu_gather", "device"),
    "call_overhead": ("warpvm", "device"),
}
# Workloads timed in one dtype only, and those whose rows are drawn from one id distribution.
FLOAT32_ONLY = ("embedding_bag", "index_add", "graphsage", "call_overhead")
UNIFORM_ONLY = ("graphsage", "call_overhead")
GRAPHSAGE_OVERSUBSCRIPTIONS = (0, 4)
CALL_OVERHEAD_OPS = ("gather", "embedding_bag", "index_add")


@dataclass(frozen=True)
class Settings:
    """One `warpvm bench torch` run."""

    workloads: tuple[str, ...] = WORKLOADS
    modes: tuple[str, ...] = MODES
    ids: tuple[str, ...] = ID_DISTRIBUTIONS
    dtypes: tuple[str, ...] = DTYPES
    oversubscriptions: tuple[int, ...] = OVERSUBSCRIPTIONS
    cache_bytes: int = 2 << 30
    page_bytes: int = 4096
    dim: int = 128
    batch: int = 1 << 20
    pooling: int = 32
    repeats: int = 5
    call_batch: int = 64
    call_iterations: int = 2000
    graphsage_steps: int = 12
    graphsage_batch: int = 1024
    graphsage_fanout: tuple[int, ...] = (10, 10)
    seed: int = 1
    commit: str = "unknown"
    driver: str = "unknown"

    def __post_init__(self) -> None:
        for name, values, allowed in (
            ("workload", self.workloads, WORKLOADS),
            ("mode", self.modes, MODES),
            ("ids", self.ids, ID_DISTRIBUTIONS),
            ("dtype", self.dtypes, DTYPES),
        ):
            unknown = ", ".join(v for v in values if v not in allowed)
            if unknown or not values:
                choices = ", ".join(allowed)
                raise ValueError(f"unknown {name} {unknown or '(none given)'} (choose from {choices})")
        if not self.oversubscriptions or any(r < 0 for r in self.oversubscriptions):
            raise ValueError("oversubscriptions are table bytes / cache bytes: 0 (in core) or more")
        if self.repeats < 1 or self.batch < 1 or self.dim < 1 or self.pooling < 1:
            raise ValueError("repeats, batch, dim and pooling must be positive")
        if self.batch % self.pooling:
            raise ValueError(f"batch {self.batch} must be a multiple of the pooling factor {self.pooling}")
        if self.dim * max(DTYPE_BYTES[d] for d in self.dtypes) % 16:
            raise ValueError(f"dim {self.dim}: a row must be a multiple of 16 bytes")


# The quick run: one dtype, two id distributions, in core and 4x, a 1 GiB cache (< 3 minutes on an H100).
QUICK = Settings(
    ids=("uniform", "zipf1.2"),
    dtypes=("float32",),
    oversubscriptions=(0, 4),
    cache_bytes=1 << 30,
    graphsage_steps=8,
    call_iterations=1000,
)


@dataclass(frozen=True)
class Point:
    """One measured point: a record's identity."""

    workload: str
    mode: str
    ids: str
    oversubscription: int
    dtype: str
    dim: int
    batch: int
    op: str | None = None  # the operation whose call overhead is timed (call_overhead only)

    @property
    def row_bytes(self) -> int:
        return self.dim * DTYPE_BYTES[self.dtype]

    def table_rows(self, cache_bytes: int) -> int:
        """Rows of the table (or of the node features) for this point's oversubscription."""
        share = self.oversubscription if self.oversubscription > 0 else IN_CORE_SHARE
        return int(cache_bytes * share) // self.row_bytes

    def table_bytes(self, cache_bytes: int) -> int:
        return self.table_rows(cache_bytes) * self.row_bytes

    @property
    def table_key(self) -> tuple[int, str, int]:
        """Points with the same key share one table."""
        return (self.oversubscription, self.dtype, self.dim)


def expand_grid(settings: Settings) -> list[Point]:
    """Every point of the run, ordered so that points sharing a table are together (the smaller
    tables first) and a workload's modes are side by side."""
    points: list[Point] = []
    for ratio in sorted(set(settings.oversubscriptions)):
        for dtype in settings.dtypes:
            for workload in settings.workloads:
                if workload in FLOAT32_ONLY and dtype != "float32":
                    continue
                if workload == "graphsage" and ratio not in GRAPHSAGE_OVERSUBSCRIPTIONS:
                    continue
                if workload == "call_overhead" and ratio != 0:
                    continue
                distributions = ("uniform",) if workload in UNIFORM_ONLY else settings.ids
                for ids in distributions:
                    for mode in WORKLOAD_MODES[workload]:
                        if mode not in settings.modes or (ratio > 0 and mode in IN_CORE_ONLY_MODES):
                            continue
                        if workload == "call_overhead":
                            points += [
                                Point(
                                    workload, mode, ids, ratio, dtype, settings.dim, settings.call_batch, op
                                )
                                for op in CALL_OVERHEAD_OPS
                            ]
                        else:
                            batch = settings.graphsage_batch if workload == "graphsage" else settings.batch
                            points.append(Point(workload, mode, ids, ratio, dtype, settings.dim, batch))
    return points


# --- ids --------------------------------------------------------------------------------------


def zipf_exponent(distribution: str) -> float | None:
    """The exponent of 'zipf1.2' (1.2), None for 'uniform'; ValueError for anything else."""
    if distribution == "uniform":
        return None
    if distribution.startswith("zipf"):
        try:
            exponent = float(distribution.removeprefix("zipf"))
        except ValueError:
            exponent = math.nan
        if exponent > 0:
            return exponent
    raise ValueError(f"unknown id distribution {distribution!r} (uniform or zipfS with S > 0)")


def scatter_multiplier(rows: int) -> int:
    """An odd multiplier near rows x (golden ratio - 1) that is coprime with `rows`: rank r goes to
    row (r x multiplier + offset) mod rows, a bijection that puts consecutive ranks far apart."""
    if rows <= 2:
        return 1
    multiplier = int(rows * (math.sqrt(5) - 1) / 2) | 1
    while math.gcd(multiplier, rows) != 1:
        multiplier += 2
    return multiplier % rows or 1


def zipf_ranks(rows: int, count: int, exponent: float, rng: np.random.Generator) -> np.ndarray:
    """`count` ranks in [0, rows) with P(rank k) proportional to 1 / (k + 1)^exponent, exactly
    (rejection-inversion, Hoermann and Derflinger 1996), for any exponent > 0."""
    s = exponent

    def h_integral(x: np.ndarray | float) -> Any:
        log_x = np.log(x)
        t = (1 - s) * log_x
        helper = np.where(np.abs(t) > 1e-8, np.expm1(t) / np.where(t == 0, 1, t), 1 + t / 2)
        return helper * log_x

    def h(x: np.ndarray | float) -> Any:
        return np.exp(-s * np.log(x))

    def h_integral_inverse(x: np.ndarray) -> np.ndarray:
        t = np.maximum(x * (1 - s), -1)
        helper = np.where(np.abs(t) > 1e-8, np.log1p(t) / np.where(t == 0, 1, t), 1 - t / 2)
        return np.exp(helper * x)

    h_x1 = h_integral(1.5) - 1
    h_n = h_integral(rows + 0.5)
    threshold = 2 - h_integral_inverse(np.asarray(h_integral(2.5) - h(2)))
    out = np.empty(count, dtype=np.int64)
    pending = np.arange(count)
    while pending.size:  # over 90% accepted each round
        u = h_n + rng.random(pending.size) * (h_x1 - h_n)
        x = h_integral_inverse(u)
        k = np.clip(np.floor(x + 0.5), 1, rows)
        accepted = (k - x <= threshold) | (u >= h_integral(k + 0.5) - h(k))
        out[pending[accepted]] = k[accepted].astype(np.int64) - 1
        pending = pending[~accepted]
    return out


# rank x multiplier + offset stays below 2^63 under this many rows.
MAX_ZIPF_ROWS = 1 << 31


def batch_ids(distribution: str, rows: int, count: int, seed: int) -> np.ndarray:
    """`count` int64 row ids in [0, rows): uniform, or Zipf with the hot ranks scattered over the
    table (scatter_multiplier; rank r is row (r x multiplier + rows // 3) mod rows whatever the
    seed, so that batches of one table share their hot rows). The same arguments give the same ids."""
    if rows < 1:
        raise ValueError(f"a table of {rows} rows has no ids to draw")
    rng = np.random.default_rng(seed)
    exponent = zipf_exponent(distribution)
    if exponent is None:
        return rng.integers(0, rows, size=count, dtype=np.int64)
    if rows >= MAX_ZIPF_ROWS:
        raise ValueError(f"Zipf ids over {rows} rows: at most {MAX_ZIPF_ROWS - 1} (int64 products)")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ranks = zipf_ranks(rows, count, exponent, rng)
    return (ranks * scatter_multiplier(rows) + rows // 3) % rows


# --- records ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measurement:
    """What one point measured: each timed run's seconds, whether the result equalled the
    reference, the warpvm counters (per run) and fields of the workload's own."""

    seconds_all: list[float]
    verified: bool
    useful_bytes: int
    rows: int
    faults: int | None = None
    bytes_moved: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return float(np.median(self.seconds_all))


@dataclass(frozen=True)
class Context:
    """What every record of a run shares."""

    device: str
    driver: str
    commit: str
    cache_bytes: int
    page_bytes: int
    eviction: str = "clock"
    placement: str = "automatic"


def make_record(point: Point, measured: Measurement, context: Context, date: str | None = None) -> Record:
    """The point's record: the fields every suite has (results.REQUIRED_FIELDS) and the suite's own."""
    seconds = measured.seconds
    table_bytes = point.table_bytes(context.cache_bytes)
    warpvm_mode = point.mode == "warpvm"
    extra: dict[str, Any] = {
        "verified": measured.verified,
        "ids": point.ids,
        "oversubscription": point.oversubscription,
        "dtype": point.dtype,
        "dim": point.dim,
        "batch": point.batch,
        "time_ms": seconds * 1e3,
        "rows_per_s": measured.rows / seconds if seconds > 0 else None,
        "repeats": len(measured.seconds_all),
        "seconds_all": measured.seconds_all,
        "table_bytes": table_bytes,
        "cache_bytes": context.cache_bytes,
        "page_bytes": context.page_bytes,
    }
    if point.op is not None:
        extra["op"] = point.op
        extra["call_us"] = seconds * 1e6
        extra["calls_per_s"] = 1 / seconds if seconds > 0 else None
    if warpvm_mode:
        extra["placement"] = context.placement
    extra.update(measured.extra)
    return Record(
        suite=SUITE,
        workload=point.workload,
        mode=point.mode,
        policy=f"{context.eviction}-{context.placement}" if warpvm_mode else "-",
        cache_fraction=min(1.0, context.cache_bytes / table_bytes) if warpvm_mode and table_bytes else 0.0,
        dataset_bytes=table_bytes,
        useful_bytes=measured.useful_bytes,
        seconds=seconds,
        useful_gbps=measured.useful_bytes / seconds / 1e9 if seconds > 0 and measured.useful_bytes else None,
        faults=measured.faults,
        bytes_moved=measured.bytes_moved,
        device=context.device,
        driver=context.driver,
        commit=context.commit,
        date=date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        extra=extra,
    )


def describe(point: Point) -> str:
    """'gather warpvm zipf1.2 float32 4x' for progress lines."""
    size = f"{point.oversubscription}x" if point.oversubscription else "in core"
    what = f"{point.workload}:{point.op}" if point.op else point.workload
    return f"{what} {point.mode} {point.ids} {point.dtype} {size}"


def point_line(point: Point, record: Record | None) -> str:
    """One progress line: the point, then its median time, GB/s and verification, or 'skipped'."""
    if record is None:
        return f"{describe(point)}  skipped"
    seconds = record.seconds or 0.0
    gbps = f"{record.useful_gbps:8.2f} GB/s" if record.useful_gbps is not None else ""
    checked = "verified" if record.verified else "NOT VERIFIED"
    if point.op is not None:
        return f"{describe(point)}  {seconds * 1e6:8.2f} us/call  {checked}"
    return f"{describe(point)}  {seconds * 1e3:9.3f} ms  {gbps}  {checked}"


# --- the run ----------------------------------------------------------------------------------


class VerificationError(Exception):
    """A point whose result differed from its reference before anything was timed."""


class Bench(Protocol):
    """What runs the points on the GPU (warpvm.torch.bench.TorchBench)."""

    context: Context

    def measure(self, point: Point) -> Measurement | str:
        """The point's measurement, or why it was skipped; VerificationError if it was wrong."""
        ...

    def close(self) -> None: ...


@dataclass
class RunOutcome:
    """The records written, the points skipped and failed (each with why), and whether the time
    limit stopped the run."""

    records: list[Record] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    timed_out: bool = False


def run(
    points: Iterable[Point],
    bench: Bench,
    out: Path,
    on_point: Callable[[Point, Record | None], None] = lambda point, record: None,
    before_point: Callable[[Point], None] = lambda point: None,
    timeout: float | None = None,
) -> RunOutcome:
    """Measures each point in order, appending its record to `out` as it comes (JSON Lines).

    `timeout` (seconds; None: none) is checked between points: past it the run stops with the
    records so far kept and `timed_out` set.
    """
    outcome = RunOutcome()
    deadline = None if timeout is None else time.monotonic() + timeout
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as sink:
        for point in points:
            if deadline is not None and time.monotonic() > deadline:
                outcome.timed_out = True
                break
            before_point(point)
            try:
                measured = bench.measure(point)
            except VerificationError as error:
                outcome.failed.append(f"{describe(point)}: {error}")
                on_point(point, None)
                continue
            if isinstance(measured, str):
                outcome.skipped.append(f"{describe(point)}: {measured}")
                on_point(point, None)
                continue
            record = make_record(point, measured, bench.context)
            sink.write(json.dumps(record.to_dict()) + "\n")
            sink.flush()
            outcome.records.append(record)
            on_point(point, record)
    return outcome


def settings_for(base: Settings, **changes: Any) -> Settings:
    """`base` with the options given (None: keep the base's)."""
    return replace(base, **{name: value for name, value in changes.items() if value is not None})

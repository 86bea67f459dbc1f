"""JSON Lines benchmark records: loading, validation and summary tables."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

# Field name -> accepted kinds: "str", "number", "int", each optionally "|null".
REQUIRED_FIELDS: dict[str, str] = {
    "suite": "str",
    "workload": "str",
    "mode": "str",
    "policy": "str",
    "cache_fraction": "number",
    "dataset_bytes": "int",
    "useful_bytes": "int",
    "seconds": "number|null",
    "useful_gbps": "number|null",
    "faults": "int|null",
    "bytes_moved": "int|null",
    "device": "str",
    "driver": "str",
    "commit": "str",
    "date": "str",
}

# Per-workload throughput fields shown next to GB/s, with their unit.
RATE_FIELDS: dict[str, tuple[str, str]] = {
    "random_page": ("pages_per_s", "pages/s"),
    "sparse_read": ("reads_per_s", "reads/s"),
    "bfs": ("teps", "TEPS"),
    "cc": ("teps", "TEPS"),
    "cc_afforest": ("teps", "TEPS"),
    "sssp": ("teps", "TEPS"),
    "gather": ("rows_per_s", "rows/s"),
    "embedding_bag": ("rows_per_s", "rows/s"),
    "index_add": ("rows_per_s", "rows/s"),
    "graphsage": ("rows_per_s", "nodes/s"),
    "call_overhead": ("calls_per_s", "calls/s"),
}

MEASURED_HEADERS = ("workload", "mode", "cache", "policy", "useful GB/s", "rate", "x UVM", "verified")
SIMULATED_HEADERS = (
    "workload",
    "mode",
    "cache",
    "policy",
    "faults",
    "evictions",
    "bytes moved",
    "amplification",
)


class ResultsError(ValueError):
    """A malformed record; the message starts with file:line."""


# Prefixes of the per-object placement fields a graph run may carry (resident_values,
# migrate_offsets, ...): objects placed otherwise than the mode says make a point of their own.
OBJECT_PLACEMENT_PREFIXES = ("resident_", "migrate_")


@dataclass(frozen=True)
class Record:
    """One measured (or simulated) point; fields beyond the required ones live in `extra`."""

    suite: str
    workload: str
    mode: str
    policy: str
    cache_fraction: float
    dataset_bytes: int
    useful_bytes: int
    seconds: float | None
    useful_gbps: float | None
    faults: int | None
    bytes_moved: int | None
    device: str
    driver: str
    commit: str
    date: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def simulated(self) -> bool:
        """True for simulator records (no timings)."""
        return bool(self.extra.get("simulated")) or self.seconds is None

    @property
    def verified(self) -> bool | None:
        """Whether the result was checked correct; None when the record does not say."""
        value = self.extra.get("verified")
        return value if isinstance(value, bool) else None

    @property
    def variant(self) -> str:
        """The mode, with what the run changed besides it: a graph frontier walked in arrival
        order, a matrix app's column product by tiles or bands, pages other than 4 KiB, and objects placed
        otherwise (`warpvm_auto (arrival order, 1 KiB pages, resident values)`)."""
        changes = ["arrival order"] if self.extra.get("frontier_vertex_order") == 0 else []
        bands = self.extra.get("column_bands")
        if self.extra.get("column_tiles") == 1:
            changes.append("column tiles")
        elif isinstance(bands, int | float) and bands > 1:
            changes.append(f"{int(bands)} bands")
        page_bytes = self.extra.get("page_bytes")
        if isinstance(page_bytes, int | float) and page_bytes != 4096:
            changes.append(f"{format_bytes(int(page_bytes)).replace('.00 ', ' ')} pages")
        held = self.extra.get("pages_held_per_thread")
        if isinstance(held, int | float):
            changes.append(f"{int(held)} held")
        changes += [
            name.replace("_", " ", 1)
            for name in sorted(self.extra)
            if name.startswith(OBJECT_PLACEMENT_PREFIXES) and self.extra[name]
        ]
        # The torch suite's points: the operation timed, the ids, the dtype and the table's size.
        changes += [
            self.extra[name] for name in ("op", "ids", "dtype") if isinstance(self.extra.get(name), str)
        ]
        ratio = self.extra.get("oversubscription")
        if isinstance(ratio, int | float):
            changes.append(f"table {ratio:g}x cache" if ratio else "in core")
        return f"{self.mode} ({', '.join(changes)})" if changes else self.mode

    @property
    def amplification(self) -> float | None:
        """Bytes moved per useful byte (I/O amplification), when bytes moved is known."""
        if self.bytes_moved is None or self.useful_bytes <= 0:
            return None
        return self.bytes_moved / self.useful_bytes

    def to_dict(self) -> dict[str, Any]:
        """The record as one flat JSON object, as the binaries write it."""
        data = asdict(self)
        return {**{k: v for k, v in data.items() if k != "extra"}, **data["extra"]}


@dataclass(frozen=True)
class MeasuredRow:
    """A timed point with its speed-up over UVM for the same workload (warpvm modes only)."""

    record: Record
    rate: tuple[float, str] | None
    speedup_vs_uvm: float | None


@dataclass(frozen=True)
class TextTable:
    """A table of formatted cells, rendered by the CLI (rich) and the report (markdown)."""

    title: str
    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]

    def numeric(self, column: int) -> bool:
        """Whether a column holds numbers (right-aligned)."""
        return self.headers[column] not in ("workload", "run", "mode", "policy", "verified")


def _check(value: Any, kind: str) -> Any:
    """Returns `value` converted to `kind`, or raises TypeError."""
    allowed = kind.split("|")
    if value is None:
        if "null" in allowed:
            return None
        raise TypeError("is null")
    base = allowed[0]
    if base == "str" and isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"should be {base}, got {json.dumps(value)}")
    if base == "number":
        return float(value)
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"should be an integer, got {value}")
    return int(value)


def parse_line(text: str, source: str, line: int) -> Record:
    """Parses one JSON Lines record; errors name `source:line`."""
    where = f"{source}:{line}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        # removesuffix: json says "Unterminated string starting at" for one.
        reason = f"{error.msg.removesuffix(' at')} at column {error.colno}"
        raise ResultsError(f"{where}: malformed JSON ({reason})") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{where}: expected a JSON object, got {type(data).__name__}")
    missing = [name for name in REQUIRED_FIELDS if name not in data]
    if missing:
        raise ResultsError(f"{where}: missing required field(s): {', '.join(missing)}")
    values: dict[str, Any] = {}
    for name, kind in REQUIRED_FIELDS.items():
        try:
            values[name] = _check(data[name], kind)
        except TypeError as error:
            raise ResultsError(f"{where}: field '{name}' {error}") from None
    extra = {k: v for k, v in data.items() if k not in REQUIRED_FIELDS}
    return Record(**values, extra=extra)


def parse_lines(lines: Iterable[str], source: str) -> list[Record]:
    """Parses JSON Lines text, skipping blank lines."""
    return [parse_line(text, source, n) for n, text in enumerate(lines, start=1) if text.strip()]


def load_records(paths: Iterable[Path]) -> list[Record]:
    """Loads and validates every record of the given JSON Lines files, in order."""
    records: list[Record] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ResultsError(f"{path}: cannot read ({error.strerror})") from None
        except UnicodeDecodeError as error:
            line = error.object[: error.start].count(b"\n") + 1
            raise ResultsError(
                f"{path}:{line}: not UTF-8 text (byte 0x{error.object[error.start]:02x}; compressed? "
                "decompress it first)"
            ) from None
        records.extend(parse_lines(text.splitlines(), str(path)))
    return records


def _check_fields(row: dict[Any, Any], required: tuple[str, ...]) -> None:
    """ValueError for a row with more fields than the header, fewer, or an empty required one."""
    if None in row:
        raise ValueError("more fields than the header")
    if any(row.get(c) is None for c in required):
        raise ValueError("fewer fields than the header")
    empty = [c for c in required if row[c] == ""]
    if empty:
        raise ValueError(f"empty {', '.join(empty)}")


def load_csv(path: Path, required: Iterable[str], parse_row: Callable[[dict[Any, Any]], T]) -> list[T]:
    """Reads a CSV with a header row, each row through `parse_row`; raises ResultsError naming the
    file when a `required` column is missing, and its line when a row has more fields than the
    header, fewer, or an empty required one, or when `parse_row` rejects it (ValueError)."""
    required = tuple(required)
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        try:
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise ResultsError(f"{path}: missing columns {', '.join(missing)}")
            parsed = []
            for row in reader:
                try:
                    _check_fields(row, required)
                    parsed.append(parse_row(row))
                except (TypeError, ValueError) as error:
                    raise ResultsError(f"{path}:{reader.line_num}: bad row: {error}") from None
        except UnicodeDecodeError:
            raise ResultsError(f"{path}: not a UTF-8 text CSV (compressed? decompress it first)") from None
    return parsed


# Extra fields that make a point of their own where a record has them: the BFS root, a graph
# run's frontier order, a matrix app's column product (tiles, or how many bands: one where a
# record does not say), warpvm's page size (4 KiB where a record does not say: POINT_DEFAULTS)
# and the pages its threads declared held, the GPU count, the access-counter threshold, and a channel run's
# configuration (its consumer threads, compute work, k-means input, GEMM side, BFS graph scale,
# keys sorted, ping-pong round trips, and the CPUs its producer and monitor were pinned to), and a
# torch-suite point's operation, ids, dtype and table size.
POINT_FIELDS = (
    "root",
    "frontier_vertex_order",
    "column_tiles",
    "column_bands",
    "page_bytes",
    "pages_held_per_thread",
    "gpus",
    "counter_threshold",
    "consumer_threads",
    "compute_iters",
    "kmeans_points",
    "gemm_side",
    "bfs_scale",
    "bitonic_keys",
    "pingpong_iterations",
    "producer_cpu",
    "monitor_cpu",
    "op",
    "ids",
    "dtype",
    "oversubscription",
)


# What a record that does not carry a point field ran with (a matrix app's column product before
# c10dedb had one band).
POINT_DEFAULTS: dict[str, Any] = {"page_bytes": 4096, "column_tiles": 0, "column_bands": 1}

# Point fields that change the kernels every mode of a run executes (a graph's frontier order, a
# matrix app's column product): a point's speed-up over UVM is taken against the UVM run of the
# same kernels.
KERNEL_FIELDS = ("frontier_vertex_order", "column_tiles", "column_bands")


def kernel_of(r: Record) -> tuple[Any, ...]:
    """The record's KERNEL_FIELDS (POINT_DEFAULTS where it does not say)."""
    return tuple(r.extra.get(name, POINT_DEFAULTS.get(name)) for name in KERNEL_FIELDS)


def latest_points(records: Iterable[Record]) -> list[Record]:
    """The latest record (by date; of equal dates, the last given) of each point: device, suite,
    workload, mode, policy, cache, size, the POINT_FIELDS a record has and the objects it placed
    otherwise (OBJECT_PLACEMENT_PREFIXES)."""
    points: dict[tuple[Any, ...], Record] = {}
    for r in sorted(records, key=lambda r: r.date):
        key = (
            r.device,
            r.suite,
            r.workload,
            r.mode,
            r.policy,
            r.cache_fraction,
            r.dataset_bytes,
            *(r.extra.get(name, POINT_DEFAULTS.get(name)) for name in POINT_FIELDS),
            tuple(sorted(name for name in r.extra if name.startswith(OBJECT_PLACEMENT_PREFIXES))),
        )
        points[key] = r
    return list(points.values())


def group_by(items: Iterable[T], key: Callable[[T], K]) -> dict[K, list[T]]:
    """Items per key, keys in order of first appearance, items in their order."""
    groups: dict[K, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return groups


def group_by_device(records: Iterable[Record]) -> dict[str, list[Record]]:
    """Records per device name, in order of first appearance."""
    return group_by(records, lambda r: r.device)


def check_time_span(start_ns: int, end_ns: int) -> None:
    """ValueError unless 0 <= start_ns <= end_ns (a timeline row's interval)."""
    if start_ns < 0:
        raise ValueError(f"start_ns {start_ns} is negative")
    if end_ns < start_ns:
        raise ValueError(f"end_ns {end_ns} before start_ns {start_ns}")


def write_json(value: Any, path: Path) -> Path:
    """Writes `value` as JSON to `path`, making its directory if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def by_workload(records: Iterable[Record]) -> list[Record]:
    """Records reordered so each workload's records are together (stable, first-seen order)."""
    listed = list(records)
    order: dict[str, int] = {}
    for r in listed:
        order.setdefault(r.workload, len(order))
    return sorted(listed, key=lambda r: order[r.workload])


def measured_rows(records: Iterable[Record]) -> list[MeasuredRow]:
    """Timed records grouped by workload, each warpvm mode with its speed-up over `uvm` running
    the same kernels (KERNEL_FIELDS)."""
    timed = by_workload(r for r in records if not r.simulated)
    uvm = {(r.device, r.workload, r.dataset_bytes, kernel_of(r)): r for r in timed if r.mode == "uvm"}
    rows = []
    for r in timed:
        baseline = uvm.get((r.device, r.workload, r.dataset_bytes, kernel_of(r)))
        speedup = None
        if r.mode.startswith("warpvm") and baseline and baseline.useful_gbps and r.useful_gbps is not None:
            speedup = r.useful_gbps / baseline.useful_gbps
        rate = None
        if r.workload in RATE_FIELDS:
            name, unit = RATE_FIELDS[r.workload]
            if isinstance(r.extra.get(name), int | float):
                rate = (float(r.extra[name]), unit)
        rows.append(MeasuredRow(r, rate, speedup))
    return rows


def format_count(value: float | None) -> str:
    """An integer count with thousands separators, or '-'."""
    return "-" if value is None else f"{round(value):,}"


def format_bytes(value: float | None) -> str:
    """A byte count in binary units, or '-'."""
    if value is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


def format_fraction(fraction: float) -> str:
    """A cache fraction as a percentage of the data, '-' when not applicable (0)."""
    return "-" if fraction == 0 else f"{fraction * 100:g}%"


def format_rate(rate: tuple[float, str] | None) -> str:
    """An operations-per-second rate with an SI prefix, or '-'."""
    if rate is None:
        return "-"
    value, unit = rate
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.2f} {prefix} {unit}"
    return f"{value:.0f} {unit}"


def _format_gbps(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.2f}"


def format_verified(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def measured_table(records: Iterable[Record], title: str) -> TextTable:
    """Useful GB/s, rate, speed-up over UVM and verification for each timed point."""
    rows: list[tuple[str, ...]] = [
        (
            row.record.workload,
            row.record.variant,
            format_fraction(row.record.cache_fraction),
            row.record.policy,
            _format_gbps(row.record.useful_gbps),
            format_rate(row.rate),
            "-" if row.speedup_vs_uvm is None else f"{row.speedup_vs_uvm:.2f}x",
            format_verified(row.record.verified),
        )
        for row in measured_rows(records)
    ]
    return TextTable(title, MEASURED_HEADERS, rows)


def simulated_table(records: Iterable[Record], title: str) -> TextTable:
    """Faults, evictions and bytes moved for each simulated point."""
    rows: list[tuple[str, ...]] = []
    for r in by_workload(r for r in records if r.simulated):
        evictions = r.extra.get("evictions")
        amplification = r.amplification
        rows.append(
            (
                r.workload,
                r.mode,
                format_fraction(r.cache_fraction),
                r.policy,
                format_count(r.faults),
                format_count(evictions if isinstance(evictions, int | float) else None),
                format_bytes(r.bytes_moved),
                "-" if amplification is None else f"{amplification:.2f}x",
            )
        )
    return TextTable(title, SIMULATED_HEADERS, rows)


def summary_tables(records: Iterable[Record]) -> list[TextTable]:
    """Per device: a table of measured points and one of simulated points, where present."""
    tables = []
    for device, group in group_by_device(records).items():
        if any(not r.simulated for r in group):
            tables.append(measured_table(group, f"{device}: measured (useful GB/s, median of repeats)"))
        if any(r.simulated for r in group):
            tables.append(simulated_table(group, f"{device}: simulated (counts, no timings)"))
    return tables


def markdown_table(table: TextTable) -> str:
    """A table as GitHub markdown (numeric columns right-aligned)."""
    header = "| " + " | ".join(table.headers) + " |"
    rule = "|" + "|".join("---:" if table.numeric(i) else "---" for i in range(len(table.headers))) + "|"
    body = ["| " + " | ".join(row) + " |" for row in table.rows]
    return "\n".join([header, rule, *body])


def markdown_summary(records: list[Record]) -> str:
    """The report's summary.md: the latest record of each point, tables grouped by device."""
    points = latest_points(records)
    lines = [
        "# warpvm results",
        "",
        f"{len(points)} points from {len(records)} records (the latest record of each point).",
    ]
    for device, group in group_by_device(points).items():
        drivers = ", ".join(sorted({r.driver for r in group}))
        commits = ", ".join(sorted({r.commit for r in group}))
        dates = sorted({r.date for r in group})
        when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
        lines += ["", f"## {device}", "", f"Driver {drivers}; commit {commits}; {when}."]
        for table in summary_tables(group):
            heading = table.title.removeprefix(f"{device}: ")
            lines += ["", f"### {heading[:1].upper()}{heading[1:]}", "", markdown_table(table)]
    return "\n".join(lines) + "\n"


def write_parquet_columns(columns: dict[str, list[Any]], path: Path) -> Path:
    """Writes the columns (name -> values) as a Parquet table (needs the 'parquet' extra: pyarrow)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ResultsError("writing Parquet needs pyarrow: pip install 'warpvm[parquet]'") from None
    pq.write_table(pa.table(columns), path)
    return path


def write_parquet(records: list[Record], path: Path) -> Path:
    """Writes the records as a Parquet table, one column per field any record has."""
    rows = [r.to_dict() for r in records]
    columns = dict.fromkeys(name for row in rows for name in row)
    return write_parquet_columns({name: [row.get(name) for row in rows] for name in columns}, path)

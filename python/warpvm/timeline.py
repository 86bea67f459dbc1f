"""Fault events as a timeline (docs/tracing.md, "Fault events").

`warpvm-bench --events FILE` (a build with -DWARPVM_FAULT_EVENTS=ON) writes one CSV row per
warp-level fault: when the warp found the page absent and when it could use it, which SM and
warp, how many lanes wanted the page, and how the fault was served (`fill`: this warp loaded it;
`wait`: another warp was loading it, a duplicate; `host`: the host_batched service did). This
module checks such a file, summarises it per run and turns it into a Chrome/Perfetto trace
(one process per run, one track per SM) or a Parquet table.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from statistics import fmean, median

from warpvm.results import TextTable, check_time_span, group_by, load_csv, write_json, write_parquet_columns

EVENT_COLUMNS = (
    "workload",
    "start_ns",
    "end_ns",
    "object",
    "page",
    "warp",
    "sm",
    "lanes",
    "kind",
    "write",
    "detail",
)
KINDS = ("fill", "wait", "host")
WARP_LANES = 32


@dataclass(frozen=True)
class FaultEvent:
    """One warp-level fault of one run."""

    run: str
    start_ns: int
    end_ns: int
    object: int
    page: int
    warp: int
    sm: int
    lanes: int
    kind: str
    write: bool
    detail: int

    @property
    def duration_ns(self) -> int:
        """How long the warp waited for its page."""
        return self.end_ns - self.start_ns


def _event(row: dict[str, str]) -> FaultEvent:
    event = FaultEvent(
        run=row["workload"],
        start_ns=int(row["start_ns"]),
        end_ns=int(row["end_ns"]),
        object=int(row["object"]),
        page=int(row["page"]),
        warp=int(row["warp"]),
        sm=int(row["sm"]),
        lanes=int(row["lanes"]),
        kind=row["kind"],
        write=row["write"] == "1",
        detail=int(row["detail"]),
    )
    if event.kind not in KINDS:
        raise ValueError(f"kind {event.kind!r} is not one of {', '.join(KINDS)}")
    check_time_span(event.start_ns, event.end_ns)
    if not 1 <= event.lanes <= WARP_LANES:
        raise ValueError(f"lanes {event.lanes} outside 1..{WARP_LANES}")
    if row["write"] not in ("0", "1"):
        raise ValueError("write must be 0 or 1")
    return event


def load_events(path: Path) -> list[FaultEvent]:
    """Reads a fault event CSV; raises ResultsError naming the file and line of a bad row."""
    return load_csv(path, EVENT_COLUMNS, _event)


def _us(values: list[int]) -> str:
    return f"{median(values) / 1000:.2f}" if values else "-"


def summary_table(events: list[FaultEvent]) -> TextTable:
    """Per run: faults by kind, the share that were duplicates, lanes merged per fault, the
    median wait per kind, and for fills the share that evicted (and wrote back) a page."""
    rows = []
    for run, group in group_by(events, lambda e: e.run).items():
        by_kind = {k: [e for e in group if e.kind == k] for k in KINDS}
        fills, waits, host = by_kind["fill"], by_kind["wait"], by_kind["host"]
        served = len(fills) + len(waits)
        rows.append(
            (
                run,
                str(len(group)),
                str(len(fills)),
                str(len(waits)),
                str(len(host)),
                f"{100 * len(waits) / served:.1f}%" if served else "-",
                f"{fmean(e.lanes for e in group):.1f}",
                _us([e.duration_ns for e in fills]),
                _us([e.duration_ns for e in waits]),
                _us([e.duration_ns for e in host]),
                f"{100 * sum(e.detail != 0 for e in fills) / len(fills):.1f}%" if fills else "-",
                f"{100 * sum(e.detail == 2 for e in fills) / len(fills):.1f}%" if fills else "-",
                f"{fmean(e.detail for e in host):.2f}" if host else "-",
            )
        )
    return TextTable(
        "Fault events per run (median waits in us)",
        (
            "run",
            "faults",
            "fills",
            "waits",
            "host",
            "duplicates",
            "lanes / fault",
            "fill us",
            "wait us",
            "host us",
            "fills evicting",
            "fills writing back",
            "posts / host fault",
        ),
        rows,
    )


def chrome_trace(events: list[FaultEvent]) -> dict:
    """The events as a Chrome trace (JSON object format), which the Perfetto UI opens: one
    process per run, one thread (track) per SM, one complete slice per fault."""
    trace: list[dict] = []
    for pid, (run, group) in enumerate(group_by(events, lambda e: e.run).items(), start=1):
        trace.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": run}})
        for sm in sorted({e.sm for e in group}):
            trace.append(
                {"name": "thread_name", "ph": "M", "pid": pid, "tid": sm, "args": {"name": f"SM {sm}"}}
            )
        for e in sorted(group, key=lambda e: e.start_ns):
            trace.append(
                {
                    "name": e.kind,
                    "cat": "fault",
                    "ph": "X",
                    "pid": pid,
                    "tid": e.sm,
                    "ts": e.start_ns / 1000,
                    "dur": e.duration_ns / 1000,
                    "args": {
                        "object": e.object,
                        "page": e.page,
                        "warp": e.warp,
                        "lanes": e.lanes,
                        "write": e.write,
                        "detail": e.detail,
                    },
                }
            )
    return {"traceEvents": trace, "displayTimeUnit": "ns"}


def write_chrome_trace(events: list[FaultEvent], path: Path) -> Path:
    """Writes chrome_trace(events) to `path`, making its directory if needed."""
    return write_json(chrome_trace(events), path)


def write_parquet(events: list[FaultEvent], path: Path) -> Path:
    """Writes the events as a Parquet table (needs the 'parquet' extra: pyarrow)."""
    names = [f.name for f in fields(FaultEvent)]
    return write_parquet_columns({name: [getattr(e, name) for e in events] for name in names}, path)

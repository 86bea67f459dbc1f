"""Producer/consumer results (warpvm-channel-bench): the channel against the polling baselines.

A *case* is one configuration of one workload: a device, the consumer threads, the compute
blocks' work, the input size of the GPU-to-GPU workloads and where the producer thread ran.
Each run's latest record in a case (a mode, and for the channel the CPU its monitor was pinned
to: one row per placement) is compared with the case's naive polling and its best baseline, as
issue #7's targets ask (docs/bench/channel.md, "Metrics").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from warpvm.results import (
    POINT_FIELDS,
    Record,
    TextTable,
    format_verified,
    latest_points,
    markdown_table,
)

SUITE = "channel"
LIBRARY_MODES = ("channel", "channel_direct", "channel_warp")  # the rest are polling baselines
# A channel run's configuration: latest_points's fields but the BFS root, the frontier order, the
# column product, the page size and the access-counter threshold (other suites') and the
# monitor's CPU (a row of its own within a case, run_label).
CASE_FIELDS = tuple(
    f
    for f in POINT_FIELDS
    if f
    not in (
        "root",
        "frontier_vertex_order",
        "column_tiles",
        "column_bands",
        "page_bytes",
        "pages_held_per_thread",
        "counter_threshold",
        "monitor_cpu",
    )
)


@dataclass
class ChannelCase:
    """One configuration of one workload and each mode's latest record in it."""

    device: str
    workload: str
    settings: tuple[tuple[str, float], ...]
    records: dict[str, Record] = field(default_factory=dict)  # run label (run_label) -> latest record

    @property
    def label(self) -> str:
        shown = ", ".join(
            f"{name} {value:.0f}" if value.is_integer() else f"{name} {value}"
            for name, value in self.settings
        )
        return f"{self.workload} on {self.device}" + (f" ({shown})" if shown else "")

    def seconds(self, mode: str) -> float | None:
        record = self.records.get(mode)
        return record.seconds if record is not None else None

    def best_baseline(self) -> tuple[str, float] | None:
        """The fastest polling baseline of the case, or None when none ran."""
        timed = [(r.mode, r.seconds) for r in self.records.values() if r.mode not in LIBRARY_MODES]
        return min(timed, key=lambda item: item[1]) if timed else None


def _setting(record: Record, name: str) -> float | None:
    value = record.extra.get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def run_label(record: Record) -> str:
    """The mode, and the CPU its monitor was pinned to where it was (the channel modes record
    monitor_cpu, -1 for a monitor the OS placed)."""
    monitor = _setting(record, "monitor_cpu")
    return record.mode + (f" (monitor on CPU {monitor:.0f})" if monitor is not None and monitor >= 0 else "")


def channel_cases(records: Iterable[Record]) -> list[ChannelCase]:
    """The latest record of each channel run (latest_points: a mode, and the CPU its monitor was
    pinned to, in one configuration) grouped into cases, in first-seen order."""
    cases: dict[tuple, ChannelCase] = {}
    for record in latest_points(r for r in records if r.suite == SUITE and r.seconds is not None):
        settings = tuple(
            (name, value) for name in CASE_FIELDS if (value := _setting(record, name)) is not None
        )
        key = (record.device, record.workload, settings)
        case = cases.setdefault(key, ChannelCase(record.device, record.workload, settings))
        case.records[run_label(record)] = record
    return list(cases.values())


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _extra(record: Record, name: str, digits: int) -> str:
    value = _setting(record, name)
    return f"{value:.{digits}f}" if value is not None else "-"


def case_table(case: ChannelCase) -> TextTable:
    """Per mode: the time, the speed-up over naive polling, the time against the best baseline,
    and the waiting metrics (overlap, wait share, the cost to computing warps, the mean host
    publish call)."""
    naive = case.seconds("naive")
    best = case.best_baseline()
    rows = []
    for label, record in case.records.items():
        seconds = record.seconds
        rows.append(
            (
                label,
                f"{seconds * 1e3:.2f}",
                _ratio(naive / seconds if naive else None),
                _ratio(seconds / best[1] if best else None),
                _extra(record, "overlap_efficiency", 2),
                _extra(record, "wait_share", 2),
                _extra(record, "compute_slowdown", 3),
                _extra(record, "publish_us", 3),
                format_verified(record.verified),
            )
        )
    baseline = f"best baseline {best[0]}" if best else "no baseline"
    return TextTable(
        f"{case.label}: {baseline}",
        (
            "mode",
            "ms",
            "x naive",
            "x best baseline",
            "overlap",
            "wait share",
            "compute slowdown",
            "publish us",
            "verified",
        ),
        rows,
    )


def channel_markdown(records: Iterable[Record]) -> str:
    """The report's section on channel records (empty when there are none)."""
    cases = channel_cases(records)
    if not cases:
        return ""
    lines = [
        "",
        "## Producer/consumer channels (warpvm-channel-bench)",
        "",
        "x naive: naive polling's time over the mode's; x best baseline: the mode's time over the",
        "fastest polling baseline's (above 1: slower). The other columns: docs/bench/channel.md, Metrics.",
    ]
    for case in cases:
        table = case_table(case)
        lines += ["", f"### {table.title}", "", markdown_table(table)]
    return "\n".join(lines) + "\n"

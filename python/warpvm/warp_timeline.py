"""Warp timelines of the channel benchmark (docs/bench/channel.md, "Metrics").

`warpvm-channel-bench --timeline FILE` appends, for the last measured run of each workload and
mode, one CSV row per warp life and per recorded wait (`run,warp,sm,consumer,kind,start_ns,
end_ns`; times from the run's first warp start; only the warps of SMs where a consumer ran; the
waits of warps that are not consumers too, such as kmeans2gpu's blocks waiting for the next
state). This module checks such a file, summarises each run's consumer waits and turns it into a
Chrome/Perfetto trace: one process per run, one track per warp, the warp's life as a slice with
its waits inside. A file holds one invocation: a run whose warp has two lives was appended twice
and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from warpvm.results import ResultsError, TextTable, check_time_span, group_by, load_csv, write_json

SPAN_COLUMNS = ("run", "warp", "sm", "consumer", "kind", "start_ns", "end_ns")
KINDS = ("life", "wait")


@dataclass(frozen=True)
class WarpSpan:
    """A warp's life, or one of its waits for the producer's data, in one run."""

    run: str
    warp: int
    sm: int
    consumer: bool
    kind: str
    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def _span(row: dict[str, str]) -> WarpSpan:
    if row["consumer"] not in ("0", "1"):
        raise ValueError("consumer must be 0 or 1")
    span = WarpSpan(
        run=row["run"],
        warp=int(row["warp"]),
        sm=int(row["sm"]),
        consumer=row["consumer"] == "1",
        kind=row["kind"],
        start_ns=int(row["start_ns"]),
        end_ns=int(row["end_ns"]),
    )
    if span.kind not in KINDS:
        raise ValueError(f"kind {span.kind!r} is not one of {', '.join(KINDS)}")
    check_time_span(span.start_ns, span.end_ns)
    return span


def load_spans(path: Path) -> list[WarpSpan]:
    """Reads a warp timeline CSV; raises ResultsError naming the file and line of a bad row, or
    the run and warp that has two lives (two invocations appended to one file)."""
    spans = load_csv(path, SPAN_COLUMNS, _span)
    lives: set[tuple[str, int]] = set()
    for span in spans:
        if span.kind != "life":
            continue
        if (span.run, span.warp) in lives:
            raise ResultsError(
                f"{path}: run {span.run!r} has two lives of warp {span.warp}: two invocations appended "
                "to one file? Give each invocation its own --timeline file"
            )
        lives.add((span.run, span.warp))
    return spans


def _percentile(values: list[int], share: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def summary_table(spans: list[WarpSpan]) -> TextTable:
    """Per run: consumer warps, their waits, the median and 99th-percentile wait, the consumers'
    time spent waiting (summed waits over summed lives, the benchmark's `wait_share`), and when
    the last wait ended (the last data's arrival)."""
    rows = []
    for run, group in group_by(spans, lambda s: s.run).items():
        consumers = [s for s in group if s.consumer]
        waits = [s.duration_ns for s in consumers if s.kind == "wait"]
        lives = sum(s.duration_ns for s in consumers if s.kind == "life")
        last = max((s.end_ns for s in consumers if s.kind == "wait"), default=0)
        rows.append(
            (
                run,
                str(len({s.warp for s in consumers})),
                str(len(waits)),
                f"{_percentile(waits, 0.5) / 1000:.2f}" if waits else "-",
                f"{_percentile(waits, 0.99) / 1000:.2f}" if waits else "-",
                f"{sum(waits) / lives:.3f}" if lives else "-",
                f"{last / 1e6:.3f}" if waits else "-",
            )
        )
    return TextTable(
        "Consumer waits per run (from the warp stamps)",
        ("run", "consumer warps", "waits", "median wait us", "p99 wait us", "wait share", "last arrival ms"),
        rows,
    )


def chrome_trace(spans: list[WarpSpan]) -> dict:
    """The spans as a Chrome trace (JSON object format), which the Perfetto UI opens: one process
    per run, one thread (track) per warp named by its SM and role, its life as a slice and its
    waits as slices inside it."""
    trace: list[dict] = []
    for pid, (run, group) in enumerate(group_by(spans, lambda s: s.run).items(), start=1):
        trace.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": run}})
        warps = {(s.warp, s.sm, s.consumer) for s in group}
        for warp, sm, consumer in sorted(warps):
            role = "consumer" if consumer else "other"
            name = f"SM {sm} warp {warp} ({role})"
            trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": warp, "args": {"name": name}})
        # Lives before waits at equal start times: a viewer nests a slice in the one opened first.
        for s in sorted(group, key=lambda s: (s.start_ns, s.kind != "life")):
            trace.append(
                {
                    "name": ("consumer" if s.consumer else "busy") if s.kind == "life" else "wait",
                    "cat": "warp",
                    "ph": "X",
                    "pid": pid,
                    "tid": s.warp,
                    "ts": s.start_ns / 1000,
                    "dur": s.duration_ns / 1000,
                    "args": {"sm": s.sm},
                }
            )
    return {"traceEvents": trace, "displayTimeUnit": "ns"}


def write_chrome_trace(spans: list[WarpSpan], path: Path) -> Path:
    """Writes chrome_trace(spans) to `path`, making its directory if needed."""
    return write_json(chrome_trace(spans), path)

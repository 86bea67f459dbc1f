"""Multi-GPU placement results (warpvm-placement-bench): OASIS against the uniform policies.

A *case* is one scaling point: a device, a GPU count, a footprint scale, a counter threshold and
where the data starts (the host, or placed on the GPUs before each run: --initial-placement,
recorded as a policy suffix). Its workloads were run under some of the policies; the issue
targets (OASIS's gain over on-touch, and its distance from the best uniform policy) are computed
per case. Real-UVM runs (the uvm modes) have no counter threshold and always start on the host:
they join every host case of their device, GPU count and scale, as columns of their own.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from warpvm.results import Record, TextTable, format_bytes, latest_points, markdown_table

SUITE = "placement"
UNIFORM_POLICIES = ("on_touch", "access_counter", "duplication")
POLICIES = (*UNIFORM_POLICIES, "oasis")
UVM_POLICIES = ("uvm", "uvm_read_mostly", "uvm_accessed_by")  # real UVM, in core: a reality check
HOST = "host"
INITIAL_PLACEMENTS = ("gpu_blocks", "gpu_interleaved")  # policy suffixes: <mode>_<placement>


def initial_placement_of(record: Record) -> str | None:
    """Where the run's data started: HOST when the policy is the mode, a GPU spread when the
    policy is <mode>_<spread>, None for other sensitivity points (e.g. oasis_reset4)."""
    if record.policy == record.mode:
        return HOST
    for placement in INITIAL_PLACEMENTS:
        if record.policy == f"{record.mode}_{placement}":
            return placement
    return None


def scale_of(record: Record) -> int:
    """The footprint a run asked for (--bytes, recorded as requested_mib), or for records without
    it the power of two nearest the footprint in log scale (each workload's shape lands near the
    requested size: a little under it for tiled matrices, up to one R-MAT scale over it)."""
    requested = record.extra.get("requested_mib")
    if isinstance(requested, int | float) and requested > 0:
        return round(requested * 2**20)
    return 1 << round(math.log2(max(record.dataset_bytes, 1)))


@dataclass(frozen=True)
class PlacementCase:
    """One scaling point and the time (seconds) of each workload under each policy."""

    device: str
    gpus: int
    scale_bytes: int
    counter_threshold: int | None
    initial_placement: str = HOST
    seconds: dict[str, dict[str, float]] = field(default_factory=dict)  # workload -> policy -> s
    footprint: dict[str, int] = field(default_factory=dict)  # workload -> bytes

    @property
    def label(self) -> str:
        threshold = "" if self.counter_threshold is None else f", counter threshold {self.counter_threshold}"
        spread = self.initial_placement.removeprefix("gpu_")
        placed = "" if self.initial_placement == HOST else f", pages first on the GPUs ({spread})"
        return f"{self.device} x{self.gpus}, {format_bytes(self.scale_bytes)} per workload{threshold}{placed}"

    @property
    def policies(self) -> tuple[str, ...]:
        """warpvm's policies, then the real-UVM modes that this case timed."""
        timed = {p for times in self.seconds.values() for p in times}
        return (*POLICIES, *(p for p in UVM_POLICIES if p in timed))

    def workloads(self, *policies: str) -> list[str]:
        """The workloads timed under every one of `policies`, in first-seen order."""
        return [w for w, times in self.seconds.items() if all(p in times for p in policies)]

    def oasis_speedup_over(self, policy: str) -> dict[str, float]:
        """Per workload, time under `policy` / time under OASIS (> 1: OASIS is faster)."""
        times = self.seconds
        return {w: times[w][policy] / times[w]["oasis"] for w in self.workloads(policy, "oasis")}

    def oasis_against_best_uniform(self) -> dict[str, tuple[str, float]]:
        """Per workload with every uniform policy timed: the best uniform policy and its time /
        OASIS's time (< 1: OASIS is slower than the best uniform policy)."""
        result = {}
        for w in self.workloads(*POLICIES):
            best = min(UNIFORM_POLICIES, key=lambda p: self.seconds[w][p])
            result[w] = (best, self.seconds[w][best] / self.seconds[w]["oasis"])
        return result


def arithmetic_and_geometric_mean(values: Iterable[float]) -> tuple[float, float]:
    """Both means of positive values (the speed-up averages the paper and the issues quote)."""
    listed = list(values)
    return statistics.fmean(listed), statistics.geometric_mean(listed)


def placement_cases(records: Iterable[Record]) -> list[PlacementCase]:
    """The cases of the placement suite's records (the latest record of each point). Sensitivity
    runs whose policy is neither their mode nor their mode with an initial placement (e.g.
    oasis_reset4) are left out; runs at another counter threshold or initial placement form
    cases of their own. A real-UVM run joins every host case of its device, GPU count and scale
    (a case of its own, without a threshold, if there is none)."""
    cases: dict[tuple[str, int, int, int | None, str], PlacementCase] = {}
    modes = (*POLICIES, *UVM_POLICIES)
    points = latest_points(r for r in records if r.suite == SUITE and r.mode in modes)
    # (record, where its data started) of each timed point that is not another sensitivity run
    timed = [
        (r, placement)
        for r in points
        if r.seconds is not None and (placement := initial_placement_of(r)) is not None
    ]

    def add(case: PlacementCase, r: Record) -> None:
        case.seconds.setdefault(r.workload, {})[r.mode] = r.seconds
        case.footprint[r.workload] = r.dataset_bytes

    for r, placement in timed:
        if r.mode in POLICIES:
            threshold = r.extra.get("counter_threshold")
            key = (r.device, int(r.extra.get("gpus", 1)), scale_of(r), threshold, placement)
            add(cases.setdefault(key, PlacementCase(*key)), r)
    for r, placement in timed:
        if r.mode in UVM_POLICIES and placement == HOST:
            point = (r.device, int(r.extra.get("gpus", 1)), scale_of(r))
            joined = [
                case
                for case in cases.values()
                if (case.device, case.gpus, case.scale_bytes) == point and case.initial_placement == HOST
            ]
            for case in joined or [cases.setdefault((*point, None, HOST), PlacementCase(*point, None))]:
                add(case, r)
    return list(cases.values())


def placement_table(case: PlacementCase) -> TextTable:
    """Seconds per workload and policy (real UVM's columns where the case has them), then OASIS's
    speed-up over on-touch and over the best uniform policy (< 1: slower than it)."""
    rows = []
    against_best = case.oasis_against_best_uniform()
    over_on_touch = case.oasis_speedup_over("on_touch")
    policies = case.policies
    for workload, times in case.seconds.items():
        cells = [f"{times[p]:.4f}" if p in times else "-" for p in policies]
        gain = f"{over_on_touch[workload]:.2f}x" if workload in over_on_touch else "-"
        best = "-"
        if workload in against_best:
            best = f"{against_best[workload][1]:.3f} ({against_best[workload][0]})"
        rows.append((workload, format_bytes(case.footprint[workload]), *cells, gain, best))
    seconds = tuple(f"{p} s" for p in policies)
    headers = ("workload", "footprint", *seconds, "oasis vs on_touch", "oasis vs best uniform")
    return TextTable(case.label, headers, rows)


def verdict_lines(case: PlacementCase) -> list[str]:
    """The issue's two targets for one case, as sentences (empty when neither can be computed)."""
    lines = []
    over = case.oasis_speedup_over("on_touch")
    if over:
        arithmetic, geometric = arithmetic_and_geometric_mean(over.values())
        lines.append(
            f"OASIS over on-touch, {len(over)} workloads: {arithmetic:.2f}x arithmetic mean "
            f"({(arithmetic - 1) * 100:+.0f}%), {geometric:.2f}x geometric mean."
        )
    against_best = case.oasis_against_best_uniform()
    if against_best:
        worst, (policy, ratio) = min(against_best.items(), key=lambda item: item[1][1])
        if ratio < 1:
            lines.append(
                f"Worst against the best uniform policy: {worst}, OASIS at {ratio:.3f}x of {policy}'s speed "
                f"({(1 - ratio) * 100:.1f}% below it; its time {1 / ratio:.3f}x)."
            )
        else:
            lines.append(
                f"OASIS is at least as fast as the best uniform policy everywhere "
                f"(closest: {worst}, {ratio:.3f}x)."
            )
    return lines


def placement_markdown(records: Iterable[Record]) -> str:
    """A markdown section with one table and the target verdicts per case; empty without cases."""
    cases = placement_cases(records)
    if not cases:
        return ""
    parts = ["", "## Placement across GPUs (seconds; speed-ups are time ratios)"]
    for case in cases:
        table = markdown_table(placement_table(case))
        parts += ["", f"### {case.label}", "", table, "", *verdict_lines(case)]
    return "\n".join(parts) + "\n"

"""`warpvm fuzz`: runs warpvm-fuzz (the seeded differential fuzzer, docs/fuzz.md) and summarises its
records: how many seeds were exact, the failures with their reproducers, and the slowest
configurations against the link's speed."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from warpvm.results import Record, TextTable, format_bytes

FUZZ = Path("tools/fuzz/warpvm-fuzz")
BACKENDS = ("gpu", "sim")
GRIDS = ("ci", "quick", "full")
# A full grid of 2,000 seeds takes minutes on an H100; a hang meets this limit first.
FUZZ_TIMEOUT_S = 1800.0
SLOWEST_SHOWN = 10


@dataclass(frozen=True)
class FuzzSettings:
    """Options for warpvm-fuzz."""

    backend: str = "gpu"
    grid: str = "full"
    seeds: int = 2000
    first_seed: int = 0
    seed: int | None = None
    jobs: int = 1
    time_limit: float = 0.0
    commit: str = "unknown"
    driver: str = "unknown"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r} (choose from {', '.join(BACKENDS)})")
        if self.grid not in GRIDS:
            raise ValueError(f"unknown grid {self.grid!r} (choose from {', '.join(GRIDS)})")

    def args(self) -> list[str]:
        """Command-line arguments; records go to stdout."""
        seeds = (
            ["--seed", str(self.seed)]
            if self.seed is not None
            else [
                *("--seeds", str(self.seeds)),
                *("--first-seed", str(self.first_seed)),
            ]
        )
        return [
            *("--backend", self.backend),
            *("--grid", self.grid),
            *seeds,
            *("--jobs", str(self.jobs)),
            *("--time-limit", f"{self.time_limit:g}"),
            *("--commit", self.commit),
            *("--driver", self.driver),
            *("--out", "-"),
        ]

    def expected_seeds(self) -> int:
        """How many records a run without a time limit writes."""
        return 1 if self.seed is not None else self.seeds


def _configuration(record: Record) -> tuple[str, int, str, int, int, int]:
    """What a seed's configuration cell is: backend, page size, policy, oversubscription,
    threads, holds."""
    extra = record.extra
    return (
        record.mode,
        int(extra.get("page_bytes", 0)),
        record.policy,
        int(extra.get("oversubscription", 0)),
        int(extra.get("threads", 0)),
        int(extra.get("pages_held_per_thread", 0)),
    )


@dataclass(frozen=True)
class Failure:
    """A seed whose results differed from the model, and how to rerun it."""

    seed: int
    failure: str
    reproduce: str


@dataclass(frozen=True)
class FuzzSummary:
    seeds: int
    exact: int
    failures: list[Failure]
    slowest: TextTable

    @property
    def exact_run(self) -> bool:
        """Whether there were seeds and every one was exact."""
        return self.seeds > 0 and not self.failures


def summarize(records: list[Record]) -> FuzzSummary:
    """Exact seeds, failures, and the configurations whose seeds took longest per launch, with the
    bytes they moved against the link's speed (timed records only; the simulator's have none)."""
    fuzz = [r for r in records if r.suite == "fuzz"]
    failures = [
        Failure(
            int(r.extra.get("seed", -1)), str(r.extra.get("failure", "")), str(r.extra.get("reproduce", ""))
        )
        for r in fuzz
        if r.extra.get("exact") is not True
    ]
    groups: dict[tuple[str, int, str, int, int, int], list[Record]] = defaultdict(list)
    for r in fuzz:
        if r.seconds is not None:
            groups[_configuration(r)].append(r)
    rows: list[tuple[float, tuple[str, ...]]] = []
    for (mode, page, policy, ratio, threads, holds), members in groups.items():
        seconds = sum(r.seconds or 0.0 for r in members)
        moved = sum(r.bytes_moved or 0 for r in members)
        links = [float(r.extra["link_gbps"]) for r in members if r.extra.get("link_gbps")]
        gbps = moved / seconds / 1e9 if seconds > 0 else None
        link = max(links) if links else None
        share = f"{100 * gbps / link:.0f}%" if gbps is not None and link else "-"
        rows.append(
            (
                seconds / len(members),
                (
                    f"{format_bytes(page).replace('.00 ', ' ')} {policy} {ratio}x {threads}t x{holds}",
                    mode,
                    str(len(members)),
                    f"{1000 * seconds / len(members):.1f}",
                    format_bytes(moved / len(members)),
                    f"{gbps:.2f}" if gbps is not None else "-",
                    f"{link:.1f}" if link else "-",
                    share,
                ),
            )
        )
    rows.sort(key=lambda row: row[0], reverse=True)
    shown = min(len(rows), SLOWEST_SHOWN)
    slowest = TextTable(
        title=f"Slowest configurations (launch time per seed; {shown} of {len(rows)})",
        headers=("run", "mode", "seeds", "ms per seed", "moved per seed", "GB/s", "link GB/s", "of link"),
        rows=[cells for _, cells in rows[:SLOWEST_SHOWN]],
    )
    exact = sum(1 for r in fuzz if r.extra.get("exact") is True)
    return FuzzSummary(seeds=len(fuzz), exact=exact, failures=failures, slowest=slowest)

"""Fig. 7: the share of batch time spent moving data; the rest is management."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import fmean, median

from matplotlib.figure import Figure

from warpvm.results import TextTable
from warpvm.trace.analysis import finish_axes, new_figure, per_run, run_table, time_axis
from warpvm.trace.batches import Batch, Run, runs, transfer_timed

# The study finds data transfer below this share of batch time for almost all batches.
TRANSFER_SHARE_MARK = 0.25


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

    @classmethod
    def of(cls, run: Run, group: list[Batch]) -> TransferShare | None:
        """None when some batch lacks its duration or transfer time."""
        if not transfer_timed(group):
            return None
        total = sum(b.duration_ns or 0 for b in group)
        management = sum(b.management_ns or 0 for b in group)
        return cls(
            run=run,
            shares=[share for b in group if (share := b.transfer_share) is not None],
            management_share=management / total if total else 0.0,
        )


def transfer_shares(batches: Iterable[Batch]) -> list[TransferShare]:
    """Fig. 7 for every run with duration and transfer times; untimed runs are left out."""
    return per_run(batches, TransferShare.of)


def transfer_table(shares: Iterable[TransferShare]) -> TextTable:
    headers = (
        "transfer share: mean",
        "median",
        "max",
        f"batches under {TRANSFER_SHARE_MARK:.0%}",
        "management share of time",
    )
    rows = (
        (
            t.run,
            (
                f"{t.mean:.1%}",
                f"{t.median:.1%}",
                f"{t.max:.1%}",
                f"{t.under_mark:.1%}",
                f"{t.management_share:.1%}",
            ),
        )
        for t in shares
    )
    return run_table("Fig. 7: share of batch time spent moving data (timed runs)", headers, rows)


def transfer_figure(batches: Sequence[Batch]) -> Figure | None:
    """Fig. 7: per-batch share of service time spent moving data; None without timed runs."""
    grouped = {run: group for run, group in runs(batches).items() if transfer_timed(group)}
    if not grouped:
        return None
    x_of, xlabel = time_axis(grouped)
    figure, (ax,) = new_figure()
    for run, group in grouped.items():
        kept = [(x_of(b), 100 * share) for b in group if (share := b.transfer_share) is not None]
        ax.scatter([x for x, _ in kept], [y for _, y in kept], s=8, alpha=0.6, label=run.label())
    ax.axhline(100 * TRANSFER_SHARE_MARK, color="black", linestyle=":", linewidth=1)
    ax.set_ylim(0, 100)
    finish_axes(
        ax, "Fig. 7: share of batch time spent moving data (rest: management)", xlabel, "transfer (%)"
    )
    return figure

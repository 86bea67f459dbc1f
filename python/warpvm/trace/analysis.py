"""What every analysis shares: results per run, tables led by each run's cells, and the figure
helpers. Each analysis module makes its results, tables and figure of these; report.py lists them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from warpvm.results import TextTable
from warpvm.trace.batches import RUN_HEADERS, Batch, Run, runs, start_timed

T = TypeVar("T")


def per_run(batches: Iterable[Batch], analyse: Callable[[Run, list[Batch]], T | None]) -> list[T]:
    """`analyse` of each run and its batches, in run order; runs it gives None for are left out."""
    return [result for run, group in runs(batches).items() if (result := analyse(run, group)) is not None]


def run_table(title: str, headers: Sequence[str], rows: Iterable[tuple[Run, Sequence[str]]]) -> TextTable:
    """A table whose rows each start with their run's identifying cells (RUN_HEADERS)."""
    return TextTable(title, (*RUN_HEADERS, *headers), [(*run.cells(), *cells) for run, cells in rows])


def format_ms(ns: float | None) -> str:
    """A time in ns as a millisecond cell, '-' when untimed."""
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def new_figure(
    rows: int = 1, cols: int = 1, height: float = 4.5, width: float = 8.5
) -> tuple[Figure, list[Axes]]:
    """A figure of rows x cols panels, `height` per row; the panels row by row."""
    figure = Figure(layout="constrained", figsize=(width, height * rows))
    axes = figure.subplots(rows, cols, squeeze=False)
    return figure, [ax for row in axes for ax in row]


def finish_axes(ax: Axes, title: str, xlabel: str, ylabel: str, legend: bool = True) -> None:
    """Titles, labels, a grid, and a legend when asked for and anything is labelled."""
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="x-small")
    ax.grid(alpha=0.3)


def time_axis(grouped: dict[Run, list[Batch]]) -> tuple[Callable[[Batch], float], str]:
    """x for time series: start time in ms when every batch has one, else the batch index."""
    if all(start_timed(group) for group in grouped.values()):
        return (lambda b: (b.start_ns or 0) / 1e6), "time since the first batch (ms)"
    return (lambda b: float(b.batch)), "batch"

"""Plots of benchmark records (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator, ScalarFormatter
from matplotlib.typing import ColorType

from warpvm.channel import channel_cases
from warpvm.placement import POLICIES, UVM_POLICIES, placement_cases
from warpvm.results import Record, format_fraction, kernel_of, latest_points

Key = TypeVar("Key", bound=Hashable)

# Horizontal reference lines on the cache sweep: mode -> dash pattern.
_REFERENCES = {"zero_copy": (0, (6, 3)), "explicit": (0, (2, 2))}
# Use a log scale when values span more than this ratio.
_LOG_RANGE = 50.0


def _devices(records: Iterable[Record]) -> list[str]:
    return list(dict.fromkeys(r.device for r in records))


def _series(record: Record, several_devices: bool) -> str:
    """A legend label: the mode, with the device when several devices are plotted together."""
    return f"{record.variant} ({record.device})" if several_devices else record.variant


def _palette(names: Iterable[Key]) -> dict[Key, ColorType]:
    """A distinct colour per name (tab10, or tab20 beyond ten names)."""
    unique = list(dict.fromkeys(names))
    cmap = colormaps["tab10" if len(unique) <= 10 else "tab20"]
    return {name: cmap(i % cmap.N) for i, name in enumerate(unique)}


def _short(value: float) -> str:
    """A bar label: three significant digits, no exponent below a million."""
    return f"{value:.0f}" if 100 <= value < 1e6 else f"{value:.3g}"


def _legend(colors: dict[str, ColorType]) -> list[Patch]:
    """Legend entries: one coloured patch per series, in order."""
    return [Patch(color=color, label=name) for name, color in colors.items()]


def _log_if_wide(values: list[float]) -> bool:
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) / min(positive) > _LOG_RANGE


def _draw_grouped_bars(
    ax: Axes, bars: list[tuple[str, str, float]], label: Callable[[float], str], colors: dict[str, ColorType]
) -> None:
    """Draws bars (workload, series, value) on `ax`, grouped by workload in first-seen order, each
    labelled with `label(value)`, the workloads as x ticks."""
    workloads = list(dict.fromkeys(w for w, _, _ in bars))
    per_workload = {w: [b for b in bars if b[0] == w] for w in workloads}
    width = 0.85 / max(len(group) for group in per_workload.values())
    for i, workload in enumerate(workloads):
        group = per_workload[workload]
        for j, (_, series, value) in enumerate(group):
            drawn = ax.bar(i + (j - (len(group) - 1) / 2) * width, value, width, color=colors[series])
            ax.bar_label(drawn, fmt=label, fontsize=6, rotation=90, padding=2)
    ax.set_xticks(range(len(workloads)), workloads)


def _grouped_bars(bars: list[tuple[str, str, float]], label: Callable[[float], str]) -> tuple[Figure, Axes]:
    """Bars (workload, series, value) grouped by workload, a colour per series, each labelled with
    `label(value)`; log scale when the values span a wide range. The caller adds axis labels."""
    workloads = list(dict.fromkeys(w for w, _, _ in bars))
    colors = _palette(series for _, series, _ in bars)
    figure = Figure(layout="constrained", figsize=(max(8.0, 1.6 * len(workloads) + 0.25 * len(bars)), 5.5))
    ax = figure.add_subplot()
    _draw_grouped_bars(ax, bars, label, colors)
    if _log_if_wide([value for _, _, value in bars]):
        ax.set_yscale("log")
    ax.set_xlabel("workload")
    ax.legend(handles=_legend(colors), fontsize=7, ncols=2, loc="best")
    ax.grid(axis="y", alpha=0.3)
    return figure, ax


def log2_x_axis(ax: Axes, ticks: Sequence[float], labels: Sequence[str]) -> None:
    """A base-2 logarithmic x axis with exactly `ticks`, labelled `labels` (no minor ticks)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(ticks)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels(list(labels))


def save_png(figure: Figure | None, path: Path) -> Path | None:
    """Writes the figure as PNG (Agg canvas); None, writing nothing, when there is no figure."""
    if figure is None:
        return None
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=120)
    return path


def plot_bandwidth(records: Iterable[Record], path: Path) -> Path | None:
    """Writes `bandwidth_figure` to `path`; None if there is nothing to plot."""
    return save_png(bandwidth_figure(records), path)


def plot_cache_sweep(records: Iterable[Record], path: Path) -> Path | None:
    """Writes `cache_sweep_figure` to `path`; None if there is nothing to plot."""
    return save_png(cache_sweep_figure(records), path)


def plot_bytes_moved(records: Iterable[Record], path: Path) -> Path | None:
    """Writes `bytes_moved_figure` to `path`; None if there is nothing to plot."""
    return save_png(bytes_moved_figure(records), path)


def bandwidth_figure(records: Iterable[Record]) -> Figure | None:
    """Grouped bars of useful GB/s per workload and mode; None if no record is timed.

    A mode measured at several cache fractions is shown at its largest one.
    """
    chosen: dict[tuple[str, str, str], Record] = {}
    for r in latest_points(records):
        if r.simulated or r.useful_gbps is None:
            continue
        key = (r.workload, r.variant, r.device)
        if key not in chosen or r.cache_fraction > chosen[key].cache_fraction:
            chosen[key] = r
    if not chosen:
        return None
    devices = _devices(chosen.values())
    several = len(devices) > 1
    figure, ax = _grouped_bars(
        [(r.workload, _series(r, several), r.useful_gbps or 0.0) for r in chosen.values()], _short
    )
    ax.set_ylabel("useful bandwidth (GB/s)")
    ax.set_title(f"Useful bandwidth per workload and mode: {', '.join(devices)}\n(warpvm: largest cache)")
    return figure


def cache_sweep_figure(records: Iterable[Record]) -> Figure | None:
    """warpvm useful GB/s against cache size, one line per workload, with zero_copy and explicit
    as dashed references; None if there is no timed warpvm point."""
    points = [r for r in latest_points(records) if not r.simulated and r.useful_gbps is not None]
    sweep = [r for r in points if r.mode == "warpvm" and r.cache_fraction > 0]
    if not sweep:
        return None
    devices = _devices(sweep)
    several = len(devices) > 1
    figure = Figure(layout="constrained", figsize=(8.5, 5.5))
    ax = figure.add_subplot()
    lines = list(dict.fromkeys((r.device, r.workload) for r in sweep))
    colors = _palette(lines)
    for device, workload in lines:
        color = colors[device, workload]
        label = f"{workload} ({device})" if several else workload
        ours = [r for r in sweep if (r.device, r.workload) == (device, workload)]
        line = sorted(ours, key=lambda r: r.cache_fraction)
        ax.plot(
            [r.cache_fraction * 100 for r in line],
            [r.useful_gbps or 0.0 for r in line],
            marker="o",
            color=color,
            label=f"{label}: warpvm",
        )
        for mode, dashes in _REFERENCES.items():
            for r in points:
                if (r.device, r.workload, r.mode) == (device, workload, mode):
                    ax.axhline(
                        r.useful_gbps or 0.0, color=color, linestyle=dashes, lw=1, label=f"{label}: {mode}"
                    )
    fractions = sorted({r.cache_fraction for r in sweep})
    log2_x_axis(ax, [f * 100 for f in fractions], [format_fraction(f) for f in fractions])
    ax.set_xlabel("cache = % of data")
    ax.set_ylabel("useful bandwidth (GB/s)")
    ax.set_title(f"warpvm bandwidth against cache size: {', '.join(devices)}")
    shown = {workload for _, workload in lines}
    if _log_if_wide([r.useful_gbps or 0.0 for r in points if r.workload in shown]):
        ax.set_yscale("log")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    return figure


def bytes_moved_figure(records: Iterable[Record]) -> Figure | None:
    """I/O amplification (bytes moved / useful bytes) per workload, mode and cache size, where bytes
    moved is known and not zero; None if there is no such record."""
    points = [r for r in latest_points(records) if r.amplification]
    if not points:
        return None
    devices = _devices(points)
    several = len(devices) > 1
    workloads = list(dict.fromkeys(r.workload for r in points))
    colors = _palette(_series(r, several) for r in points)
    heights = [sum(r.workload == w for r in points) for w in workloads]
    figure = Figure(layout="constrained", figsize=(8.5, 1.2 + 0.32 * len(points) + 0.6 * len(workloads)))
    axes = figure.subplots(len(workloads), 1, sharex=True, squeeze=False, height_ratios=heights)[:, 0]
    logarithmic = _log_if_wide([r.amplification or 0.0 for r in points])
    for ax, workload in zip(axes, workloads, strict=True):
        rows = [r for r in points if r.workload == workload]
        for y, r in enumerate(rows):
            bars = ax.barh(y, r.amplification, color=colors[_series(r, several)])
            ax.bar_label(bars, fmt=lambda v: _short(v) + "x", fontsize=6, padding=2)
        names = [
            f"{r.variant} {format_fraction(r.cache_fraction)}" if r.cache_fraction else r.variant
            for r in rows
        ]
        ax.set_yticks(range(len(rows)), names, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", linewidth=0.8, linestyle=":")
        ax.set_ylabel(workload, fontsize=8)
        ax.grid(axis="x", alpha=0.3)
        if logarithmic:
            ax.set_xscale("log")
    axes[-1].set_xlabel("bytes moved / useful bytes (x, dotted line: 1x = no amplification)")
    figure.suptitle(f"I/O amplification by mode and cache size: {', '.join(devices)}")
    figure.legend(handles=_legend(colors), fontsize=7, loc="outside lower center", ncols=3, title="mode")
    return figure


def _median_seconds(records: Iterable[Record]) -> dict[tuple[str, str, str, float, int], float]:
    """Median time per point (device, workload, mode, cache, size) over its roots or repeats."""
    times: dict[tuple[str, str, str, float, int], list[float]] = {}
    for r in latest_points(records):
        if not r.simulated and r.seconds:
            key = (r.device, r.workload, r.variant, r.cache_fraction, r.dataset_bytes)
            times.setdefault(key, []).append(r.seconds)
    return {key: statistics.median(values) for key, values in times.items()}


def speedup_figure(records: Iterable[Record]) -> Figure | None:
    """Speed-up over real UVM (time of `uvm` / time of the mode) per workload and mode, each mode
    at its largest cache; None without a workload timed both in `uvm` and in another mode."""
    # Each variant's kernels, and which variants are real UVM: a mode is compared with the UVM run
    # of the same kernels (KERNEL_FIELDS).
    points = latest_points(records)
    seconds = _median_seconds(points)
    kernels = {(r.device, r.workload, r.variant, r.dataset_bytes): kernel_of(r) for r in points}
    uvm_variants = {(r.device, r.workload, r.variant, r.dataset_bytes) for r in points if r.mode == "uvm"}
    uvm = {
        (d, w, size, kernels[(d, w, variant, size)]): t
        for (d, w, variant, _, size), t in seconds.items()
        if (d, w, variant, size) in uvm_variants
    }
    best: dict[tuple[str, str, str, int], tuple[float, float]] = {}  # -> (cache, speed-up)
    for (device, workload, mode, cache, size), t in seconds.items():
        if (device, workload, mode, size) in uvm_variants:
            continue
        baseline = uvm.get((device, workload, size, kernels[(device, workload, mode, size)]))
        if baseline is None:
            continue
        key = (device, workload, mode, size)
        if key not in best or cache > best[key][0]:
            best[key] = (cache, baseline / t)
    if not best:
        return None
    devices = _devices_of(best)
    several = len(devices) > 1
    bars = [(k[1], f"{k[2]} ({k[0]})" if several else k[2], speedup) for k, (_, speedup) in best.items()]
    figure, ax = _grouped_bars(bars, lambda v: _short(v) + "x")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_ylabel("speed-up over UVM in-core (x, time)")
    ax.set_title(
        f"Speed-up over UVM by workload and mode: {', '.join(devices)}\n(each mode at its largest cache)"
    )
    return figure


def oversubscription_figure(records: Iterable[Record]) -> Figure | None:
    """Slowdown against oversubscription (time at cache f / time at cache 100%, x axis 1/f) per
    workload and mode, the shape of DREAM's Fig. 14; None without a mode timed at 100% and below."""
    seconds = _median_seconds(records)
    full = {(d, w, m, size): t for (d, w, m, cache, size), t in seconds.items() if cache == 1.0}
    lines: dict[tuple[str, str, str, int], list[tuple[float, float]]] = {}
    for (device, workload, mode, cache, size), t in seconds.items():
        reference = full.get((device, workload, mode, size))
        if reference is not None and 0 < cache <= 1.0:
            lines.setdefault((device, workload, mode, size), []).append((1.0 / cache, t / reference))
    lines = {key: sorted(points) for key, points in lines.items() if len(points) > 1}
    if not lines:
        return None
    devices = _devices_of(lines)
    several = len(devices) > 1
    labels = {k: f"{k[1]} {k[2]}" + (f" ({k[0]})" if several else "") for k in lines}
    colors = _palette(labels.values())
    figure = Figure(layout="constrained", figsize=(8.5, 5.5))
    ax = figure.add_subplot()
    for key, points in lines.items():
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", color=colors[labels[key]], label=labels[key])
    ratios = sorted({x for points in lines.values() for x, _ in points})
    log2_x_axis(ax, ratios, [f"{x:g}x" for x in ratios])
    ax.axhline(2.0, color="black", linewidth=0.8, linestyle=":", label="2x slowdown")
    ax.set_xlabel("oversubscription (data / cache)")
    ax.set_ylabel("slowdown (time / time at cache = 100%)")
    ax.set_title(f"Slowdown against oversubscription: {', '.join(devices)}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    return figure


def _devices_of(keys: Iterable[tuple[object, ...]]) -> list[str]:
    """The devices (first key field) in order of first appearance."""
    return list(dict.fromkeys(str(key[0]) for key in keys))


def plot_speedup(records: Iterable[Record], path: Path) -> Path | None:
    """Writes `speedup_figure` to `path`; None if there is nothing to plot."""
    return save_png(speedup_figure(records), path)


def plot_oversubscription(records: Iterable[Record], path: Path) -> Path | None:
    """Writes `oversubscription_figure` to `path`; None if there is nothing to plot."""
    return save_png(oversubscription_figure(records), path)


def placement_figure(records: Iterable[Record]) -> Figure | None:
    """Speed-up over uniform on-touch (time of on_touch / time of the policy) per workload and
    placement policy (and real-UVM mode, where timed), one panel per case (device, GPU count,
    footprint scale, counter threshold); None without a case that timed on-touch and another policy."""
    cases = [
        c for c in placement_cases(records) if any(len(t) > 1 and "on_touch" in t for t in c.seconds.values())
    ]
    if not cases:
        return None
    timed = {p for c in cases for times in c.seconds.values() for p in times}
    others = [p for p in POLICIES if p != "on_touch"] + [p for p in UVM_POLICIES if p in timed]
    colors = _palette(others)
    widest = max(len(c.workloads("on_touch")) for c in cases)
    figure = Figure(layout="constrained", figsize=(max(8.0, 1.4 * widest), 3.2 * len(cases)))
    axes = figure.subplots(len(cases), 1, squeeze=False)[:, 0]
    for ax, case in zip(axes, cases, strict=True):
        bars = [
            (workload, policy, times["on_touch"] / times[policy])
            for workload, times in case.seconds.items()
            if "on_touch" in times
            for policy in others
            if policy in times
        ]
        _draw_grouped_bars(ax, bars, lambda v: _short(v) + "x", colors)
        speedups = [value for _, _, value in bars]
        if _log_if_wide(speedups) or max(speedups, default=1.0) > 8:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.margins(y=0.18)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
        ax.set_ylabel("x on-touch (time)", fontsize=8)
        ax.set_title(case.label, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    figure.suptitle("Placement policies against uniform on-touch (dotted line: on-touch; higher is faster)")
    legend = _legend(colors)
    figure.legend(handles=legend, fontsize=7, loc="outside lower center", ncols=len(others), title="policy")
    return figure


def plot_placement(records: Iterable[Record], path: Path) -> Path | None:
    """Writes `placement_figure` to `path`; None if there is nothing to plot."""
    return save_png(placement_figure(records), path)


def channel_figure(records: Iterable[Record]) -> Figure | None:
    """Per channel case (workload and configuration, one group of bars each), every mode's time
    over the case's fastest polling baseline (the dotted line; lower is faster), log scale; None
    without a case that timed a polling baseline and another mode."""
    baselines = [
        (case, best[1])
        for case in channel_cases(records)
        if (best := case.best_baseline()) is not None and len(case.records) > 1
    ]
    if not baselines:
        return None
    bars = []
    for case, best in baselines:
        shown = ", ".join(f"{name} {value:.0f}" for name, value in case.settings if name != "gpus")
        group = case.workload + (f"\n({shown})" if shown else "")
        bars += [(group, label, record.seconds / best) for label, record in case.records.items()]
    colors = _palette(series for _, series, _ in bars)
    groups = list(dict.fromkeys(g for g, _, _ in bars))
    figure = Figure(layout="constrained", figsize=(max(8.0, 1.5 * len(groups) + 0.2 * len(bars)), 5.5))
    ax = figure.add_subplot()
    _draw_grouped_bars(ax, bars, lambda v: _short(v) + "x", colors)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.margins(y=0.18)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.tick_params(axis="x", labelsize=7)
    ax.set_ylabel("time / fastest polling baseline")
    ax.set_title("Producer/consumer modes against the fastest polling baseline (lower is faster)", fontsize=9)
    ax.legend(handles=_legend(colors), fontsize=7, ncols=3, loc="upper left", title="mode")
    ax.grid(axis="y", alpha=0.3)
    return figure


def plot_channel(records: Iterable[Record], path: Path) -> Path | None:
    """Writes `channel_figure` to `path`; None if there is nothing to plot."""
    return save_png(channel_figure(records), path)

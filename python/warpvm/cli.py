"""The `warpvm` command line: run the GPU benchmark or the CPU simulator, and report results."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from warpvm import __version__, fuzz, plots, runner, trace, warp_timeline
from warpvm import timeline as timeline_events
from warpvm.channel import channel_markdown
from warpvm.placement import placement_markdown
from warpvm.results import (
    Record,
    ResultsError,
    TextTable,
    load_records,
    markdown_summary,
    summary_tables,
    write_parquet,
)

T = TypeVar("T")

NO_GPU_MESSAGE = (
    "No CUDA GPU visible: running the CPU simulator instead (counts of faults and bytes moved, no timings)."
)

# The exit code for a binary stopped at its time limit, as timeout(1) has it.
TIMEOUT_EXIT = 124

# Wide enough for any table: measuring against it gives a table's natural width.
_UNLIMITED_WIDTH = 1_000_000

ALL_WORKLOADS = ",".join(runner.BENCH_WORKLOADS)
ALL_MODES = ",".join(runner.BENCH_MODES)

app = typer.Typer(no_args_is_help=True, add_completion=False)
bench_app = typer.Typer(
    no_args_is_help=True,
    help="Run the GPU benchmarks: paging (quick, run) and the application suites (graph, apps, ...).",
)
app.add_typer(bench_app, name="bench")


class Eviction(str, Enum):
    """Page-cache eviction policies (runner.EVICTION_POLICIES): typer refuses any other name,
    listing these."""

    clock = "clock"
    fifo = "fifo"


class Model(str, Enum):
    """Fault paths the simulator can replay."""

    warpvm = "warpvm"
    uvm = "uvm"


class FuzzBackend(str, Enum):
    """Where warpvm-fuzz runs its programs (fuzz.BACKENDS)."""

    gpu = "gpu"
    sim = "sim"


class FuzzGrid(str, Enum):
    """warpvm-fuzz's configuration grids (fuzz.GRIDS)."""

    ci = "ci"
    quick = "quick"
    full = "full"


BuildDir = Annotated[
    Path | None,
    typer.Option(
        "--build-dir",
        file_okay=False,
        help="CMake build directory (default: $WARPVM_BUILD_DIR, else the checkout's build/).",
    ),
]
Size = Annotated[str, typer.Option("--bytes", help="Dataset size: a number with GiB, MiB or KiB.")]
Fractions = Annotated[
    str, typer.Option("--cache-fractions", help="Comma-separated cache sizes as fractions of the data.")
]
EvictionOption = Annotated[Eviction, typer.Option("--eviction", help="Eviction policy.")]
BenchOut = Annotated[Path, typer.Option("--out", dir_okay=False, help="JSON Lines file to append to.")]
SimOut = Annotated[Path | None, typer.Option("--out", dir_okay=False, help="JSON Lines file to append to.")]
ReportOut = Annotated[Path, typer.Option("--out", file_okay=False, help="Directory to write to.")]


_KILLED_AT_LIMIT = "before it is stopped (its process group killed,"


def _timeout_option(what: str, default: str, how: str = _KILLED_AT_LIMIT) -> Any:
    """A command's --timeout (also read from $WARPVM_TIMEOUT): seconds `what` may run; None when
    neither is given (then the `default` the help states). `how` says how the limit is enforced."""
    return Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=0,
            envvar=runner.TIMEOUT_ENV,
            show_envvar=True,
            help=(
                f"Seconds {what} may run {how} the records written so far kept, exit code "
                f"{TIMEOUT_EXIT}); 0: no limit. Default: ${runner.TIMEOUT_ENV}, else {default}."
            ),
        ),
    ]


BenchTimeout = _timeout_option("warpvm-bench", f"{runner.BENCH_TIMEOUT_S:g}")
SimTimeout = _timeout_option("warpvm-sim", f"{runner.SIM_TIMEOUT_S:g}")
FuzzTimeout = _timeout_option("warpvm-fuzz", f"{fuzz.FUZZ_TIMEOUT_S:g}")
QuickTimeout = _timeout_option(
    "each binary",
    f"{runner.BENCH_TIMEOUT_S:g} for warpvm-bench, {runner.SIM_TIMEOUT_S:g} for warpvm-sim",
)


def _version(show: bool) -> None:
    if show:
        typer.echo(f"warpvm {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """GPU-driven demand paging: run warpvm's benchmarks or its CPU simulator, and report the results."""


def _names(text: str, option: str, allowed: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """A comma-separated list of names, checked against `allowed` when given."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise typer.BadParameter("give at least one name", param_hint=option)
    unknown = [name for name in names if allowed is not None and name not in allowed]
    if unknown:
        raise typer.BadParameter(
            f"unknown {', '.join(unknown)} (choose from {', '.join(allowed or ())})", param_hint=option
        )
    return names


def _fractions(text: str) -> tuple[float, ...]:
    """Cache fractions in (0, 1]."""
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise typer.BadParameter(f"not a list of numbers: {text!r}", param_hint="--cache-fractions") from None
    if not values or any(not 0 < v <= 1 for v in values):
        raise typer.BadParameter("give fractions in (0, 1], e.g. 1,0.5,0.25", param_hint="--cache-fractions")
    return values


def _size(text: str) -> str:
    try:
        return runner.check_size(text)
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--bytes") from None


def _binary(build_dir: Path | None, relative: Path) -> Path:
    """The built binary, or exit code 2 with a message naming the missing path."""
    try:
        return runner.find_binary(runner.resolve_build_dir(build_dir), relative)
    except runner.MissingBinaryError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from None


@contextmanager
def _exit_on_bad_input() -> Iterator[None]:
    """Turns a ResultsError (a bad or missing input file) into its message and exit code 1."""
    try:
        yield
    except ResultsError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1) from None


def _print_table(console: Console, table: TextTable) -> None:
    """Renders a summary table, one section per workload, never cutting a cell.

    A pipe or a file has no width to keep to (rich would take $COLUMNS, the terminal's or 80, and
    cut the cells to fit), so there the table is as wide as its widest cells. In a terminal
    narrower than the table the cells wrap, long words folded; no column shrinks to nothing, and
    where even that is too wide the lines run past the edge rather than lose characters.
    """
    rich_table = Table(title=table.title, title_justify="left")
    for i, header in enumerate(table.headers):
        justify = "right" if table.numeric(i) else "left"
        rich_table.add_column(header, justify=justify, overflow="fold", min_width=1)
    previous = None
    for row in table.rows:
        if previous is not None and row[0] != previous:
            rich_table.add_section()
        cells = [Text(cell, style="bold red" if cell == "NO" else "") for cell in row]
        if row[0] == previous:
            cells[0] = Text("")
        rich_table.add_row(*cells)
        previous = row[0]
    if not console.is_terminal:
        unlimited = console.options.update_width(_UNLIMITED_WIDTH)
        rich_table.width = Measurement.get(console, unlimited, rich_table).maximum
    console.print(rich_table, crop=False)


def _points_progress(console: Console) -> Progress:
    """A progress bar counting measured points, shown only on a terminal and gone when done."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("points"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def _run(
    console: Console,
    binary: Path,
    args: list[str],
    out: Path | None,
    expected: int | None,
    timeout: float | None,
) -> runner.RunResult:
    """Runs a binary under a progress display counting the records it writes, stopping it after
    `timeout` seconds (None: no limit)."""
    progress = _points_progress(console)
    with progress:
        task = progress.add_task(binary.name, total=expected)

        def on_record(record: Record) -> None:
            progress.update(task, advance=1, description=f"{binary.name}: {record.workload} {record.mode}")
            state = progress.tasks[0]
            if state.total is not None and state.completed > state.total:  # the expected count is approximate
                progress.update(task, total=state.completed)

        def on_point(line: str) -> None:
            progress.console.print(Text(line, style="dim"), soft_wrap=True)

        return runner.run_binary(
            binary, args, out=out, on_record=on_record, on_point=on_point, timeout=timeout
        )


def _kept(count: int, out: Path | None) -> str:
    """Where a failed run's records are: '3 records kept in FILE', '... shown above', 'no records'."""
    if count == 0:
        return "no records written"
    return f"{count} records kept in {out}" if out is not None else f"{count} records shown above"


def _show(
    console: Console,
    result: runner.RunResult,
    name: str,
    out: Path | None,
    note: Callable[[list[Record]], None] | None = None,
) -> None:
    """Prints a finished run's tables (then `note`s on its records), or its messages and exits
    non-zero if it failed: TIMEOUT_EXIT when it was stopped at its time limit (the tables of the
    records it wrote before), 2 when it refused its arguments (a usage error, its message shown),
    else its own code. Lines that looked like records but were not are reported, and a run that
    otherwise succeeded then exits with 1 (its good records kept)."""
    failed = result.timed_out or result.returncode != 0 or not result.records
    if failed:
        for message in result.messages:
            typer.echo(message, err=True)
    if result.records and (result.timed_out or not failed):
        for table in summary_tables(result.records):
            _print_table(console, table)
        if out is not None and not result.timed_out:
            console.print(f"{len(result.records)} records appended to {out}")
        if note is not None:
            note(result.records)
    _finish(result, name, out, failed)


def _finish(result: runner.RunResult, name: str, out: Path | None, failed: bool) -> None:
    """The end of a run, once its output is shown: reports malformed record lines, then exits
    TIMEOUT_EXIT past the time limit, 2 for a usage error, the binary's code (or 1) when `failed`,
    and 1 when it wrote malformed lines; returns otherwise."""
    for bad in result.bad_lines:
        typer.echo(f"error: {bad}", err=True)
    if result.timed_out:
        limit = f"{result.timeout:g} s" if result.timeout is not None else "its time limit"
        typer.echo(
            f"error: {name} ran past its time limit of {limit} and was stopped "
            f"(--timeout or ${runner.TIMEOUT_ENV} sets the limit, 0 for none); "
            f"{_kept(len(result.records), out)}",
            err=True,
        )
        raise typer.Exit(TIMEOUT_EXIT)
    if result.returncode == runner.USAGE_EXIT:
        said = ", its message above" if result.messages else ""
        typer.echo(
            f"error: {name} refused its arguments (exit code {runner.USAGE_EXIT}: a usage error{said}): "
            f"{' '.join(result.args)}",
            err=True,
        )
        raise typer.Exit(runner.USAGE_EXIT)
    if failed:
        reason = f"exit code {result.returncode}" if result.returncode else "no records written"
        typer.echo(f"error: {name} failed ({reason})", err=True)
        raise typer.Exit(result.returncode or 1)
    if result.bad_lines:
        count = len(result.bad_lines)
        typer.echo(
            f"error: {name} wrote {count} malformed record line{'s' if count > 1 else ''}, left out; "
            f"the {_kept(len(result.records), out)}",
            err=True,
        )
        raise typer.Exit(1)


def _console() -> Console:
    # No markup: a path or a name with brackets, like results[dim].jsonl, prints as it is.
    console = Console(highlight=False, markup=False)
    # A pipe or a file has no width to keep to: lines go out whole, not wrapped at rich's guess.
    console.soft_wrap = not console.is_terminal
    return console


def _bench(
    console: Console,
    build_dir: Path | None,
    settings: runner.BenchSettings,
    out: Path,
    timeout: float | None,
) -> runner.RunResult:
    """Runs warpvm-bench; `timeout`: --timeout (or $WARPVM_TIMEOUT), None for BENCH_TIMEOUT_S."""
    binary = _binary(build_dir, runner.BENCH)
    limit = runner.resolve_timeout(timeout, runner.BENCH_TIMEOUT_S)
    return _run(console, binary, settings.args(), out, settings.expected_points(), limit)


def _sim(
    console: Console,
    build_dir: Path | None,
    settings: runner.SimSettings,
    out: Path | None,
    timeout: float | None,
) -> None:
    binary = _binary(build_dir, runner.SIM)
    limit = runner.resolve_timeout(timeout, runner.SIM_TIMEOUT_S)
    _show(console, _run(console, binary, settings.args(), out, None, limit), binary.name, out)


def _commit(build_dir: Path | None, given: str | None) -> str:
    """The commit to record: as given, else the checkout's git HEAD."""
    return given or runner.git_commit(runner.resolve_build_dir(build_dir))


@bench_app.command()
def quick(
    size: Size = "4GiB",
    out: BenchOut = Path("bench-results.jsonl"),
    build_dir: BuildDir = None,
    timeout: QuickTimeout = None,
) -> None:
    """The headline run: every workload and mode at cache sizes 100% to 12.5% of the data.

    Without a visible GPU (as the CUDA runtime sees them), runs the CPU simulator instead.
    """
    console = _console()
    size = _size(size)
    if runner.gpu_visible():
        commit, driver = _commit(build_dir, None), runner.driver_version()
        settings = runner.BenchSettings(size=size, commit=commit, driver=driver)
        result = _bench(console, build_dir, settings, out, timeout)
        if result.timed_out or result.returncode != runner.NO_GPU_EXIT:
            _show(console, result, "warpvm-bench", out)
            return
    typer.echo(NO_GPU_MESSAGE)
    _sim(console, build_dir, runner.SimSettings(), out, timeout)


@bench_app.command("run")
def bench_run(
    workloads: Annotated[str, typer.Option(help="Comma-separated workloads.")] = ALL_WORKLOADS,
    modes: Annotated[str, typer.Option(help="Comma-separated modes.")] = ALL_MODES,
    size: Size = "16GiB",
    cache_fractions: Fractions = "1,0.5,0.25,0.125",
    repeats: Annotated[int, typer.Option(min=1, help="Timed runs per point (median reported).")] = 3,
    eviction: EvictionOption = Eviction.clock,
    out: BenchOut = Path("bench-results.jsonl"),
    commit: Annotated[str | None, typer.Option(help="Commit to record (default: git HEAD).")] = None,
    build_dir: BuildDir = None,
    timeout: BenchTimeout = None,
) -> None:
    """Run warpvm-bench with the given options."""
    settings = runner.BenchSettings(
        workloads=_names(workloads, "--workloads", runner.BENCH_WORKLOADS),
        modes=_names(modes, "--modes", runner.BENCH_MODES),
        size=_size(size),
        cache_fractions=_fractions(cache_fractions),
        repeats=repeats,
        eviction=eviction.value,
        commit=_commit(build_dir, commit),
        driver=runner.driver_version(),
    )
    console = _console()
    _show(console, _bench(console, build_dir, settings, out, timeout), "warpvm-bench", out)


def _suite_command(suite: runner.Suite) -> None:
    """Registers `warpvm bench <suite.name>`: the binary over a grid, options after `--` passed on."""

    def command(
        context: typer.Context,
        workloads: Annotated[
            str | None, typer.Option(help="Comma-separated workloads (default: the binary's).")
        ] = None,
        modes: Annotated[
            str | None, typer.Option(help="Comma-separated modes (default: the binary's).")
        ] = None,
        cache_fractions: Annotated[
            str | None,
            typer.Option(
                "--cache-fractions", help="Cache sizes, fractions of the data (default: the binary's)."
            ),
        ] = None,
        repeats: Annotated[
            int | None, typer.Option(min=1, help="Timed runs per point (median reported).")
        ] = None,
        out: BenchOut = Path(f"{suite.name}-results.jsonl"),
        commit: Annotated[str | None, typer.Option(help="Commit to record (default: git HEAD).")] = None,
        build_dir: BuildDir = None,
        timeout: BenchTimeout = None,  # its help and default made the suite's below
    ) -> None:
        binary = _binary(build_dir, suite.binary)
        try:
            settings = runner.SuiteSettings(
                suite=suite,
                workloads=_names(workloads, "--workloads") if workloads else None,
                modes=_names(modes, "--modes") if modes else None,
                cache_fractions=_fractions(cache_fractions) if cache_fractions else None,
                repeats=repeats,
                commit=_commit(build_dir, commit),
                driver=runner.driver_version(),
                extra=tuple(context.args),
            )
            args = settings.args()
        except ValueError as error:
            raise typer.BadParameter(str(error)) from None
        console = _console()
        result = _run(console, binary, args, out, None, runner.resolve_timeout(timeout, suite.timeout_s))

        def note_unverified(records: list[Record]) -> None:
            unchecked = [r for r in records if r.verified is not True]
            if unchecked:
                kinds = sorted({f"{r.workload} {r.mode}" for r in unchecked})
                console.print(
                    f"{len(unchecked)} records not verified (bounds, unchecked modes): {', '.join(kinds)}"
                )

        _show(console, result, binary.name, out, note_unverified)

    # The annotations are strings, evaluated in this module's globals: the suite's own --timeout
    # help (its binary, its default) goes in as an object.
    command.__annotations__["timeout"] = _timeout_option(suite.binary.name, f"{suite.timeout_s:g}")
    command.__doc__ = (
        f"{suite.summary}\n\nOptions after `--` go to the binary unchanged (its --help lists them)."
    )
    bench_app.command(
        suite.name, context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
    )(command)


for _suite in runner.SUITES.values():
    _suite_command(_suite)


@app.command()
def sim(
    workloads: Annotated[
        str, typer.Option(help="Comma-separated workloads: stream, vadd, random_page, hotset, bfs.")
    ] = "stream,vadd,random_page,hotset",
    size: Size = "1GiB",
    cache_fractions: Fractions = "1,0.5,0.25,0.125",
    eviction: EvictionOption = Eviction.clock,
    model: Annotated[
        Model,
        typer.Option(help="warpvm's device cache, or UVM's batched fault path as the driver states it."),
    ] = Model.warpvm,
    out: SimOut = None,
    build_dir: BuildDir = None,
    timeout: SimTimeout = None,
) -> None:
    """Run the CPU simulator (no GPU needed): faults, evictions and bytes moved, no timings."""
    settings = runner.SimSettings(
        workloads=_names(workloads, "--workloads"),
        size=_size(size),
        cache_fractions=_fractions(cache_fractions),
        eviction=eviction.value,
        model=model.value,
    )
    _sim(_console(), build_dir, settings, out, timeout)


@app.command()
def report(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="JSON Lines files.")],
    out: ReportOut = Path("report"),
    parquet: Annotated[bool, typer.Option(help="Also write records.parquet (needs pyarrow).")] = False,
) -> None:
    """Write summary.md and plots (bandwidth, cache sweep, bytes moved, speed-up over UVM, slowdown
    against oversubscription, placement policies across GPUs, channel modes against polling) from
    result files."""
    console = _console()
    with _exit_on_bad_input():
        records = load_records(files)
        if not records:
            raise ResultsError(f"no records in {', '.join(map(str, files))}")
        out.mkdir(parents=True, exist_ok=True)
        summary = out / "summary.md"
        summary.write_text(
            markdown_summary(records) + placement_markdown(records) + channel_markdown(records),
            encoding="utf-8",
        )
        written = [summary]
        for name, plot, needs in (
            ("bandwidth.png", plots.plot_bandwidth, "timed records"),
            ("cache_sweep.png", plots.plot_cache_sweep, "timed warpvm records"),
            ("bytes_moved.png", plots.plot_bytes_moved, "records with bytes moved"),
            ("speedup_over_uvm.png", plots.plot_speedup, "workloads timed with uvm and another mode"),
            ("oversubscription.png", plots.plot_oversubscription, "modes timed at 100% and smaller caches"),
            ("placement.png", plots.plot_placement, "placement runs under on_touch and another policy"),
            ("channel.png", plots.plot_channel, "channel runs with a polling baseline and another mode"),
        ):
            path = plot(records, out / name)
            if path is None:
                console.print(f"skipped {name}: no {needs}")
            else:
                written.append(path)
        if parquet:
            written.append(write_parquet(records, out / "records.parquet"))
    for path in written:
        typer.echo(f"wrote {path}")


@app.command("trace")
def trace_command(
    files: Annotated[
        list[Path], typer.Argument(exists=True, dir_okay=False, help="Batch traces (CSV, docs/tracing.md).")
    ],
    out: ReportOut = Path("trace-report"),
) -> None:
    """Analyse fault-batch traces as the SC21 UVM study does: tables, summary.md and plots.

    Every run found (workload, cache fraction, batch limit, prefetch) is summarised; the batch-size
    sweep (Fig. 9) and the prefetch comparison (Fig. 14) pair runs across the files; plots the data
    cannot support (Fig. 7 without timings, for one) are skipped, saying why.
    """
    console = _console()
    with _exit_on_bad_input():
        batches = trace.load_traces(files)
        if not batches:
            raise ResultsError(f"no batches in {', '.join(map(str, files))}")
    for table in trace.tables(batches):
        _print_table(console, table)
    out.mkdir(parents=True, exist_ok=True)
    written, skipped = trace.write_plots(batches, out)
    summary = out / "summary.md"
    summary.write_text(
        trace.markdown_summary(batches, (f"skipped {note}" for note in skipped)), encoding="utf-8"
    )
    for note in skipped:
        console.print(f"skipped {note}")
    for path in [summary, *written]:
        typer.echo(f"wrote {path}")


def _summarise_timeline(
    file: Path,
    load: Callable[[Path], list[T]],
    summary_table: Callable[[list[T]], TextTable],
    write_trace: Callable[[list[T], Path], Path],
    out: Path,
    what: str,
) -> list[T]:
    """A timeline command's common part: load `file` (refusing an empty one, naming `what` it
    lacks), print its summary table, write its Perfetto trace to `out` and say so. Inside
    _exit_on_bad_input, so a bad file ends the command with its message."""
    console = _console()
    with _exit_on_bad_input():
        items = load(file)
        if not items:
            raise ResultsError(f"no {what} in {file}")
        _print_table(console, summary_table(items))
        written = write_trace(items, out)
    typer.echo(f"wrote {written}")
    return items


@app.command()
def timeline(
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="Fault events (CSV, docs/tracing.md).")
    ],
    out: Annotated[
        Path, typer.Option("--out", dir_okay=False, help="Chrome/Perfetto trace to write (JSON).")
    ] = Path("timeline.json"),
    parquet: Annotated[
        Path | None, typer.Option(dir_okay=False, help="Also write the events as Parquet (needs pyarrow).")
    ] = None,
) -> None:
    """Summarise fault events and write them as a Perfetto timeline: one track per SM, a slice per fault.

    Open the JSON in https://ui.perfetto.dev (or chrome://tracing). The events come from
    `warpvm-bench --events FILE` built with -DWARPVM_FAULT_EVENTS=ON, or Runtime::fault_events().
    """
    events = _summarise_timeline(
        file,
        timeline_events.load_events,
        timeline_events.summary_table,
        timeline_events.write_chrome_trace,
        out,
        "events",
    )
    if parquet is not None:
        with _exit_on_bad_input():
            written = timeline_events.write_parquet(events, parquet)
        typer.echo(f"wrote {written}")


@app.command("warp-timeline")
def warp_timeline_command(
    file: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="Warp stamps (CSV from warpvm-channel-bench --timeline)."
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", dir_okay=False, help="Chrome/Perfetto trace to write (JSON).")
    ] = Path("warp-timeline.json"),
) -> None:
    """Summarise the channel benchmark's consumer waits and write them as a Perfetto timeline: one
    track per warp, its life as a slice with its waits inside.

    Open the JSON in https://ui.perfetto.dev (or chrome://tracing). docs/bench/channel.md, "Metrics",
    says what the stamps mean.
    """
    _summarise_timeline(
        file,
        warp_timeline.load_spans,
        warp_timeline.summary_table,
        warp_timeline.write_chrome_trace,
        out,
        "warp stamps",
    )


@app.command("fuzz")
def fuzz_command(
    seeds: Annotated[int, typer.Option(min=1, help="Seeds to run, from --first-seed on.")] = 2000,
    first_seed: Annotated[int, typer.Option(min=0, help="The first seed.")] = 0,
    seed: Annotated[
        int | None, typer.Option(min=0, help="Run this one seed only (a failure's reproducer).")
    ] = None,
    backend: Annotated[
        FuzzBackend, typer.Option(help="gpu: warpvm's runtime on device 0; sim: the CPU simulator.")
    ] = FuzzBackend.gpu,
    grid: Annotated[
        FuzzGrid, typer.Option(help="Configuration grid: ci (small), quick, full.")
    ] = FuzzGrid.full,
    jobs: Annotated[
        int, typer.Option(min=1, max=64, help="Seeds run at once, each with its own runtime.")
    ] = 1,
    time_limit: Annotated[
        float,
        typer.Option(min=0, help="Seconds after which no new seed starts (0: none); the run still passes."),
    ] = 0.0,
    out: BenchOut = Path("fuzz.jsonl"),
    commit: Annotated[str | None, typer.Option(help="Commit to record (default: git HEAD).")] = None,
    build_dir: BuildDir = None,
    timeout: FuzzTimeout = None,
) -> None:
    """Run the seeded differential fuzzer (docs/fuzz.md): random programs checked bit for bit against a
    host model, the cache's invariants after every launch. Summarises the exact seeds, the failures
    with the command that reproduces each, and the slowest configurations against the link's speed."""
    binary = _binary(build_dir, fuzz.FUZZ)
    settings = fuzz.FuzzSettings(
        backend=backend.value,
        grid=grid.value,
        seeds=seeds,
        first_seed=first_seed,
        seed=seed,
        jobs=jobs,
        time_limit=time_limit,
        commit=_commit(build_dir, commit),
        driver=runner.driver_version() if backend == FuzzBackend.gpu else "none",
    )
    console = _console()
    limit = runner.resolve_timeout(timeout, fuzz.FUZZ_TIMEOUT_S)
    result = _run(console, binary, settings.args(), out, settings.expected_seeds(), limit)
    if result.returncode == runner.NO_GPU_EXIT and not result.timed_out:
        typer.echo("error: warpvm-fuzz sees no CUDA GPU; --backend sim runs the simulator instead", err=True)
        raise typer.Exit(runner.NO_GPU_EXIT)
    summary = _print_fuzz_summary(console, result.records)
    console.print(f"records appended to {out}")
    # Exit code 1 with every record written is the fuzzer's verdict, shown above: not a crash.
    finished = not result.timed_out and result.returncode in (0, 1) and len(result.records) > 0
    if not finished:
        for message in result.messages:
            typer.echo(message, err=True)
    _finish(result, binary.name, out, failed=not finished)
    if summary.failures:
        raise typer.Exit(1)


@app.command("fuzz-summary")
def fuzz_summary(
    files: Annotated[
        list[Path], typer.Argument(exists=True, dir_okay=False, help="warpvm-fuzz records (JSON Lines).")
    ],
) -> None:
    """Summarise warpvm-fuzz records written elsewhere (a GPU machine): seeds, exact, the failures with
    their reproducers, the slowest configurations against the link's speed. Exits 1 if a seed failed."""
    with _exit_on_bad_input():
        records = load_records(files)
    if not _print_fuzz_summary(_console(), records).exact_run:
        raise typer.Exit(1)


def _print_fuzz_summary(console: Console, records: list[Record]) -> fuzz.FuzzSummary:
    """Prints the slowest configurations, each failure with its reproducer, and the counts."""
    summary = fuzz.summarize(records)
    if summary.slowest.rows:
        _print_table(console, summary.slowest)
    for failure in summary.failures:
        typer.echo(
            f"FAILED seed {failure.seed}: {failure.failure}\n  reproduce: {failure.reproduce}", err=True
        )
    console.print(f"{summary.seeds} seeds: {summary.exact} exact, {len(summary.failures)} failed")
    return summary


# `warpvm bench torch` lives in its own module, which registers itself on bench_app.
from warpvm import cli_torch  # noqa: E402, F401

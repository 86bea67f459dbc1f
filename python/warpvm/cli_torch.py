"""`warpvm bench torch`: the PyTorch suite's command (docs/bench/torch.md), registered on the
`warpvm bench` group of warpvm.cli. The grid and records are warpvm.bench_torch; the GPU side is
warpvm.torch.bench, imported only when the command runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from warpvm import bench_torch, runner
from warpvm.cli import (
    TIMEOUT_EXIT,
    BenchOut,
    _commit,
    _console,
    _kept,
    _names,
    _points_progress,
    _print_table,
    _timeout_option,
    bench_app,
)
from warpvm.results import summary_tables
from warpvm.sizes import parse_size

TorchTimeout = _timeout_option("the run", f"{runner.BENCH_TIMEOUT_S:g}", how="(checked between points,")


def _ratios(text: str) -> tuple[int, ...]:
    """Oversubscriptions: whole numbers >= 0."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise typer.BadParameter(f"not a list of whole numbers: {text!r}", param_hint="--sizes") from None
    if not values or any(v < 0 for v in values):
        raise typer.BadParameter("give ratios >= 0, e.g. 0,4,16", param_hint="--sizes")
    return values


def _torch_bench(settings: bench_torch.Settings) -> bench_torch.Bench:
    """The GPU side of `warpvm bench torch` (needs torch; tests put a fake in its place)."""
    from warpvm.torch.bench import TorchBench

    return TorchBench(settings)


@bench_app.command("torch")
def bench_torch_command(
    workloads: Annotated[
        str | None, typer.Option(help=f"Comma-separated: {', '.join(bench_torch.WORKLOADS)}.")
    ] = None,
    modes: Annotated[
        str | None, typer.Option(help=f"Comma-separated: {', '.join(bench_torch.MODES)}.")
    ] = None,
    ids: Annotated[
        str | None,
        typer.Option(
            help=f"Id distributions: {', '.join(bench_torch.ID_DISTRIBUTIONS)} (--quick: uniform,zipf1.2)."
        ),
    ] = None,
    dtypes: Annotated[
        str | None, typer.Option(help="Table dtypes of the gather: float32,float16 (--quick: float32).")
    ] = None,
    sizes: Annotated[
        str | None,
        typer.Option(
            help="Oversubscriptions, table bytes / cache bytes: 0 is a table in core (half the cache). "
            "Default 0,4,16 (--quick: 0,4)."
        ),
    ] = None,
    cache: Annotated[
        str | None,
        typer.Option(help="warpvm's cache, which the tables are sized by (default 2GiB; --quick 1GiB)."),
    ] = None,
    batch: Annotated[int | None, typer.Option(min=1, help="Ids per batch (default 1048576).")] = None,
    dim: Annotated[int | None, typer.Option(min=1, help="Row length (default 128).")] = None,
    pooling: Annotated[
        int | None, typer.Option(min=1, help="Ids per bag of embedding_bag (default 32).")
    ] = None,
    repeats: Annotated[
        int | None, typer.Option(min=1, help="Timed runs per point (median reported; default 5).")
    ] = None,
    quick: Annotated[bool, typer.Option(help="The short grid (under 3 minutes on an H100).")] = False,
    out: BenchOut = Path("torch-results.jsonl"),
    commit: Annotated[str | None, typer.Option(help="Commit to record (default: git HEAD).")] = None,
    timeout: TorchTimeout = None,
) -> None:
    """PyTorch over warpvm: feature gathers, embedding bags, index_add and GraphSAGE training against a
    CPU gather, zero-copy, managed memory and device memory (docs/bench/torch.md). Needs torch, and
    cupy for zero_copy and managed."""
    try:
        settings = bench_torch.settings_for(
            bench_torch.QUICK if quick else bench_torch.Settings(),
            workloads=_names(workloads, "--workloads") if workloads else None,
            modes=_names(modes, "--modes") if modes else None,
            ids=_names(ids, "--ids") if ids else None,
            dtypes=_names(dtypes, "--dtypes") if dtypes else None,
            oversubscriptions=_ratios(sizes) if sizes else None,
            cache_bytes=parse_size(cache) if cache else None,
            batch=batch,
            dim=dim,
            pooling=pooling,
            repeats=repeats,
            commit=_commit(None, commit),
            driver=runner.driver_version(),
        )
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    if not runner.gpu_visible():
        typer.echo("error: no CUDA GPU visible: warpvm bench torch needs one", err=True)
        raise typer.Exit(runner.NO_GPU_EXIT)
    try:
        bench = _torch_bench(settings)
    except ImportError as error:
        typer.echo(
            f"error: warpvm bench torch needs torch (and cupy for zero_copy, managed): {error}", err=True
        )
        raise typer.Exit(1) from None
    console = _console()
    points = bench_torch.expand_grid(settings)
    progress = _points_progress(console)
    try:
        with progress:
            task = progress.add_task("torch", total=len(points))
            outcome = bench_torch.run(
                points,
                bench,
                out,
                before_point=lambda point: progress.update(task, description=bench_torch.describe(point)),
                on_point=lambda point, record: (
                    progress.console.print(bench_torch.point_line(point, record), soft_wrap=True),
                    progress.advance(task),
                ),
                timeout=runner.resolve_timeout(timeout, runner.BENCH_TIMEOUT_S),
            )
    finally:
        bench.close()
    for table in summary_tables(outcome.records):
        _print_table(console, table)
    if outcome.records:
        console.print(f"{len(outcome.records)} records appended to {out}")
    for reason in outcome.skipped:
        typer.echo(f"skipped {reason}", err=True)
    for failure in outcome.failed:
        typer.echo(f"error: {failure}", err=True)
    unverified = [r for r in outcome.records if r.verified is not True]
    if outcome.timed_out:
        typer.echo(
            f"error: the run passed its time limit and was stopped; {_kept(len(outcome.records), out)}",
            err=True,
        )
        raise typer.Exit(TIMEOUT_EXIT)
    if unverified or outcome.failed:
        typer.echo(f"error: {len(unverified) + len(outcome.failed)} points not verified", err=True)
        raise typer.Exit(1)

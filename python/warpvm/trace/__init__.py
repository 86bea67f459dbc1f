"""Fault-batch traces analysed the way the SC21 UVM study does (docs/tracing.md is the contract).

A trace is a CSV with one row per serviced batch, columns `COLUMNS` in that order. A run is
identified by (workload, cache_fraction, batch_limit, prefetch). `warpvm-sim --model uvm --trace
FILE` writes traces without the GPU-only columns (start_ns, duration_ns, transfer_ns and
faults_flushed empty); the GPU transport (`warpvm-bench --modes warpvm_uvm --trace FILE`) fills
them. Every analysis works on counts; the ones that need time (Fig. 7, service times in Figs. 6,
9, 12-14) say so, or fall back to counts, when a run has none.

batches.py reads traces and groups batches into runs; analysis.py holds what every analysis
shares; each analysis has a module of its own (its results, tables and figure); report.py lists
them in the study's order and makes the tables, summary.md and the plots. The names below are the
package's API.
"""

from warpvm.trace.batches import (
    COLUMNS,
    LATER_COLUMNS,
    MIB,
    PAGE_BYTES,
    RUN_HEADERS,
    TIMING_COLUMNS,
    Batch,
    Run,
    load_trace,
    load_traces,
    runs,
    start_timed,
    timed,
    total_ns,
    transfer_timed,
)
from warpvm.trace.blocks import BlockStats, block_stats, block_table, blocks_figure
from warpvm.trace.eviction import (
    LEVEL_RATIO,
    CostLevel,
    EvictionCost,
    batch_cost,
    cost_levels,
    eviction_costs,
    eviction_figure,
    eviction_split_table,
    level_table,
)
from warpvm.trace.migration import (
    Fit,
    MigrationFit,
    fit_line,
    mib_migrated,
    migration_figure,
    migration_fits,
    migration_table,
)
from warpvm.trace.prefetch import PrefetchComparison, prefetch_comparisons, prefetch_figure, prefetch_table
from warpvm.trace.report import ANALYSES, Analysis, markdown_summary, tables, write_plots
from warpvm.trace.summary import (
    RunSummary,
    RunTotals,
    batch_sizes_figure,
    run_totals,
    summarize,
    summary_table,
)
from warpvm.trace.sweep import Sweep, SweepPoint, batch_size_sweeps, sweep_figure, sweep_table
from warpvm.trace.transfer import (
    TRANSFER_SHARE_MARK,
    TransferShare,
    transfer_figure,
    transfer_shares,
    transfer_table,
)

__all__ = [
    "ANALYSES",
    "COLUMNS",
    "LATER_COLUMNS",
    "LEVEL_RATIO",
    "MIB",
    "PAGE_BYTES",
    "RUN_HEADERS",
    "TIMING_COLUMNS",
    "TRANSFER_SHARE_MARK",
    "Analysis",
    "Batch",
    "BlockStats",
    "CostLevel",
    "EvictionCost",
    "Fit",
    "MigrationFit",
    "PrefetchComparison",
    "Run",
    "RunSummary",
    "RunTotals",
    "Sweep",
    "SweepPoint",
    "TransferShare",
    "batch_cost",
    "batch_size_sweeps",
    "batch_sizes_figure",
    "block_stats",
    "block_table",
    "blocks_figure",
    "cost_levels",
    "eviction_costs",
    "eviction_figure",
    "eviction_split_table",
    "fit_line",
    "level_table",
    "load_trace",
    "load_traces",
    "markdown_summary",
    "mib_migrated",
    "migration_figure",
    "migration_fits",
    "migration_table",
    "prefetch_comparisons",
    "prefetch_figure",
    "prefetch_table",
    "run_totals",
    "runs",
    "start_timed",
    "summarize",
    "summary_table",
    "sweep_figure",
    "sweep_table",
    "tables",
    "timed",
    "total_ns",
    "transfer_figure",
    "transfer_shares",
    "transfer_table",
    "transfer_timed",
    "write_plots",
]

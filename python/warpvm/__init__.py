"""warpvm: run the GPU paging benchmarks or the CPU simulator, and summarise and plot their results."""

__version__ = "0.1.0"

"""warpvm from Python: the host API (warpvm.Runtime, warpvm.PagedArray), paged tensor ops for
PyTorch, CuPy and JAX users (gather, embedding_bag, index_add, sample_neighbors), and the command
line that runs the GPU paging benchmarks or the CPU simulator and summarises and plots their
results.

The host API lives in the extension module warpvm._warpvm, imported on first use of one of its
names: the command line works without it. torch, cupy and jax are never imported by warpvm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from warpvm.errors import Error, ErrorKind
from warpvm.sizes import parse_size

if TYPE_CHECKING:
    from warpvm.ops import embedding_bag, gather, index_add, sample_neighbors
    from warpvm.runtime import PagedArray, Runtime, device_count, make_config

__version__ = "0.1.0"

__all__ = [
    "Error",
    "ErrorKind",
    "PagedArray",
    "Runtime",
    "device_count",
    "embedding_bag",
    "gather",
    "index_add",
    "make_config",
    "parse_size",
    "sample_neighbors",
]

_RUNTIME_NAMES = ("PagedArray", "Runtime", "device_count", "make_config")
_OPS_NAMES = ("embedding_bag", "gather", "index_add", "sample_neighbors")


def __getattr__(name: str) -> Any:
    if name in _RUNTIME_NAMES:
        from warpvm import runtime

        return getattr(runtime, name)
    if name in _OPS_NAMES:
        from warpvm import ops

        return getattr(ops, name)
    raise AttributeError(f"module 'warpvm' has no attribute {name!r}")

"""warpvm from Python: the host API (warpvm.Runtime), and the command line that runs the GPU paging
benchmarks or the CPU simulator and summarises and plots their results.

The host API lives in the extension module warpvm._warpvm, imported on first use of Runtime,
device_count or make_config: the command line works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from warpvm.errors import Error, ErrorKind
from warpvm.sizes import parse_size

if TYPE_CHECKING:
    from warpvm.runtime import Runtime, device_count, make_config

__version__ = "0.1.0"

__all__ = ["Error", "ErrorKind", "Runtime", "device_count", "make_config", "parse_size"]

_RUNTIME_NAMES = ("Runtime", "device_count", "make_config")


def __getattr__(name: str) -> Any:
    if name in _RUNTIME_NAMES:
        from warpvm import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'warpvm' has no attribute {name!r}")

"""warpvm.Runtime: the library's host API (warpvm::Runtime) from Python, and the paged arrays it
makes (warpvm.PagedArray).

    with warpvm.Runtime(cache="8GiB") as rt:   # an 8 GiB page cache on device 0
        features = rt.empty((rows, 128), "float32", name="features")
        features.host[:] = ...                  # a numpy view of the pinned host memory

Every error the library raises reaches Python as warpvm.Error, with the library's message and
its kind (warpvm.ErrorKind). A configuration that cannot work is refused before any CUDA call,
so it raises invalid_config on a machine without a GPU as on one with a GPU; without a GPU a
valid one raises no_device.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from warpvm.errors import Error, ErrorKind
from warpvm.interop import dtype_name, placement_name
from warpvm.sizes import parse_size

try:
    from warpvm import _warpvm
except ImportError as error:
    raise ImportError(
        "warpvm's extension module warpvm._warpvm is not built or cannot be loaded "
        f"({error}). Install the package from the checkout, which builds it with CMake (the CUDA "
        "toolkit is needed, a GPU is not): `python3 -m pip install ./python`, or scripts/ensure-tools "
        "for an editable install."
    ) from error

__all__ = ["PagedArray", "Runtime", "device_count", "make_config"]

#: A 1-D or 2-D array in the paged space (the extension's class): shape, dtype (a name), nbytes,
#: name, placement (settable: "automatic", "migrate", "remote", "resident"), closed, and host, a
#: zero-copy numpy view of its pinned host memory (exact after Runtime.flush(); bfloat16 as
#: ml_dtypes.bfloat16 when ml_dtypes is installed, else as uint16 bits). Made by Runtime.empty()
#: and Runtime.adopt(); once its runtime is closed every use raises warpvm.Error (views already
#: taken stay valid: the memory lives as long as they do).
PagedArray = _warpvm.PagedArray


def device_count() -> int:
    """Number of CUDA devices visible: 0 on a machine without a GPU or without a driver."""
    return _warpvm.device_count()


def _bytes(field: str, value: int | str) -> int:
    try:
        return parse_size(value)
    except ValueError as error:
        raise Error(f"warpvm: invalid config: {field}: {error}", ErrorKind.invalid_config) from None


def make_config(
    cache: int | str | None = None,
    page_bytes: int | str = 4096,
    eviction: str = "clock",
    device: int = 0,
    checked: bool = False,
    resident: int | str = 0,
) -> _warpvm.Config:
    """A validated warpvm::Config (the arguments as Runtime takes them); touches no GPU.

    Raises warpvm.Error (invalid_config) with the library's message for a configuration that
    cannot work.
    """
    config = _warpvm.Config()
    if cache is not None:
        config.cache_bytes = _bytes("cache", cache)
    config.page_bytes = _bytes("page_bytes", page_bytes)
    config.eviction = eviction
    config.device = device
    config.checked = checked
    config.resident_bytes = _bytes("resident", resident)
    config.validate()
    return config


class Runtime:
    """Owns one device's page cache (warpvm::Runtime). Use it as a context manager, or close() it.

    cache: the device cache, in bytes or as a size such as "8GiB"; None (default) gives it half
        of the device's free memory.
    page_bytes: page (and frame) size, a power of two from 512 B to 2 MiB (4096 by default).
    eviction: "clock" (default) or "fifo".
    device: CUDA device ordinal.
    checked: bounds-check every element access in kernels.
    resident: device memory set aside for paged arrays placed "resident" (0 by default: none).

    Raises warpvm.Error: invalid_config for a configuration that cannot work (checked before
    any CUDA call), no_device when no GPU is visible, cuda or out_of_memory when setting up fails.
    Not thread-safe: use a Runtime from one thread at a time.
    """

    def __init__(
        self,
        cache: int | str | None = None,
        page_bytes: int | str = 4096,
        eviction: str = "clock",
        device: int = 0,
        checked: bool = False,
        resident: int | str = 0,
    ) -> None:
        config = make_config(
            cache=cache,
            page_bytes=page_bytes,
            eviction=eviction,
            device=device,
            checked=checked,
            resident=resident,
        )
        self._runtime = _warpvm.Runtime(config)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Frees the device cache now (safe to call again). Other calls then raise warpvm.Error,
        and so does any use of its paged arrays."""
        self._runtime.close()

    def empty(
        self,
        shape: int | Sequence[int],
        dtype: Any,
        placement: str = "automatic",
        name: str | None = None,
    ) -> PagedArray:
        """A new paged array of `shape` ((rows,) or (rows, columns)) and `dtype` (a name such as
        "float32", a numpy dtype or a torch dtype), in pinned host memory of its own, contents
        uninitialised. Fill it through `.host`.

        Raises warpvm.Error: invalid_argument for a shape, dtype or placement it cannot have,
        out_of_memory when the pinned memory cannot be had, or this runtime's pending error.
        """
        extents = [operator.index(e) for e in ([shape] if isinstance(shape, int) else shape)]
        if any(e <= 0 for e in extents):
            raise Error(
                f"warpvm: invalid argument: empty: a paged array cannot be empty (shape {tuple(extents)})",
                ErrorKind.invalid_argument,
            )
        return self._runtime.empty(extents, dtype_name(dtype), placement_name(placement), name or "")

    def adopt(self, array: Any, placement: str = "automatic", name: str | None = None) -> PagedArray:
        """The memory of a C-contiguous 1-D or 2-D host array (a numpy array, or a pinned torch CPU
        tensor; anything with DLPack or the buffer protocol) as a paged array, without a copy. The
        array is kept alive as long as the paged array is; memory that is not pinned yet is
        registered with CUDA (cudaHostRegister) until then. It must be 16-byte aligned.

        Raises warpvm.Error (invalid_argument) for an array it cannot take; TypeError for an
        object that is not an array.
        """
        return self._runtime.adopt(array, placement_name(placement), name or "")

    def flush(self) -> None:
        """Waits for the device and writes every dirty page back: each paged array's `.host` is
        exact afterwards (index_add's sums among them). Raises a pending device error."""
        self._runtime.flush()

    def drop_cached(self) -> None:
        """flush(), then empties the cache: the next access to any page reads host memory again.
        After writing `.host` of an array whose pages may be cached, call this."""
        self._runtime.drop_cached()

    def synchronize(self) -> None:
        """Waits for all device work and raises the first device-side error, such as an op's id
        out of range (warpvm.Error, index_out_of_range, naming the op, the value and the table)."""
        self._runtime.synchronize()

    def stats(self) -> dict[str, int]:
        """The fault path's counters since the runtime was made or reset_stats(): hits, misses,
        waits, evictions, writebacks, bytes_in, bytes_out. Waits for the device."""
        return self._runtime.stats()

    def reset_stats(self) -> None:
        self._runtime.reset_stats()

    @property
    def closed(self) -> bool:
        return self._runtime.closed

    @property
    def cache_bytes(self) -> int:
        """The cache as allocated: whole pages."""
        return self._runtime.cache_bytes

    @property
    def page_bytes(self) -> int:
        return self._runtime.page_bytes

    @property
    def frame_count(self) -> int:
        """Frames (pages) the cache holds."""
        return self._runtime.frame_count

    @property
    def device(self) -> int:
        return self._runtime.device

    @property
    def multiprocessor_count(self) -> int:
        return self._runtime.multiprocessor_count

    def describe(self) -> str:
        """The configuration in effect, in one line."""
        return self._runtime.describe()

    def __repr__(self) -> str:
        if self.closed:
            return "warpvm.Runtime(closed)"
        return f"warpvm.Runtime(device={self.device}: {self.describe()})"

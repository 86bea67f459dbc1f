"""warpvm.Runtime: the library's host API (warpvm::Runtime) from Python.

    with warpvm.Runtime(cache="8GiB") as rt:   # an 8 GiB page cache on device 0
        print(rt.describe())

Every error the library raises reaches Python as warpvm.Error, with the library's message and
its kind (warpvm.ErrorKind). A configuration that cannot work is refused before any CUDA call,
so it raises invalid_config on a machine without a GPU as on one with a GPU; without a GPU a
valid one raises no_device.
"""

from __future__ import annotations

from types import TracebackType

from warpvm.errors import Error, ErrorKind
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

__all__ = ["Runtime", "device_count", "make_config"]


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
    ) -> None:
        config = make_config(
            cache=cache, page_bytes=page_bytes, eviction=eviction, device=device, checked=checked
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
        """Frees the device cache now (safe to call again). Other calls then raise warpvm.Error."""
        self._runtime.close()

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

"""What warpvm's Python API needs to know of other array libraries, without importing them.

torch, cupy and jax are optional: nothing here imports one. A tensor's framework is read from
its type's module; a framework that made a tensor is imported already, so it is taken from
sys.modules at no cost.
"""

from __future__ import annotations

import sys
from typing import Any

from warpvm.errors import Error, ErrorKind

__all__ = ["DTYPES", "PLACEMENTS", "dtype_name", "framework_of", "placement_name", "stream_handle"]

#: The element types of paged arrays and ops, by name.
DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "uint8")
#: Where a paged array's pages are served from.
PLACEMENTS = ("automatic", "migrate", "remote", "resident")

_DTYPE_ALIASES = {name: name for name in DTYPES} | {
    "half": "float16",
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "long": "int64",
    "bf16": "bfloat16",
}

_frameworks: dict[type, str] = {}


def dtype_name(dtype: object) -> str:
    """The name of a dtype given as a string, a numpy dtype or type, or a torch dtype.

    Raises warpvm.Error (invalid_argument) for a type paged arrays do not hold.
    """
    if isinstance(dtype, str):
        key = dtype
    elif type(dtype).__module__ == "torch":  # torch.float32 prints as "torch.float32"
        key = str(dtype).removeprefix("torch.")
    else:
        key = str(getattr(dtype, "name", None) or getattr(dtype, "__name__", dtype))  # numpy dtypes and types
    name = _DTYPE_ALIASES.get(key)
    if name is None:
        raise Error(
            f"warpvm: invalid argument: dtype {dtype!r} is not one of {', '.join(DTYPES)}",
            ErrorKind.invalid_argument,
        )
    return name


def placement_name(placement: str) -> str:
    """`placement` checked against PLACEMENTS (warpvm.Error, invalid_argument, otherwise)."""
    if placement not in PLACEMENTS:
        raise Error(
            f"warpvm: invalid argument: placement {placement!r} is not one of {', '.join(PLACEMENTS)}",
            ErrorKind.invalid_argument,
        )
    return placement


def framework_of(array: object) -> str:
    """ "torch", "cupy", "jax" or "" (anything else) for the library that made `array`."""
    kind = type(array)
    framework = _frameworks.get(kind)
    if framework is None:
        root = kind.__module__.partition(".")[0]
        framework = {"torch": "torch", "cupy": "cupy", "jax": "jax", "jaxlib": "jax"}.get(root, "")
        _frameworks[kind] = framework
    return framework


def _torch_current_stream(like: Any) -> int:
    """torch's current stream on the device of `like`. torch._C._cuda_getCurrentRawStream (what
    Triton's launcher calls) gives the handle without making a torch.cuda.Stream object; where a
    torch lacks it, the public API."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return int(raw(like.get_device()))
    return int(torch.cuda.current_stream(like.device).cuda_stream)


def stream_handle(stream: Any, framework: str, like: Any) -> int:
    """The cudaStream_t, as an int, that an op runs on.

    `stream`: None (the current stream of the framework of `like`: torch's for torch tensors,
    cupy's for cupy arrays, else the legacy default stream 0), a raw handle (int), or a stream
    object: one with __cuda_stream__ (the CUDA stream protocol), a torch.cuda.Stream
    (.cuda_stream) or a cupy stream (.ptr). Raises TypeError for anything else.
    """
    if stream is None:
        if framework == "torch":
            return _torch_current_stream(like)
        if framework == "cupy":
            return int(sys.modules["cupy"].cuda.get_current_stream().ptr)
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise TypeError(f"stream handle {stream} is negative")
        return stream
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        value = protocol() if callable(protocol) else protocol
        return int(value[1])  # (protocol version, handle)
    for attribute in ("cuda_stream", "ptr"):
        handle = getattr(stream, attribute, None)
        if isinstance(handle, int):
            return handle
    raise TypeError(
        f"stream must be None, an int handle, or a CUDA stream object (__cuda_stream__, a torch or cupy "
        f"stream), not {type(stream).__name__}"
    )

"""Paged tensor ops for PyTorch, CuPy and JAX users: the tables live in warpvm's paged space
(warpvm.PagedArray: pinned host memory, cached in the GPU's frames), everything else is an
ordinary GPU tensor of the caller's framework.

    with warpvm.Runtime(cache="8GiB") as rt:
        features = rt.adopt(numpy_features)                 # [rows, dim], no copy
        x = warpvm.gather(features, ids)                     # ids: a torch CUDA tensor -> torch
        rt.synchronize()                                     # an id out of range is raised here

Inputs and outputs are DLPack GPU tensors (torch, cupy, jax, ...) on the runtime's GPU,
C-contiguous. Outputs come back in the framework of the ids (seeds) tensor: a torch tensor
allocated with torch.empty, a cupy array with cupy.empty, or device memory of warpvm's handed to
jax (jax.dlpack) or, for anything else, returned as a DLPack array. jax runs asynchronously on
streams warpvm cannot wait on: its inputs are waited for, and the op's stream before its output
is handed over. `out=` writes into a tensor
of yours instead (not with jax, whose arrays are immutable).

Streams: every op is queued on `stream` after the work already queued there. None means the
current stream of the ids' framework (torch.cuda.current_stream(), cupy's current stream), else
the legacy default stream; or pass a stream object (__cuda_stream__, torch or cupy streams) or a
raw cudaStream_t as an int.

Errors. A table that is not a PagedArray, or a stream that is not one: TypeError. Every other bad
argument (dtype, shape, device, non-contiguous, a closed runtime, tables of different runtimes):
warpvm.Error (invalid_argument), raised before anything is queued. Ids, offsets and seeds are
checked on the GPU before anything is written: an id out of range leaves `out` and the table
untouched and is raised as warpvm.Error (index_out_of_range, naming the op, the value and the
table) by the runtime's next synchronize(), flush() or stats(); sample_neighbors, which waits
for the GPU anyway, raises it at once.
"""

from __future__ import annotations

import sys
from typing import Any

from warpvm.errors import Error, ErrorKind
from warpvm.interop import framework_of, stream_handle
from warpvm.runtime import PagedArray, _warpvm

__all__ = ["embedding_bag", "gather", "index_add", "sample_neighbors"]

_torch_dtypes: dict[str, Any] = {}
_torch_to_dlpack: Any = None


def _operand(array: Any) -> Any:
    """`array` as the extension takes it. A torch tensor goes as its DLPack capsule, made by
    torch.utils.dlpack.to_dlpack (C code); given the tensor, the extension would call
    Tensor.__dlpack__, whose checks in Python cost microseconds a tensor
    (scripts/profile-call-overhead). The extension checks the capsule's device, dtype, shape and strides as it
    would the tensor's."""
    global _torch_to_dlpack
    if array is None or framework_of(array) != "torch":
        return array
    if _torch_to_dlpack is None:
        _torch_to_dlpack = sys.modules["torch"].utils.dlpack.to_dlpack
    return _torch_to_dlpack(array)


def _writable(out: Any, op: str) -> Any:
    """A caller's `out` for the extension: torch refuses, as for its own ops' out=, a tensor that
    autograd tracks (writing into it behind autograd's back would give wrong gradients)."""
    if framework_of(out) == "torch" and out.requires_grad:
        raise _invalid(op, "out must not require grad (autograd cannot see what warpvm writes into it)")
    return _operand(out)


def _expect_table(table: object, op: str, what: str = "table") -> None:
    if not isinstance(table, PagedArray):
        raise TypeError(
            f"{op}: {what} must be a warpvm.PagedArray (Runtime.empty or Runtime.adopt), not "
            f"{type(table).__name__}"
        )


def _invalid(op: str, message: str) -> Error:
    return Error(f"warpvm: invalid argument: {op}: {message}", ErrorKind.invalid_argument)


def _empty(framework: str, like: Any, shape: tuple[int, ...], dtype: str, device: int) -> Any:
    """Uninitialised device memory for an output, in `framework` where it can allocate."""
    if framework == "torch":
        torch = sys.modules["torch"]
        if not _torch_dtypes:
            _torch_dtypes.update(
                {
                    name: getattr(torch, name)
                    for name in ("float16", "bfloat16", "float32", "float64", "int32", "int64", "uint8")
                }
            )
        return torch.empty(shape, dtype=_torch_dtypes[dtype], device=like.device)
    if framework == "cupy" and dtype != "bfloat16":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device):
            return cupy.empty(shape, dtype=dtype)
    return _warpvm.empty_device(list(shape), dtype, device)


def _ready(framework: str, *arrays: Any) -> None:
    """jax computes asynchronously on streams of its own, which warpvm's cannot wait on: its
    inputs are waited for first."""
    if framework == "jax":
        for array in arrays:
            if array is not None:
                array.block_until_ready()


def _returned(framework: str, out: Any, stream: int) -> Any:
    """`out` as the framework's array. jax takes warpvm's memory through DLPack once the op is
    done (it cannot wait on the op's stream)."""
    if framework == "jax":
        _warpvm.synchronize_stream(stream)
        return sys.modules["jax"].dlpack.from_dlpack(out)
    return out


def gather(table: PagedArray, ids: Any, out: Any = None, stream: Any = None) -> Any:
    """Rows of `table` by index: out[k] = table[ids[k]] (the GNN feature fetch).

    ids: 1-D int32 or int64 GPU tensor. Returns `out`, of shape (len(ids),) + table.shape[1:] and
    the table's dtype (any of its dtypes).
    """
    _expect_table(table, "gather")
    framework = framework_of(ids)
    handle = stream_handle(stream, framework, ids)
    if out is None:
        out = _empty(framework, ids, (ids.shape[0], *table.shape[1:]), table.dtype, table.device)
    _ready(framework, ids)
    _warpvm.gather(table, _operand(ids), _writable(out, "gather"), handle)
    return _returned(framework, out, handle)


def embedding_bag(
    table: PagedArray,
    ids: Any,
    offsets: Any,
    mode: str = "sum",
    per_sample_weights: Any = None,
    out: Any = None,
    stream: Any = None,
    include_last_offset: bool = False,
) -> Any:
    """torch.nn.functional.embedding_bag over a paged table: bag b is ids[offsets[b]:offsets[b+1]]
    (the last bag ends at len(ids), or at offsets[-1] with include_last_offset, which then holds
    one more entry than there are bags), reduced by "sum" or "mean"; an empty bag gives zeros.

    ids, offsets: 1-D int32 or int64 GPU tensors of one type. per_sample_weights (mode "sum"
    only): one weight per id, the table's dtype. The table: float16, bfloat16, float32 or
    float64 (accumulated in float32, float64 for float64). Returns `out`: (bags, columns).
    """
    if mode not in ("sum", "mean"):
        raise _invalid("embedding_bag", f"mode must be 'sum' or 'mean', not {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise _invalid("embedding_bag", "per_sample_weights are only for mode 'sum' (as in PyTorch)")
    _expect_table(table, "embedding_bag")
    framework = framework_of(ids)
    handle = stream_handle(stream, framework, ids)
    if out is None:
        bags = max(offsets.shape[0] - (1 if include_last_offset else 0), 0)
        out = _empty(framework, ids, (bags, *table.shape[1:]), table.dtype, table.device)
    _ready(framework, ids, offsets, per_sample_weights)
    _warpvm.embedding_bag(
        table,
        _operand(ids),
        _operand(offsets),
        mode,
        _operand(per_sample_weights),
        include_last_offset,
        _writable(out, "embedding_bag"),
        handle,
    )
    return _returned(framework, out, handle)


def index_add(table: PagedArray, ids: Any, values: Any, stream: Any = None) -> None:
    """table[ids[k]] += values[k] for every k, with atomics: duplicate ids add up.

    values: (len(ids),) + table.shape[1:] in the table's dtype (float16, bfloat16, float32,
    float64, int32 or int64). The rows written are dirty pages: Runtime.flush() lands them in the
    table's host memory. A bad id leaves the whole table as it was.
    """
    _expect_table(table, "index_add")
    framework = framework_of(ids)
    _ready(framework, ids, values)
    _warpvm.index_add(table, _operand(ids), _operand(values), stream_handle(stream, framework, ids))


def sample_neighbors(
    indptr: PagedArray, indices: PagedArray, seeds: Any, fanout: int, seed: int = 0, stream: Any = None
) -> tuple[Any, Any]:
    """Uniform neighbour sampling without replacement over a paged CSR graph (GraphSAGE style).

    indptr (nodes + 1 entries) and indices: 1-D int32 or int64 paged arrays of one runtime;
    seeds: 1-D int32 or int64 GPU tensor of node ids. Each seed contributes all its neighbours
    when its degree <= fanout (in CSR order), else `fanout` distinct ones drawn uniformly; the
    same (graph, seeds, fanout, seed) always gives the same sample. Returns the sample as a CSR
    over the seeds, (out_indptr, out_indices), both int64, in the seeds' framework: seed i's
    neighbours are out_indices[out_indptr[i]:out_indptr[i + 1]]. Waits for the GPU once (to size
    out_indices); a bad seed or indptr is raised at once.
    """
    if not isinstance(fanout, int) or isinstance(fanout, bool) or not 1 <= fanout < 2**32:
        raise _invalid("sample_neighbors", f"fanout must be a positive int, not {fanout!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**64:
        raise _invalid("sample_neighbors", f"seed must be an int in [0, 2**64), not {seed!r}")
    _expect_table(indptr, "sample_neighbors", "indptr")
    _expect_table(indices, "sample_neighbors", "indices")
    framework = framework_of(seeds)
    handle = stream_handle(stream, framework, seeds)
    device = indptr.device
    _ready(framework, seeds)
    out_indptr = _empty(framework, seeds, (seeds.shape[0] + 1,), "int64", device)
    total = _warpvm.count_sampled_neighbors(
        indptr, indices, _operand(seeds), fanout, _operand(out_indptr), handle
    )
    out_indices = _empty(framework, seeds, (total,), "int64", device)
    _warpvm.sample_neighbors(
        indptr, indices, _operand(seeds), fanout, seed, _operand(out_indptr), _operand(out_indices), handle
    )
    return _returned(framework, out_indptr, handle), _returned(framework, out_indices, handle)

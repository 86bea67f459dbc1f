"""PagedEmbedding and PagedEmbeddingBag: torch.nn.Embedding / EmbeddingBag over a warpvm table.

Autograd design (one, on purpose): the table is not a torch Parameter (it is bigger than GPU
memory, and no torch optimizer could step it), so backward updates it in place with a fused SGD
step, `table[ids[k]] -= lr x grad_rows[k]`, through warpvm.index_add (atomics: repeated ids add
up, as a sparse gradient's duplicates do). This is the update torch.optim.SGD makes from
nn.Embedding(sparse=True)'s gradient; tests compare the two. `lr` is a plain attribute (change it
for a schedule); lr = 0 freezes the table. The per-sample weights of an EmbeddingBag get their
ordinary gradient.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

import warpvm

if TYPE_CHECKING:
    from warpvm import PagedArray, Runtime

# Rows initialised per step (on the GPU, then copied to the pinned host table).
_INIT_CHUNK_BYTES = 256 << 20

_TORCH_DTYPES = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
}


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype for a torch dtype, a numpy dtype (or type) or a name such as 'float16'."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        name = dtype
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype)
    name = name.removeprefix("torch.")
    if name not in _TORCH_DTYPES:
        raise TypeError(f"no torch dtype for {dtype!r} (warpvm tables hold {', '.join(_TORCH_DTYPES)})")
    return _TORCH_DTYPES[name]


def host_tensor(array: PagedArray) -> torch.Tensor:
    """A CPU tensor over the array's pinned host memory (no copy), in the array's dtype.

    It is exact only after flush(runtime); to write it while pages may be cached, flush, write,
    then drop_cached(runtime) (docs/concepts.md, "Writes, dirty pages, flush and drop").
    """
    dtype = torch_dtype(array.dtype)
    host = np.asarray(array.host)
    if dtype == torch.bfloat16:  # numpy has no bfloat16: view its 16-bit words
        return torch.from_numpy(host.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(host)


def flush(runtime: Runtime) -> None:
    """Waits for the GPU's work on torch's streams (warpvm's calls run there), then flushes the
    cache: every host view is exact afterwards."""
    torch.cuda.synchronize(runtime.device)
    runtime.flush()


def drop_cached(runtime: Runtime) -> None:
    """Waits for torch's streams, then empties the cache: the next reads see the host memory."""
    torch.cuda.synchronize(runtime.device)
    runtime.drop_cached()


def fill_normal(runtime: Runtime, array: PagedArray, seed: int) -> None:
    """Writes N(0, 1) values (as torch.nn.Embedding initialises its weight) into the table, chunk
    by chunk on the GPU, and empties the cache of any stale pages."""
    device = torch.device("cuda", runtime.device)
    generator = torch.Generator(device=device).manual_seed(seed)
    host = host_tensor(array)
    rows, dim = host.shape
    chunk_rows = max(1, _INIT_CHUNK_BYTES // max(1, dim * host.element_size()))
    flush(runtime)
    for start in range(0, rows, chunk_rows):
        stop = min(rows, start + chunk_rows)
        values = torch.randn(stop - start, dim, generator=generator, device=device, dtype=torch.float32)
        host[start:stop].copy_(values.to(host.dtype))
    drop_cached(runtime)


def _apply_sgd(table: PagedArray, ids: torch.Tensor, grad_rows: torch.Tensor, lr: float) -> None:
    """table[ids[k]] -= lr x grad_rows[k], duplicates adding up."""
    step = (grad_rows.to(torch.float32) * -lr).to(torch_dtype(table.dtype)).contiguous()
    warpvm.index_add(table, ids, step)


def _bags_of_ids(offsets: torch.Tensor, id_count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For EmbeddingBag offsets (a start per bag): each id's bag, and each bag's size."""
    ends = torch.cat([offsets[1:], offsets.new_tensor([id_count])]).to(torch.int64)
    sizes = ends - offsets.to(torch.int64)
    bags = torch.arange(offsets.numel(), device=offsets.device)
    return torch.repeat_interleave(bags, sizes, output_size=id_count), sizes


class _Lookup(torch.autograd.Function):
    """warpvm.gather forward; backward steps the table (fused SGD). `anchor` is a zero-size tensor
    that requires grad, so that autograd calls backward: the table itself is not a tensor."""

    @staticmethod
    def forward(
        ctx: Any, anchor: torch.Tensor, table: PagedArray, ids: torch.Tensor, lr: float
    ) -> torch.Tensor:
        ctx.table, ctx.lr = table, lr
        ctx.save_for_backward(ids)
        return warpvm.gather(table, ids)

    @staticmethod
    def backward(ctx: Any, grad_rows: torch.Tensor) -> tuple[None, None, None, None]:
        (ids,) = ctx.saved_tensors
        _apply_sgd(ctx.table, ids, grad_rows, ctx.lr)
        return None, None, None, None


class _Bag(torch.autograd.Function):
    """warpvm.embedding_bag forward; backward steps the table (fused SGD) and returns the gradient
    of the per-sample weights: each id's row . its bag's output gradient."""

    @staticmethod
    def forward(
        ctx: Any,
        anchor: torch.Tensor,
        per_sample_weights: torch.Tensor | None,
        table: PagedArray,
        ids: torch.Tensor,
        offsets: torch.Tensor,
        mode: str,
        lr: float,
    ) -> torch.Tensor:
        ctx.table, ctx.mode, ctx.lr = table, mode, lr
        ctx.save_for_backward(ids, offsets, per_sample_weights)
        return warpvm.embedding_bag(table, ids, offsets, mode=mode, per_sample_weights=per_sample_weights)

    @staticmethod
    def backward(ctx: Any, grad_bags: torch.Tensor) -> tuple[Any, ...]:
        ids, offsets, per_sample_weights = ctx.saved_tensors
        bag_of_id, bag_sizes = _bags_of_ids(offsets, ids.numel())
        grad_rows = grad_bags.index_select(0, bag_of_id)
        grad_weights = None
        if ctx.needs_input_grad[1]:  # read the rows before the step changes them
            rows = warpvm.gather(ctx.table, ids).to(torch.float32)
            grad_weights = (rows * grad_rows.to(torch.float32)).sum(1).to(per_sample_weights.dtype)
        if ctx.lr != 0:
            if ctx.mode == "mean":
                grad_rows = grad_rows / bag_sizes.index_select(0, bag_of_id).unsqueeze(1).to(grad_rows.dtype)
            if per_sample_weights is not None:
                grad_rows = grad_rows * per_sample_weights.unsqueeze(1).to(grad_rows.dtype)
            _apply_sgd(ctx.table, ids, grad_rows, ctx.lr)
        return None, grad_weights, None, None, None, None, None


class _PagedTable(nn.Module):
    """What both modules share: the table, its runtime, the fused-SGD learning rate."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        dtype: Any,
        runtime: Runtime,
        lr: float,
        placement: str,
        name: str,
        seed: int,
    ) -> None:
        super().__init__()
        if num_embeddings < 1 or embedding_dim < 1:
            raise ValueError(f"a table of {num_embeddings} x {embedding_dim}: both must be positive")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.runtime = runtime
        self.lr = float(lr)
        self.weight: PagedArray = runtime.empty(
            (num_embeddings, embedding_dim), torch_dtype(dtype), placement=placement, name=name
        )
        self._grad_anchor = torch.empty(0, requires_grad=True)
        self.reset_parameters(seed)

    def reset_parameters(self, seed: int = 0) -> None:
        """Fills the table with N(0, 1) values (torch.nn.Embedding's initialisation)."""
        fill_normal(self.runtime, self.weight, seed)

    def weight_host(self) -> torch.Tensor:
        """The table as a CPU tensor over its host memory (no copy), made exact by a flush."""
        flush(self.runtime)
        return host_tensor(self.weight)

    def _steps_table(self) -> bool:
        return self.lr != 0 and torch.is_grad_enabled()

    def extra_repr(self) -> str:
        dtype = str(torch_dtype(self.weight.dtype)).removeprefix("torch.")
        return f"{self.num_embeddings}, {self.embedding_dim}, dtype={dtype}, lr={self.lr:g}"


class PagedEmbedding(_PagedTable):
    """torch.nn.Embedding whose weight is a warpvm PagedArray `weight` (num_embeddings x
    embedding_dim), which may be far larger than GPU memory.

    forward(ids) -> ids.shape + (embedding_dim,), on the runtime's GPU (ids on that GPU, int32 or
    int64). backward applies table[ids] -= lr x grad in place (the module's docstring says why);
    lr = 0 freezes the table. The weight starts as N(0, 1) draws from `seed`.
    Not supported: padding_idx, max_norm, scale_grad_by_freq.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        dtype: Any = torch.float32,
        *,
        runtime: Runtime,
        lr: float = 0.0,
        placement: str = "automatic",
        name: str = "embedding",
        seed: int = 0,
    ) -> None:
        super().__init__(num_embeddings, embedding_dim, dtype, runtime, lr, placement, name, seed)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.reshape(-1)
        if self._steps_table():
            rows = _Lookup.apply(self._grad_anchor, self.weight, flat, self.lr)
        else:
            rows = warpvm.gather(self.weight, flat)
        return rows.view(*ids.shape, self.embedding_dim)


class PagedEmbeddingBag(_PagedTable):
    """torch.nn.EmbeddingBag (mode "sum" or "mean") whose weight is a warpvm PagedArray.

    forward(ids, offsets, per_sample_weights=None) with torch's meaning: 1-D ids and a start
    offset per bag (include_last_offset=False), or 2-D ids [bags, ids per bag] without offsets.
    per_sample_weights only with mode "sum", as in torch; they get their gradient. backward
    applies the fused SGD step to the table (lr = 0 freezes it).
    Not supported: mode "max", padding_idx, max_norm, scale_grad_by_freq, include_last_offset.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        dtype: Any = torch.float32,
        *,
        runtime: Runtime,
        mode: str = "sum",
        lr: float = 0.0,
        placement: str = "automatic",
        name: str = "embedding_bag",
        seed: int = 0,
    ) -> None:
        if mode not in ("sum", "mean"):
            raise ValueError(f"mode {mode!r}: PagedEmbeddingBag pools by 'sum' or 'mean'")
        super().__init__(num_embeddings, embedding_dim, dtype, runtime, lr, placement, name, seed)
        self.mode = mode

    def forward(
        self,
        ids: torch.Tensor,
        offsets: torch.Tensor | None = None,
        per_sample_weights: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if ids.dim() == 2:
            if offsets is not None:
                raise ValueError("offsets go with 1-D ids; 2-D ids are one bag per row")
            bags, per_bag = ids.shape
            offsets = torch.arange(0, bags * per_bag, per_bag, device=ids.device, dtype=ids.dtype)
            ids = ids.reshape(-1)
            if per_sample_weights is not None:
                per_sample_weights = per_sample_weights.reshape(-1)
        elif ids.dim() != 1 or offsets is None:
            raise ValueError("give 1-D ids with offsets, or 2-D ids [bags, ids per bag]")
        if per_sample_weights is not None and self.mode != "sum":
            raise ValueError(f"per_sample_weights need mode 'sum' (this bag pools by {self.mode!r})")
        weights_need_grad = (
            per_sample_weights is not None and per_sample_weights.requires_grad and torch.is_grad_enabled()
        )
        if self._steps_table() or weights_need_grad:
            return _Bag.apply(
                self._grad_anchor, per_sample_weights, self.weight, ids, offsets, self.mode, self.lr
            )
        return warpvm.embedding_bag(
            self.weight, ids, offsets, mode=self.mode, per_sample_weights=per_sample_weights
        )

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, mode={self.mode!r}"

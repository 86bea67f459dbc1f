"""warpvm from PyTorch: embedding tables and node features larger than GPU memory (docs/torch.md).

    import warpvm
    from warpvm.torch import PagedEmbeddingBag

    rt = warpvm.Runtime(cache="8GiB")
    bag = PagedEmbeddingBag(500_000_000, 128, runtime=rt, mode="sum", lr=0.05)  # 256 GB of pinned host memory
    pooled = bag(ids, offsets)          # [bags, 128] on the GPU
    loss(pooled).backward()             # applies table[ids] -= lr x grad in place (fused SGD)

The tables live in warpvm PagedArrays (pinned host memory behind warpvm's GPU page cache), read
through warpvm.gather and warpvm.embedding_bag and updated through warpvm.index_add.
PagedFeatureStore, InMemoryGraphStore and WarpvmNeighborSampler (torch_geometric's FeatureStore,
GraphStore and a node sampler) are imported on first use, so that this package works without
torch_geometric.

Needs torch; `import warpvm` alone never imports it.
"""

from __future__ import annotations

from typing import Any

from warpvm.torch.embedding import (
    PagedEmbedding,
    PagedEmbeddingBag,
    drop_cached,
    flush,
    host_tensor,
    torch_dtype,
)

__all__ = [
    "InMemoryGraphStore",
    "PagedEmbedding",
    "PagedEmbeddingBag",
    "PagedFeatureStore",
    "WarpvmNeighborSampler",
    "drop_cached",
    "flush",
    "host_tensor",
    "torch_dtype",
]

_PYG_NAMES = ("PagedFeatureStore", "InMemoryGraphStore", "WarpvmNeighborSampler")


def __getattr__(name: str) -> Any:
    if name in _PYG_NAMES:
        from warpvm.torch import pyg

        return getattr(pyg, name)
    raise AttributeError(f"module 'warpvm.torch' has no attribute {name!r}")

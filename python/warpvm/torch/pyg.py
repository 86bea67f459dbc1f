"""PyG's remote-backend interfaces over warpvm: node features in PagedArrays.

    feature_store = PagedFeatureStore(rt)
    feature_store.put_tensor(x, group_name=None, attr_name="x", index=None)   # x may exceed GPU memory
    graph_store = InMemoryGraphStore()
    graph_store.put_edge_index((row, colptr), edge_type=None, layout="csc", size=(n, n), is_sorted=True)
    loader = NeighborLoader((feature_store, graph_store), num_neighbors=[10, 10], input_nodes=seeds, ...)

Every batch's features are one warpvm.gather of the sampled nodes' rows, on the runtime's GPU.
Needs torch_geometric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr
from torch_geometric.sampler import BaseSampler, EdgeSamplerInput, NodeSamplerInput, SamplerOutput

import warpvm
from warpvm.torch.embedding import drop_cached, flush, host_tensor

if TYPE_CHECKING:
    from warpvm import PagedArray, Runtime

# A tensor's key: (group_name, attr_name); group_name None for a homogeneous graph.
TensorKey = tuple[Any, Any]


class PagedFeatureStore(FeatureStore):
    """A torch_geometric FeatureStore whose tensors are warpvm PagedArrays (1-D or 2-D).

    put_tensor with index None stores a whole tensor: a PagedArray as it is (no copy), or a torch
    tensor or numpy array copied into a new PagedArray of `placement`. With an index it overwrites
    those rows of a stored tensor (flush, host write, drop_cached).
    get_tensor with an index (a tensor, slice or int) gathers those rows on the
    runtime's GPU (warpvm.gather); with index None, or the slice `:`, it returns the whole tensor
    as a CPU tensor over its host memory (no copy), which may be larger than GPU memory.
    """

    def __init__(self, runtime: Runtime, placement: str = "automatic") -> None:
        super().__init__()
        self.runtime = runtime
        self.placement = placement
        self._arrays: dict[TensorKey, PagedArray] = {}

    @property
    def device(self) -> torch.device:
        return torch.device("cuda", self.runtime.device)

    @staticmethod
    def _key(attr: TensorAttr) -> TensorKey:
        return (attr.group_name, attr.attr_name)

    def _array(self, attr: TensorAttr) -> PagedArray:
        array = self._arrays.get(self._key(attr))
        if array is None:
            raise KeyError(f"no tensor {self._key(attr)} in the feature store")
        return array

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        key = self._key(attr)
        if attr.index is None:
            self._arrays[key] = (
                tensor if isinstance(tensor, warpvm.PagedArray) else self._copy_in(tensor, key)
            )
            return True
        array = self._array(attr)
        rows = self._ids(attr.index, int(array.shape[0]), torch.device("cpu"))
        flush(self.runtime)
        host = host_tensor(array)
        host[rows] = torch.as_tensor(tensor).to(device="cpu", dtype=host.dtype)
        drop_cached(self.runtime)
        return True

    def _copy_in(self, tensor: Any, key: TensorKey) -> PagedArray:
        values = torch.as_tensor(tensor)
        name = ".".join(str(part) for part in key if part is not None) or "features"
        array = self.runtime.empty(tuple(values.shape), values.dtype, placement=self.placement, name=name)
        host_tensor(array).copy_(values)
        return array

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        array = self._array(attr)
        index = attr.index
        if index is None or (isinstance(index, slice) and index == slice(None)):
            flush(self.runtime)
            return host_tensor(array)
        rows = self._ids(index, int(array.shape[0]), self.device)
        gathered = warpvm.gather(array, rows)
        return gathered[0] if isinstance(index, int | np.integer) else gathered

    @staticmethod
    def _ids(index: Any, rows: int, device: torch.device) -> torch.Tensor:
        """Row ids on `device` for a PyG index: a tensor, a slice or an int."""
        if isinstance(index, slice):
            return torch.arange(*index.indices(rows), device=device)
        if isinstance(index, int | np.integer):
            return torch.tensor([int(index)], device=device)
        return torch.as_tensor(index).to(device, non_blocking=True)

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self._arrays.pop(self._key(attr), None) is not None

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...] | None:
        array = self._arrays.get(self._key(attr))
        return None if array is None else tuple(int(n) for n in array.shape)

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        # New objects each call: the loaders set their `index`.
        return [self._tensor_attr_cls.cast(*key) for key in self._arrays]

    def __repr__(self) -> str:
        return f"PagedFeatureStore({len(self._arrays)} tensors, device={self.runtime.device})"


class InMemoryGraphStore(GraphStore):
    """A torch_geometric GraphStore that keeps each edge index as given (COO, CSR or CSC tensors).

    PyG ships none outside its tests; NeighborLoader samples from the CSC of it (give CSC sorted
    by destination to skip a conversion).
    """

    def __init__(self) -> None:
        super().__init__()
        self._edges: dict[tuple[Any, ...], tuple[EdgeAttr, Any]] = {}

    @staticmethod
    def _key(attr: EdgeAttr) -> tuple[Any, ...]:
        return (attr.edge_type, attr.layout.value)

    def _put_edge_index(self, edge_index: Any, edge_attr: EdgeAttr) -> bool:
        self._edges[self._key(edge_attr)] = (edge_attr, edge_index)
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr) -> Any:
        stored = self._edges.get(self._key(edge_attr))
        return None if stored is None else stored[1]

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        return self._edges.pop(self._key(edge_attr), None) is not None

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [attr for attr, _ in self._edges.values()]


class WarpvmNeighborSampler(BaseSampler):
    """A PyG node sampler whose draws are warpvm.sample_neighbors on the GPU, for
    NodeLoader(data, node_sampler=...): each layer takes up to `num_neighbors[i]` in-neighbours of
    every node of the previous layer (uniform, without replacement; all of them when fewer), from
    a graph's CSC in PagedArrays (`colptr` [nodes + 1] and `row` [edges], as the GraphStore keeps
    it: PyG's layout). Each call's seed is drawn from torch's generator, so torch.manual_seed
    makes the batches repeat.

    Its output is PyG's (seed nodes first, then each layer's new nodes; edges neighbour ->
    node, relabelled), on the CPU as PyG's samplers give it, so the loaders and the training loop
    are PyG's own. It needs neither pyg-lib nor torch-sparse.
    """

    def __init__(
        self, colptr: PagedArray, row: PagedArray, num_neighbors: Sequence[int], device: torch.device
    ) -> None:
        super().__init__()
        self.colptr, self.row = colptr, row
        self.num_neighbors = tuple(int(n) for n in num_neighbors)
        self.device = device
        # Each node's place in the batch being sampled, -1 outside it (reset after each batch).
        self._local = torch.full((int(colptr.shape[0]) - 1,), -1, dtype=torch.int64, device=device)

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: Any) -> SamplerOutput:
        seeds = index.node.to(self.device, torch.int64)
        local = self._local
        local[seeds] = torch.arange(seeds.numel(), device=self.device)
        count = seeds.numel()
        nodes, rows, cols = [seeds], [], []
        frontier = seeds
        for fanout in self.num_neighbors:
            if frontier.numel() == 0:
                break
            draw = int(torch.randint(1 << 62, (1,)))
            offsets, neighbours = warpvm.sample_neighbors(self.colptr, self.row, frontier, fanout, seed=draw)
            neighbours = neighbours.to(torch.int64)
            degrees = (offsets[1:] - offsets[:-1]).to(torch.int64)
            cols.append(torch.repeat_interleave(local[frontier], degrees, output_size=neighbours.numel()))
            fresh = torch.unique(neighbours[local[neighbours] < 0])
            local[fresh] = torch.arange(count, count + fresh.numel(), device=self.device)
            count += fresh.numel()
            rows.append(local[neighbours])
            nodes.append(fresh)
            frontier = fresh
        node = torch.cat(nodes)
        local[node] = -1
        empty = torch.empty(0, dtype=torch.int64)
        return SamplerOutput(
            node=node.cpu(),
            row=torch.cat(rows).cpu() if rows else empty,
            col=torch.cat(cols).cpu() if cols else empty,
            edge=None,
            num_sampled_nodes=[n.numel() for n in nodes],
            num_sampled_edges=[r.numel() for r in rows],
            metadata=(index.input_id, index.time),  # NodeLoader reads the batch's seeds from here
        )

    def sample_from_edges(self, index: EdgeSamplerInput, neg_sampling: Any = None) -> SamplerOutput:
        raise NotImplementedError("WarpvmNeighborSampler samples from nodes (NodeLoader), not from edges")

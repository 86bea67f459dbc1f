"""GraphSAGE minibatch training over a generated graph, with node features served three ways.

Shared by examples/python/graphsage.py and `warpvm bench torch`'s graphsage workload:

- "warpvm": features in a PagedFeatureStore, NeighborLoader((feature_store, graph_store), ...);
- "cpu_gather": PyG's own loader over Data(x=CPU features), each batch's x copied to the GPU;
- "device": features in GPU memory, each batch's rows indexed there.

All three sample the same CSC graph with the same sampler, so with the same seed they draw the same
batches and their loss curves agree (up to the order of floating-point sums on the GPU).
Sampling is NeighborLoader's own where PyG can sample (pyg-lib or torch-sparse), else
WarpvmNeighborSampler's (warpvm.sample_neighbors) under NodeLoader; LoaderOptions.sampler chooses.
Needs torch and torch_geometric.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
import torch_geometric.typing
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader, NodeLoader
from torch_geometric.nn import GraphSAGE

from warpvm.torch.pyg import InMemoryGraphStore, PagedFeatureStore, WarpvmNeighborSampler

if TYPE_CHECKING:
    from warpvm import PagedArray, Runtime

FEATURE_MODES = ("warpvm", "cpu_gather", "device")
# R-MAT's quadrant probabilities (Graph500's).
RMAT_A, RMAT_B, RMAT_C = 0.57, 0.19, 0.19
_CHUNK_ROWS = 1 << 20


def sampling_backend() -> str | None:
    """What NeighborLoader samples with here: 'pyg-lib', 'torch-sparse', or None (it cannot)."""
    if torch_geometric.typing.WITH_PYG_LIB:
        return "pyg-lib"
    if torch_geometric.typing.WITH_TORCH_SPARSE:
        return "torch-sparse"
    return None


@dataclass(frozen=True)
class Graph:
    """A directed graph in CSC (sorted by destination), on the CPU where NeighborLoader samples."""

    num_nodes: int
    colptr: torch.Tensor  # [num_nodes + 1]
    row: torch.Tensor  # [edges]: the source of each edge, edges grouped by destination
    # (runtime, colptr, row): the CSC adopted by a runtime, made once (paged_csc).
    _paged: list[tuple[Any, Any, Any]] = field(default_factory=list, compare=False, repr=False)

    @property
    def num_edges(self) -> int:
        return self.row.numel()

    def paged_csc(self, runtime: Runtime) -> tuple[PagedArray, PagedArray]:
        """colptr and row as PagedArrays of `runtime` over the same host memory (adopted once)."""
        for owner, colptr, row in self._paged:
            if owner is runtime:
                return colptr, row
        colptr = runtime.adopt(self.colptr.numpy(), name="colptr")
        row = runtime.adopt(self.row.numpy(), name="row")
        self._paged.append((runtime, colptr, row))
        return colptr, row

    def col(self) -> torch.Tensor:
        """The destination of each edge (COO's second row)."""
        degrees = self.colptr[1:] - self.colptr[:-1]
        return torch.repeat_interleave(torch.arange(self.num_nodes), degrees, output_size=self.num_edges)


def rmat_graph(num_nodes: int, edge_factor: int, seed: int, device: torch.device) -> Graph:
    """An R-MAT graph (power-law degrees) of `num_nodes` vertices: both directions of each of
    num_nodes x edge_factor drawn edges, less those that fall past num_nodes, self loops and
    repeats; vertex ids permuted so the hubs are scattered. Generated on `device`."""
    scale = max(1, (num_nodes - 1).bit_length())
    drawn = num_nodes * edge_factor
    generator = torch.Generator(device=device).manual_seed(seed)
    src = torch.zeros(drawn, dtype=torch.int64, device=device)
    dst = torch.zeros(drawn, dtype=torch.int64, device=device)
    for bit in range(scale):
        r = torch.rand(drawn, generator=generator, device=device)
        src |= (r >= RMAT_A + RMAT_B).to(torch.int64) << bit
        dst |= (((r >= RMAT_A) & (r < RMAT_A + RMAT_B)) | (r >= RMAT_A + RMAT_B + RMAT_C)).to(
            torch.int64
        ) << bit
    permutation = torch.randperm(1 << scale, generator=generator, device=device)
    src, dst = permutation[src], permutation[dst]
    kept = (src < num_nodes) & (dst < num_nodes) & (src != dst)
    # One key per edge, sorted by destination then source: torch.unique sorts and drops repeats.
    keys = torch.unique(torch.cat([dst[kept] * num_nodes + src[kept], src[kept] * num_nodes + dst[kept]]))
    dst, src = keys // num_nodes, keys % num_nodes
    colptr = torch.zeros(num_nodes + 1, dtype=torch.int64, device=device)
    colptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    return Graph(num_nodes, colptr.cpu(), src.cpu())


def fill_features(host: torch.Tensor, classes: int, seed: int, device: torch.device) -> torch.Tensor:
    """Writes node features into `host` [nodes, dim] (a CPU tensor, e.g. host_tensor of a
    PagedArray) in chunks made on `device`: each node's class centre plus unit noise. Returns the
    classes, on `device`."""
    generator = torch.Generator(device=device).manual_seed(seed)
    nodes, dim = host.shape
    centres = torch.randn(classes, dim, generator=generator, device=device)
    labels = torch.randint(classes, (nodes,), generator=generator, device=device)
    for start in range(0, nodes, _CHUNK_ROWS):
        stop = min(nodes, start + _CHUNK_ROWS)
        noise = torch.randn(stop - start, dim, generator=generator, device=device)
        host[start:stop].copy_((centres[labels[start:stop]] + noise).to(host.dtype))
    return labels


def feature_store(runtime: Runtime, features: PagedArray) -> tuple[PagedFeatureStore, InMemoryGraphStore]:
    """A PagedFeatureStore holding `features` as attribute 'x' of a homogeneous graph (no copy)."""
    store = PagedFeatureStore(runtime)
    store.put_tensor(features, group_name=None, attr_name="x", index=None)
    return store, InMemoryGraphStore()


SAMPLERS = ("pyg", "warpvm")


@dataclass(frozen=True)
class LoaderOptions:
    """How batches are drawn: seed nodes per batch, neighbours per layer, and the sampler:
    NeighborLoader's own ("pyg": pyg-lib or torch-sparse on the CPU), WarpvmNeighborSampler
    ("warpvm": warpvm.sample_neighbors on the GPU), or None: PyG's where it can sample, else warpvm's."""

    batch_size: int = 1024
    fanout: tuple[int, ...] = (10, 10)
    sampler: str | None = None

    @property
    def resolved_sampler(self) -> str:
        if self.sampler is None:
            return "pyg" if sampling_backend() is not None else "warpvm"
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r} (choose from {', '.join(SAMPLERS)})")
        return self.sampler


def sampler_name(options: LoaderOptions) -> str:
    """What draws the batches: 'pyg-lib', 'torch-sparse' or 'warpvm'."""
    if options.resolved_sampler == "warpvm":
        return "warpvm"
    return sampling_backend() or "pyg (neither pyg-lib nor torch-sparse found)"


def make_loader(
    mode: str,
    graph: Graph,
    options: LoaderOptions,
    runtime: Runtime,
    stores: tuple[PagedFeatureStore, InMemoryGraphStore] | None = None,
    cpu_features: torch.Tensor | None = None,
) -> NodeLoader:
    """The mode's loader over every node as a seed (shuffled): over the warpvm `stores` ("warpvm"),
    over Data with `cpu_features` ("cpu_gather"), or over the bare graph ("device"), sampled as
    `options` says."""
    if mode == "warpvm":
        if stores is None:
            raise ValueError("mode warpvm needs the feature and graph stores")
        features, graph_store = stores
        graph_store.put_edge_index(
            (graph.row, graph.colptr),
            edge_type=None,
            layout="csc",
            size=(graph.num_nodes, graph.num_nodes),
            is_sorted=True,
        )
        data: Any = (features, graph_store)
    else:
        data = Data(edge_index=torch.stack([graph.row, graph.col()]), num_nodes=graph.num_nodes)
        if mode == "cpu_gather":
            if cpu_features is None:
                raise ValueError("mode cpu_gather needs the CPU features")
            data.x = cpu_features
        elif mode != "device":
            raise ValueError(f"unknown feature mode {mode!r} (choose from {', '.join(FEATURE_MODES)})")
    common: dict[str, Any] = {
        "input_nodes": torch.arange(graph.num_nodes),
        "batch_size": options.batch_size,
        "shuffle": True,
    }
    if options.resolved_sampler == "warpvm":
        colptr, row = graph.paged_csc(runtime)
        sampler = WarpvmNeighborSampler(colptr, row, options.fanout, torch.device("cuda", runtime.device))
        return NodeLoader(data, node_sampler=sampler, **common)
    if mode == "warpvm":
        return NeighborLoader(data, num_neighbors=list(options.fanout), **common)
    return NeighborLoader(data, num_neighbors=list(options.fanout), is_sorted=True, **common)


def batch_features(
    mode: str, device: torch.device, device_features: torch.Tensor | None = None
) -> Callable[[Any], torch.Tensor]:
    """How a mode's batch becomes its features on `device`."""
    if mode == "warpvm":
        return lambda batch: batch.x
    if mode == "cpu_gather":
        return lambda batch: batch.x.to(device, non_blocking=True)
    if device_features is None:
        raise ValueError("mode device needs the features in GPU memory")
    return lambda batch: device_features.index_select(0, batch.n_id.to(device, non_blocking=True))


@dataclass
class TrainLog:
    """A run's loss and time per step, and the nodes and feature bytes each batch read."""

    losses: list[float] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    feature_bytes: list[int] = field(default_factory=list)


def train(
    loader: Iterable[Any],
    features_of: Callable[[Any], torch.Tensor],
    labels: torch.Tensor,
    model: torch.nn.Module,
    steps: int,
    lr: float,
    check: Callable[[Any, torch.Tensor], None] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainLog:
    """`steps` steps of Adam on cross-entropy over each batch's seed nodes. Each step's time runs
    from asking the loader for the batch to the loss on the host (sampling, features, forward,
    backward, update). `check(batch, x)` sees each batch's features first (untimed)."""
    device = labels.device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    log = TrainLog()
    batches = iter(loader)
    model.train()
    for step in range(steps):
        start = time.perf_counter()
        batch = next(batches)
        x = features_of(batch)
        if check is not None:
            torch.cuda.synchronize(device)
            paused = time.perf_counter()
            check(batch, x)
            start += time.perf_counter() - paused
        seeds = batch.n_id[: batch.batch_size].to(device, non_blocking=True)
        out = model(x.to(torch.float32), batch.edge_index.to(device, non_blocking=True))[: batch.batch_size]
        loss = F.cross_entropy(out, labels[seeds])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        value = loss.item()
        log.step_seconds.append(time.perf_counter() - start)
        log.losses.append(value)
        log.nodes.append(int(batch.n_id.numel()))
        log.feature_bytes.append(x.numel() * x.element_size())
        if on_step is not None:
            on_step(step, value)
    return log


def make_model(
    dim: int, hidden: int, classes: int, layers: int, seed: int, device: torch.device
) -> GraphSAGE:
    """A GraphSAGE of `layers` mean-aggregating layers; the same seed gives the same weights."""
    torch.manual_seed(seed)
    return GraphSAGE(dim, hidden, num_layers=layers, out_channels=classes).to(device)


def run_mode(
    mode: str,
    graph: Graph,
    options: LoaderOptions,
    runtime: Runtime,
    labels: torch.Tensor,
    dim: int,
    hidden: int,
    steps: int,
    lr: float,
    seed: int,
    *,
    stores: tuple[PagedFeatureStore, InMemoryGraphStore] | None = None,
    cpu_features: torch.Tensor | None = None,
    device_features: torch.Tensor | None = None,
    check: Callable[[Any, torch.Tensor], None] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainLog:
    """Trains a fresh model (weights and batch order from `seed`) with the mode's loader."""
    device = labels.device
    model = make_model(dim, hidden, int(labels.max()) + 1, len(options.fanout), seed, device)
    loader = make_loader(mode, graph, options, runtime, stores, cpu_features)
    torch.manual_seed(seed)  # the loader's shuffle and the sampler draw from here
    return train(
        loader, batch_features(mode, device, device_features), labels, model, steps, lr, check, on_step
    )


def features_checker(reference: torch.Tensor) -> Callable[[Any, torch.Tensor], None]:
    """check() for train(): the batch's features must equal reference[n_id] (a CPU tensor), bit
    for bit; raises AssertionError naming the first wrong node otherwise."""

    def check(batch: Any, x: torch.Tensor) -> None:
        expected = reference.index_select(0, batch.n_id.cpu())
        got = x.cpu()
        if not torch.equal(got, expected):
            wrong = int((got != expected).any(1).nonzero()[0])
            raise AssertionError(f"features of node {int(batch.n_id[wrong])} differ from the host's")

    return check


def max_difference(first: Sequence[float], second: Sequence[float]) -> float:
    """The largest |a - b| over two loss curves' common steps."""
    return max((abs(a - b) for a, b in zip(first, second, strict=False)), default=0.0)

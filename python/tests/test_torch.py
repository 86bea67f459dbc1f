"""warpvm.torch against torch's own modules, on random inputs: needs torch, a GPU and warpvm's
extension API (warpvm.gather and the rest); skipped, saying which is missing, otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import warpvm

torch = pytest.importorskip("torch", reason="warpvm.torch needs torch, which is not installed")
if not torch.cuda.is_available():
    pytest.skip("warpvm.torch needs a CUDA GPU, and torch sees none", allow_module_level=True)
if not hasattr(warpvm, "gather"):
    pytest.skip("warpvm's extension API (warpvm.gather, ...) is not built here", allow_module_level=True)

from warpvm.torch import PagedEmbedding, PagedEmbeddingBag, host_tensor  # noqa: E402

DEVICE = torch.device("cuda", 0)
# Smaller than the tables below (40 MiB of float32): each test pages.
CACHE = "16MiB"
ROWS, DIM = 160_000, 64
# A step's update of a hot row sums hundreds of gradient rows, here in the order the atomics take
# them and in torch in its own: float32 rounding of such a sum reaches k * 2^-24 of its size
# (3e-5 at k = 500). Forward results, which sum no more than a bag, keep 1e-5.
UPDATE_TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}


@pytest.fixture
def rt() -> Iterator[Any]:
    with warpvm.Runtime(cache=CACHE, page_bytes=4096) as runtime:
        yield runtime


def skewed_ids(shape: tuple[int, ...], rows: int, seed: int) -> Any:
    """Random ids with many repeats (a few hot rows), on the GPU."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    hot = torch.randint(rows, (16,), generator=generator, device=DEVICE)
    spread = torch.randint(rows, shape, generator=generator, device=DEVICE)
    pick = torch.randint(2, shape, generator=generator, device=DEVICE).bool()
    return torch.where(pick, hot[spread % 16], spread)


def reference_embedding(module: Any, dtype: Any = None) -> Any:
    weight = module.weight_host().clone().to(DEVICE, dtype or torch_dtype_of(module))
    return torch.nn.Embedding.from_pretrained(weight, freeze=False, sparse=True)


def torch_dtype_of(module: Any) -> Any:
    return host_tensor(module.weight).dtype


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_embedding_forward_equals_torch(rt: Any, dtype: str) -> None:
    module = PagedEmbedding(ROWS, DIM, dtype, runtime=rt, seed=3)
    reference = reference_embedding(module)
    ids = skewed_ids((128, 50), ROWS, seed=1)
    out = module(ids)
    assert out.shape == (128, 50, DIM) and out.dtype == reference.weight.dtype
    assert torch.equal(out, reference(ids))


def test_initial_weights_are_standard_normal(rt: Any) -> None:
    weight = PagedEmbedding(ROWS, DIM, runtime=rt, seed=5).weight_host()
    assert abs(float(weight.mean())) < 0.01 and abs(float(weight.std()) - 1) < 0.01
    other = PagedEmbedding(ROWS, DIM, runtime=rt, seed=6).weight_host()
    assert not torch.equal(weight, other)


def test_embedding_backward_is_torchs_sparse_sgd_step(rt: Any) -> None:
    lr = 0.5
    module = PagedEmbedding(ROWS, DIM, runtime=rt, lr=lr, seed=7)
    reference = reference_embedding(module)
    optimizer = torch.optim.SGD(reference.parameters(), lr=lr)
    ids = skewed_ids((4096,), ROWS, seed=2)
    weights = torch.randn(4096, DIM, device=DEVICE)
    (module(ids) * weights).pow(2).sum().backward()
    (reference(ids) * weights).pow(2).sum().backward()
    optimizer.step()
    torch.testing.assert_close(module.weight_host(), reference.weight.detach().cpu(), **UPDATE_TOLERANCE)
    # The second step reads the updated rows.
    torch.testing.assert_close(module(ids), reference(ids), rtol=1e-5, atol=1e-5)


def test_frozen_table_and_no_grad_leave_the_table(rt: Any) -> None:
    module = PagedEmbedding(ROWS, DIM, runtime=rt, lr=0.0, seed=8)
    before = module.weight_host().clone()
    ids = skewed_ids((1000,), ROWS, seed=3)
    assert not module(ids).requires_grad
    module.lr = 1.0
    with torch.no_grad():
        assert not module(ids).requires_grad
    assert torch.equal(module.weight_host(), before)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_forward_equals_torch(rt: Any, mode: str) -> None:
    module = PagedEmbeddingBag(ROWS, DIM, runtime=rt, mode=mode, seed=9)
    reference = torch.nn.EmbeddingBag.from_pretrained(module.weight_host().clone().to(DEVICE), mode=mode)
    ids = skewed_ids((3000,), ROWS, seed=4)
    cuts = torch.sort(torch.randint(3000, (199,), device=DEVICE)).values
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64, device=DEVICE), cuts])  # some bags empty
    torch.testing.assert_close(module(ids, offsets), reference(ids, offsets), rtol=1e-5, atol=1e-5)
    square = ids[:2900].view(100, 29)
    torch.testing.assert_close(module(square), reference(square), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_backward_is_torchs_sparse_sgd_step(rt: Any, mode: str) -> None:
    lr = 0.25
    module = PagedEmbeddingBag(ROWS, DIM, runtime=rt, mode=mode, lr=lr, seed=10)
    reference = torch.nn.EmbeddingBag.from_pretrained(
        module.weight_host().clone().to(DEVICE), mode=mode, freeze=False, sparse=True
    )
    optimizer = torch.optim.SGD(reference.parameters(), lr=lr)
    ids = skewed_ids((5000,), ROWS, seed=5)
    offsets = torch.arange(0, 5000, 25, device=DEVICE)
    target = torch.randn(200, DIM, device=DEVICE)
    (module(ids, offsets) - target).pow(2).sum().backward()
    (reference(ids, offsets) - target).pow(2).sum().backward()
    optimizer.step()
    torch.testing.assert_close(module.weight_host(), reference.weight.detach().cpu(), **UPDATE_TOLERANCE)


def test_per_sample_weights_get_torchs_gradient(rt: Any) -> None:
    lr = 0.1
    module = PagedEmbeddingBag(ROWS, DIM, runtime=rt, mode="sum", lr=lr, seed=11)
    reference = torch.nn.EmbeddingBag.from_pretrained(
        module.weight_host().clone().to(DEVICE), mode="sum", freeze=False, sparse=True
    )
    optimizer = torch.optim.SGD(reference.parameters(), lr=lr)
    ids = skewed_ids((2000,), ROWS, seed=6)
    offsets = torch.arange(0, 2000, 40, device=DEVICE)
    weights = torch.rand(2000, device=DEVICE, requires_grad=True)
    reference_weights = weights.detach().clone().requires_grad_()
    target = torch.randn(50, DIM, device=DEVICE)
    (module(ids, offsets, per_sample_weights=weights) * target).sum().backward()
    (reference(ids, offsets, per_sample_weights=reference_weights) * target).sum().backward()
    optimizer.step()
    torch.testing.assert_close(weights.grad, reference_weights.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(module.weight_host(), reference.weight.detach().cpu(), **UPDATE_TOLERANCE)


def test_embedding_bag_refuses_what_torch_refuses(rt: Any) -> None:
    with pytest.raises(ValueError, match="'sum' or 'mean'"):
        PagedEmbeddingBag(10, 16, runtime=rt, mode="max")
    module = PagedEmbeddingBag(100, 16, runtime=rt, mode="mean")
    ids = torch.arange(10, device=DEVICE)
    with pytest.raises(ValueError, match="per_sample_weights need mode 'sum'"):
        module(ids, torch.tensor([0, 5], device=DEVICE), per_sample_weights=torch.ones(10, device=DEVICE))
    with pytest.raises(ValueError, match="1-D ids with offsets"):
        module(ids)


def test_ops_take_torch_tensors_as_capsules_and_refuse_an_out_that_needs_grad(rt: Any) -> None:
    table = rt.empty((1000, 8), "float32", name="table")
    table.host[:] = np.random.default_rng(5).standard_normal((1000, 8), dtype=np.float32)
    ids = torch.randint(1000, (300,), device=DEVICE)
    reference = torch.from_numpy(table.host.copy()).to(DEVICE)[ids]
    assert torch.equal(warpvm.gather(table, ids), reference)
    out = torch.zeros((300, 8), device=DEVICE)
    assert warpvm.gather(table, ids, out=out) is out
    assert torch.equal(out, reference)
    # A slice is exported with its strides, so the extension still sees it is not contiguous.
    with pytest.raises(warpvm.Error, match="ids must be C-contiguous"):
        warpvm.gather(table, torch.arange(20, device=DEVICE)[::2])
    tracked = torch.zeros((300, 8), device=DEVICE, requires_grad=True)
    with pytest.raises(warpvm.Error, match="out must not require grad") as info:
        warpvm.gather(table, ids, out=tracked)
    assert info.value.kind is warpvm.ErrorKind.invalid_argument
    assert not tracked.detach().any()


# --- PyG -------------------------------------------------------------------------------------


@pytest.fixture
def pyg() -> Any:
    return pytest.importorskip("torch_geometric", reason="PagedFeatureStore needs torch_geometric")


def test_feature_store_serves_every_index_kind(rt: Any, pyg: Any) -> None:
    from warpvm.torch import PagedFeatureStore

    store = PagedFeatureStore(rt)
    x = torch.randn(ROWS, DIM)
    y = torch.randint(0, 1000, (ROWS, 4), dtype=torch.int64)
    assert store.put_tensor(x, group_name=None, attr_name="x", index=None)
    store["paper", "y", None] = y
    assert {(a.group_name, a.attr_name) for a in store.get_all_tensor_attrs()} == {
        (None, "x"),
        ("paper", "y"),
    }
    assert store.get_tensor_size(None, "x") == (ROWS, DIM)
    ids = skewed_ids((5000,), ROWS, seed=7)
    got = store.get_tensor(None, "x", ids)
    assert got.device == DEVICE and torch.equal(got.cpu(), x[ids.cpu()])
    assert torch.equal(store.get_tensor(None, "x", slice(10, 500, 7)).cpu(), x[10:500:7])
    assert torch.equal(store.get_tensor(None, "x", 123).cpu(), x[123])
    assert torch.equal(store["paper", "y", ids].cpu(), y[ids.cpu()])
    assert torch.equal(store.get_tensor(None, "x", None), x)
    rows = torch.tensor([5, 77, ROWS - 1])
    store.put_tensor(torch.full((3, DIM), 2.5), group_name=None, attr_name="x", index=rows)
    assert torch.equal(store.get_tensor(None, "x", rows.to(DEVICE)).cpu(), torch.full((3, DIM), 2.5))
    assert store.remove_tensor(None, "x", None) and not store.remove_tensor(None, "x", None)
    assert store.get_tensor_size(None, "x") is None
    with pytest.raises(KeyError):
        store.get_tensor(None, "x", ids)


def test_warpvm_sampler_draws_real_edges_within_the_fanout(rt: Any, pyg: Any) -> None:
    from torch_geometric.sampler import NodeSamplerInput

    from warpvm.torch import graphsage
    from warpvm.torch.pyg import WarpvmNeighborSampler

    graph = graphsage.rmat_graph(ROWS, 4, seed=4, device=DEVICE)
    colptr, row = graph.paged_csc(rt)
    fanout = (4, 3)
    sampler = WarpvmNeighborSampler(colptr, row, fanout, DEVICE)
    seeds = torch.randperm(ROWS)[:300]
    out = sampler.sample_from_nodes(NodeSamplerInput(input_id=torch.arange(300), node=seeds))
    assert torch.equal(out.node[:300], seeds)
    assert torch.equal(out.metadata[0], torch.arange(300))
    assert len(torch.unique(out.node)) == out.node.numel() == sum(out.num_sampled_nodes)
    edges = set(zip(graph.row.tolist(), graph.col().tolist(), strict=True))
    sources, destinations = out.node[out.row], out.node[out.col]
    assert all(edge in edges for edge in zip(sources.tolist(), destinations.tolist(), strict=True))
    # Layer one: each seed gets min(degree, 4) distinct in-neighbours.
    first = out.num_sampled_edges[0]
    degrees = (graph.colptr[1:] - graph.colptr[:-1])[seeds]
    per_seed = torch.bincount(out.col[:first], minlength=300)
    assert torch.equal(per_seed, torch.clamp(degrees, max=fanout[0]))
    pairs = set(zip(out.row[:first].tolist(), out.col[:first].tolist(), strict=True))
    assert len(pairs) == first


@pytest.mark.parametrize("sampler", ["warpvm", "pyg"])
def test_loaders_read_features_from_warpvm(rt: Any, pyg: Any, sampler: str) -> None:
    from warpvm.torch import graphsage

    if sampler == "pyg" and graphsage.sampling_backend() is None:
        pytest.skip("NeighborLoader needs pyg-lib or torch-sparse to sample")
    graph = graphsage.rmat_graph(ROWS, 4, seed=1, device=DEVICE)
    degrees = graph.colptr[1:] - graph.colptr[:-1]
    assert graph.colptr[-1] == graph.num_edges and int(degrees.min()) >= 0
    assert torch.all(graph.col()[:-1] <= graph.col()[1:])
    features = rt.empty((ROWS, DIM), "float32", name="features")
    labels = graphsage.fill_features(host_tensor(features), classes=5, seed=2, device=DEVICE)
    reference = host_tensor(features).clone()
    options = graphsage.LoaderOptions(batch_size=256, fanout=(5, 5), sampler=sampler)
    common: dict[str, Any] = {"hidden": 32, "steps": 6, "lr": 0.01, "seed": 3}
    paged = graphsage.run_mode(
        "warpvm",
        graph,
        options,
        rt,
        labels,
        DIM,
        stores=graphsage.feature_store(rt, features),
        check=graphsage.features_checker(reference),
        **common,
    )
    cpu = graphsage.run_mode("cpu_gather", graph, options, rt, labels, DIM, cpu_features=reference, **common)
    device = graphsage.run_mode(
        "device", graph, options, rt, labels, DIM, device_features=reference.to(DEVICE), **common
    )
    assert len(paged.losses) == len(cpu.losses) == len(device.losses) == 6
    assert all(np.isfinite(paged.losses)) and all(np.isfinite(cpu.losses))
    assert sum(paged.nodes) > 6 * 256
    if sampler == "warpvm":  # the same draws from the same seed: the same batches
        assert paged.nodes == cpu.nodes == device.nodes
        assert graphsage.max_difference(paged.losses, cpu.losses) < 1e-3
        assert graphsage.max_difference(paged.losses, device.losses) < 1e-3

"""warpvm's ops (gather, embedding_bag, index_add, sample_neighbors). Without a GPU: streams,
frameworks and the checks made before any GPU call. With one (and torch or cupy): each op
against a numpy reference on random inputs, and bad inputs raise and touch nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gpu_arrays import Backend, gpu_backend

import warpvm
from warpvm import interop, ops

# ---- no GPU needed -----------------------------------------------------------------------------


class StreamProtocol:
    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0xABC)


class TorchLikeStream:
    cuda_stream = 0x1234


class CupyLikeStream:
    ptr = 0x5678


def test_stream_handles() -> None:
    assert interop.stream_handle(None, "", object()) == 0  # the legacy default stream
    assert interop.stream_handle(None, "jax", object()) == 0
    assert interop.stream_handle(42, "torch", object()) == 42
    assert interop.stream_handle(StreamProtocol(), "", None) == 0xABC
    assert interop.stream_handle(TorchLikeStream(), "", None) == 0x1234
    assert interop.stream_handle(CupyLikeStream(), "", None) == 0x5678
    for bad in ("stream", 1.5, True, -1, object()):
        with pytest.raises(TypeError):
            interop.stream_handle(bad, "", None)


def make_type(module: str) -> Any:
    return type("Tensor", (), {"__module__": module})()


def test_frameworks_come_from_the_type_module() -> None:
    assert interop.framework_of(make_type("torch")) == "torch"
    assert interop.framework_of(make_type("cupy._core.core")) == "cupy"
    assert interop.framework_of(make_type("jaxlib.xla_extension")) == "jax"
    assert interop.framework_of(make_type("jax._src.array")) == "jax"
    assert interop.framework_of(np.zeros(1)) == ""


def test_the_package_imports_no_framework() -> None:
    import subprocess
    import sys

    code = (
        "import sys, warpvm, warpvm.ops; "
        "print(sorted(m for m in ('torch', 'cupy', 'jax') if m in sys.modules))"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        == "[]\n"
    )


def test_ops_are_exported() -> None:
    assert warpvm.gather is ops.gather
    assert warpvm.embedding_bag is ops.embedding_bag
    assert warpvm.index_add is ops.index_add
    assert warpvm.sample_neighbors is ops.sample_neighbors


def test_arguments_checked_before_any_gpu_call() -> None:
    ids = np.zeros(4, dtype=np.int64)
    with pytest.raises(TypeError, match="gather: table must be a warpvm.PagedArray"):
        warpvm.gather(np.zeros((4, 4)), ids)
    with pytest.raises(TypeError, match="index_add: table must be a warpvm.PagedArray"):
        warpvm.index_add("table", ids, ids)
    with pytest.raises(warpvm.Error, match="mode must be 'sum' or 'mean'") as info:
        warpvm.embedding_bag(None, ids, ids, mode="max")
    assert info.value.kind is warpvm.ErrorKind.invalid_argument
    with pytest.raises(warpvm.Error, match="per_sample_weights are only for mode 'sum'"):
        warpvm.embedding_bag(None, ids, ids, mode="mean", per_sample_weights=ids)
    for fanout in (0, -3, 2.5, True):
        with pytest.raises(warpvm.Error, match="fanout must be a positive int"):
            warpvm.sample_neighbors(None, None, ids, fanout)
    with pytest.raises(warpvm.Error, match="seed must be an int"):
        warpvm.sample_neighbors(None, None, ids, 10, seed=-1)
    with pytest.raises(TypeError, match="sample_neighbors: indptr must be a warpvm.PagedArray"):
        warpvm.sample_neighbors(None, None, ids, 10)


# ---- on the GPU --------------------------------------------------------------------------------

DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64", "uint8")
CACHES = ("64MiB", "1MiB")  # in core; a quarter of the 4 MiB tables


@pytest.fixture
def gpu() -> Backend:
    return gpu_backend()


def random_table(rng: np.random.Generator, rows: int, dim: int, dtype: str) -> np.ndarray:
    """Small integers (exact in every dtype and in sums), as numpy; bfloat16 as its uint16 bits."""
    values = rng.integers(0 if dtype == "uint8" else -8, 9, size=(rows, dim))
    if dtype == "bfloat16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return values.astype(dtype)


def paged(
    rt: warpvm.Runtime, table: np.ndarray, dtype: str, placement: str = "automatic"
) -> warpvm.PagedArray:
    if dtype == "bfloat16":  # numpy has no bfloat16: fill the bits through the host view
        array = rt.empty(table.shape, "bfloat16", placement=placement, name="table")
        array.host.view(np.uint16)[:] = table
        return array
    return rt.adopt(table, placement=placement, name="table")


def as_float(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float64)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_matches_numpy(gpu: Backend, dtype: str, cache: str) -> None:
    rng = np.random.default_rng(DTYPES.index(dtype))
    dim = 100  # 100 elements a row: rows straddle pages
    rows = (4 << 20) // (dim * np.dtype(np.uint16 if dtype == "bfloat16" else dtype).itemsize)
    table = random_table(rng, rows, dim, dtype)
    with warpvm.Runtime(cache=cache) as rt:
        features = paged(rt, table, dtype)
        for ids_type in (np.int32, np.int64):
            ids = rng.integers(0, rows, size=5000).astype(ids_type)
            out = warpvm.gather(features, gpu.to_gpu(ids))
            assert out.shape == (5000, dim)
            assert np.array_equal(gpu.to_numpy(out), table[ids])
        one_d = rt.adopt(np.ascontiguousarray(rng.integers(0, 100, size=rows).astype(np.int64)))
        ids = rng.integers(0, rows, size=999)
        assert np.array_equal(gpu.to_numpy(warpvm.gather(one_d, gpu.to_gpu(ids))), one_d.host[ids])


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", ("float16", "float32", "float64"))
@pytest.mark.parametrize("mode", ("sum", "mean"))
def test_embedding_bag_matches_numpy(gpu: Backend, dtype: str, mode: str, cache: str) -> None:
    rng = np.random.default_rng(7)
    rows, dim = (2 << 20) // (64 * np.dtype(dtype).itemsize), 64
    table = (rng.integers(-100, 101, size=(rows, dim)) / 64).astype(dtype)
    sizes = rng.integers(0, 9, size=300)  # empty bags among them
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    ids = rng.integers(0, rows, size=int(sizes.sum())).astype(np.int64)
    weights = (rng.integers(-4, 5, size=ids.size) / 4).astype(dtype) if mode == "sum" else None
    expected = np.zeros((sizes.size, dim))
    for b, (start, size) in enumerate(zip(offsets, sizes, strict=True)):
        rows_of_bag = table[ids[start : start + size]].astype(np.float64)
        if weights is not None:
            rows_of_bag = rows_of_bag * weights[start : start + size, None]
        if size:
            expected[b] = rows_of_bag.sum(0) / (size if mode == "mean" else 1)
    with warpvm.Runtime(cache=cache) as rt:
        embeddings = rt.adopt(table)
        for include_last in (False, True):
            bag_offsets = np.append(offsets, ids.size) if include_last else offsets
            out = warpvm.embedding_bag(
                embeddings,
                gpu.to_gpu(ids),
                gpu.to_gpu(bag_offsets),
                mode=mode,
                per_sample_weights=None if weights is None else gpu.to_gpu(weights),
                include_last_offset=include_last,
            )
            tolerance = 1e-2 if dtype == "float16" else 1e-5
            np.testing.assert_allclose(
                gpu.to_numpy(out).astype(np.float64), expected, rtol=tolerance, atol=tolerance
            )


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", ("float16", "bfloat16", "float32", "float64", "int32", "int64"))
def test_index_add_adds_duplicates_and_flush_lands_them(gpu: Backend, dtype: str, cache: str) -> None:
    rng = np.random.default_rng(11)
    rows, dim = 8000, 100
    table = random_table(rng, rows, dim, dtype)
    ids = rng.integers(0, rows // 4, size=rows)  # each added about 4 times
    values = random_table(rng, ids.size, dim, dtype)
    expected = as_float(table, dtype)
    np.add.at(expected, ids, as_float(values, dtype))
    with warpvm.Runtime(cache=cache) as rt:
        accumulators = paged(rt, table, dtype)
        warpvm.index_add(accumulators, gpu.to_gpu(ids), gpu.to_gpu_as(values, dtype))
        rt.flush()
        got = accumulators.host.view(np.uint16) if dtype == "bfloat16" else accumulators.host
        assert np.array_equal(as_float(np.asarray(got), dtype), expected)


def random_csr(rng: np.random.Generator, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    degrees = rng.integers(0, 40, size=nodes)
    indptr = np.concatenate(([0], np.cumsum(degrees))).astype(np.int64)
    indices = np.concatenate([rng.choice(nodes, size=d, replace=False) for d in degrees]).astype(np.int64)
    return indptr, indices


@pytest.mark.parametrize("cache", CACHES)
def test_sample_neighbors_is_a_uniform_reproducible_subset(gpu: Backend, cache: str) -> None:
    rng = np.random.default_rng(13)
    nodes, fanout = 20000, 10
    indptr, indices = random_csr(rng, nodes)
    seeds = rng.integers(0, nodes, size=2000)
    with warpvm.Runtime(cache=cache) as rt:
        graph = (rt.adopt(indptr, name="indptr"), rt.adopt(indices.astype(np.int32), name="indices"))
        out_indptr, out_indices = warpvm.sample_neighbors(*graph, gpu.to_gpu(seeds), fanout, seed=5)
        again = warpvm.sample_neighbors(*graph, gpu.to_gpu(seeds), fanout, seed=5)
        other = warpvm.sample_neighbors(*graph, gpu.to_gpu(seeds), fanout, seed=6)
        out_indptr, out_indices = gpu.to_numpy(out_indptr), gpu.to_numpy(out_indices)
    degrees = indptr[seeds + 1] - indptr[seeds]
    assert np.array_equal(np.diff(out_indptr), np.minimum(degrees, fanout))
    for i, node in enumerate(seeds):
        sample = out_indices[out_indptr[i] : out_indptr[i + 1]]
        neighbours = indices[indptr[node] : indptr[node + 1]]
        if degrees[i] <= fanout:
            assert np.array_equal(sample, neighbours)
        else:
            assert len(set(sample.tolist())) == fanout
            assert set(sample.tolist()) <= set(neighbours.tolist())
    assert np.array_equal(gpu.to_numpy(again[1]), out_indices)
    assert not np.array_equal(gpu.to_numpy(other[1]), out_indices)


def test_bad_ids_raise_and_touch_nothing(gpu: Backend) -> None:
    rng = np.random.default_rng(17)
    table = rng.random((1000, 16), dtype=np.float32)
    with warpvm.Runtime(cache="64MiB") as rt:
        features = rt.adopt(table.copy(), name="features")
        for bad in (1000, -1):
            out = gpu.to_gpu(np.full((3, 16), -7.0, dtype=np.float32))
            warpvm.gather(features, gpu.to_gpu(np.array([1, bad, 2])), out=out)
            with pytest.raises(
                warpvm.Error, match=f"gather: ids holds {bad}, out of range for table 'features'"
            ) as info:
                rt.synchronize()
            assert info.value.kind is warpvm.ErrorKind.index_out_of_range
            assert np.all(gpu.to_numpy(out) == -7.0)
        warpvm.index_add(
            features, gpu.to_gpu(np.array([3, 4, 1000])), gpu.to_gpu(np.ones((3, 16), np.float32))
        )
        with pytest.raises(warpvm.Error, match="index_add: ids holds 1000"):
            rt.flush()
        rt.flush()
        assert np.array_equal(features.host, table)
        with pytest.raises(warpvm.Error, match="embedding_bag: offsets hold 9"):
            warpvm.embedding_bag(features, gpu.to_gpu(np.array([1, 2])), gpu.to_gpu(np.array([0, 9])))
            rt.synchronize()
        indptr = rt.adopt(np.array([0, 1, 2], dtype=np.int64))
        indices = rt.adopt(np.array([1, 0], dtype=np.int64))
        with pytest.raises(warpvm.Error, match="sample_neighbors: seeds holds 2"):
            warpvm.sample_neighbors(indptr, indices, gpu.to_gpu(np.array([0, 2])), 3)


def test_bad_arguments_raise_before_anything_is_queued(gpu: Backend) -> None:
    with warpvm.Runtime(cache="64MiB") as rt:
        features = rt.empty((100, 8), "float32", name="features")
        ids = gpu.to_gpu(np.arange(4))

        def refused(call: Any, message: str) -> None:
            with pytest.raises(warpvm.Error, match=message) as info:
                call()
            assert info.value.kind is warpvm.ErrorKind.invalid_argument

        refused(
            lambda: warpvm.gather(features, gpu.to_gpu(np.arange(4.0))), "ids must be a 1-D int32 or int64"
        )
        refused(lambda: warpvm.gather(features, gpu.to_gpu(np.zeros((2, 2), np.int64))), "ids must be a 1-D")
        refused(lambda: warpvm.gather(features, np.arange(4)), "ids must be on the runtime's GPU")
        refused(lambda: warpvm.gather(features, gpu.to_gpu(np.arange(8))[::2]), "ids must be C-contiguous")
        refused(
            lambda: warpvm.gather(features, ids, out=gpu.to_gpu(np.zeros((4, 9), np.float32))),
            "out must have shape",
        )
        refused(
            lambda: warpvm.gather(features, ids, out=gpu.to_gpu(np.zeros((4, 8)))),
            "out must have the table's dtype",
        )
        refused(
            lambda: warpvm.index_add(features, ids, gpu.to_gpu(np.zeros((3, 8), np.float32))),
            "values must have shape",
        )
        integers = rt.empty(100, "int64")
        other = warpvm.Runtime(cache="16MiB")
        foreign = other.empty(100, "int64")
        refused(lambda: warpvm.sample_neighbors(integers, foreign, ids, 3), "must belong to the same Runtime")
        other.close()
        refused(lambda: warpvm.sample_neighbors(integers, foreign, ids, 3), "closed")
    refused(lambda: warpvm.gather(features, ids), "closed")

"""warpvm.PagedArray and the Runtime calls around it. Dtype and placement names need no GPU; the
rest skips without one."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import warpvm
from warpvm import interop

GPU_VISIBLE = warpvm.device_count() > 0
needs_gpu = pytest.mark.skipif(not GPU_VISIBLE, reason="no CUDA device visible: GPU test skipped")


class FakeTorchDtype:
    """Prints as torch dtypes do, from a type whose module is torch (torch itself is optional)."""

    __module__ = "torch"

    def __init__(self, name: str) -> None:
        self.name_ = name

    def __str__(self) -> str:
        return f"torch.{self.name_}"


@pytest.mark.parametrize("name", interop.DTYPES)
def test_dtype_names_come_from_strings_numpy_and_torch(name: str) -> None:
    assert interop.dtype_name(name) == name
    assert interop.dtype_name(FakeTorchDtype(name)) == name
    if name != "bfloat16":  # numpy has none (ml_dtypes adds one, named bfloat16 too)
        assert interop.dtype_name(np.dtype(name)) == name
        assert interop.dtype_name(getattr(np, name)) == name


def test_dtype_aliases_and_refusals() -> None:
    assert interop.dtype_name("float") == "float32"
    assert interop.dtype_name("half") == "float16"
    assert interop.dtype_name("long") == "int64"
    for bad in ("complex64", np.dtype("int16"), FakeTorchDtype("bool"), 3):
        with pytest.raises(warpvm.Error) as info:
            interop.dtype_name(bad)
        assert info.value.kind is warpvm.ErrorKind.invalid_argument
        assert "is not one of float16, bfloat16" in str(info.value)


def test_placement_names() -> None:
    for name in interop.PLACEMENTS:
        assert interop.placement_name(name) == name
    with pytest.raises(warpvm.Error, match="placement 'pinned' is not one of automatic"):
        interop.placement_name("pinned")


def test_paged_array_is_exported_with_its_api() -> None:
    assert warpvm.PagedArray is warpvm.runtime.PagedArray
    for attribute in ("shape", "dtype", "nbytes", "placement", "name", "host", "closed", "device"):
        assert hasattr(warpvm.PagedArray, attribute), attribute
    for method in ("empty", "adopt", "flush", "drop_cached", "synchronize", "stats"):
        assert callable(getattr(warpvm.Runtime, method)), method


@needs_gpu
def test_empty_has_shape_dtype_and_a_writable_host_view() -> None:
    with warpvm.Runtime(cache="64MiB") as rt:
        a = rt.empty((1000, 24), "float32", name="features")
        assert (a.shape, a.dtype, a.nbytes, a.name, a.placement) == (
            (1000, 24),
            "float32",
            96000,
            "features",
            "automatic",
        )
        assert len(a) == 1000
        rng = np.random.default_rng(1)
        values = rng.random((1000, 24), dtype=np.float32)
        a.host[:] = values
        rt.drop_cached()
        assert np.array_equal(a.host, values)
        b = rt.empty(77, np.int64, placement="remote")
        assert (b.shape, b.dtype, b.placement) == ((77,), "int64", "remote")
        assert b.name.startswith("object#")


@needs_gpu
def test_adopt_shares_memory_and_keeps_the_source_alive() -> None:
    with warpvm.Runtime(cache="64MiB") as rt:
        source = np.arange(4096, dtype=np.int32).reshape(512, 8)
        a = rt.adopt(source, placement="migrate", name="adopted")
        assert (a.shape, a.dtype, a.placement) == ((512, 8), "int32", "migrate")
        source[3, 4] = -5
        assert a.host[3, 4] == -5  # the same memory, no copy
        del source
        gc.collect()
        assert a.host[3, 5] == 3 * 8 + 5  # still alive through the paged array


@needs_gpu
def test_placement_is_settable_and_checked() -> None:
    with warpvm.Runtime(cache="64MiB", resident="4MiB") as rt:
        a = rt.empty(1 << 16, "float32")
        for placement in ("migrate", "remote", "resident", "automatic"):
            a.placement = placement
            assert a.placement == placement
        with pytest.raises(warpvm.Error) as info:
            a.placement = "pinned"
        assert info.value.kind is warpvm.ErrorKind.invalid_argument


@needs_gpu
def test_bad_arrays_are_refused() -> None:
    with warpvm.Runtime(cache="64MiB") as rt:
        for shape in ((0,), (2, 3, 4), (), (5, -1)):
            with pytest.raises(warpvm.Error) as info:
                rt.empty(shape, "float32")
            assert info.value.kind is warpvm.ErrorKind.invalid_argument
        with pytest.raises(warpvm.Error, match="C-contiguous"):
            rt.adopt(np.zeros((64, 64), dtype=np.float32)[:, ::2])
        with pytest.raises(warpvm.Error, match="dtype"):
            rt.adopt(np.zeros(64, dtype=np.int16))
        with pytest.raises(TypeError):
            rt.adopt("not an array")


@needs_gpu
def test_bfloat16_host_view() -> None:
    with warpvm.Runtime(cache="64MiB") as rt:
        a = rt.empty((16, 4), "bfloat16")
        try:
            import ml_dtypes
        except ImportError:
            assert a.host.dtype == np.uint16
        else:
            assert a.host.dtype == ml_dtypes.bfloat16
        assert a.host.shape == (16, 4)


@needs_gpu
def test_closing_the_runtime_invalidates_its_arrays() -> None:
    rt = warpvm.Runtime(cache="64MiB")
    a = rt.empty(1024, "float64", name="doomed")
    view = a.host
    view[:] = 2.5
    rt.close()
    assert a.closed
    for use in (lambda: a.host, lambda: a.placement, lambda: a.device):
        with pytest.raises(warpvm.Error, match="closed"):
            use()
    assert view[7] == 2.5  # views taken before stay valid: the memory is the array's own
    assert "closed" in repr(a)


@needs_gpu
def test_stats_is_a_dict_of_counters() -> None:
    with warpvm.Runtime(cache="64MiB") as rt:
        stats = rt.stats()
        assert set(stats) == {"hits", "misses", "waits", "evictions", "writebacks", "bytes_in", "bytes_out"}
        assert all(isinstance(v, int) for v in stats.values())
        rt.flush()
        rt.synchronize()

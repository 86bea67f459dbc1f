"""The measurements of `warpvm bench torch`; warpvm.bench_torch has the grid, the ids and the
records, and docs/bench/torch.md says what each workload and mode does.

One table (pinned host memory, a warpvm PagedArray) serves the points of one size and dtype.
The modes read it as follows:
- warpvm: warpvm.gather / embedding_bag / index_add on the PagedArray (automatic placement),
  the cache emptied before each point;
- cpu_gather: torch on the CPU over the same host memory (index_select into a pinned buffer,
  then a non-blocking copy to the GPU), as a CPU feature loader does;
- zero_copy: CuPy kernels that read the pinned host table in place over the link;
- managed: torch on a copy in CUDA managed memory (cupy.cuda.malloc_managed), in core only;
- device: torch on a copy in GPU memory, in core only.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import warpvm
from warpvm.bench_torch import Context, Measurement, Point, Settings, VerificationError, batch_ids
from warpvm.torch.embedding import drop_cached, fill_normal, flush, host_tensor

try:
    import cupy
except ImportError:  # zero_copy and managed are then skipped, saying so
    cupy = None

# Headroom left in GPU memory beside a copy of the table (managed, device modes).
_GPU_HEADROOM_BYTES = 2 << 30
# Untimed calls before the timed ones (call overhead).
_CALL_WARMUP = 100
_GRAPHSAGE_WARMUP_STEPS = 2
_GRAPHSAGE_HIDDEN = 128
_GRAPHSAGE_CLASSES = 16
_GRAPHSAGE_EDGE_FACTOR = 8
_GRAPHSAGE_LR = 0.003

# A warp per row (gather) or per bag (sum); the host table is read in place through its device
# pointer. Rows are a multiple of 16 bytes (bench_torch.Settings checks).
_ZERO_COPY_KERNELS = r"""
extern "C" __global__ void gather_rows(const uint4* __restrict__ table, const long long* __restrict__ ids,
                                       uint4* __restrict__ out, long long count, int words_per_row) {
  const long long warps = (long long)gridDim.x * blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; i < count; i += warps) {
    const uint4* row = table + ids[i] * words_per_row;
    for (int w = lane; w < words_per_row; w += 32) out[i * words_per_row + w] = row[w];
  }
}

extern "C" __global__ void bag_sum_rows(const float* __restrict__ table, const long long* __restrict__ ids,
                                        const long long* __restrict__ offsets, float* __restrict__ out,
                                        long long bags, long long count, int dim) {
  const long long warps = (long long)gridDim.x * blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (long long bag = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; bag < bags; bag += warps) {
    const long long begin = offsets[bag], end = bag + 1 < bags ? offsets[bag + 1] : count;
    for (int d = lane; d < dim; d += 32) {
      float sum = 0.0f;
      for (long long k = begin; k < end; ++k) sum += table[ids[k] * dim + d];
      out[bag * dim + d] = sum;
    }
  }
}
"""


@dataclass
class IdBatch:
    """One batch: ids (and bag offsets) on the CPU and on the GPU, and index_add's values."""

    ids_cpu: torch.Tensor
    ids: torch.Tensor
    offsets_cpu: torch.Tensor
    offsets: torch.Tensor
    values_cpu: torch.Tensor
    values: torch.Tensor

    @staticmethod
    def make(
        ids: np.ndarray, pooling: int, values: tuple[torch.Tensor, torch.Tensor], device: torch.device
    ) -> IdBatch:
        """A batch of `ids` with index_add's `values` (on the CPU, pinned, and on the GPU), which
        the batches of a point share: a 1M x 128 float32 batch of values takes 512 MiB."""
        ids_cpu = torch.from_numpy(ids).pin_memory()
        offsets_cpu = torch.arange(0, len(ids), pooling, dtype=torch.int64).pin_memory()
        return IdBatch(ids_cpu, ids_cpu.to(device), offsets_cpu, offsets_cpu.to(device), *values)

    @staticmethod
    def values(count: int, dim: int, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        generator = torch.Generator(device=device).manual_seed(seed)
        values = torch.randn(count, dim, generator=generator, device=device) * 1e-3
        return values.cpu().pin_memory(), values


class Table:
    """One mode's access to the table. rows() reads the mode's own copy, exactly."""

    def gather(self, batch: IdBatch) -> torch.Tensor:
        raise NotImplementedError

    def embedding_bag(self, batch: IdBatch) -> torch.Tensor:
        raise NotImplementedError

    def index_add(self, batch: IdBatch) -> None:
        raise NotImplementedError

    def rows(self, ids_cpu: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class WarpvmTable(Table):
    def __init__(self, runtime: warpvm.Runtime, array: warpvm.PagedArray) -> None:
        self.runtime, self.array = runtime, array

    def gather(self, batch: IdBatch) -> torch.Tensor:
        return warpvm.gather(self.array, batch.ids)

    def embedding_bag(self, batch: IdBatch) -> torch.Tensor:
        return warpvm.embedding_bag(self.array, batch.ids, batch.offsets, mode="sum")

    def index_add(self, batch: IdBatch) -> None:
        warpvm.index_add(self.array, batch.ids, batch.values)

    def rows(self, ids_cpu: torch.Tensor) -> torch.Tensor:
        flush(self.runtime)
        return host_tensor(self.array).index_select(0, ids_cpu)


class DeviceTable(Table):
    """torch's own GPU ops over a tensor in GPU-visible memory (device or managed)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def gather(self, batch: IdBatch) -> torch.Tensor:
        return self.tensor.index_select(0, batch.ids)

    def embedding_bag(self, batch: IdBatch) -> torch.Tensor:
        return F.embedding_bag(batch.ids, self.tensor, batch.offsets, mode="sum")

    def index_add(self, batch: IdBatch) -> None:
        self.tensor.index_add_(0, batch.ids, batch.values)

    def rows(self, ids_cpu: torch.Tensor) -> torch.Tensor:
        return self.tensor.index_select(0, ids_cpu.to(self.tensor.device)).cpu()


class ManagedTable(DeviceTable):
    """A copy in CUDA managed memory (cupy.cuda.malloc_managed), seen by torch without a copy."""

    def __init__(self, host: torch.Tensor, device: torch.device) -> None:
        with cupy.cuda.Device(device.index):
            self.memory = cupy.cuda.malloc_managed(host.numel() * host.element_size())
            array = cupy.ndarray(tuple(host.shape), dtype=_numpy_dtype(host.dtype), memptr=self.memory)
        tensor = torch.as_tensor(array, device=device)
        tensor.copy_(host)
        super().__init__(tensor)


class CpuGatherTable(Table):
    """The CPU gathers from host memory; the result goes to the GPU (pinned, non-blocking)."""

    def __init__(self, host: torch.Tensor, device: torch.device) -> None:
        self.host, self.device = host, device
        self.staging: torch.Tensor | None = None

    def gather(self, batch: IdBatch) -> torch.Tensor:
        shape = (batch.ids_cpu.numel(), self.host.shape[1])
        if self.staging is None or tuple(self.staging.shape) != shape:
            self.staging = torch.empty(shape, dtype=self.host.dtype, pin_memory=True)
        torch.index_select(self.host, 0, batch.ids_cpu, out=self.staging)
        return self.staging.to(self.device, non_blocking=True)

    def embedding_bag(self, batch: IdBatch) -> torch.Tensor:
        pooled = F.embedding_bag(batch.ids_cpu, self.host, batch.offsets_cpu, mode="sum")
        return pooled.pin_memory().to(self.device, non_blocking=True)

    def index_add(self, batch: IdBatch) -> None:
        self.host.index_add_(0, batch.ids_cpu, batch.values.to("cpu", non_blocking=False))

    def rows(self, ids_cpu: torch.Tensor) -> torch.Tensor:
        return self.host.index_select(0, ids_cpu)


class ZeroCopyTable(Table):
    """CuPy kernels read the pinned host table in place through its device pointer."""

    _module: Any = None

    def __init__(self, host: torch.Tensor, device: torch.device) -> None:
        self.host, self.device = host, device
        # Pinned memory is mapped at the same address on the device (unified virtual addressing,
        # every 64-bit CUDA platform), which is what cudaHostGetDevicePointer would return.
        self.pointer = host.data_ptr()
        if ZeroCopyTable._module is None:
            module = cupy.RawModule(code=_ZERO_COPY_KERNELS)
            for name in ("gather_rows", "bag_sum_rows"):  # compiles now: errors surface here
                module.get_function(name)
            ZeroCopyTable._module = module
        self.blocks = torch.cuda.get_device_properties(device).multi_processor_count * 8

    def _launch(self, name: str, *args: Any) -> None:
        kernel = ZeroCopyTable._module.get_function(name)
        with (
            cupy.cuda.Device(self.device.index),
            cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream),
        ):
            kernel((self.blocks,), (256,), args)

    def gather(self, batch: IdBatch) -> torch.Tensor:
        count = batch.ids.numel()
        out = torch.empty(count, self.host.shape[1], dtype=self.host.dtype, device=self.device)
        words = self.host.shape[1] * self.host.element_size() // 16
        self._launch(
            "gather_rows",
            np.uint64(self.pointer),
            np.uint64(batch.ids.data_ptr()),
            np.uint64(out.data_ptr()),
            np.int64(count),
            np.int32(words),
        )
        return out

    def embedding_bag(self, batch: IdBatch) -> torch.Tensor:
        if self.host.dtype != torch.float32:
            raise NotImplementedError("zero_copy embedding_bag sums float32 tables")
        bags = batch.offsets.numel()
        out = torch.empty(bags, self.host.shape[1], dtype=torch.float32, device=self.device)
        self._launch(
            "bag_sum_rows",
            np.uint64(self.pointer),
            np.uint64(batch.ids.data_ptr()),
            np.uint64(batch.offsets.data_ptr()),
            np.uint64(out.data_ptr()),
            np.int64(bags),
            np.int64(batch.ids.numel()),
            np.int32(self.host.shape[1]),
        )
        return out

    def rows(self, ids_cpu: torch.Tensor) -> torch.Tensor:
        return self.host.index_select(0, ids_cpu)


def _numpy_dtype(dtype: torch.dtype) -> Any:
    return {torch.float32: np.float32, torch.float16: np.float16}[dtype]


def time_on_stream(run: Callable[[int], object], repeats: int) -> list[float]:
    """Seconds of runs 1..`repeats` after an untimed run 0, by CUDA events on the current stream
    (a run's CPU work counts: the stream waits for what it enqueues). run(k) runs batch k."""
    run(0)
    torch.cuda.synchronize()
    seconds = []
    for k in range(1, repeats + 1):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(k)
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1e3)
    return seconds


def time_calls(call: Callable[[], object], iterations: int, repeats: int) -> list[float]:
    """Host seconds per call (time.perf_counter over `iterations` back-to-back calls), `repeats`
    times: the Python and launch overhead, the GPU left to catch up after each round."""
    for _ in range(_CALL_WARMUP):
        call()
    torch.cuda.synchronize()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(iterations):
            call()
        seconds.append((time.perf_counter() - start) / iterations)
        torch.cuda.synchronize()
    return seconds


def verify(workload: str, table: Table, batch: IdBatch, pooling: int) -> bool:
    """Runs the workload once and compares it with the table's own rows, read on the CPU: gather
    exactly, sums and updates to float32 rounding."""
    if workload == "gather":
        return torch.equal(table.gather(batch).cpu(), table.rows(batch.ids_cpu))
    if workload == "embedding_bag":
        rows = table.rows(batch.ids_cpu).to(torch.float32)
        expected = rows.view(-1, pooling, rows.shape[1]).sum(1)
        return torch.allclose(table.embedding_bag(batch).cpu(), expected, rtol=1e-4, atol=1e-4)
    touched, where = torch.unique(batch.ids_cpu, return_inverse=True)
    before = table.rows(touched).to(torch.float32)
    values = batch.values_cpu.to(torch.float32)
    expected = before.clone().index_add_(0, where, values)
    # Float32 sums of n terms in two orders differ by at most n x 2^-23 x the sum of the terms'
    # magnitudes: a hot Zipf row takes thousands of adds, so no fixed tolerance fits every row.
    adds = torch.bincount(where, minlength=len(touched)).to(torch.float32).unsqueeze(1)
    magnitude = before.abs().index_add_(0, where, values.abs())
    bound = adds * 2.0**-23 * magnitude + 1e-6
    table.index_add(batch)
    return bool(((table.rows(touched).to(torch.float32) - expected).abs() <= bound).all())


class TorchBench:
    """Runs the points of one `warpvm bench torch` run on GPU 0 (bench_torch.Bench)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.device = torch.device("cuda", 0)
        torch.cuda.set_device(self.device)
        self.runtime = warpvm.Runtime(cache=settings.cache_bytes, page_bytes=settings.page_bytes)
        self.context = Context(
            device=torch.cuda.get_device_name(self.device),
            driver=settings.driver,
            commit=settings.commit,
            cache_bytes=self.runtime.cache_bytes,
            page_bytes=self.runtime.page_bytes,
        )
        self._table_key: tuple[Any, ...] | None = None
        self._array: Any = None
        self._tables: dict[str, Table | str] = {}
        self._batches: dict[tuple[str, int, int], IdBatch] = {}
        self._values: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
        self._graphsage: Any = None

    def close(self) -> None:
        self._release()
        self.runtime.close()

    def _release(self) -> None:
        self._tables.clear()
        self._batches.clear()
        self._values.clear()
        self._array = self._graphsage = self._table_key = None
        gc.collect()
        torch.cuda.empty_cache()

    def _fits_on_gpu(self, nbytes: int) -> bool:
        free, _ = torch.cuda.mem_get_info(self.device)
        return nbytes + _GPU_HEADROOM_BYTES <= free

    # --- tables ---

    def _table_array(self, point: Point) -> Any:
        key = ("table", *point.table_key)
        if self._table_key != key:
            self._release()
            rows = point.table_rows(self.context.cache_bytes)
            self._array = self.runtime.empty((rows, point.dim), point.dtype, name="table")
            fill_normal(self.runtime, self._array, self.settings.seed)
            self._table_key = key
        return self._array

    def _table(self, point: Point) -> Table | str:
        array = self._table_array(point)
        if point.mode not in self._tables:
            self._tables[point.mode] = self._make_table(point.mode, array)
        return self._tables[point.mode]

    def _make_table(self, mode: str, array: Any) -> Table | str:
        if mode == "warpvm":
            return WarpvmTable(self.runtime, array)
        flush(self.runtime)
        host = host_tensor(array)
        if mode == "cpu_gather":
            return CpuGatherTable(host, self.device)
        if mode in ("zero_copy", "managed") and cupy is None:
            return f"{mode} needs cupy, which is not installed"
        nbytes = host.numel() * host.element_size()
        if mode in ("managed", "device") and not self._fits_on_gpu(nbytes):
            return f"a copy of the {nbytes / 2**30:.1f} GiB table does not fit in free GPU memory"
        if mode == "device":
            return DeviceTable(host.to(self.device))
        try:
            return (
                ZeroCopyTable(host, self.device) if mode == "zero_copy" else ManagedTable(host, self.device)
            )
        except (
            cupy.cuda.runtime.CUDARuntimeError,
            cupy.cuda.compiler.CompileException,
            cupy.cuda.memory.OutOfMemoryError,
        ) as error:
            return f"{mode} could not be set up: {error}"

    def _batch(self, point: Point, run: int) -> IdBatch:
        """Batch `run` of the point's ids: each timed run reads a batch of its own, as a training
        loop does (Zipf batches share their hot rows: batch_ids)."""
        key = (point.ids, point.batch, run)
        if key not in self._batches:
            rows = point.table_rows(self.context.cache_bytes)
            ids = batch_ids(point.ids, rows, point.batch, self.settings.seed + run)
            values_key = (point.batch, point.dim)
            if values_key not in self._values:
                self._values[values_key] = IdBatch.values(
                    point.batch, point.dim, self.settings.seed, self.device
                )
            self._batches[key] = IdBatch.make(
                ids, self.settings.pooling, self._values[values_key], self.device
            )
        return self._batches[key]

    # --- points ---

    def measure(self, point: Point) -> Measurement | str:
        if point.workload == "graphsage":
            return self._measure_graphsage(point)
        table = self._table(point)
        if isinstance(table, str):
            return table
        workload = point.op or point.workload
        run = {"gather": table.gather, "embedding_bag": table.embedding_bag, "index_add": table.index_add}[
            workload
        ]
        if point.mode == "warpvm":
            drop_cached(self.runtime)
        first = self._batch(point, 0)
        verified = verify(workload, table, first, self.settings.pooling)
        before = self.runtime.stats() if point.mode == "warpvm" else None
        if point.workload == "call_overhead":
            seconds = time_calls(lambda: run(first), self.settings.call_iterations, self.settings.repeats)
            calls = _CALL_WARMUP + self.settings.call_iterations * self.settings.repeats
        else:
            batches = [self._batch(point, k) for k in range(1 + self.settings.repeats)]
            seconds = time_on_stream(lambda k: run(batches[k]), self.settings.repeats)
            calls = 1 + self.settings.repeats  # the untimed run too
        after = self.runtime.stats() if before is not None else None
        if point.workload != "call_overhead":
            # The last batch again, read through the cache state the timed runs left.
            verified = verify(workload, table, batches[-1], self.settings.pooling) and verified
        faults, moved = _stats_per_call(before, after, calls)
        if point.mode == "warpvm":
            flush(self.runtime)
        return Measurement(
            seconds_all=seconds,
            verified=verified,
            useful_bytes=point.batch * point.row_bytes,
            rows=point.batch,
            faults=faults,
            bytes_moved=moved,
            extra={"pooling": self.settings.pooling} if workload == "embedding_bag" else {},
        )

    def _measure_graphsage(self, point: Point) -> Measurement | str:
        from warpvm.torch import graphsage

        state = self._graphsage_state(point)
        features_host = host_tensor(state["features"])
        device_features = None
        if point.mode == "device":
            nbytes = features_host.numel() * features_host.element_size()
            if not self._fits_on_gpu(nbytes):
                return f"the {nbytes / 2**30:.1f} GiB of features do not fit in free GPU memory"
            device_features = features_host.to(self.device)
        options = graphsage.LoaderOptions(self.settings.graphsage_batch, self.settings.graphsage_fanout)
        steps = _GRAPHSAGE_WARMUP_STEPS + self.settings.graphsage_steps
        if point.mode == "warpvm":
            drop_cached(self.runtime)
        before = self.runtime.stats() if point.mode == "warpvm" else None
        try:
            log = graphsage.run_mode(
                point.mode,
                state["graph"],
                options,
                self.runtime,
                state["labels"],
                point.dim,
                _GRAPHSAGE_HIDDEN,
                steps,
                _GRAPHSAGE_LR,
                self.settings.seed,
                stores=graphsage.feature_store(self.runtime, state["features"]),
                cpu_features=features_host,
                device_features=device_features,
                check=graphsage.features_checker(features_host),
            )
        except AssertionError as error:
            raise VerificationError(str(error)) from None
        faults, moved = _stats_per_call(before, self.runtime.stats() if before is not None else None, steps)
        timed = slice(_GRAPHSAGE_WARMUP_STEPS, None)
        nodes = float(np.mean(log.nodes[timed]))
        graph = state["graph"]
        return Measurement(
            seconds_all=log.step_seconds[timed],
            verified=True,
            useful_bytes=int(np.mean(log.feature_bytes[timed])),
            rows=int(nodes),
            faults=faults,
            bytes_moved=moved,
            extra={
                "losses": log.losses,
                "steps": self.settings.graphsage_steps,
                "warmup_steps": _GRAPHSAGE_WARMUP_STEPS,
                "fanout": list(self.settings.graphsage_fanout),
                "nodes": graph.num_nodes,
                "edges": graph.num_edges,
                "sampler": graphsage.sampler_name(options),
            },
        )

    def _graphsage_state(self, point: Point) -> dict[str, Any]:
        from warpvm.torch import graphsage

        key = ("graphsage", *point.table_key)
        if self._table_key != key:
            self._release()
            nodes = point.table_rows(self.context.cache_bytes)
            features = self.runtime.empty((nodes, point.dim), point.dtype, name="features")
            labels = graphsage.fill_features(
                host_tensor(features), _GRAPHSAGE_CLASSES, self.settings.seed, self.device
            )
            graph = graphsage.rmat_graph(nodes, _GRAPHSAGE_EDGE_FACTOR, self.settings.seed, self.device)
            torch.cuda.empty_cache()
            self._graphsage = {"features": features, "labels": labels, "graph": graph}
            self._table_key = key
        return self._graphsage


def _stats_per_call(
    before: dict[str, Any] | None, after: dict[str, Any] | None, calls: int
) -> tuple[int | None, int | None]:
    """Pages loaded and bytes moved per call between two rt.stats(); None, None without them."""
    names = ("misses", "bytes_in", "bytes_out")
    if before is None or after is None or calls < 1 or any(n not in before or n not in after for n in names):
        return None, None

    def delta(name: str) -> int:
        return int(after[name]) - int(before[name])

    return delta("misses") // calls, (delta("bytes_in") + delta("bytes_out")) // calls

// warpvm._warpvm's ops: gather, embedding_bag, index_add and neighbour sampling over paged
// arrays, with GPU tensors of any framework through DLPack (python/warpvm/ops.py is the typed
// API that picks streams and allocates outputs). Every argument is checked here, before anything
// is queued; ids and offsets are checked on the device before anything is written.

#include "bindings.hpp"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace warpvm::python {
namespace {

std::string describe_device(const nb::ndarray<>& a) {
  if (a.device_type() == nb::device::cuda::value) return "cuda:" + std::to_string(a.device_id());
  if (a.device_type() == nb::device::cpu::value) return "the CPU";
  return "device type " + std::to_string(a.device_type());
}

/// Raises warpvm.Error (invalid_argument) "<op>: <what> <message>" unless `condition`. A macro so
/// that the message is built only on failure: these checks run on every op call.
#define WARPVM_EXPECT_OPERAND(condition, op, what, message) \
  WARPVM_EXPECTS(condition, ErrorKind::invalid_argument, std::string(op) + ": " + (what) + " " + std::string(message))

/// `a` as an operand of `op` on the runtime's GPU: on that device and C-contiguous.
void expect_on_device(const nb::ndarray<>& a, int device, const char* op, const char* what) {
  WARPVM_EXPECT_OPERAND(
      a.device_type() == nb::device::cuda::value && a.device_id() == device, op, what,
      "must be on the runtime's GPU, cuda:" + std::to_string(device) + ", not on " + describe_device(a));
  std::int64_t expected = 1;
  for (std::size_t d = a.ndim(); d-- > 0;) {
    WARPVM_EXPECT_OPERAND(a.shape(d) <= 1 || a.stride(d) == expected, op, what, "must be C-contiguous");
    expected *= static_cast<std::int64_t>(a.shape(d));
  }
}

/// A 1-D int32 or int64 device array.
ops::Indices indices_of(const nb::ndarray<>& a, int device, const char* op, const char* what) {
  expect_on_device(a, device, op, what);
  const std::optional<ops::Dtype> dtype = dtype_from_dlpack(a.dtype());
  WARPVM_EXPECT_OPERAND(a.ndim() == 1 && (dtype == ops::Dtype::int32 || dtype == ops::Dtype::int64), op, what,
                        "must be a 1-D int32 or int64 tensor");
  return {a.data(), a.shape(0), dtype == ops::Dtype::int32 ? ops::Indices::Type::int32 : ops::Indices::Type::int64};
}

/// A device array of `rows` rows shaped like the table's (rows, or rows x columns), of its dtype.
void* rows_of(nb::ndarray<>& a, const PagedArray& table, std::uint64_t rows, int device, const char* op,
              const char* what) {
  expect_on_device(a, device, op, what);
  const bool two_d = table.shape().size() == 2;
  const bool shaped = a.ndim() == table.shape().size() && a.shape(0) == rows && (!two_d || a.shape(1) == table.shape()[1]);
  WARPVM_EXPECT_OPERAND(shaped, op, what,
                        "must have shape (" + std::to_string(rows) +
                            (two_d ? ", " + std::to_string(table.shape()[1]) : std::string(",")) + ")");
  WARPVM_EXPECT_OPERAND(dtype_from_dlpack(a.dtype()) == table.dtype(), op, what,
                        std::string("must have the table's dtype, ") + ops::to_string(table.dtype()));
  return a.data();
}

cudaStream_t as_stream(std::uintptr_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

void gather(const PagedArray& table, const nb::ndarray<>& ids, nb::ndarray<> out, std::uintptr_t stream) {
  const char* op = "gather";
  const ops::Table t = table.table(op);
  Runtime& rt = table.runtime(op);
  const int device = rt.config().device;
  const ops::Indices i = indices_of(ids, device, op, "ids");
  void* o = rows_of(out, table, i.count, device, op, "out");
  ops::gather(rt, t, i, o, as_stream(stream));
}

void embedding_bag(const PagedArray& table, const nb::ndarray<>& ids, const nb::ndarray<>& offsets,
                   const std::string& mode, std::optional<nb::ndarray<>> per_sample_weights, bool include_last_offset,
                   nb::ndarray<> out, std::uintptr_t stream) {
  const char* op = "embedding_bag";
  const ops::Table t = table.table(op);
  Runtime& rt = table.runtime(op);
  const int device = rt.config().device;
  WARPVM_EXPECT_OPERAND(mode == "sum" || mode == "mean", op, "mode", "must be 'sum' or 'mean', not '" + mode + "'");
  const ops::Indices i = indices_of(ids, device, op, "ids");
  const ops::Indices o = indices_of(offsets, device, op, "offsets");
  WARPVM_EXPECT_OPERAND(!include_last_offset || o.count >= 1, op, "offsets", "needs an entry with include_last_offset");
  const std::uint64_t bags = include_last_offset ? o.count - 1 : o.count;
  const void* weights = nullptr;
  if (per_sample_weights.has_value()) {
    WARPVM_EXPECT_OPERAND(per_sample_weights->ndim() == 1 && per_sample_weights->shape(0) == i.count, op,
                          "per_sample_weights", "must be 1-D, one weight per id");
    expect_on_device(*per_sample_weights, device, op, "per_sample_weights");
    WARPVM_EXPECT_OPERAND(dtype_from_dlpack(per_sample_weights->dtype()) == table.dtype(), op, "per_sample_weights",
                          std::string("must have the table's dtype, ") + ops::to_string(table.dtype()));
    weights = per_sample_weights->data();
  }
  void* result = rows_of(out, table, bags, device, op, "out");
  ops::embedding_bag(rt, t, i, o, include_last_offset, mode == "sum" ? ops::BagMode::sum : ops::BagMode::mean,
                     weights, result, as_stream(stream));
}

void index_add(const PagedArray& table, const nb::ndarray<>& ids, nb::ndarray<> values, std::uintptr_t stream) {
  const char* op = "index_add";
  const ops::Table t = table.table(op);
  Runtime& rt = table.runtime(op);
  const int device = rt.config().device;
  const ops::Indices i = indices_of(ids, device, op, "ids");
  const void* v = rows_of(values, table, i.count, device, op, "values");
  ops::index_add(rt, t, i, v, as_stream(stream));
}

/// The runtime of a CSR graph's two arrays, which must share it.
Runtime& graph_runtime(const PagedArray& indptr, const PagedArray& indices, const char* op) {
  Runtime& rt = indptr.runtime(op);
  (void)indices.runtime(op);
  WARPVM_EXPECT_OPERAND(indptr.owner() == indices.owner(), op, "indptr and indices", "must belong to the same Runtime");
  return rt;
}

std::int64_t* sample_offsets(nb::ndarray<>& out_indptr, std::uint64_t seeds, int device, const char* op) {
  expect_on_device(out_indptr, device, op, "out_indptr");
  WARPVM_EXPECT_OPERAND(out_indptr.ndim() == 1 && out_indptr.shape(0) == seeds + 1 &&
                            dtype_from_dlpack(out_indptr.dtype()) == ops::Dtype::int64,
                        op, "out_indptr", "must be 1-D int64 of len(seeds) + 1 = " + std::to_string(seeds + 1));
  return static_cast<std::int64_t*>(out_indptr.data());
}

std::uint64_t count_sampled_neighbors(const PagedArray& indptr, const PagedArray& indices, const nb::ndarray<>& seeds,
                                      std::uint32_t fanout, nb::ndarray<> out_indptr, std::uintptr_t stream) {
  const char* op = "sample_neighbors";
  Runtime& rt = graph_runtime(indptr, indices, op);
  const int device = rt.config().device;
  const ops::Indices s = indices_of(seeds, device, op, "seeds");
  std::int64_t* offsets = sample_offsets(out_indptr, s.count, device, op);
  nb::gil_scoped_release unlocked;  // it waits for the stream
  return ops::count_sampled_neighbors(rt, indptr.table(op), indices.table(op), s, fanout, offsets, as_stream(stream));
}

void sample_neighbors(const PagedArray& indptr, const PagedArray& indices, const nb::ndarray<>& seeds,
                      std::uint32_t fanout, std::uint64_t seed, nb::ndarray<> out_indptr, nb::ndarray<> out_indices,
                      std::uintptr_t stream) {
  const char* op = "sample_neighbors";
  Runtime& rt = graph_runtime(indptr, indices, op);
  const int device = rt.config().device;
  const ops::Indices s = indices_of(seeds, device, op, "seeds");
  const std::int64_t* offsets = sample_offsets(out_indptr, s.count, device, op);
  expect_on_device(out_indices, device, op, "out_indices");
  WARPVM_EXPECT_OPERAND(out_indices.ndim() == 1 && dtype_from_dlpack(out_indices.dtype()) == ops::Dtype::int64, op,
                        "out_indices", "must be 1-D int64");
  ops::sample_neighbors(rt, indptr.table(op), indices.table(op), s, fanout, seed, offsets,
                        static_cast<std::int64_t*>(out_indices.data()), as_stream(stream));
}

/// Device memory of the extension's, for frameworks it cannot ask to allocate (DLPack's
/// consumers take it over; it is freed when the last of them lets go).
nb::ndarray<> empty_device(const std::vector<std::size_t>& shape, const std::string& dtype, int device) {
  const ops::Dtype type = dtype_from_name(dtype);
  std::size_t bytes = ops::size_of(type);
  for (const std::size_t extent : shape) bytes *= extent;
  int previous = 0;
  WARPVM_CUDA_TRY(cudaGetDevice(&previous));
  WARPVM_CUDA_TRY(cudaSetDevice(device));
  void* memory = nullptr;
  const cudaError_t allocated = cudaMalloc(&memory, bytes == 0 ? 1 : bytes);
  WARPVM_CUDA_TRY(cudaSetDevice(previous));
  WARPVM_EXPECTS(allocated == cudaSuccess, ErrorKind::out_of_memory,
                 "cannot allocate " + std::to_string(bytes) + " B on cuda:" + std::to_string(device));
  nb::capsule owner(memory, [](void* p) noexcept { cudaFree(p); });
  return nb::ndarray<>(memory, shape.size(), shape.data(), owner, nullptr, dlpack_of(type), nb::device::cuda::value,
                       device);
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.def("gather", &gather, nb::arg("table"), nb::arg("ids"), nb::arg("out"), nb::arg("stream"),
        "out[k] = table[ids[k]] on `stream` (a raw cudaStream_t handle).");
  m.def("embedding_bag", &embedding_bag, nb::arg("table"), nb::arg("ids"), nb::arg("offsets"), nb::arg("mode"),
        nb::arg("per_sample_weights").none(), nb::arg("include_last_offset"), nb::arg("out"), nb::arg("stream"),
        "PyTorch's embedding_bag over a paged table, into `out`.");
  m.def("index_add", &index_add, nb::arg("table"), nb::arg("ids"), nb::arg("values"), nb::arg("stream"),
        "table[ids[k]] += values[k], atomically.");
  m.def("count_sampled_neighbors", &count_sampled_neighbors, nb::arg("indptr"), nb::arg("indices"), nb::arg("seeds"),
        nb::arg("fanout"), nb::arg("out_indptr"), nb::arg("stream"),
        "Fills out_indptr with the sample's offsets and returns its size (waits for the stream).");
  m.def("sample_neighbors", &sample_neighbors, nb::arg("indptr"), nb::arg("indices"), nb::arg("seeds"),
        nb::arg("fanout"), nb::arg("seed"), nb::arg("out_indptr"), nb::arg("out_indices"), nb::arg("stream"),
        "Fills out_indices with the sample that out_indptr describes.");
  m.def(
      "synchronize_stream", [](std::uintptr_t stream) { WARPVM_CUDA_TRY(cudaStreamSynchronize(as_stream(stream))); },
      nb::arg("stream"), nb::call_guard<nb::gil_scoped_release>(),
      "Waits for a stream: before a consumer that cannot wait on it (jax) reads an op's output.");
  m.def("empty_device", &empty_device, nb::arg("shape"), nb::arg("dtype"), nb::arg("device"),
        "Uninitialised device memory of the extension's, as a DLPack array.");
}

}  // namespace warpvm::python

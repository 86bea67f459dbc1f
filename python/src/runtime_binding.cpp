// warpvm._warpvm.Runtime: the library's Runtime (closable from Python), the paged arrays it
// makes (empty, adopt), and flush, drop_cached, synchronize and stats.

#include "bindings.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <cuda_runtime_api.h>

namespace warpvm::python {
namespace {

/// The shape of a paged array: one or two positive extents.
std::vector<std::uint64_t> checked_shape(const std::vector<std::uint64_t>& shape, const char* op) {
  WARPVM_EXPECTS(shape.size() == 1 || shape.size() == 2, ErrorKind::invalid_argument,
                 std::string(op) + ": a paged array has 1 or 2 dimensions (rows, or rows x columns), not " +
                     std::to_string(shape.size()));
  for (const std::uint64_t extent : shape)
    WARPVM_EXPECTS(extent > 0, ErrorKind::invalid_argument, std::string(op) + ": a paged array cannot be empty");
  return shape;
}

std::unique_ptr<PagedArray> empty(nb::handle self, const std::vector<std::uint64_t>& shape, const std::string& dtype,
                                  const std::string& placement, const std::string& name) {
  PyRuntime& runtime = nb::cast<PyRuntime&>(self);
  const Placement where = placement_from_name(placement);
  const ops::Dtype type = dtype_from_name(dtype);
  std::vector<std::uint64_t> extents = checked_shape(shape, "empty");
  std::uint64_t bytes = ops::size_of(type);
  for (const std::uint64_t extent : extents) bytes *= extent;
  (void)runtime.get();
  // Memory of the array's own, not the runtime's: numpy views of it stay valid after close().
  void* memory = nullptr;
  WARPVM_EXPECTS(cudaHostAlloc(&memory, bytes, cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess,
                 ErrorKind::out_of_memory,
                 "empty: pinned host allocation of " + std::to_string(bytes) + " B for '" + name + "' failed");
  std::shared_ptr<void> owned(memory, [](void* p) { cudaFreeHost(p); });
  return std::make_unique<PagedArray>(nb::borrow(self), runtime, std::move(extents), type, memory, std::move(owned),
                                      nb::none(), where, name);
}

std::unique_ptr<PagedArray> adopt(nb::handle self, nb::object source, const std::string& placement,
                                  const std::string& name) {
  PyRuntime& runtime = nb::cast<PyRuntime&>(self);
  nb::ndarray<> array;
  if (!nb::try_cast(source, array, /*convert=*/false))
    throw nb::type_error("adopt: the array must support DLPack or the buffer protocol (a numpy array, a CPU tensor)");
  const bool on_host = array.device_type() == nb::device::cpu::value || array.device_type() == nb::device::cuda_host::value;
  WARPVM_EXPECTS(on_host, ErrorKind::invalid_argument,
                 "adopt: the array must be in host memory (a numpy array, or a pinned CPU tensor), not on a GPU");
  const std::optional<ops::Dtype> type = dtype_from_dlpack(array.dtype());
  WARPVM_EXPECTS(type.has_value(), ErrorKind::invalid_argument,
                 "adopt: the array's dtype is not one of float16, bfloat16, float32, float64, int32, int64, uint8");
  std::vector<std::uint64_t> shape;
  for (std::size_t d = 0; d < array.ndim(); ++d) shape.push_back(array.shape(d));
  shape = checked_shape(shape, "adopt");
  const bool contiguous = array.ndim() == 1 ? array.stride(0) == 1 : array.stride(1) == 1 && array.stride(0) == static_cast<std::int64_t>(shape[1]);
  WARPVM_EXPECTS(contiguous, ErrorKind::invalid_argument, "adopt: the array must be C-contiguous");
  return std::make_unique<PagedArray>(nb::borrow(self), runtime, std::move(shape), *type, array.data(), nullptr,
                                      std::move(source), placement_from_name(placement), name);
}

nb::dict stats(PyRuntime& runtime) {
  const Stats s = runtime.get().stats();
  nb::dict d;
  d["hits"] = s.hits;
  d["misses"] = s.misses;
  d["waits"] = s.waits;
  d["evictions"] = s.evictions;
  d["writebacks"] = s.writebacks;
  d["bytes_in"] = s.bytes_in;
  d["bytes_out"] = s.bytes_out;
  return d;
}

}  // namespace

void bind_runtime(nb::module_& m) {
  nb::class_<PyRuntime>(m, "Runtime", "warpvm::Runtime: owns one device's page cache.")
      .def(nb::init<const Config&>(), nb::arg("config"), nb::call_guard<nb::gil_scoped_release>(),
           "Validates `config` (before any CUDA call), then allocates the cache on config.device.")
      .def("close", &PyRuntime::close,
           "Releases its paged arrays and frees the cache now; any later call but close() raises warpvm.Error.")
      .def_prop_ro("closed", &PyRuntime::closed)
      .def_prop_ro("cache_bytes", [](PyRuntime& r) { return r.get().cache_bytes(); })
      .def_prop_ro("page_bytes", [](PyRuntime& r) { return r.get().page_bytes(); })
      .def_prop_ro("frame_count", [](PyRuntime& r) { return r.get().frame_count(); })
      .def_prop_ro("multiprocessor_count", [](PyRuntime& r) { return r.get().multiprocessor_count(); })
      .def_prop_ro("device", [](PyRuntime& r) { return r.get().config().device; })
      .def("describe", [](PyRuntime& r) { return r.get().config().describe(); },
           "The configuration in effect, in one line (the cache size as allocated).")
      .def("empty", &empty, nb::arg("shape"), nb::arg("dtype"), nb::arg("placement"), nb::arg("name"),
           "A new paged array of `shape` (1 or 2 extents) and `dtype` (a name), contents uninitialised.")
      .def("adopt", &adopt, nb::arg("array"), nb::arg("placement"), nb::arg("name"),
           "The memory of a C-contiguous host array (numpy, or a pinned CPU tensor) as a paged array, no "
           "copy; the array is kept alive.")
      .def("flush", [](PyRuntime& r) { r.get().flush(); }, nb::call_guard<nb::gil_scoped_release>(),
           "Writes every dirty page back: each paged array's host view is exact afterwards.")
      .def("drop_cached", [](PyRuntime& r) { r.get().drop_cached(); }, nb::call_guard<nb::gil_scoped_release>(),
           "flush(), then empties the cache.")
      .def("synchronize", [](PyRuntime& r) { r.get().synchronize(); }, nb::call_guard<nb::gil_scoped_release>(),
           "Waits for all device work; raises the first device-side error (an op's bad input among them).")
      .def("stats", &stats, "The fault path's counters since the runtime was made or reset_stats().")
      .def("reset_stats", [](PyRuntime& r) { r.get().reset_stats(); });
}

}  // namespace warpvm::python

// What the extension's source files share: the Runtime as Python holds it (it may be closed
// before it is collected), paged arrays, and the dtype and placement names.

#pragma once

#include "warpvm/ops.hpp"
#include "warpvm/runtime.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace warpvm::python {

namespace nb = nanobind;

class PagedArray;

/// A Runtime that Python may close before the object is collected. Closing releases the objects
/// of its paged arrays first, which then refuse every use with warpvm.Error.
class PyRuntime {
 public:
  explicit PyRuntime(const Config& config) : runtime_(std::in_place, config) {}
  ~PyRuntime() { close(); }
  PyRuntime(const PyRuntime&) = delete;
  PyRuntime& operator=(const PyRuntime&) = delete;

  Runtime& get();
  void close();
  [[nodiscard]] bool closed() const { return !runtime_.has_value(); }
  void track(PagedArray* array) { arrays_.push_back(array); }
  void forget(const PagedArray* array);

 private:
  std::optional<Runtime> runtime_;
  std::vector<PagedArray*> arrays_;  ///< alive and not released; each keeps this runtime alive
};

/// A 1-D or 2-D array in the paged space (warpvm.PagedArray): an object of the runtime over
/// pinned host memory that outlives it (the array's own, or an adopted source's), so that views
/// of it stay valid after the runtime is closed.
class PagedArray {
 public:
  /// Registers `memory` (pinned host memory of shape x dtype, kept alive by `owned_memory` or by
  /// `source`) with the runtime.
  PagedArray(nb::object runtime_owner, PyRuntime& runtime, std::vector<std::uint64_t> shape, ops::Dtype dtype,
             void* memory, std::shared_ptr<void> owned_memory, nb::object source, Placement placement,
             std::string name);
  ~PagedArray();
  PagedArray(const PagedArray&) = delete;
  PagedArray& operator=(const PagedArray&) = delete;

  /// Drops the object (its runtime is closing); any later use raises warpvm.Error.
  void release() noexcept;
  [[nodiscard]] bool closed() const { return !object_.has_value(); }
  /// The runtime, or warpvm.Error (invalid_argument) naming `op` when it is closed.
  [[nodiscard]] Runtime& runtime(const char* op) const;
  [[nodiscard]] const PyRuntime* owner() const { return runtime_; }
  /// The array as a table of ops (rows, and columns: 1 for a 1-D array).
  [[nodiscard]] ops::Table table(const char* op) const;

  [[nodiscard]] const std::vector<std::uint64_t>& shape() const { return shape_; }
  [[nodiscard]] ops::Dtype dtype() const { return dtype_; }
  [[nodiscard]] std::uint64_t nbytes() const;
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] Placement placement(const char* op) const;
  void set_placement(Placement placement);
  [[nodiscard]] void* host_data() const { return memory_; }

 private:
  const object<std::uint8_t>& live(const char* op) const;

  nb::object runtime_owner_;  ///< the Python Runtime: alive while this array is
  PyRuntime* runtime_;        ///< null once released
  std::vector<std::uint64_t> shape_;
  ops::Dtype dtype_;
  std::shared_ptr<void> owned_memory_;  ///< rt.empty()'s pinned memory
  nb::object source_;                   ///< rt.adopt()'s source array
  void* memory_;
  std::string name_;
  std::optional<object<std::uint8_t>> object_;  ///< last: unregistered before the memory goes
};

/// A dtype by its name ("float32"); warpvm.Error (invalid_argument) for another name.
ops::Dtype dtype_from_name(std::string_view name);
/// The dtype of a DLPack dtype, if ops take it.
std::optional<ops::Dtype> dtype_from_dlpack(nb::dlpack::dtype dtype);
nb::dlpack::dtype dlpack_of(ops::Dtype dtype);
Placement placement_from_name(std::string_view name);

void bind_runtime(nb::module_& m);
void bind_paged_array(nb::module_& m);
void bind_ops(nb::module_& m);

}  // namespace warpvm::python

// warpvm.PagedArray: a 1-D or 2-D array in the paged space, made by Runtime.empty() or
// Runtime.adopt(), with a zero-copy numpy view of its host memory.

#include "bindings.hpp"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <array>
#include <utility>

namespace warpvm::python {
namespace {

constexpr std::array<std::pair<ops::Dtype, const char*>, 7> dtype_names{{
    {ops::Dtype::float16, "float16"},
    {ops::Dtype::bfloat16, "bfloat16"},
    {ops::Dtype::float32, "float32"},
    {ops::Dtype::float64, "float64"},
    {ops::Dtype::int32, "int32"},
    {ops::Dtype::int64, "int64"},
    {ops::Dtype::uint8, "uint8"},
}};

constexpr std::array<std::pair<Placement, const char*>, 4> placement_names{{
    {Placement::migrate, "migrate"},
    {Placement::remote, "remote"},
    {Placement::automatic, "automatic"},
    {Placement::resident, "resident"},
}};

/// ml_dtypes.bfloat16 when ml_dtypes is installed, else None (looked up once).
nb::handle ml_dtypes_bfloat16() {
  static nb::handle type = [] {
    try {
      return nb::object(nb::module_::import_("ml_dtypes").attr("bfloat16")).release();
    } catch (const nb::python_error&) {
      return nb::none().release();
    }
  }();
  return type;
}

}  // namespace

ops::Dtype dtype_from_name(std::string_view name) {
  for (const auto& [dtype, spelled] : dtype_names)
    if (name == spelled) return dtype;
  WARPVM_EXPECTS(false, ErrorKind::invalid_argument,
                 "dtype '" + std::string(name) + "' is not one of float16, bfloat16, float32, float64, int32, int64, uint8");
  return ops::Dtype::float32;
}

std::optional<ops::Dtype> dtype_from_dlpack(nb::dlpack::dtype dtype) {
  using Code = nb::dlpack::dtype_code;
  if (dtype.lanes != 1) return std::nullopt;
  const auto code = static_cast<Code>(dtype.code);
  if (code == Code::Float && dtype.bits == 16) return ops::Dtype::float16;
  if (code == Code::Float && dtype.bits == 32) return ops::Dtype::float32;
  if (code == Code::Float && dtype.bits == 64) return ops::Dtype::float64;
  if (code == Code::Bfloat && dtype.bits == 16) return ops::Dtype::bfloat16;
  if (code == Code::Int && dtype.bits == 32) return ops::Dtype::int32;
  if (code == Code::Int && dtype.bits == 64) return ops::Dtype::int64;
  if (code == Code::UInt && dtype.bits == 8) return ops::Dtype::uint8;
  return std::nullopt;
}

nb::dlpack::dtype dlpack_of(ops::Dtype dtype) {
  using Code = nb::dlpack::dtype_code;
  const auto bits = static_cast<std::uint8_t>(8 * ops::size_of(dtype));
  const Code code = dtype == ops::Dtype::bfloat16                                  ? Code::Bfloat
                    : dtype == ops::Dtype::int32 || dtype == ops::Dtype::int64     ? Code::Int
                    : dtype == ops::Dtype::uint8                                   ? Code::UInt
                                                                                   : Code::Float;
  return {static_cast<std::uint8_t>(code), bits, 1};
}

Placement placement_from_name(std::string_view name) {
  for (const auto& [placement, spelled] : placement_names)
    if (name == spelled) return placement;
  WARPVM_EXPECTS(false, ErrorKind::invalid_argument,
                 "placement '" + std::string(name) + "' is not one of migrate, remote, automatic, resident");
  return Placement::automatic;
}

// ---- PyRuntime ---------------------------------------------------------------------------------

Runtime& PyRuntime::get() {
  WARPVM_EXPECTS(runtime_.has_value(), ErrorKind::invalid_argument, "this Runtime is closed");
  return *runtime_;
}

void PyRuntime::close() {
  for (PagedArray* array : std::exchange(arrays_, {})) array->release();
  runtime_.reset();
}

void PyRuntime::forget(const PagedArray* array) { std::erase(arrays_, array); }

// ---- PagedArray --------------------------------------------------------------------------------

PagedArray::PagedArray(nb::object runtime_owner, PyRuntime& runtime, std::vector<std::uint64_t> shape,
                       ops::Dtype dtype, void* memory, std::shared_ptr<void> owned_memory, nb::object source,
                       Placement placement, std::string name)
    : runtime_owner_(std::move(runtime_owner)),
      runtime_(&runtime),
      shape_(std::move(shape)),
      dtype_(dtype),
      owned_memory_(std::move(owned_memory)),
      source_(std::move(source)),
      memory_(memory) {
  object_.emplace(runtime.get().adopt(static_cast<std::uint8_t*>(memory_), nbytes(), placement, std::move(name)));
  name_ = object_->name();
  runtime.track(this);
}

PagedArray::~PagedArray() {
  if (runtime_ != nullptr) runtime_->forget(this);
}

void PagedArray::release() noexcept {
  object_.reset();
  runtime_ = nullptr;
}

std::uint64_t PagedArray::nbytes() const {
  std::uint64_t elements = 1;
  for (const std::uint64_t extent : shape_) elements *= extent;
  return elements * ops::size_of(dtype_);
}

const object<std::uint8_t>& PagedArray::live(const char* op) const {
  WARPVM_EXPECTS(object_.has_value(), ErrorKind::invalid_argument,
                 std::string(op) + ": paged array '" + name_ + "' belongs to a Runtime that is closed");
  return *object_;
}

Runtime& PagedArray::runtime(const char* op) const {
  (void)live(op);
  return runtime_->get();
}

ops::Table PagedArray::table(const char* op) const {
  return ops::table(live(op), shape_.size() == 2 ? shape_[1] : 1, dtype_);
}

Placement PagedArray::placement(const char* op) const { return live(op).placement(); }

void PagedArray::set_placement(Placement placement) {
  (void)live("placement");
  object_->set_placement(placement);
}

// ---- bindings ----------------------------------------------------------------------------------

void bind_paged_array(nb::module_& m) {
  nb::class_<PagedArray>(m, "PagedArray",
                         "A 1-D or 2-D array in warpvm's paged space (pinned host memory, cached in the GPU's "
                         "frames); made by Runtime.empty() or Runtime.adopt(). Tables of warpvm's ops.")
      .def_prop_ro(
          "shape",
          [](const PagedArray& a) {
            nb::list extents;
            for (const std::uint64_t extent : a.shape()) extents.append(extent);
            return nb::tuple(extents);
          },
          "(rows,) or (rows, columns).")
      .def_prop_ro("dtype", [](const PagedArray& a) { return std::string(ops::to_string(a.dtype())); },
                   "The element type's name: float16, bfloat16, float32, float64, int32, int64 or uint8.")
      .def_prop_ro("nbytes", &PagedArray::nbytes)
      .def_prop_ro("name", &PagedArray::name, "The name error messages give it.")
      .def_prop_ro("closed", &PagedArray::closed, "True once its Runtime is closed.")
      .def_prop_ro("device", [](const PagedArray& a) { return a.runtime("device").config().device; },
                   "The CUDA device of its Runtime, where the ops' tensors must be.")
      .def_prop_rw(
          "placement", [](const PagedArray& a) { return std::string(to_string(a.placement("placement"))); },
          [](PagedArray& a, const std::string& name) { a.set_placement(placement_from_name(name)); },
          "Where its pages are served from: 'automatic', 'migrate', 'remote' or 'resident'. Setting it "
          "waits for the device (leaving the cache writes dirty pages back first).")
      .def_prop_ro(
          "host",
          [](nb::handle self) -> nb::object {
            const auto& a = nb::cast<const PagedArray&>(self);
            (void)a.placement("host");  // refused once the runtime is closed
            const bool bfloat = a.dtype() == ops::Dtype::bfloat16;
            const nb::dlpack::dtype dtype = bfloat ? nb::dtype<std::uint16_t>() : dlpack_of(a.dtype());
            std::vector<std::size_t> extents(a.shape().begin(), a.shape().end());
            nb::object view = nb::cast(nb::ndarray<nb::numpy>(a.host_data(), extents.size(), extents.data(), self,
                                                              nullptr, dtype, nb::device::cpu::value));
            if (bfloat && !ml_dtypes_bfloat16().is_none()) return view.attr("view")(ml_dtypes_bfloat16());
            return view;
          },
          "A numpy view of the host memory, no copy (exact after Runtime.flush()). bfloat16 arrays: an "
          "ml_dtypes.bfloat16 view when ml_dtypes is installed, else a uint16 view of the bits.")
      .def("__len__", [](const PagedArray& a) { return a.shape().front(); })
      .def("__repr__", [](const PagedArray& a) {
        std::string shape;
        for (const std::uint64_t extent : a.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(extent);
        if (a.shape().size() == 1) shape += ",";
        return "warpvm.PagedArray('" + a.name() + "', shape=(" + shape + "), dtype=" + ops::to_string(a.dtype()) +
               (a.closed() ? ", closed)" : ", placement=" + std::string(to_string(a.placement("repr"))) + ")");
      });
}

}  // namespace warpvm::python

// warpvm._warpvm: the library's host API for Python (nanobind); this file is the module's entry
// and its error translation. The Runtime and paged arrays are bound in runtime_binding.cpp and
// paged_array.cpp, the ops in ops_binding.cpp. The typed API is python/warpvm/runtime.py and
// python/warpvm/ops.py; this module is its low-level half. Every warpvm::Error reaches Python
// as warpvm.Error (python/warpvm/errors.py) with what() as its message and the ErrorKind's name
// as its `kind`.

#include "bindings.hpp"

#include "warpvm/config.hpp"
#include "warpvm/error.hpp"
#include "warpvm/runtime.hpp"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstddef>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace nb = nanobind;
using warpvm::ErrorKind;

namespace {

/// ErrorKind's enumerators by name, as warpvm.ErrorKind spells them.
constexpr std::array<std::pair<ErrorKind, const char*>, 8> error_kinds{{
    {ErrorKind::invalid_config, "invalid_config"},
    {ErrorKind::invalid_argument, "invalid_argument"},
    {ErrorKind::out_of_memory, "out_of_memory"},
    {ErrorKind::cuda, "cuda"},
    {ErrorKind::index_out_of_range, "index_out_of_range"},
    {ErrorKind::no_progress, "no_progress"},
    {ErrorKind::no_device, "no_device"},
    {ErrorKind::invalid_free, "invalid_free"},
}};

const char* kind_name(ErrorKind kind) {
  for (const auto& [k, name] : error_kinds)
    if (k == kind) return name;
  return "unknown";
}

/// warpvm.errors.Error, imported on first use (the module imports without the package, as
/// stubgen does); a borrowed reference kept for the life of the process.
nb::handle python_error_type() {
  static nb::handle type = nb::object(nb::module_::import_("warpvm.errors").attr("Error")).release();
  return type;
}

/// Raises a warpvm::Error as warpvm.Error(what(), kind); as RuntimeError if that class cannot be had.
void translate_error(const std::exception_ptr& exception, void*) {
  try {
    std::rethrow_exception(exception);
  } catch (const warpvm::Error& error) {
    try {
      const nb::handle type = python_error_type();
      const nb::object instance = type(error.what(), kind_name(error.kind()));
      PyErr_SetObject(type.ptr(), instance.ptr());
    } catch (const nb::python_error&) {
      PyErr_SetString(PyExc_RuntimeError, error.what());
    }
  }
}

warpvm::EvictionPolicy eviction_from_name(const std::string& name) {
  if (name == "clock") return warpvm::EvictionPolicy::clock;
  if (name == "fifo") return warpvm::EvictionPolicy::fifo;
  warpvm::detail::throw_error(ErrorKind::invalid_config, "eviction = '" + name + "' must be clock or fifo",
                              __FILE__, __LINE__);
}

}  // namespace

NB_MODULE(_warpvm, m) {
  m.doc() = "warpvm's host API (low level; use warpvm.Runtime)";
  nb::register_exception_translator(translate_error);

  m.def(
      "error_kinds",
      [] {
        std::vector<std::string> names;
        for (const auto& entry : error_kinds) names.emplace_back(entry.second);
        return names;
      },
      "warpvm::ErrorKind's enumerators by name, in order (warpvm.ErrorKind has the same).");

  m.def("device_count", &warpvm::device_count,
        "Number of CUDA devices visible (0 on a machine without a GPU, or without a driver).");

  nb::class_<warpvm::Config>(m, "Config", "warpvm::Config: everything a Runtime needs to know up front.")
      .def(nb::init<>())
      .def_rw("cache_bytes", &warpvm::Config::cache_bytes,
              "Device cache size in bytes; 0: cache_fraction_of_free of the device's free memory.")
      .def_rw("cache_fraction_of_free", &warpvm::Config::cache_fraction_of_free,
              "Share of the device's free memory given to the cache when cache_bytes is 0, in (0, 0.95].")
      .def_rw("resident_bytes", &warpvm::Config::resident_bytes,
              "Device memory set aside beside the cache for resident objects.")
      .def_rw("page_bytes", &warpvm::Config::page_bytes,
              "Page (and frame) size: a power of two from 512 B to 2 MiB.")
      .def_prop_rw(
          "eviction", [](const warpvm::Config& c) { return std::string(warpvm::to_string(c.eviction)); },
          [](warpvm::Config& c, const std::string& name) { c.eviction = eviction_from_name(name); },
          "Eviction policy: 'clock' or 'fifo' (another name raises warpvm.Error).")
      .def_rw("checked", &warpvm::Config::checked, "Bounds-check every element access.")
      .def_rw("max_pages_held_per_thread", &warpvm::Config::max_pages_held_per_thread,
              "Pages one thread may hold at once.")
      .def_rw("automatic_remote_share", &warpvm::Config::automatic_remote_share,
              "Placement 'automatic' while nothing can be evicted: the share of a page that remote reads "
              "may fetch before it migrates, in [0, 1].")
      .def_rw("automatic_remote_share_evicting", &warpvm::Config::automatic_remote_share_evicting,
              "Placement 'automatic' once the cache can evict: the same share, counted since the page's "
              "last load, in [0, 64].")
      .def_rw("device", &warpvm::Config::device, "CUDA device ordinal.")
      .def_rw("watchdog_seconds", &warpvm::Config::watchdog_seconds,
              "How long a warp may find no evictable frame before a no_progress error.")
      .def("validate", &warpvm::Config::validate,
           "Raises warpvm.Error (invalid_config) naming the first field that cannot work; touches no GPU.")
      .def("describe", &warpvm::Config::describe, "One-line human-readable summary.");

  warpvm::python::bind_runtime(m);
  warpvm::python::bind_paged_array(m);
  warpvm::python::bind_ops(m);
}

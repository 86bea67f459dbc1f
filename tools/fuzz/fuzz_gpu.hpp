#pragma once
/// @file
/// The GPU backend: a warpvm::Runtime with the run's minimum legal cache, its seven objects,
/// and a kernel in which every thread runs its fuzz program through warpvm::array handles
/// (elements, atomics, page spans, cursors). Invariants are read with detail::frame_owners,
/// frame_dirty_bits and page_states (detail/core/inspect.hpp).

#include "fuzz_run.hpp"

#include <memory>
#include <string>

namespace warpvm::fuzz {

/// The GPU backend for `config`, its objects filled from `model`. Throws warpvm::Error.
std::unique_ptr<Backend> make_gpu_backend(const RunConfig& config, const ReferenceModel& model);

/// Device 0's name ("" without a device).
std::string gpu_name();
/// Pinned host to device copy speed of device 0, in GB/s (the best of a few 256 MiB copies).
double measure_link_gbps();

}  // namespace warpvm::fuzz

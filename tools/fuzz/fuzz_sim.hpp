#pragma once
/// @file
/// The simulator backend: the fuzz programs run on the CPU, one fiber per GPU thread, over a
/// page cache built from the library's own page-state transitions (detail/core/page_table.hpp)
/// and victim search (detail/policy/victim.hpp) on a detail::FrameTable. A deterministic
/// scheduler (a hash of the seed) switches fibers at every step of the fault path (acquire,
/// wait, victim search, fill, release) and before every access, so that threads hold pages
/// at once, wait on each other's loads and evict each other's pages at the minimum legal
/// cache, exactly reproducibly. No GPU needed.
///
/// What it models of the GPU: per-thread holds (a lane is its own group: no warp-level merging),
/// the held path only (no hold-free hits, no never-evicts mode), CLOCK and FIFO, dirty bits,
/// write-back at eviction and flush, overwrite spans (no load, write-behind) done whole by one
/// lane, migrate and automatic as migrate (no remote reads of absent pages), remote as host
/// memory, resident as frames of the object's own. The acquire path itself (acquire.cuh) is
/// warp-level device code and is mirrored here, step by step, not reused.

#include "fuzz_run.hpp"

#include <memory>

namespace warpvm::fuzz {

/// The simulator backend for `config`, its host memory filled from `model`.
std::unique_ptr<Backend> make_sim_backend(const RunConfig& config, const ReferenceModel& model);

}  // namespace warpvm::fuzz

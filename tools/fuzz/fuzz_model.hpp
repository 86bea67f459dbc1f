#pragma once
/// @file
/// The reference: every object's bytes as they must be, advanced one launch at a time by
/// replaying each thread's program in turn (roles make the order irrelevant, fuzz_program.hpp),
/// and the invariants every backend's cache must satisfy between launches.

#include "fuzz_config.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace warpvm::fuzz {

/// A range of one object's bytes that the host rewrote between launches.
struct HostWrite {
  std::uint32_t object;
  std::uint64_t offset;
  std::uint64_t bytes;
};

class ReferenceModel {
 public:
  /// The objects' initial bytes (what the backends put into host memory first).
  explicit ReferenceModel(const RunConfig& config);

  /// Runs launch `launch` on the model's bytes; returns each thread's digest.
  std::vector<std::uint64_t> run_launch(std::uint32_t launch);
  /// The host writes after launch `launch` (Boundary::host_write), applied to the model; the
  /// caller copies the same ranges of bytes() into the backend's host memory.
  std::vector<HostWrite> host_writes(std::uint32_t launch);

  [[nodiscard]] std::span<const std::byte> bytes(std::uint32_t o) const { return objects_[o]; }

 private:
  const RunConfig& config_;
  std::vector<std::vector<std::byte>> objects_;
};

/// One backend's cache, seen between launches.
struct CacheSnapshot {
  std::uint32_t cache_frames = 0;      ///< the cache's frames; then the scratch frame; then resident ones
  std::vector<std::uint64_t> owners;   ///< page key of each frame (detail::frame_owners)
  std::vector<std::uint32_t> dirty;    ///< dirty bit of each frame (detail::frame_dirty_bits)
  struct Object {
    std::uint32_t id = 0;
    Placement placement = Placement::migrate;
    std::vector<std::uint32_t> states;  ///< each page's state word (detail::page_states)
    std::span<const std::byte> host;    ///< the backing store, as it is (not flushed)
  };
  std::vector<Object> objects;  ///< by fuzz object index
};

/// The invariants after a launch: no page held or busy; no page in two frames; every frame's
/// page resident, in a frame of the right kind (cache or resident) and every resident page in
/// a frame; free frames clean; and every page whose host copy differs from the model cached in
/// a dirty frame (a clean frame is a copy of the host). `flushed`: also no dirty frame at all,
/// so host memory equals the model. Returns "" or what is wrong.
[[nodiscard]] std::string check_cache(const RunConfig& config, const ReferenceModel& model, const CacheSnapshot& cache,
                                      bool flushed);

}  // namespace warpvm::fuzz

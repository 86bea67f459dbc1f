#pragma once
/// @file
/// What device code sees of a MultiGpuSpace: per GPU, one SpaceView and one object table in that
/// GPU's memory, holding pointers into every GPU's memory (peer access, UVA) and the host's.

#include "warpvm/detail/host_device.hpp"
#include "warpvm/detail/multi_gpu/frame_pool.hpp"
#include "warpvm/detail/policy/placement.hpp"

#include <cstddef>
#include <cstdint>

namespace warpvm {

/// How a multi-GPU object's pages are placed: one of placement.hpp's page policies for every
/// shared fault, or OASIS's per-object controller (the O-Table) choosing between them.
enum class PlacementPolicy : std::uint8_t { oasis, on_touch, access_counter, duplication };

[[nodiscard]] constexpr const char* to_string(PlacementPolicy p) {
  switch (p) {
    case PlacementPolicy::oasis: return "oasis";
    case PlacementPolicy::on_touch: return "on_touch";
    case PlacementPolicy::access_counter: return "access_counter";
    case PlacementPolicy::duplication: return "duplication";
  }
  return "?";
}

/// How MultiGpuSpace::place_on_gpus() spreads an object's pages over the space's GPUs before any
/// kernel runs (OASIS's initial-placement study, Section VI-B; pages otherwise start on the host).
enum class Spread : std::uint8_t {
  blocks,       ///< GPU g holds the g-th of N runs of pages (equal to within one page)
  interleaved,  ///< page p on GPU p % N
};

[[nodiscard]] constexpr const char* to_string(Spread s) {
  return s == Spread::blocks ? "blocks" : "interleaved";
}

namespace detail::mg {
/// The GPU (0 .. gpus - 1) that `spread` gives page `page` of an object of `pages` pages.
[[nodiscard]] WARPVM_HD_INLINE constexpr unsigned spread_gpu(Spread spread, std::uint64_t page, std::uint64_t pages,
                                                            unsigned gpus) {
  // pages < 2^40 and gpus <= 64: the product cannot overflow.
  return static_cast<unsigned>(spread == Spread::blocks ? page * gpus / pages : page % gpus);
}
}  // namespace detail::mg

}  // namespace warpvm

namespace warpvm::detail::mg {

/// The most GPUs one space spans (the directory's masks allow 64; the per-GPU tables are sized
/// for this).
inline constexpr unsigned max_gpus = 16;

/// Per-GPU event counters, sharded by SM so that no counter is one contended word.
enum class Counter : std::uint32_t {
  local_accesses,       ///< warp accesses (one per page per warp) served from the GPU's own frame
  remote_accesses,      ///< warp accesses to a peer's frame over NVLink
  remote_lines,         ///< 128 B lines those touched (what the access counters count)
  first_touches,        ///< faults on pages on the host never shared (first touches, private pages evicted and touched
                        ///< again), and writes that took a page placed on another GPU
  shared_faults,        ///< faults on pages another GPU held, or shared before an eviction (the O-Table learns from these)
  migrations,           ///< fault-driven page moves (on-touch, duplication's write)
  counter_migrations,   ///< pages moved because this GPU's access counter reached the threshold
  replications,
  collapses,            ///< writes that collapsed replicas
  remote_maps,
  write_upgrades,       ///< first write through a read-only mapping that may write (marks dirty)
  invalidations,        ///< other GPUs' mappings taken away or narrowed (revoked and drained)
  aborted_transitions,  ///< transitions abandoned because a mapping did not drain in time (retried)
  nvlink_bytes,         ///< pages pulled from peers (the host adds remote_lines' bytes: one atomic less per access)
  pcie_bytes,           ///< pages fetched from the host plus pages written back
  writebacks,           ///< dirty pages copied back to the host: by flush(), and by evictions of a sole owner's page
  evictions,            ///< own copies given up to free a frame of a full pool
  count
};
inline constexpr std::uint32_t counter_count = static_cast<std::uint32_t>(Counter::count);
inline constexpr std::uint32_t counter_shards = 64;

/// What failed on a device.
enum class DeviceFailure : std::uint32_t {
  out_of_frames,     ///< a full pool in which no page could be evicted (`where`: the faulting page)
  bad_flat_address,  ///< a flat_view access outside every object, or past or across its end (`where`: the address)
  lock_timeout,      ///< a page's directory lock not given back within the watchdog (`where`: the page)
  bad_span,          ///< shared_array::with_span outside its object or across a page (`where`: the first element)
};

/// First device-side failure (mapped pinned host memory, plain stores; the claim is a device
/// word on the space's first GPU).
struct ErrorRecord {
  std::uint32_t state;  ///< 0, then 1 once every field is written
  std::uint32_t object_id;
  std::uint32_t gpu;
  std::uint32_t frames;  ///< the pool's size
  std::uint64_t where;
  DeviceFailure failure;
};

/// One object as one GPU's kernels see it (a copy per GPU, in that GPU's memory).
struct ObjectView {
  std::byte* host;                  ///< pinned backing store (this device's address for it)
  std::uint64_t bytes;
  DirectoryEntry* directory;        ///< per page, on the object's home GPU
  std::uint32_t* dirty;             ///< per page, on the home GPU: written since the last flush
  std::uint64_t* pte[max_gpus];     ///< every GPU's page table of this object
  std::uint32_t* counters;          ///< this GPU's access counters, one per 64 KB group
  std::uint32_t id;
  PlacementPolicy policy;
  std::uint64_t flat_base;          ///< the object's first flat address (flat_view)
};

struct SpaceView {
  FramePoolView pools[max_gpus];  ///< every GPU's frame pool (frames are freed into their own GPU's)
  ObjectView* objects;            ///< this GPU's copy of the object table, indexed by id
  std::uint32_t* otable;          ///< one word per object id, on the first GPU
  std::uint64_t* counters;        ///< this GPU's [counter_shards][counter_count]
  ErrorRecord* error;             ///< mapped host memory
  std::uint32_t* error_claim;     ///< device word on the first GPU
  std::uint64_t drain_timeout_ns; ///< a transition whose mappings have not drained by then is abandoned
  std::uint64_t watchdog_ns;      ///< MultiGpuConfig::watchdog_seconds: no frame, or no lock, for this long fails
  std::uint32_t reset_threshold;
  std::uint32_t counter_threshold;
  std::uint32_t pages_per_group;  ///< pages per access-counter group (64 KB / page, at least 1)
  unsigned gpu;
  unsigned gpus;
  unsigned page_shift;
};

/// A handle's binding to one GPU: enough for the hit path without touching the tables.
struct Binding {
  const SpaceView* space = nullptr;   ///< the bound GPU's view (device memory)
  const ObjectView* object = nullptr; ///< the bound GPU's entry for the object
  std::uint64_t* pte = nullptr;       ///< the bound GPU's page table of the object
  unsigned gpu = 0;
  unsigned gpus = 0;
  unsigned page_shift = 0;
};

}  // namespace warpvm::detail::mg

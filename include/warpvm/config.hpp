#pragma once
/// @file
/// Runtime configuration: cache size, page size, eviction policy, fault transport, checked mode,
/// progress bound; and the named presets (warpvm's default, DREAM's, UVM's).

#include <cstddef>
#include <cstdint>
#include <string>

/// 1 when the device-side fault-event recorder is compiled in (CMake option WARPVM_FAULT_EVENTS,
/// which defines it for the library and everything that links it).
#ifndef WARPVM_FAULT_EVENTS
#define WARPVM_FAULT_EVENTS 0
#endif

/// 1 when kernels carry the host_batched transport's evicting path (CMake option
/// WARPVM_HOST_BATCHED_EVICTION). It is inlined at every access site and costs kernels of the
/// default preset 5-30 registers even though they never take it, so it is opt-in: without it, a
/// host_batched launch whose objects outgrow the cache is refused with an error that says so.
#ifndef WARPVM_HOST_BATCHED_EVICTION
#define WARPVM_HOST_BATCHED_EVICTION 0
#endif

namespace warpvm {

/// How the device page cache picks a victim frame.
enum class EvictionPolicy : std::uint8_t {
  clock,  ///< CLOCK: a frame referenced since the hand last passed gets a second chance (default)
  fifo,   ///< FIFO with reference counts, as DREAM: the hand takes the next frame nobody holds
};

/// Where an object's pages are served from.
enum class Placement : std::uint8_t {
  migrate,  ///< pages are copied into the device cache on first touch
  remote,   ///< every access goes to pinned host memory over the link (zero-copy); nothing cached
  /// Per page, as access counters do: element reads of an absent page go to host memory over the
  /// link while what they fetched (32-byte sectors) stays within Config::automatic_remote_share
  /// of the page, then it migrates. Sparse pages cost only the sectors read; dense ones are
  /// copied once, at the first dense read. Writes, atomics, spans
  /// and cursors migrate at once. The uvm preset (host_batched) migrates, as UVM does. The
  /// default of Runtime::alloc and adopt: the choice between zero-copy and migration is per page,
  /// not left to the user.
  automatic,
  /// The object gets frames of its own, one per page, out of Config::resident_bytes (beside the
  /// cache, which they do not take from): each page is copied in on its first touch and then
  /// stays until drop_cached(). Nothing evicts it, so accesses take no holds: an element read is
  /// a load of the page's entry and a load of the element, with no atomic, however oversubscribed
  /// the cache is. For small objects that kernels touch at random (a graph's per-vertex values,
  /// a lookup table), which would otherwise pay a hold (two atomics) per access once the cache
  /// can evict. Not available with the host_batched transport.
  resident,
};

/// Whether an object's pages are kept in the cache's frames (migrate or automatic).
[[nodiscard]] constexpr bool is_cached(Placement placement) {
  return placement == Placement::migrate || placement == Placement::automatic;
}

/// Who serves a fault.
enum class Transport : std::uint8_t {
  /// The faulting warp copies the page itself, out of pinned host memory (default).
  gpu_initiated,
  /// As UVM does: the faulting warp posts the fault to a buffer in pinned memory and waits; a
  /// host thread takes batches of up to `fault_batch_size` faults, drops duplicates, services
  /// them per 2 MB block with UVM's tree prefetcher, copies with cudaMemcpyAsync and replays.
  /// 4 KB pages. Evicts only in builds with WARPVM_HOST_BATCHED_EVICTION=1; otherwise the
  /// cache must hold every migrate object, in whole 2 MB chunks.
  host_batched,
};

/// Named configurations (Config::preset).
enum class Preset : std::uint8_t {
  warpvm,  ///< GPU-initiated transfers, CLOCK eviction
  dream,   ///< DREAM's choices: GPU-initiated transfers, FIFO with reference counts, no prefetch
  uvm,     ///< UVM's policy: host-batched faults, tree prefetch, 4 KB pages
};

const char* to_string(EvictionPolicy policy) noexcept;
const char* to_string(Placement placement) noexcept;
const char* to_string(Transport transport) noexcept;
const char* to_string(Preset preset) noexcept;

/// Everything a Runtime needs to know up front. Validated by Runtime's constructor.
struct Config {
  /// Device cache size in bytes; 0 means "use cache_fraction_of_free".
  std::size_t cache_bytes = 0;
  /// Share of the device's free memory given to the cache when cache_bytes is 0, in (0, 0.95].
  double cache_fraction_of_free = 0.5;
  /// Device memory set aside beside the cache for Placement::resident objects, a frame per page
  /// of each (rounded up to whole pages; 0: no object can be resident).
  std::size_t resident_bytes = 0;
  /// Page (and frame) size: a power of two from 512 B (one 16-byte load per lane) to 2 MiB.
  std::size_t page_bytes = 4096;
  EvictionPolicy eviction = EvictionPolicy::clock;
  Transport transport = Transport::gpu_initiated;
  /// host_batched: faults taken per batch (the driver's default is 256).
  std::uint32_t fault_batch_size = 256;
  /// host_batched: UVM's tree prefetcher on or off.
  bool prefetch = true;
  /// Fault events the device may record (Runtime::fault_events()); 0 turns recording off.
  /// Each takes 40 bytes of device memory. Needs a build with -DWARPVM_FAULT_EVENTS=ON.
  std::size_t fault_event_capacity = 0;
  /// Bounds-check every element access; an out-of-range index is raised as a warpvm::Error.
  bool checked = false;
  /// Pages one thread may hold at once (live page spans or cursors, plus one element access).
  /// Launches are refused when resident threads x this exceeds the frames: that bound is what
  /// makes every oversubscription ratio deadlock-free.
  std::uint32_t max_pages_held_per_thread = 4;
  /// Objects that may be alive at once.
  std::uint32_t max_objects = 1024;
  /// Placement::automatic while nothing can be evicted (every cached object fits): the share of a
  /// page's bytes that element reads of it may fetch from host memory (in 32-byte sectors, each
  /// counted once per warp access) before it migrates, in [0, 1]. 1/16 of a 4 KB page is 8
  /// sectors: eight scattered reads, or none for a warp access that reads more than 8 sectors
  /// (that page is copied at once). 0 migrates at every absence. A copy made in core stays for
  /// good, so buying it early costs little.
  double automatic_remote_share = 1.0 / 16;
  /// Placement::automatic once the cache can evict, in [0, 64]: the same share, counted since the
  /// page was last loaded. A copy may now be thrown out before it is read again, so a page first
  /// pays for its copy in remote reads (1: the ski-rental break-even, which fetches at most twice
  /// what the better of the two choices would). A 512-byte row of a 4 KB page is then read
  /// remotely eight times before its page migrates, instead of migrating at its first read.
  double automatic_remote_share_evicting = 1.0;
  /// CUDA device ordinal.
  int device = 0;
  /// A warp that finds no evictable frame for this long records a no_progress error and traps.
  double watchdog_seconds = 20.0;

  /// The settings of a named preset; the other fields keep their defaults.
  [[nodiscard]] static Config preset(Preset preset);

  /// Throws warpvm::Error(invalid_config) naming the first field that cannot work.
  void validate() const;
  /// One-line human-readable summary.
  [[nodiscard]] std::string describe() const;
};

}  // namespace warpvm

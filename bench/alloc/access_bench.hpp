#pragma once
// warpvm-alloc-bench's access workloads (access_bench.cu): how the heap's layouts fare when
// threads read their allocations at random, on warpvm's fault path (default config and the
// `uvm` preset) and on real UVM (the managed backend).

#include "../micro/bench_support.cuh"
#include "warpvm/detail/alloc/warp_layout.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace warpvm::bench {

struct AccessSetup {
  /// random_access: `threads` threads, one point per range size, `accesses` reads each.
  std::uint64_t threads = 1024;
  std::vector<std::uint64_t> ranges{512,      1 << 10,  2 << 10,   4 << 10,   8 << 10,   16 << 10, 32 << 10,
                                    64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20};
  std::uint64_t accesses = 100;
  /// large_ranges: the paper's Section VII-F shape (128 threads over 16 MB each).
  std::uint64_t large_threads = 128, large_range = 16ull << 20, large_accesses = 100;
  /// oversubscription: the paper's Section VII-G shape (120 MB per thread, 420 reads) over a
  /// cache of `oversub_cache`; `oversub_threads` 0 takes the fewest whole warps whose ranges
  /// total at least 2.5x the cache.
  std::uint64_t oversub_range = 120ull << 20, oversub_accesses = 420, oversub_cache = 4ull << 30,
                oversub_threads = 0;
  /// The aligned modes' order of the lanes' tiles in a row (the paper's pattern order:
  /// prefetch_first).
  detail::LaneOrder lane_order = detail::LaneOrder::lane_id;
};

inline const std::vector<std::string> access_workloads{"random_access", "large_ranges", "oversubscription"};
inline const std::vector<std::string> access_modes{"warpvm_aligned",     "warpvm_contiguous", "warpvm_uvm_aligned",
                                                   "warpvm_uvm_contiguous", "managed_aligned",  "managed_contiguous"};

/// Runs `workloads` (of access_workloads) in `modes` (of access_modes), one record per point
/// into `recorder`; true when every point was verified. Throws std::runtime_error before
/// measuring anything when a managed point would not fit in core (cudaMemGetInfo's free memory
/// less 4 GiB).
bool run_access_workloads(const AccessSetup& setup, const std::vector<std::string>& workloads,
                          const std::vector<std::string>& modes, const Options& options, Recorder& recorder);

}  // namespace warpvm::bench

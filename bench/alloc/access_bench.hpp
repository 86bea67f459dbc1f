#pragma once
// warpvm-alloc-bench's access workloads (access_bench.cu): how the heap's layouts fare when
// threads read their allocations at random, on warpvm's fault path (default config and the
// `uvm` preset) and on real UVM (the managed backend). Also the launch shape and the heap's
// device face that both of the benchmark's files (alloc_bench.cu, access_bench.cu) use.

#include "harness.cuh"
#include "warpvm/workloads/alloc/alloc_workloads.hpp"
#include "warpvm/detail/alloc/warp_layout.hpp"
#include "warpvm/heap.hpp"

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
  /// Whose draws each thread's reads follow (alloc_workloads.hpp): independent per thread, or
  /// its warp's (every lane at the same offset of its own range at each step).
  workloads::AccessOffsets offsets = workloads::AccessOffsets::per_thread;
};

/// Threads per block of warpvm-alloc-bench's kernels (alloc_bench.cu, access_bench.cu).
inline constexpr unsigned block_threads = 256;

__device__ inline std::uint64_t thread_index() { return std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; }

/// Blocks of block_threads for one thread each of `threads`.
inline dim3 grid_for(std::uint64_t threads) {
  return dim3(static_cast<unsigned>((threads + block_threads - 1) / block_threads));
}

/// warpvm::Heap behind the face the kernels are written against (CUDA's malloc and the managed
/// buffer have one too): allocation, and 4-byte words of an allocation through warpvm's page cache.
struct HeapMemory {
  using pointer = heap_ptr;
  device_heap heap;
  __device__ pointer allocate(std::uint64_t bytes) const { return heap.malloc(bytes); }
  __device__ void release(pointer p) const { heap.free(p); }
  __device__ std::uint32_t load(pointer p, std::uint64_t word) const { return heap.load<std::uint32_t>(p, word); }
  __device__ void store(pointer p, std::uint64_t word, std::uint32_t value) const {
    heap.store<std::uint32_t>(p, word, value);
  }
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

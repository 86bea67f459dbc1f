#pragma once
/// @file
/// warpvm-alloc-bench's size and slot draws, shared by the benchmark's kernels
/// (alloc_bench.cu, access_bench.cu), the host replay of its random workload
/// (tests/alloc/random_workload_test.cpp) and the access workloads' host references
/// (access_workloads.hpp), so that each side draws exactly the same values. Host and device;
/// no CUDA runtime.

#include "warpvm/detail/host_device.hpp"

#include <cstdint>

namespace warpvm::workloads {

/// Thread `thread`'s draw in [lo, hi] for `seed` (splitmix64 of seed and thread).
WARPVM_HD_INLINE std::uint64_t point_bytes(std::uint64_t seed, std::uint64_t thread, std::uint64_t lo,
                                           std::uint64_t hi) {
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + thread;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return lo + (x ^ (x >> 31)) % (hi - lo + 1);
}

/// The random workload's step `step`: the slot thread `thread` picks among its `slots` (slot
/// array index: thread x slots + the pick) ...
WARPVM_HD_INLINE std::uint64_t random_slot(std::uint64_t step, std::uint64_t thread, std::uint32_t slots) {
  return thread * slots + point_bytes(2 * step, thread, 0, slots - 1);
}

/// ... and the bytes it asks for there when that slot is empty.
WARPVM_HD_INLINE std::uint64_t random_bytes(std::uint64_t step, std::uint64_t thread, std::uint64_t lo,
                                            std::uint64_t hi) {
  return point_bytes(2 * step + 1, thread, lo, hi);
}

/// The access workloads (random_access, large_ranges, oversubscription): the 4-byte word that
/// thread `thread` writes at word `word` of its range (words < 2^32) ...
WARPVM_HD_INLINE std::uint32_t pattern_word(std::uint64_t seed, std::uint64_t thread, std::uint64_t word) {
  return static_cast<std::uint32_t>(point_bytes(seed, thread << 32 | word, 0, 0xffffffffull));
}

/// Whose draws a thread's reads follow: its own (per_thread: independent offsets, issue #4's
/// random access) or its warp's (per_warp: at each step every lane reads the same word of its
/// own range, the lane-correlated pattern AlignMalloc's layout is built for).
enum class AccessOffsets : std::uint8_t { per_thread, per_warp };

/// ... the stream of draws thread `thread` follows ...
WARPVM_HD_INLINE std::uint64_t access_stream(std::uint64_t thread, AccessOffsets offsets) {
  return offsets == AccessOffsets::per_warp ? thread / 32 : thread;
}

/// ... and the word of its `words` that read number `access` of draw stream `stream` goes to.
WARPVM_HD_INLINE std::uint64_t access_word(std::uint64_t seed, std::uint64_t stream, std::uint64_t access,
                                           std::uint64_t words) {
  return point_bytes(~seed ^ access << 32, stream, 0, words - 1);
}

}  // namespace warpvm::workloads

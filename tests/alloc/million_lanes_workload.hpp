#pragma once
// The million-lane random alloc/free workload (issue #28, item 7), shared by the host replay
// (million_lanes_test.cpp) and the GPU test (heap_test.cu) so that both draw the same requests.
// Each step, every thread picks one of its slots: a live block there is freed, an empty slot gets a
// new block. Most requests are the fast path's (16 B .. 256 B); one draw in `large_one_in` reaches
// the host path (8 KB + 16 .. 64 KB). Sized so that at 1M lanes the live bytes (about 0.7 GiB) and
// what the heap keeps for them fit a 4 GiB heap: see the replay.

#include "warpvm/detail/host_device.hpp"
#include "warpvm/workloads/alloc/alloc_workloads.hpp"

#include <cstdint>

namespace warpvm::testing::million {

struct Workload {
  std::uint64_t threads = 1024 * 1024;
  std::uint32_t slots = 2;
  std::uint32_t steps = 8;
  std::uint64_t small_lo = 16, small_hi = 256;
  std::uint64_t large_lo = 8192 + 16, large_hi = 64 * 1024;
  std::uint64_t large_one_in = 64;
};

/// The slot thread `thread` picks at `step` (index thread x slots + the pick).
WARPVM_HD_INLINE std::uint64_t slot_of(const Workload& w, std::uint32_t step, std::uint64_t thread) {
  return workloads::random_slot(step, thread, w.slots);
}

/// The bytes it asks for there when the slot is empty.
WARPVM_HD_INLINE std::uint64_t bytes_of(const Workload& w, std::uint32_t step, std::uint64_t thread) {
  const bool large = workloads::point_bytes(0x5eed + step, thread, 0, w.large_one_in - 1) == 0;
  return large ? workloads::random_bytes(step, thread, w.large_lo, w.large_hi)
               : workloads::random_bytes(step, thread, w.small_lo, w.small_hi);
}

}  // namespace warpvm::testing::million

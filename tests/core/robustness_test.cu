// Misuse and broken state that must end in a clear warpvm::Error, not a hang or silent
// corruption (issue #28): a wait for a page whose load or eviction never finishes. Cases that
// end the kernel with a trap run in a child process (death tests): a trap leaves the CUDA
// context unusable.

#include "gpu_test_support.cuh"

#include "warpvm/detail/core/inspect.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace warpvm::testing {
namespace {

class Robustness : public GpuTest {};

/// Reads every element (grid-stride) and adds them into *sink, so that the reads are kept.
__global__ void sum_elements(array<std::uint32_t> a, unsigned long long* sink) {
  unsigned long long sum = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < a.size();
       i += std::uint64_t{gridDim.x} * blockDim.x)
    sum += a[i];
  atomicAdd(sink, sum);
}

/// Page 2 of 'stuck' is left BUSY, as by a loader that died: every warp that reaches it waits.
void run_until_page_wait_watchdog() {
  try {
    Runtime rt(Config{.cache_bytes = 1ull << 20, .max_pages_held_per_thread = 1, .watchdog_seconds = 1.0});
    auto a = rt.alloc<std::uint32_t>(4096, Placement::migrate, "stuck");
    fill_initial(a, 1);
    detail::force_page_state(rt, a.id(), 2, detail::page_word::busy);
    DeviceVector<unsigned long long> sink(1);
    rt.launch(sum_elements, dim3(4), dim3(128), 0, a.device(), sink.get());
    rt.synchronize();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(e.kind() == ErrorKind::no_progress ? 0 : 1);
  }
  std::exit(2);
}

TEST_F(Robustness, AWaitForAPageThatNeverLeavesItsTransitionReportsNoProgress) {
  EXPECT_EXIT(run_until_page_wait_watchdog(), ::testing::ExitedWithCode(0), "evicting page 2 of 'stuck'");
}

}  // namespace
}  // namespace warpvm::testing

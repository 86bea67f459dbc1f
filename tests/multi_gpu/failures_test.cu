// Failures of a MultiGpuSpace's kernels that must reach the host as a clear warpvm::Error naming
// the object (issue #28): a directory lock never given back (the wait is bounded by
// MultiGpuConfig::watchdog_seconds). Each ends the kernel with a trap, so each runs in a child
// process (death tests). One GPU suffices.

#include "gpu_test_support.cuh"

#include <cstdio>
#include <cstdlib>

namespace warpvm::testing {
namespace {

class MultiGpuFailures : public GpuTest {};

/// Exits 0 when `run` throws Error of `kind` (printing its message for the death test's regex).
template <class Run>
void exit_with_error_kind(ErrorKind kind, Run&& run) {
  try {
    run();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(e.kind() == kind ? 0 : 1);
  }
  std::exit(2);
}

__global__ void load_first_element(shared_array<std::uint32_t> a, shared_array<std::uint32_t> out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) out.store(0, a.load(0));
}

TEST_F(MultiGpuFailures, AFaultOnADirectoryLockNeverGivenBackReportsNoProgress) {
  EXPECT_EXIT(exit_with_error_kind(ErrorKind::no_progress,
                                   [] {
                                     MultiGpuSpace space({.devices = {0}, .frame_bytes_per_gpu = 8ull << 20,
                                                          .watchdog_seconds = 1.0});
                                     auto locked = space.alloc<std::uint32_t>(4096, std::nullopt, "locked");
                                     auto out = space.alloc<std::uint32_t>(1, std::nullopt, "out");
                                     detail::mg::force_directory_lock(space, locked.id(), 0);
                                     space.launch(load_first_element, dim3(1), dim3(32), 0, locked.on(0), out.on(0));
                                     space.synchronize();
                                   }),
              ::testing::ExitedWithCode(0), "object 'locked' \\(page 0\\).*directory lock");
}

}  // namespace
}  // namespace warpvm::testing

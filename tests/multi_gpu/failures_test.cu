// Failures of a MultiGpuSpace's kernels that must reach the host as a clear warpvm::Error naming
// the object (issue #28): a directory lock never given back (the wait is bounded by
// MultiGpuConfig::watchdog_seconds), a span outside its object, and a first failure on record
// followed by a trap (the record, not CUDA's bare launch failure, is raised). Each ends the
// kernel with a trap, so each runs in a child process (death tests). One GPU suffices.

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

/// A span of two elements across the end of `a`.
__global__ void span_past_the_end(shared_array<std::uint32_t> a) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    a.with_span<access::read>(a.size() - 1, 2, [](const std::uint32_t*) {});
}

TEST_F(MultiGpuFailures, ASpanPastItsObjectIsRecordedBeforeTheTrap) {
  EXPECT_EXIT(exit_with_error_kind(ErrorKind::index_out_of_range,
                                   [] {
                                     MultiGpuSpace space({.devices = {0}, .frame_bytes_per_gpu = 8ull << 20});
                                     auto short_one = space.alloc<std::uint32_t>(100, std::nullopt, "short");
                                     space.launch(span_past_the_end, dim3(1), dim3(32), 0, short_one.on(0));
                                     space.synchronize();
                                   }),
              ::testing::ExitedWithCode(0), "with_span .*element 99 of 'short'");
}

/// A bad flat address is recorded (the kernel goes on), then a bad span traps: the record is the
/// cause the host must see.
__global__ void bad_address_then_trap(flat_view flat, shared_array<std::uint32_t> a) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  (void)flat.load<std::uint32_t>(0);
  a.with_span<access::read>(a.size() - 1, 2, [](const std::uint32_t*) {});
}

TEST_F(MultiGpuFailures, ARecordedBadFlatAddressIsRaisedEvenWhenTheKernelTrapsAfterIt) {
  EXPECT_EXIT(exit_with_error_kind(ErrorKind::index_out_of_range,
                                   [] {
                                     MultiGpuSpace space({.devices = {0}, .frame_bytes_per_gpu = 8ull << 20});
                                     auto a = space.alloc<std::uint32_t>(100, std::nullopt, "a");
                                     space.launch(bad_address_then_trap, dim3(1), dim3(32), 0, space.flat(), a.on(0));
                                     space.synchronize();
                                   }),
              ::testing::ExitedWithCode(0), "flat address 0 is no object's.*the kernel then failed");
}

}  // namespace
}  // namespace warpvm::testing

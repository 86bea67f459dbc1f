// Every cudaMalloc, cudaHostAlloc, cudaHostRegister and host thread start that Runtime
// construction, alloc and adopt make, failed in turn (detail::fail_nth_call, for N = 1, 2, ...
// until a run makes fewer than N calls of the kind), under the default configuration and the
// uvm preset (whose host_batched transport allocates more and starts a service thread). Each
// failure must be a warpvm::Error of the right kind saying what was being allocated; nothing may
// leak (the library's live counts of every kind, exact; free device memory, to within what
// CUDA's own bookkeeping may move); and a new runtime must then work (a kernel's result checked).

#include "gpu_test_support.cuh"

#include "warpvm/detail/core/resources.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

using detail::Resource;

constexpr std::size_t elements = 100000;

__global__ void add_into(array<std::uint32_t> sum, array<std::uint32_t> addend) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < sum.size();
       i += std::uint64_t{gridDim.x} * blockDim.x)
    sum.store(i, sum[i] + addend[i]);
}

/// What each injected failure interrupts: a runtime, an allocated and an adopted object, and a
/// kernel whose result is checked (ASSERTs: the caller checks HasFatalFailure()).
void construct_and_use(const Config& config, std::vector<std::uint32_t>& adopted_memory) {
  Runtime rt(config);
  auto allocated = rt.alloc<std::uint32_t>(elements, Placement::automatic, "allocated");
  for (std::size_t i = 0; i < elements; ++i) {
    allocated.host()[i] = static_cast<std::uint32_t>(i);
    adopted_memory[i] = static_cast<std::uint32_t>(2 * i);
  }
  auto adopted = rt.adopt(adopted_memory.data(), adopted_memory.size(), Placement::migrate, "adopted");
  rt.launch(add_into, dim3(16), dim3(256), 0, allocated.device(), adopted.device());
  rt.flush();
  for (std::size_t i = 0; i < elements; ++i) ASSERT_EQ(allocated.host()[i], 3 * i) << i;
}

std::size_t free_device_bytes() {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  WARPVM_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

std::array<std::int64_t, detail::resource_kinds> live_counts() {
  std::array<std::int64_t, detail::resource_kinds> counts{};
  for (std::size_t k = 0; k < detail::resource_kinds; ++k) counts[k] = detail::live_count(static_cast<Resource>(k));
  return counts;
}

Config default_config() { return Config{.cache_bytes = 32ull << 20, .max_pages_held_per_thread = 1}; }
Config uvm_config() {
  Config config = Config::preset(Preset::uvm);
  config.cache_bytes = 32ull << 20;
  config.max_pages_held_per_thread = 1;
  return config;
}

/// Fails call 1, 2, ... of `kind` in construct_and_use(config) until a run makes fewer calls;
/// each failure must be an Error of `expected` whose message contains `says`, leak nothing, and
/// leave the next runtime working. Returns the calls of `kind` one run makes.
std::uint32_t expect_every_failure_clean(Resource kind, const Config& config, ErrorKind expected, const std::string& says) {
  std::vector<std::uint32_t> memory(elements);
  construct_and_use(config, memory);  // warm-up: modules loaded, CUDA's lazy allocations made
  if (::testing::Test::HasFatalFailure()) return 0;
  for (std::uint32_t nth = 1;; ++nth) {
    SCOPED_TRACE(std::string(detail::to_string(kind)) + " call " + std::to_string(nth));
    const auto live_before = live_counts();
    const std::size_t free_before = free_device_bytes();
    detail::fail_nth_call(kind, nth);
    bool failed = false;
    try {
      construct_and_use(config, memory);
    } catch (const Error& e) {
      failed = true;
      EXPECT_EQ(e.kind(), expected) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    const std::uint32_t calls = detail::calls_since_armed(kind);
    detail::fail_nth_call(kind, 0);
    const auto live_after = live_counts();
    for (std::size_t k = 0; k < detail::resource_kinds; ++k)
      EXPECT_EQ(live_after[k], live_before[k]) << detail::to_string(static_cast<Resource>(k)) << " leaked";
    const std::size_t free_after = free_device_bytes();
    EXPECT_LE(free_before - std::min(free_before, free_after), std::size_t{2} << 20)
        << "device memory leaked (the cache alone is 32 MiB)";
    if (!failed) {
      EXPECT_LT(calls, nth) << "call " << nth << " was made but did not fail";
      return calls;
    }
    EXPECT_GE(calls, nth);
    construct_and_use(config, memory);  // a new runtime works
    if (::testing::Test::HasFatalFailure()) return calls;
  }
}

class ResourceFailures : public GpuTest {};

TEST_F(ResourceFailures, EveryDeviceAllocationThatFailsIsACleanErrorAndTheNextRuntimeWorks) {
  EXPECT_GT(expect_every_failure_clean(Resource::device_memory, default_config(), ErrorKind::out_of_memory,
                                       "cudaMalloc of "),
            10u);
  EXPECT_GT(expect_every_failure_clean(Resource::device_memory, uvm_config(), ErrorKind::out_of_memory,
                                       "cudaMalloc of "),
            10u);
}

TEST_F(ResourceFailures, EveryPinnedAllocationThatFailsIsACleanErrorAndTheNextRuntimeWorks) {
  EXPECT_GE(expect_every_failure_clean(Resource::pinned_memory, default_config(), ErrorKind::out_of_memory,
                                       "pinned "),
            2u)
      << "the error record and the allocated object";
  EXPECT_GT(expect_every_failure_clean(Resource::pinned_memory, uvm_config(), ErrorKind::out_of_memory, "pinned "),
            2u);
}

TEST_F(ResourceFailures, AHostRegistrationThatFailsIsACleanErrorAndTheNextRuntimeWorks) {
  EXPECT_EQ(expect_every_failure_clean(Resource::host_registration, default_config(), ErrorKind::cuda,
                                       "cudaHostRegister of "),
            1u);
}

TEST_F(ResourceFailures, AServiceThreadThatCannotStartIsACleanErrorAndTheNextRuntimeWorks) {
  EXPECT_EQ(expect_every_failure_clean(Resource::host_thread, uvm_config(), ErrorKind::out_of_memory,
                                       "could not start the host_batched service thread"),
            1u);
}

}  // namespace
}  // namespace warpvm::testing

// Misuse and broken state that must end in a clear warpvm::Error, not a hang or silent
// corruption (issue #28): a wait for a page whose load or eviction never finishes, a handle of
// an object destroyed since (checked mode), an overwrite span that leaves part of its page
// unwritten (checked mode). Cases that end the kernel with a trap run in a child process
// (death tests): a trap leaves the CUDA context unusable.

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
    rt.launch(sum_elements, dim3(1), dim3(128), 0, a.device(), sink.get());  // 128 threads: within 256 frames
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

/// Stores 0 into every element (grid-stride).
__global__ void zero_elements(array<std::uint32_t> a) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < a.size();
       i += std::uint64_t{gridDim.x} * blockDim.x)
    a.store(i, 0u);
}

TEST_F(Robustness, AStaleHandleOfADestroyedObjectIsReportedInCheckedModeAndTouchesNothing) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .checked = true, .max_pages_held_per_thread = 1});
  array<std::uint32_t> stale;
  std::uint32_t departed_id = 0;
  {
    auto departed = rt.alloc<std::uint32_t>(1u << 16, Placement::migrate, "departed");
    departed_id = departed.id();
    stale = departed.device();
  }
  auto successor = rt.alloc<std::uint32_t>(1u << 16, Placement::migrate, "successor");
  ASSERT_EQ(successor.id(), departed_id) << "the test needs the slot reused";
  fill_initial(successor, 2);
  rt.launch(zero_elements, dim3(16), dim3(256), 0, stale);
  try {
    rt.synchronize();
    FAIL() << "expected the stale handle to be reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    const std::string what = e.what();
    EXPECT_NE(what.find("stale handle: 'departed'"), std::string::npos) << what;
    EXPECT_NE(what.find("generation 1"), std::string::npos) << what;
    EXPECT_NE(what.find("generation 2 ('successor'"), std::string::npos) << what;
  }
  rt.flush();
  for (std::size_t i = 0; i < successor.size(); ++i)
    ASSERT_EQ(successor.host()[i], initial_value(i, 2)) << "the stale handle wrote into its successor at " << i;
  // The runtime goes on, and the live handle works.
  rt.launch(zero_elements, dim3(16), dim3(256), 0, successor.device());
  rt.flush();
  for (std::size_t i = 0; i < successor.size(); ++i) ASSERT_EQ(successor.host()[i], 0u) << i;
}

/// A warp per page, through an overwrite span; its lanes write the first `written` elements of
/// each page only (all of them when `written` is the page's size or more).
__global__ void overwrite_pages(array<std::uint32_t> a, std::uint32_t written) {
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const std::uint64_t per_page = a.elements_per_page();
  for (std::uint64_t first = warp * per_page; first < a.size(); first += warps * per_page) {
    const auto page = a.span<access::overwrite>(first);
    for (std::uint32_t j = threadIdx.x % 32; j < page.size() && j < written; j += 32)
      page[j] = static_cast<std::uint32_t>(page.first() + j);
  }
}

TEST_F(Robustness, AnOverwriteSpanThatLeavesBytesUnwrittenIsReportedInCheckedMode) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .checked = true, .max_pages_held_per_thread = 1});
  // A page's previous contents are another object's: 'earlier' fills frames, is dropped, and
  // 'output' takes them over.
  auto earlier = rt.alloc<std::uint32_t>(1u << 16, Placement::migrate, "earlier");
  fill_initial(earlier, 3);
  DeviceVector<unsigned long long> sink(1);
  rt.launch(sum_elements, dim3(16), dim3(256), 0, earlier.device(), sink.get());
  rt.drop_cached();

  auto complete = rt.alloc<std::uint32_t>(5000, Placement::migrate, "complete");  // a partial last page
  rt.launch(overwrite_pages, dim3(8), dim3(128), 0, complete.device(), ~0u);
  rt.flush();  // a span that wrote its whole page is not reported
  for (std::size_t i = 0; i < complete.size(); ++i) ASSERT_EQ(complete.host()[i], i) << i;

  auto half = rt.alloc<std::uint32_t>(1u << 14, Placement::migrate, "half-written");
  const auto per_page = static_cast<std::uint32_t>(rt.page_bytes() / sizeof(std::uint32_t));
  rt.launch(overwrite_pages, dim3(8), dim3(128), 0, half.device(), per_page / 2);
  try {
    rt.synchronize();
    FAIL() << "expected the unwritten half pages to be reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    const std::string what = e.what();
    EXPECT_NE(what.find("overwrite span of 'half-written'"), std::string::npos) << what;
    EXPECT_NE(what.find("with bytes from " + std::to_string(rt.page_bytes() / 2) + " of the page on never written"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace warpvm::testing

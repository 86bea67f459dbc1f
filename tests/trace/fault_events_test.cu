// The device-side fault-event recorder (builds with -DWARPVM_FAULT_EVENTS=ON; skipped, saying
// so, in others): one event per warp-level fault, consistent with the runtime's counters.

#include "gpu_test_support.cuh"

#include <algorithm>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

namespace warpvm::testing {
namespace {

/// Each warp sums whole pages through read spans.
__global__ void sum_pages(array<std::uint32_t> a, unsigned long long* total) {
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const std::uint64_t per_page = a.elements_per_page();
  unsigned long long s = 0;
  for (std::uint64_t p = warp; p < a.size() / per_page; p += warps) {
    const auto page = a.span(p * per_page);
    for (std::uint32_t j = threadIdx.x % 32; j < page.size(); j += 32) s += page[j];
  }
  atomicAdd(total, s);
}

/// Every warp reads the same few pages: most warps wait for another's load.
__global__ void crowd_pages(array<std::uint32_t> a, std::uint64_t pages, unsigned long long* total) {
  const std::uint64_t page = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32 % pages;
  atomicAdd(total, static_cast<unsigned long long>(a[page * a.elements_per_page() + threadIdx.x % 32]));
}

class FaultEvents : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (!WARPVM_FAULT_EVENTS) GTEST_SKIP() << "built without the fault-event recorder (-DWARPVM_FAULT_EVENTS=ON)";
  }
};

TEST_F(FaultEvents, OneFillPerMissAndEvictionsAgreeWithTheCounters) {
  constexpr std::uint64_t n = 4u << 20;  // 16 MiB: 4096 pages through a 4 MiB cache
  Runtime rt(Config{.cache_bytes = 4u << 20, .fault_event_capacity = 1u << 16, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint32_t>(n, Placement::migrate);
  fill_initial(a, 3);
  DeviceVector<unsigned long long> total(1);
  rt.launch(sum_pages, dim3(4), dim3(256), 0, a.device(), total.get());  // 1024 threads x 1 page = the cache
  rt.synchronize();
  const auto host = a.host();
  EXPECT_EQ(total.to_host()[0], std::accumulate(host.begin(), host.end(), 0ull));

  std::uint64_t dropped = 1;
  const std::vector<FaultEvent> events = rt.fault_events(&dropped);
  EXPECT_EQ(dropped, 0u);
  const Stats stats = rt.stats();
  std::uint64_t fills = 0, evicting = 0, waits = 0;
  std::set<std::uint64_t> pages;
  for (const FaultEvent& e : events) {
    EXPECT_LE(e.start_ns, e.end_ns);
    EXPECT_EQ(e.object, a.id());
    EXPECT_LT(e.page, n / 1024);
    EXPECT_GE(e.lanes, 1u);
    EXPECT_LE(e.lanes, 32u);
    EXPECT_LT(e.warp, 4u * 256 / 32);
    EXPECT_EQ(e.write, 0u);
    if (e.kind == FaultKind::fill) {
      ++fills;
      evicting += e.detail != 0;
      pages.insert(e.page);
    } else {
      EXPECT_EQ(e.kind, FaultKind::wait);
      ++waits;
    }
  }
  EXPECT_EQ(fills, stats.misses);
  EXPECT_EQ(pages.size(), n / 1024);  // each page faulted at least once
  EXPECT_EQ(evicting, stats.evictions);
  EXPECT_EQ(waits, stats.waits);

  rt.clear_fault_events();
  EXPECT_TRUE(rt.fault_events().empty());
}

TEST_F(FaultEvents, WaitsAreDuplicatesOfAFill) {
  constexpr std::uint64_t n = 1u << 20;
  Runtime rt(Config{.cache_bytes = 4u << 20, .fault_event_capacity = 1u << 16, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint32_t>(n, Placement::migrate);
  auto extra = rt.alloc<std::uint32_t>(n, Placement::migrate);  // eviction possible: every access holds and is counted
  fill_initial(a, 4);
  DeviceVector<unsigned long long> total(1);
  // 32 warps on 4 pages: 8 warps per page. 1024 threads x 1 page held = the 4 MiB cache.
  rt.launch(crowd_pages, dim3(4), dim3(256), 0, a.device(), std::uint64_t{4}, total.get());
  rt.synchronize();
  std::set<std::uint64_t> filled, waited;
  for (const FaultEvent& e : rt.fault_events()) (e.kind == FaultKind::fill ? filled : waited).insert(e.page);
  EXPECT_EQ(filled, (std::set<std::uint64_t>{0, 1, 2, 3}));
  for (const std::uint64_t p : waited) EXPECT_TRUE(filled.count(p)) << p;
}

TEST_F(FaultEvents, CapacityBoundsWhatIsKeptAndCountsTheRest) {
  constexpr std::uint64_t n = 4u << 20;
  Runtime rt(Config{.cache_bytes = 32u << 20, .fault_event_capacity = 100});
  auto a = rt.alloc<std::uint32_t>(n, Placement::migrate);
  fill_initial(a, 5);
  DeviceVector<unsigned long long> total(1);
  rt.launch(sum_pages, dim3(8), dim3(256), 0, a.device(), total.get());  // 2048 threads x 4 pages = the cache
  std::uint64_t dropped = 0;
  const std::vector<FaultEvent> events = rt.fault_events(&dropped);
  EXPECT_EQ(events.size(), 100u);
  EXPECT_EQ(events.size() + dropped, rt.stats().misses);  // nothing waits: every warp has its own pages
}

TEST_F(FaultEvents, HostBatchedFaultsAreRecordedWithTheirPosts) {
  constexpr std::uint64_t n = 4u << 20;  // 16 MiB
  Config config = Config::preset(Preset::uvm);
  config.cache_bytes = 16u << 20;
  config.fault_event_capacity = 1u << 16;
  Runtime rt(config);
  auto a = rt.alloc<std::uint32_t>(n, Placement::migrate);
  fill_initial(a, 6);
  DeviceVector<unsigned long long> total(1);
  rt.launch(sum_pages, dim3(32), dim3(256), 0, a.device(), total.get());
  rt.synchronize();
  std::uint64_t posts = 0;
  bool saturated = false;  // `detail` counts posts up to 255
  const std::vector<FaultEvent> events = rt.fault_events();
  ASSERT_FALSE(events.empty());
  for (const FaultEvent& e : events) {
    EXPECT_EQ(e.kind, FaultKind::host);
    EXPECT_GE(e.detail, 1u);
    posts += e.detail;
    saturated |= e.detail == 255;
  }
  std::uint64_t taken = 0;
  for (const FaultBatch& b : rt.fault_batches()) taken += b.faults + b.faults_flushed;
  EXPECT_GE(taken, events.size());  // each recorded fault posted at least once, and posts are taken or flushed
  if (!saturated) EXPECT_LE(taken, posts);  // a post is taken or flushed at most once
}

}  // namespace
}  // namespace warpvm::testing

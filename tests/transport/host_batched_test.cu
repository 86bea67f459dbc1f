// The host_batched transport (UVM's policy, served by a host thread): exact data, the batch
// records it keeps, prefetch on and off, flush and drop, what it refuses, and eviction when
// the objects need more 2 MB chunks than the cache has.

#include "gpu_test_support.cuh"

#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

/// Sums the object in a grid-stride loop: every page is touched, in address order per warp.
__global__ void sum_all(array<std::uint32_t> a, unsigned long long* total) {
  unsigned long long s = 0;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < a.size();
       i += std::uint64_t{gridDim.x} * blockDim.x)
    s += a[i];
  atomicAdd(total, s);
}

/// Touches one word of every `stride`-th page.
__global__ void touch_strided_pages(array<std::uint32_t> a, std::uint64_t stride, unsigned long long* total) {
  const std::uint64_t per_page = a.elements_per_page();
  const std::uint64_t pages = a.size() / per_page;
  unsigned long long s = 0;
  for (std::uint64_t p = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) * stride; p < pages;
       p += std::uint64_t{gridDim.x} * blockDim.x * stride)
    s += a[p * per_page];
  atomicAdd(total, s);
}

/// v' = v + i through read_write spans.
__global__ void add_index(array<std::uint32_t> a) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < a.size();
       i += std::uint64_t{gridDim.x} * blockDim.x)
    a.store(i, a[i] + static_cast<std::uint32_t>(i));
}

Config uvm_preset(std::size_t cache_bytes, bool prefetch = true) {
  Config config = Config::preset(Preset::uvm);
  config.cache_bytes = cache_bytes;
  config.prefetch = prefetch;
  return config;
}

std::uint64_t host_sum(const object<std::uint32_t>& a) {
  const auto host = a.host();
  return std::accumulate(host.begin(), host.end(), std::uint64_t{0});
}

class HostBatched : public GpuTest {};

TEST_F(HostBatched, StreamReadIsExactAndEveryPageComesInOnce) {
  constexpr std::uint64_t n = 16u << 20;  // 64 MiB: 32 blocks of 2 MB
  Runtime rt(uvm_preset(64ull << 20));
  auto a = rt.alloc<std::uint32_t>(n, Placement::migrate, "stream");
  fill_initial(a, 5);
  DeviceVector<unsigned long long> total(1);
  rt.launch(sum_all, dim3(264), dim3(256), 0, a.device(), total.get());
  rt.synchronize();
  EXPECT_EQ(total.to_host()[0], host_sum(a));

  const Stats stats = rt.stats();
  EXPECT_EQ(stats.misses, n * 4 / 4096);  // each page once, faulted or prefetched
  EXPECT_EQ(stats.bytes_in, n * 4);
  const std::vector<FaultBatch> batches = rt.fault_batches();
  ASSERT_FALSE(batches.empty());
  std::uint64_t pages = 0;
  for (const FaultBatch& b : batches) {
    EXPECT_LE(b.faults, 256u);
    EXPECT_LE(b.unique_faults, b.faults);
    EXPECT_GE(b.blocks, 1u);
    EXPECT_LE(b.blocks, b.unique_faults);
    EXPECT_GT(b.duration_ns, 0u);
    EXPECT_LE(b.transfer_ns, b.duration_ns);
    EXPECT_EQ(b.chunks_evicted, 0u);
    pages += b.pages_faulted + b.pages_prefetched;
  }
  EXPECT_EQ(pages, n * 4 / 4096);
  EXPECT_GT(batches.back().start_ns, 0u);
}

TEST_F(HostBatched, BatchRecordsCountOnlyPagesInsideTheObject) {
  constexpr std::uint64_t n = (3u << 20) / 4 + 1024 + 7;  // 3 MiB, one page more and a partial one
  Runtime rt(uvm_preset(4ull << 20));
  auto a = rt.alloc<std::uint32_t>(n);
  fill_initial(a, 8);
  DeviceVector<unsigned long long> total(1);
  rt.launch(sum_all, dim3(16), dim3(256), 0, a.device(), total.get());
  rt.synchronize();
  EXPECT_EQ(total.to_host()[0], host_sum(a));
  std::uint64_t pages = 0;
  for (const FaultBatch& b : rt.fault_batches()) pages += b.pages_faulted + b.pages_prefetched;
  const std::uint64_t object_pages = (n * 4 + 4095) / 4096;
  EXPECT_EQ(pages, object_pages);  // the prefetcher's whole-block view stops at the object's end
  EXPECT_EQ(rt.stats().misses, object_pages);
}

TEST_F(HostBatched, PrefetchOffMigratesOnlyFaultedPages) {
  constexpr std::uint64_t n = 8u << 20;  // 32 MiB
  for (const bool prefetch : {true, false}) {
    Runtime rt(uvm_preset(32ull << 20, prefetch));
    auto a = rt.alloc<std::uint32_t>(n);
    fill_initial(a, 6);
    DeviceVector<unsigned long long> total(1);
    // Every 4th page: under UVM's prefetcher the 64 KB big pages around each fault come in whole.
    rt.launch(touch_strided_pages, dim3(8), dim3(128), 0, a.device(), std::uint64_t{4}, total.get());
    rt.synchronize();
    unsigned long long expected = 0;
    for (std::uint64_t p = 0; p < n / 1024; p += 4) expected += a.host()[p * 1024];
    EXPECT_EQ(total.to_host()[0], expected);
    std::uint64_t faulted = 0, prefetched = 0;
    for (const FaultBatch& b : rt.fault_batches()) {
      faulted += b.pages_faulted;
      prefetched += b.pages_prefetched;
    }
    const std::uint64_t touched = n / 1024 / 4;
    if (prefetch) {  // a touched page may have come in by prefetch before its own fault
      EXPECT_GT(prefetched, 0u);
      EXPECT_GE(faulted + prefetched, touched);
    } else {
      EXPECT_EQ(faulted, touched);
      EXPECT_EQ(prefetched, 0u);
    }
  }
}

TEST_F(HostBatched, WritesReachTheHostAfterFlushAndDropStartsOver) {
  constexpr std::uint64_t n = 4u << 20;  // 16 MiB
  Runtime rt(uvm_preset(16ull << 20));
  auto a = rt.alloc<std::uint32_t>(n);
  fill_initial(a, 7);
  const std::vector<std::uint32_t> before(a.host().begin(), a.host().end());
  rt.launch(add_index, dim3(132), dim3(256), 0, a.device());
  rt.flush();
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < n; ++i) wrong += a.host()[i] != before[i] + static_cast<std::uint32_t>(i);
  EXPECT_EQ(wrong, 0u);

  rt.drop_cached();
  rt.reset_stats();
  rt.clear_fault_batches();
  for (std::uint64_t i = 0; i < n; ++i) a.host()[i] = static_cast<std::uint32_t>(i * 3 + 1);  // host writes between kernels
  DeviceVector<unsigned long long> total(1);
  rt.launch(sum_all, dim3(132), dim3(256), 0, a.device(), total.get());
  rt.synchronize();
  EXPECT_EQ(total.to_host()[0], host_sum(a));
  EXPECT_EQ(rt.stats().misses, n * 4 / 4096);  // all brought in again
  EXPECT_FALSE(rt.fault_batches().empty());
}

TEST_F(HostBatched, RefusesPagesOtherThan4KB) {
  try {
    Config config = Config::preset(Preset::uvm);
    config.page_bytes = 65536;
    Runtime rt(config);
    FAIL() << "64 KB pages accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_config);
    EXPECT_NE(std::string(e.what()).find("4 KB pages"), std::string::npos) << e.what();
  }
}

/// Touches one word of each page in `pages` (a list of page indices, one per thread).
__global__ void touch_listed_pages(array<std::uint32_t> a, const std::uint64_t* pages, std::uint64_t count,
                                   unsigned long long* total) {
  unsigned long long s = 0;
  for (std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < count;
       t += std::uint64_t{gridDim.x} * blockDim.x)
    s += a[pages[t] * a.elements_per_page()];
  atomicAdd(total, s);
}

std::uint64_t chunks_evicted(const std::vector<FaultBatch>& batches) {
  std::uint64_t n = 0;
  for (const FaultBatch& b : batches) n += b.chunks_evicted;
  return n;
}

/// The evicting path is compiled into kernels only with -DWARPVM_HOST_BATCHED_EVICTION=ON.
class HostBatchedEviction : public HostBatched {
 protected:
  void SetUp() override {
    HostBatched::SetUp();
    if (!WARPVM_HOST_BATCHED_EVICTION) GTEST_SKIP() << "built without -DWARPVM_HOST_BATCHED_EVICTION=ON";
  }
};

TEST_F(HostBatched, OutgrownCacheIsRefusedSayingWhyWithoutTheEvictingBuild) {
  if (WARPVM_HOST_BATCHED_EVICTION) GTEST_SKIP() << "this build evicts (HostBatchedEviction tests)";
  Runtime rt(uvm_preset(16ull << 20));  // 8 chunks for 32
  auto a = rt.alloc<std::uint32_t>(16u << 20);
  fill_initial(a, 10);
  DeviceVector<unsigned long long> total(1);
  try {
    rt.launch(sum_all, dim3(264), dim3(256), 0, a.device(), total.get());
    FAIL() << "a host_batched launch that must evict was accepted by a build that cannot";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_config);
    const std::string what = e.what();
    EXPECT_NE(what.find("WARPVM_HOST_BATCHED_EVICTION=ON"), std::string::npos) << what;
    EXPECT_NE(what.find("holds 8 chunks"), std::string::npos) << what;
    EXPECT_NE(what.find("need 32"), std::string::npos) << what;
  }
}

TEST_F(HostBatchedEviction, OversubscribedStreamReadIsExact) {
  constexpr std::uint64_t n = 16u << 20;  // 64 MiB: 32 blocks of 2 MB
  for (const std::uint64_t cache_mib : {32ull, 16ull}) {  // 50% and 25%
    Runtime rt(uvm_preset(cache_mib << 20));
    auto a = rt.alloc<std::uint32_t>(n, Placement::migrate, "stream");
    fill_initial(a, 11);
    DeviceVector<unsigned long long> total(1);
    rt.launch(sum_all, dim3(264), dim3(256), 0, a.device(), total.get());
    rt.synchronize();
    EXPECT_EQ(total.to_host()[0], host_sum(a)) << cache_mib << " MiB";
    const Stats stats = rt.stats();
    EXPECT_GE(stats.misses, n * 4 / 4096);
    EXPECT_GT(stats.evictions, 0u);
    EXPECT_EQ(stats.writebacks, 0u);  // nothing was written
    EXPECT_GT(chunks_evicted(rt.fault_batches()), 0u);
  }
}

TEST_F(HostBatchedEviction, OversubscribedReadModifyWriteReachesTheHost) {
  constexpr std::uint64_t n = 16u << 20;  // 64 MiB, cache 16 MiB
  Runtime rt(uvm_preset(16ull << 20));
  auto a = rt.alloc<std::uint32_t>(n);
  std::mt19937 random(2024);
  for (auto& v : a.host()) v = static_cast<std::uint32_t>(random());
  const std::vector<std::uint32_t> before(a.host().begin(), a.host().end());
  rt.launch(add_index, dim3(264), dim3(256), 0, a.device());
  rt.synchronize();
  // Before the flush, every write-back was an eviction's, and each is on a batch record.
  const Stats evicted = rt.stats();
  EXPECT_GT(evicted.evictions, 0u);
  EXPECT_GT(evicted.writebacks, 0u);
  std::uint64_t written_back = 0;
  for (const FaultBatch& b : rt.fault_batches()) written_back += b.pages_written_back;
  EXPECT_EQ(written_back, evicted.writebacks);
  rt.flush();
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < n; ++i) wrong += a.host()[i] != before[i] + static_cast<std::uint32_t>(i);
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(rt.stats().writebacks, evicted.writebacks);  // the flush wrote the resident dirty pages
}

/// Random 4 KB page touches (a fixed list, some pages several times) at a cache of `chunks`.
void expect_random_touch_exact(std::uint64_t chunks) {
  constexpr std::uint64_t n = 32u << 20;  // 128 MiB: 64 blocks
  constexpr std::uint64_t pages = n / 1024;
  Runtime rt(uvm_preset(chunks << 21));
  auto a = rt.alloc<std::uint32_t>(n);
  fill_initial(a, 12);
  std::mt19937_64 random(chunks);
  std::vector<std::uint64_t> list(8192);
  for (auto& p : list) p = random() % pages;
  DeviceVector<std::uint64_t> listed(list.size());
  WARPVM_CUDA_TRY(cudaMemcpy(listed.get(), list.data(), list.size() * sizeof(std::uint64_t), cudaMemcpyHostToDevice));
  DeviceVector<unsigned long long> total(1);
  rt.launch(touch_listed_pages, dim3(32), dim3(128), 0, a.device(), listed.get(), std::uint64_t{list.size()},
            total.get());
  rt.synchronize();
  unsigned long long expected = 0;
  for (const std::uint64_t p : list) expected += a.host()[p * 1024];
  EXPECT_EQ(total.to_host()[0], expected) << chunks << " chunks";
  EXPECT_GT(chunks_evicted(rt.fault_batches()), 0u) << chunks << " chunks";
}

TEST_F(HostBatchedEviction, RandomPageTouchIsExactAtAQuarterCache) { expect_random_touch_exact(16); }

TEST_F(HostBatchedEviction, RandomPageTouchIsExactAtTheSmallestCache) { expect_random_touch_exact(1); }  // one 2 MB chunk

TEST_F(HostBatchedEviction, BatchTraceShowsEvictionsAndTheirCost) {
  constexpr std::uint64_t n = 8u << 20;  // 32 MiB, cache 8 MiB
  Runtime rt(uvm_preset(8ull << 20));
  auto a = rt.alloc<std::uint32_t>(n);
  fill_initial(a, 13);
  rt.launch(add_index, dim3(132), dim3(256), 0, a.device());
  rt.synchronize();
  std::uint64_t chunks = 0, pages = 0, written_back = 0;
  bool timed_eviction = false;
  for (const FaultBatch& b : rt.fault_batches()) {
    chunks += b.chunks_evicted;
    pages += b.pages_evicted;
    written_back += b.pages_written_back;
    // A chunk is given up only for a block that needs one, or in place of a withdrawn order's.
    EXPECT_LE(b.chunks_evicted, b.blocks + b.orders_cancelled);
    EXPECT_LE(b.pages_evicted, b.chunks_evicted * 512u);
    EXPECT_LE(b.transfer_ns + b.eviction_ns, b.duration_ns);
    timed_eviction = timed_eviction || b.eviction_ns > 0;
  }
  EXPECT_GE(chunks, (n * 4 >> 21) - 4);  // at least every block but the last four was given up
  EXPECT_GT(pages, 0u);
  EXPECT_GT(written_back, 0u);
  EXPECT_LE(written_back, pages);
  EXPECT_TRUE(timed_eviction);
  std::ostringstream csv;
  write_batch_trace_header(csv);
  write_batch_trace_rows(csv, BatchRun{"rmw", 0.25, 256, true, true}, rt.fault_batches());
  EXPECT_NE(csv.str().find("pages_written_back,eviction_ns,orders_cancelled\n"), std::string::npos);
}

/// Each warp holds a read span of one page of `held` (lane l on element l of it) while its
/// lanes read `reads` listed elements of `other` (faults on other chunks), then reads its span
/// again: the sum of both spans' reads and the listed elements.
__global__ void read_other_while_holding(array<std::uint32_t> held, array<std::uint32_t> other,
                                         const std::uint64_t* listed, std::uint64_t reads, unsigned long long* total) {
  const std::uint64_t thread = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::uint64_t held_pages = held.size() / held.elements_per_page();
  const std::uint64_t i = (thread / 32) % held_pages * held.elements_per_page() + thread % 32;
  const auto span = held.span<access::read>(i);
  unsigned long long s = span[static_cast<std::uint32_t>(i - span.first())];
  for (std::uint64_t r = 0; r < reads; ++r) s += other[listed[thread * reads + r]];
  s += span[static_cast<std::uint32_t>(i - span.first())];  // still its page, still its data
  atomicAdd(total, s);
}

TEST_F(HostBatchedEviction, ChunksPinnedBySpansAcrossFaultsAreSkippedNotWaitedFor) {
  // Two chunks: one for `held`, whose pages the warps' spans keep across their faults on
  // `other` (two blocks), and one for `other`. UVM's LRU by last migration soon picks held's
  // chunk (never migrated into again, while other's blocks are); its pages stay held, so the
  // order is withdrawn and the model evicts other's previous block instead. Without the
  // withdrawal the kernel hangs until the watchdog.
  constexpr std::uint64_t held_n = 1u << 19;   // 2 MiB: one chunk, every page held by two warps
  constexpr std::uint64_t other_n = 1u << 20;  // 4 MiB: two blocks
  constexpr unsigned blocks = 264, threads = 128;
  constexpr std::uint64_t reads = 4;
  Runtime rt(uvm_preset(2ull << 21));
  auto held = rt.alloc<std::uint32_t>(held_n, Placement::migrate, "held");
  auto other = rt.alloc<std::uint32_t>(other_n, Placement::migrate, "other");
  const unsigned seed = std::random_device{}();
  std::mt19937_64 random(seed);
  for (auto& v : held.host()) v = static_cast<std::uint32_t>(random() | 1);
  for (auto& v : other.host()) v = static_cast<std::uint32_t>(random() | 1);
  std::vector<std::uint64_t> list(std::uint64_t{blocks} * threads * reads);
  for (auto& i : list) i = random() % other_n;
  DeviceVector<std::uint64_t> listed(list.size());
  WARPVM_CUDA_TRY(cudaMemcpy(listed.get(), list.data(), list.size() * sizeof(std::uint64_t), cudaMemcpyHostToDevice));
  DeviceVector<unsigned long long> total(1);
  rt.launch(read_other_while_holding, dim3(blocks), dim3(threads), 0, held.device(), other.device(), listed.get(),
            reads, total.get());
  rt.synchronize();

  unsigned long long expected = 0;
  for (std::uint64_t t = 0; t < std::uint64_t{blocks} * threads; ++t)
    expected += 2ull * held.host()[(t / 32) % (held_n / 1024) * 1024 + t % 32];
  for (const std::uint64_t i : list) expected += other.host()[i];
  EXPECT_EQ(total.to_host()[0], expected) << "seed " << seed;
  std::uint64_t cancelled = 0;
  for (const FaultBatch& b : rt.fault_batches()) cancelled += b.orders_cancelled;
  EXPECT_GT(chunks_evicted(rt.fault_batches()), 0u) << "seed " << seed;
  EXPECT_GT(cancelled, 0u) << "seed " << seed;  // held's chunk was picked, and skipped
  EXPECT_EQ(rt.stats().writebacks, 0u);  // nothing was written
}

}  // namespace
}  // namespace warpvm::testing

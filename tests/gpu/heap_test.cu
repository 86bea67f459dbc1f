// warpvm::Heap on the GPU: live allocations never overlap (each thread writes and verifies its
// own pattern, fresh sizes and seeds every round, both layouts), freed memory is reused,
// running out of memory returns null without hanging, divergent callers, 256K threads, and
// checked mode's invalid frees raised on the host.

#include "gpu_test_support.cuh"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

__host__ __device__ std::uint64_t request_bytes(std::uint64_t seed, std::uint64_t thread, std::uint64_t lo,
                                                std::uint64_t hi) {
  return lo + mix(seed * 7919 + thread) % (hi - lo + 1);
}

__device__ std::uint32_t pattern(std::uint64_t seed, std::uint64_t thread, std::uint64_t word) {
  return static_cast<std::uint32_t>(mix(seed * 1315423911ull + thread * 2654435761ull + word)) | 1u;
}

__device__ std::uint64_t thread_index() { return std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; }

/// The words a thread writes: all of them, or its first and last.
__device__ void write_pattern(const device_heap& heap, heap_ptr p, std::uint64_t seed, std::uint64_t thread,
                              bool every_word) {
  const std::uint64_t words = p.size() / 4;
  for (std::uint64_t i = 0; i < words; i = every_word || i + 1 == words ? i + 1 : words - 1)
    heap.store<std::uint32_t>(p, i, pattern(seed, thread, i));
}

/// Each thread asks for request_bytes(seed, thread, lo, hi) and writes its pattern.
__global__ void allocate_and_write(device_heap heap, heap_ptr* out, std::uint64_t threads, std::uint64_t seed,
                                   std::uint64_t lo, std::uint64_t hi, bool every_word) {
  const std::uint64_t t = thread_index();
  if (t >= threads) return;
  const heap_ptr p = heap.malloc(request_bytes(seed, t, lo, hi));
  out[t] = p;
  if (p) write_pattern(heap, p, seed, t, every_word);
}

/// Calls from three branches, one of them with only some lanes: small, medium and (from odd
/// lanes only) several-segment requests.
__global__ void allocate_divergent(device_heap heap, heap_ptr* out, std::uint64_t threads, std::uint64_t seed) {
  const std::uint64_t t = thread_index();
  if (t >= threads) return;
  heap_ptr p;
  if (t % 3 == 0) {
    p = heap.malloc(request_bytes(seed, t, 16, 512));
  } else if (t % 3 == 1) {
    if (t % 2 == 1) p = heap.malloc(request_bytes(seed, t, 3u << 20, 5u << 20));
  } else {
    p = heap.malloc(request_bytes(seed, t, 4096, 80000));
  }
  out[t] = p;
  if (p) write_pattern(heap, p, seed, t, false);
}

/// Checks every thread's pattern (counting mismatches and nulls), then frees when asked.
__global__ void verify_and_free(device_heap heap, const heap_ptr* ptrs, std::uint64_t threads, std::uint64_t seed,
                                bool every_word, bool free_it, unsigned long long* mismatches,
                                unsigned long long* nulls) {
  const std::uint64_t t = thread_index();
  if (t >= threads) return;
  const heap_ptr p = ptrs[t];
  if (!p) {
    atomicAdd(nulls, 1ull);
    return;
  }
  const std::uint64_t words = p.size() / 4;
  for (std::uint64_t i = 0; i < words; i = every_word || i + 1 == words ? i + 1 : words - 1)
    if (heap.load<std::uint32_t>(p, i) != pattern(seed, t, i)) atomicAdd(mismatches, 1ull);
  if (free_it) heap.free(p);
}

/// No two live allocations share a byte: regions never overlap, and the lanes of one region
/// are distinct and agree on its shape.
void expect_disjoint(const std::vector<heap_ptr>& ptrs) {
  struct Region {
    std::uint64_t bytes;
    std::uint32_t lanes, tag;
    std::vector<bool> lane_seen;
  };
  std::map<std::uint64_t, Region> regions;
  for (const heap_ptr& p : ptrs) {
    if (!p) continue;
    auto [it, fresh] = regions.try_emplace(p.region_offset(), Region{p.region_bytes(), p.lanes(), p.tag(), {}});
    Region& r = it->second;
    if (fresh) r.lane_seen.assign(r.lanes, false);
    ASSERT_EQ(r.lanes, p.lanes());
    ASSERT_EQ(r.tag, p.tag());
    ASSERT_EQ(r.bytes, p.region_bytes());
    ASSERT_LT(p.lane(), r.lanes);
    ASSERT_FALSE(r.lane_seen[p.lane()]) << "two threads got lane " << p.lane() << " of region " << p.region_offset();
    r.lane_seen[p.lane()] = true;
  }
  std::uint64_t end = 0;
  for (const auto& [offset, r] : regions) {
    ASSERT_GE(offset, end) << "region at " << offset << " overlaps the one before";
    end = offset + r.bytes;
  }
}

struct Counts {
  std::uint64_t mismatches, nulls;
};

class HeapTest : public GpuTest, public ::testing::WithParamInterface<HeapLayout> {
 protected:
  static Config config(std::size_t cache_bytes = 512ull << 20, bool checked = false) {
    return Config{.cache_bytes = cache_bytes, .checked = checked, .max_pages_held_per_thread = 2};
  }
  static constexpr std::uint32_t block = 256;
  static dim3 grid(std::uint64_t threads) { return dim3(static_cast<unsigned>((threads + block - 1) / block)); }

  /// verify_and_free over `threads` pointers; returns the mismatches and nulls it counted.
  static Counts verify(Runtime& rt, Heap& heap, const DeviceVector<heap_ptr>& ptrs, std::uint64_t threads,
                       std::uint64_t seed, bool every_word, bool free_it) {
    DeviceVector<unsigned long long> counts(2);
    rt.launch(verify_and_free, grid(threads), dim3(block), 0, heap.device(), ptrs.get(), threads, seed, every_word,
              free_it, counts.get(), counts.get() + 1);
    rt.synchronize();
    const auto c = counts.to_host();
    return {c[0], c[1]};
  }
};

TEST_P(HeapTest, LiveAllocationsNeverOverlap) {
  Runtime rt(config());
  Heap heap(rt, {.capacity_bytes = 4ull << 30, .layout = GetParam()});
  constexpr std::uint64_t threads = 16384;
  DeviceVector<heap_ptr> ptrs(threads);
  struct Round {
    std::uint64_t lo, hi;
    bool every_word;
  };
  std::uint64_t seed = 11;
  for (const Round round : {Round{16, 256, true}, Round{100, 6000, true}, Round{4096, 70000, false},
                            Round{16, 40000, false}}) {
    SCOPED_TRACE("sizes " + std::to_string(round.lo) + ".." + std::to_string(round.hi));
    ++seed;
    rt.launch(allocate_and_write, grid(threads), dim3(block), 0, heap.device(), ptrs.get(), threads, seed, round.lo,
              round.hi, round.every_word);
    rt.synchronize();
    const std::vector<heap_ptr> got = ptrs.to_host();
    expect_disjoint(got);
    for (std::uint64_t t = 0; t < threads; ++t) {
      ASSERT_TRUE(got[t]) << "thread " << t;
      ASSERT_GE(got[t].size(), request_bytes(seed, t, round.lo, round.hi));
    }
    const Counts c = verify(rt, heap, ptrs, threads, seed, round.every_word, true);
    EXPECT_EQ(c.mismatches, 0u);
    EXPECT_EQ(c.nulls, 0u);
  }
  const HeapStats stats = heap.stats();
  EXPECT_EQ(stats.allocations, 4 * threads);
  EXPECT_EQ(stats.failed_allocations, 0u);
  EXPECT_EQ(stats.regions_freed, stats.requests) << "every region went back once all its lanes freed";
  EXPECT_EQ(stats.reserved_bytes, 0u);
  EXPECT_GE(stats.requests, 4 * threads / 32);
  EXPECT_LT(4 * stats.requests, stats.allocations) << "a warp is served by one request per size class";
}

TEST_P(HeapTest, DivergentCallersAndLargeRegions) {
  Runtime rt(config());
  Heap heap(rt, {.capacity_bytes = 8ull << 30, .layout = GetParam()});
  constexpr std::uint64_t threads = 3000;
  DeviceVector<heap_ptr> ptrs(threads);
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    rt.launch(allocate_divergent, grid(threads), dim3(block), 0, heap.device(), ptrs.get(), threads, seed);
    rt.synchronize();
    const std::vector<heap_ptr> got = ptrs.to_host();
    expect_disjoint(got);
    const auto nulls = static_cast<std::uint64_t>(std::count_if(got.begin(), got.end(), [](heap_ptr p) { return !p; }));
    EXPECT_EQ(nulls, threads / 6) << "only the even lanes of the t % 3 == 1 branch ask for nothing";
    const Counts c = verify(rt, heap, ptrs, threads, seed, false, true);
    EXPECT_EQ(c.mismatches, 0u);
  }
  const HeapStats stats = heap.stats();
  EXPECT_EQ(stats.failed_allocations, 0u);
  EXPECT_EQ(stats.reserved_bytes, 0u);
}

TEST_P(HeapTest, FreedMemoryIsReused) {
  Runtime rt(config());
  Heap heap(rt, {.capacity_bytes = 256ull << 20, .layout = GetParam()});
  constexpr std::uint64_t threads = 4096;  // ~1 KB each: 128 warps of 128 KB reserved (aligned), 16 MiB
  DeviceVector<heap_ptr> ptrs(threads);
  std::uint64_t peak = 0;
  for (std::uint64_t round = 0; round < 40; ++round) {  // 40 rounds reserve far more than the capacity
    rt.launch(allocate_and_write, grid(threads), dim3(block), 0, heap.device(), ptrs.get(), threads, round, 512,
              1024, true);
    rt.synchronize();
    peak = std::max(peak, heap.stats().reserved_bytes);
    const Counts c = verify(rt, heap, ptrs, threads, round, true, true);
    ASSERT_EQ(c.mismatches, 0u);
    ASSERT_EQ(c.nulls, 0u);
  }
  const HeapStats stats = heap.stats();
  EXPECT_EQ(stats.failed_allocations, 0u);
  EXPECT_GT(40 * peak, heap.capacity_bytes()) << "the rounds together needed more than the heap";
  EXPECT_EQ(stats.peak_reserved_bytes, peak);
}

TEST_P(HeapTest, OutOfMemoryReturnsNullWithoutHanging) {
  Runtime rt(config());
  Heap heap(rt, {.capacity_bytes = 64ull << 20, .layout = GetParam()});
  constexpr std::uint64_t threads = 16384;  // 64 KB each: 1 GiB asked of 64 MiB
  DeviceVector<heap_ptr> ptrs(threads);
  rt.launch(allocate_and_write, grid(threads), dim3(block), 0, heap.device(), ptrs.get(), threads, 5, 60000, 65536,
            false);
  rt.synchronize();
  expect_disjoint(ptrs.to_host());
  const Counts c = verify(rt, heap, ptrs, threads, 5, false, true);
  EXPECT_EQ(c.mismatches, 0u);
  EXPECT_GT(c.nulls, threads / 2);
  EXPECT_LT(c.nulls, threads) << "what fits is served";
  HeapStats stats = heap.stats();
  EXPECT_EQ(stats.failed_allocations, c.nulls);
  EXPECT_EQ(stats.allocations, threads - c.nulls);
  EXPECT_EQ(stats.reserved_bytes, 0u);

  // Larger than the whole heap, and larger than any lane can be: null, counted.
  heap.reset_stats();
  rt.launch(allocate_and_write, dim3(1), dim3(64), 0, heap.device(), ptrs.get(), std::uint64_t{64}, 6,
            std::uint64_t{1} << 40, std::uint64_t{1} << 40, false);
  rt.synchronize();
  const std::vector<heap_ptr> huge = ptrs.to_host();
  EXPECT_TRUE(std::none_of(huge.begin(), huge.begin() + 64, [](heap_ptr p) { return static_cast<bool>(p); }));
  stats = heap.stats();
  EXPECT_EQ(stats.failed_allocations, 64u);
  EXPECT_EQ(stats.requests, 2u) << "one request per warp";
}

TEST_P(HeapTest, QuarterMillionThreadsComplete) {
  Runtime rt(config(4ull << 30));  // a full GPU of resident threads, 2 pages each
  Heap heap(rt, {.capacity_bytes = 4ull << 30, .layout = GetParam()});
  constexpr std::uint64_t threads = 256 * 1024;
  DeviceVector<heap_ptr> ptrs(threads);
  rt.launch(allocate_and_write, grid(threads), dim3(block), 0, heap.device(), ptrs.get(), threads, 9, 1024, 1024,
            false);
  rt.synchronize();
  expect_disjoint(ptrs.to_host());
  const Counts c = verify(rt, heap, ptrs, threads, 9, false, true);
  EXPECT_EQ(c.mismatches, 0u);
  EXPECT_EQ(c.nulls, 0u);
  const HeapStats stats = heap.stats();
  EXPECT_EQ(stats.allocations, threads);
  EXPECT_EQ(stats.requests, threads / 32);
  EXPECT_EQ(stats.reserved_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(Layouts, HeapTest, ::testing::Values(HeapLayout::contiguous, HeapLayout::aligned),
                         [](const ::testing::TestParamInfo<HeapLayout>& layout) {
                           return std::string(layout.param == HeapLayout::aligned ? "aligned" : "contiguous");
                         });

/// Frees every thread's allocation twice, or (forge) a pointer the heap never returned.
__global__ void free_badly(device_heap heap, bool forge) {
  heap_ptr p = heap.malloc(64);
  if (forge) p = heap_ptr(p.region_offset(), p.size(), p.tag() + 1, p.lane(), p.lanes(), p.layout(),
                          detail::LaneOrder::lane_id);
  heap.free(p);
  heap.free(p);
}

class HeapChecked : public GpuTest {};

TEST_F(HeapChecked, DoubleFreeAndForeignPointersRaiseInvalidFree) {
  for (const bool forge : {false, true}) {
    SCOPED_TRACE(forge ? "foreign pointer" : "double free");
    Runtime rt(Config{.cache_bytes = 64ull << 20, .checked = true});
    Heap heap(rt, {.capacity_bytes = 64ull << 20});
    rt.launch(free_badly, dim3(2), dim3(64), 0, heap.device(), forge);
    try {
      rt.synchronize();
      ADD_FAILURE() << "no Error raised";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_free) << e.what();
    }
    const HeapStats stats = heap.stats();
    EXPECT_EQ(stats.allocations, 128u);
    // The double free changed nothing: each region went back once.
    EXPECT_EQ(stats.regions_freed, forge ? 0u : stats.requests);
  }
}

}  // namespace
}  // namespace warpvm::testing

// The two races a well-known GPU page cache shipped with, and contention corner cases:
// an in-use page evicted under its reader, one page loaded into two frames, many warps on one
// page, two pages fighting over one frame.

#include "gpu_test_support.cuh"

#include "warpvm/detail/core/inspect.hpp"

#include <map>
#include <vector>

namespace warpvm::testing {
namespace {

constexpr std::uint32_t salt = 5;

/// Warps of the first `holder_blocks` blocks hold one page each and re-read it while the
/// other blocks thrash the cache with random reads of a larger object.
__global__ void hold_while_thrashing(array<std::uint32_t> held, array<std::uint32_t> thrash, unsigned holder_blocks,
                                     unsigned rounds, unsigned long long* mismatches) {
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  unsigned long long bad = 0;
  if (blockIdx.x < holder_blocks) {
    const std::uint64_t first = warp * held.elements_per_page();
    const auto page = held.span(first);
    for (unsigned r = 0; r < rounds; ++r) {
      for (std::uint32_t j = threadIdx.x % 32; j < page.size(); j += 32)
        bad += page[j] != initial_value(page.first() + j, salt);
      __nanosleep(2000);
    }
  } else {
    std::uint64_t x = warp * 131 + threadIdx.x;
    for (unsigned r = 0; r < rounds * 8; ++r) {
      x = mix(x);
      const std::uint64_t i = x % thrash.size();
      bad += thrash[i] != initial_value(i, salt + 1);
    }
  }
  if (bad != 0) atomicAdd(mismatches, bad);
}

class Races : public GpuTest {};

TEST_F(Races, HeldPageIsNeverEvicted) {
  constexpr std::size_t page = 4096;
  constexpr unsigned block = 128, holder_blocks = 8, thrash_blocks = 24;
  constexpr std::uint64_t frames = (holder_blocks + thrash_blocks) * block;  // holds 1 per thread
  Runtime rt(Config{.cache_bytes = frames * page, .eviction = EvictionPolicy::fifo, .max_pages_held_per_thread = 1});
  const std::uint64_t held_pages = holder_blocks * block / 32;
  auto held = rt.alloc<std::uint32_t>(held_pages * page / 4, Placement::migrate, "held");
  auto thrash = rt.alloc<std::uint32_t>(64ull << 20, Placement::migrate, "thrash");  // 256 MiB >> 4 MiB cache
  fill_initial(held, salt);
  fill_initial(thrash, salt + 1);
  DeviceVector<unsigned long long> mismatches(1);
  rt.launch(hold_while_thrashing, dim3(holder_blocks + thrash_blocks), dim3(block), 0, held.device(), thrash.device(),
            holder_blocks, 200u, mismatches.get());
  rt.synchronize();
  EXPECT_EQ(mismatches.to_host()[0], 0u);
  EXPECT_GT(rt.stats().evictions, 1000u);
}

/// Every thread reads one element of each of `pages` pages, all warps at once.
__global__ void everyone_reads_the_same_pages(array<std::uint32_t> a, std::uint32_t pages, unsigned long long* bad) {
  const std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  unsigned long long wrong = 0;
  for (std::uint32_t k = 0; k < pages; ++k) {
    const std::uint64_t p = (k + t / 32) % pages;  // warps start on different pages
    const std::uint64_t i = p * a.elements_per_page() + t % a.elements_per_page();
    wrong += a[i] != initial_value(i, salt);
  }
  if (wrong != 0) atomicAdd(bad, wrong);
}

TEST_F(Races, ContendedPageIsLoadedOnce) {
  constexpr std::uint32_t pages = 64;
  Runtime rt(Config{.cache_bytes = 1ull << 30, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint32_t>(pages * 1024, Placement::migrate, "contended");
  fill_initial(a, salt);
  DeviceVector<unsigned long long> bad(1);
  rt.launch(everyone_reads_the_same_pages, dim3(rt.multiprocessor_count() * 4), dim3(256), 0, a.device(), pages, bad.get());
  rt.synchronize();
  EXPECT_EQ(bad.to_host()[0], 0u);
  const Stats stats = rt.stats();
  EXPECT_EQ(stats.misses, pages) << "a page was loaded more than once";
  EXPECT_GT(stats.waits, 0u) << "expected warps to wait for other warps' loads";
  std::map<std::uint64_t, int> frames_per_key;
  for (std::uint64_t key : detail::frame_owners(rt))
    if (key != detail::empty_page_key) ++frames_per_key[key];
  EXPECT_EQ(frames_per_key.size(), pages);
  for (const auto& [key, frames] : frames_per_key) EXPECT_EQ(frames, 1) << "page key " << key;
}

TEST_F(Races, NoPageInTwoFramesAfterHeavyEviction) {
  constexpr std::uint32_t pages = 512;
  constexpr unsigned blocks = 16, block = 128;
  Runtime rt(Config{.cache_bytes = blocks * block * 4096ull, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint32_t>(pages * 1024, Placement::migrate, "evicted");
  fill_initial(a, salt);
  DeviceVector<unsigned long long> bad(1);
  for (int round = 0; round < 3; ++round)
    rt.launch(everyone_reads_the_same_pages, dim3(blocks), dim3(block), 0, a.device(), pages, bad.get());
  rt.synchronize();
  EXPECT_EQ(bad.to_host()[0], 0u);
  std::map<std::uint64_t, int> frames_per_key;
  for (std::uint64_t key : detail::frame_owners(rt))
    if (key != detail::empty_page_key) ++frames_per_key[key];
  for (const auto& [key, frames] : frames_per_key) EXPECT_EQ(frames, 1) << "page key " << key;
  for (std::uint32_t word : detail::page_states(rt, a.id())) EXPECT_EQ(detail::page_word::holders(word), 0u);
}

__global__ void hammer_one_page(array<std::uint32_t> a, unsigned rounds) {
  const std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (unsigned r = 0; r < rounds; ++r) a.fetch_add((t + r) % a.elements_per_page(), 1u);
}

TEST_F(Races, ManyWarpsOnOnePage) {
  Runtime rt(Config{.cache_bytes = 2ull << 30, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint32_t>(1024, Placement::migrate, "one page");
  std::fill(a.host().begin(), a.host().end(), 7u);
  const unsigned blocks = rt.multiprocessor_count() * 8, block = 256, rounds = 64;
  rt.launch(hammer_one_page, dim3(blocks), dim3(block), 0, a.device(), rounds);
  rt.flush();
  std::uint64_t total = 0;
  for (std::uint32_t v : a.host()) total += v - 7u;
  EXPECT_EQ(total, std::uint64_t{blocks} * block * rounds);
  EXPECT_EQ(rt.stats().misses, 1u);
}

__global__ void alternate_pages(array<std::uint64_t> a, unsigned rounds) {
  const std::uint64_t per_page = a.elements_per_page();
  for (unsigned r = 0; r < rounds; ++r) {
    const std::uint64_t page = r % 2;
    const std::uint64_t i = page * per_page + (r / 2) % per_page;
    a.store(i, a[i] + r);
  }
}

TEST_F(Races, TwoPagesCollideInOneFrame) {
  Runtime rt(Config{.cache_bytes = 4096, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint64_t>(1024, Placement::migrate, "two pages");  // 2 pages of 4 KiB
  for (std::size_t i = 0; i < a.size(); ++i) a.host()[i] = i * 3 + 1;
  std::vector<std::uint64_t> expected(a.host().begin(), a.host().end());
  constexpr unsigned rounds = 200;
  for (unsigned r = 0; r < rounds; ++r) expected[(r % 2) * 512 + (r / 2) % 512] += r;
  rt.launch(alternate_pages, dim3(1), dim3(1), 0, a.device(), rounds);
  rt.flush();
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), a.host().begin()));
  const Stats stats = rt.stats();
  EXPECT_EQ(stats.misses, rounds);
  EXPECT_EQ(stats.evictions, rounds - 1);
  EXPECT_EQ(stats.writebacks, rounds);  // rounds-1 by eviction, the last by flush
}

__global__ void touch_every_page(array<std::uint32_t> a, unsigned long long* sink) {
  unsigned long long s = 0;
  for (std::uint64_t i = 0; i < a.size(); i += a.elements_per_page()) s += a[i];
  atomicAdd(sink, s);
}

__global__ void read_around_a_fault(array<std::uint32_t> a, array<std::uint32_t> c, std::uint32_t* out) {
  const auto page = a.span(0);  // hold-free while nothing can be evicted
  out[0] = page[0];
  out[1] = c[0];  // a fault that needs a frame
  out[2] = page[0];
}

TEST_F(Races, HoldFreeReadsSurviveAPartialDrop) {
  // A and B fill all 8 frames and the hand has gone round; destroying B frees 4 frames and
  // makes A + C fit, so A's pages are read without holds. C's fault must take a free frame,
  // never A's (a reviewer's reproduction of an in-use eviction).
  Runtime rt(Config{.cache_bytes = 8 * 4096, .max_pages_held_per_thread = 2});
  auto a = rt.alloc<std::uint32_t>(4 * 1024, Placement::migrate, "A");
  auto c = rt.alloc<std::uint32_t>(4 * 1024, Placement::migrate, "C");
  std::fill(a.host().begin(), a.host().end(), 111u);
  std::fill(c.host().begin(), c.host().end(), 333u);
  DeviceVector<unsigned long long> sink(1);
  {
    auto b = rt.alloc<std::uint32_t>(4 * 1024, Placement::migrate, "B");
    std::fill(b.host().begin(), b.host().end(), 222u);
    rt.launch(touch_every_page, dim3(1), dim3(1), 0, a.device(), sink.get());
    rt.launch(touch_every_page, dim3(1), dim3(1), 0, b.device(), sink.get());
    rt.synchronize();
  }
  rt.reset_stats();
  DeviceVector<std::uint32_t> out(3);
  rt.launch(read_around_a_fault, dim3(1), dim3(1), 0, a.device(), c.device(), out.get());
  rt.synchronize();
  EXPECT_EQ(out.to_host(), (std::vector<std::uint32_t>{111u, 333u, 111u}));
  EXPECT_EQ(rt.stats().evictions, 0u);
}

}  // namespace
}  // namespace warpvm::testing

// The host API around the fault path: flush exactness, drop_cached, remote, automatic and
// resident placement and switching placement, adopted memory, page sizes with partial last pages, checked mode,
// launch refusal, object lifetime, and the no-progress watchdog.

#include "gpu_test_support.cuh"

#include "warpvm/detail/core/inspect.hpp"
#include "warpvm/detail/policy/automatic.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

/// Each warp rewrites whole pages through spans: v' = v * 3 + i.
template <class T>
__global__ void rewrite_pages(array<T> a) {
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const std::uint64_t pages = (a.size() + a.elements_per_page() - 1) / a.elements_per_page();
  for (std::uint64_t p = warp; p < pages; p += warps) {
    const auto page = a.template span<access::read_write>(p * a.elements_per_page());
    for (std::uint32_t j = threadIdx.x % 32; j < page.size(); j += 32)
      page[j] = static_cast<T>(page[j] * 3 + (page.first() + j));
  }
}

template <class T>
std::vector<T> rewritten(const std::vector<T>& v) {
  std::vector<T> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(v[i] * 3 + i);
  return out;
}

class Api : public GpuTest {};

TEST_F(Api, FlushMakesHostCopyBitExactAtEveryPageSize) {
  for (std::size_t page : {512ul, 4096ul, 65536ul, 2ul << 20}) {
    SCOPED_TRACE("page " + std::to_string(page));
    Runtime rt(Config{.cache_bytes = 8 * page * 4096 / (page < 65536 ? 8 : 64), .page_bytes = page,
                      .max_pages_held_per_thread = 1});
    const std::size_t n = 3 * (page / 8) * 37 + 5;  // partial last page
    auto a = rt.alloc<std::uint64_t>(n, Placement::migrate, "a");
    std::mt19937_64 rng(page);
    for (auto& v : a.host()) v = rng();
    const std::vector<std::uint64_t> before(a.host().begin(), a.host().end());
    rt.launch(rewrite_pages<std::uint64_t>, dim3(4), dim3(128), 0, a.device());
    rt.flush();
    const auto expected = rewritten(before);
    EXPECT_EQ(std::memcmp(expected.data(), a.host().data(), n * sizeof(std::uint64_t)), 0);
  }
}

/// Writes every element of every page through overwrite spans: v = i * 7.
__global__ void overwrite_pages(array<std::uint32_t> a) {
  const std::uint64_t warp = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const std::uint64_t pages = (a.size() + a.elements_per_page() - 1) / a.elements_per_page();
  for (std::uint64_t p = warp; p < pages; p += warps) {
    const auto page = a.span<access::overwrite>(p * a.elements_per_page());
    for (std::uint32_t j = threadIdx.x % 32; j < page.size(); j += 32)
      page[j] = static_cast<std::uint32_t>((page.first() + j) * 7);
  }
}

TEST_F(Api, OverwriteSpansSkipTheLoadAndWriteEverything) {
  for (std::size_t cache_pages : {1024ul, 32ul}) {  // never evicts / must evict
    SCOPED_TRACE("cache pages " + std::to_string(cache_pages));
    Runtime rt(Config{.cache_bytes = cache_pages * 4096, .max_pages_held_per_thread = 1});
    auto a = rt.alloc<std::uint32_t>(500 * 1024 + 77, Placement::migrate, "overwritten");  // partial last page
    fill_initial(a, 12);
    rt.launch(overwrite_pages, dim3(1), dim3(cache_pages >= 1024 ? 512 : 32), 0, a.device());
    rt.synchronize();
    // Written behind on release: exact on the host before any flush.
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < a.size(); ++i) wrong += a.host()[i] != static_cast<std::uint32_t>(i * 7);
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(rt.stats().writebacks, 501u);
    rt.flush();  // nothing left dirty
    const Stats stats = rt.stats();
    EXPECT_EQ(stats.bytes_in, 0u) << "overwrite spans must not read host memory";
    EXPECT_EQ(stats.writebacks, 501u);
    EXPECT_EQ(stats.bytes_out, a.bytes());
  }
}

__global__ void copy_elements(array<std::uint32_t> from, array<std::uint32_t> to) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < from.size();
       i += std::uint64_t{gridDim.x} * blockDim.x)
    to.store(i, from[i]);
}

TEST_F(Api, DropCachedMakesHostWritesVisible) {
  Runtime rt(Config{.cache_bytes = 64ull << 20, .max_pages_held_per_thread = 1});
  auto from = rt.alloc<std::uint32_t>(100000, Placement::migrate, "from");
  auto to = rt.alloc<std::uint32_t>(100000, Placement::migrate, "to");
  fill_initial(from, 1);
  rt.launch(copy_elements, dim3(64), dim3(256), 0, from.device(), to.device());
  rt.synchronize();
  fill_initial(from, 2);  // host changes data while its pages are cached
  rt.drop_cached();
  rt.launch(copy_elements, dim3(64), dim3(256), 0, from.device(), to.device());
  rt.flush();
  for (std::size_t i = 0; i < to.size(); ++i) ASSERT_EQ(to.host()[i], initial_value(i, 2)) << i;
}

__global__ void count_into(array<std::uint32_t> counters, unsigned rounds) {
  const std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (unsigned r = 0; r < rounds; ++r) counters.fetch_add(mix(t * rounds + r) % counters.size(), 1u);
}

TEST_F(Api, RemotePlacementIsExactAndCachesNothing) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .max_pages_held_per_thread = 1});
  auto from = rt.alloc<std::uint32_t>(1u << 20, Placement::remote, "remote from");
  auto to = rt.alloc<std::uint32_t>(1u << 20, Placement::remote, "remote to");
  auto counters = rt.alloc<std::uint32_t>(4096, Placement::remote, "remote counters");
  fill_initial(from, 3);
  std::fill(counters.host().begin(), counters.host().end(), 0u);
  rt.launch(copy_elements, dim3(16), dim3(256), 0, from.device(), to.device());
  rt.launch(count_into, dim3(16), dim3(256), 0, counters.device(), 16u);
  rt.synchronize();
  for (std::size_t i = 0; i < to.size(); ++i) ASSERT_EQ(to.host()[i], initial_value(i, 3)) << i;
  std::vector<std::uint32_t> expected(counters.size(), 0);
  for (std::uint64_t t = 0; t < 16 * 256; ++t)
    for (unsigned r = 0; r < 16; ++r) ++expected[mix(t * 16 + r) % counters.size()];
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), counters.host().begin()));
  EXPECT_EQ(rt.stats().misses, 0u);
}

TEST_F(Api, SwitchingPlacementKeepsData) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint32_t>(1u << 18, Placement::migrate, "switching");
  fill_initial(a, 4);
  const std::vector<std::uint32_t> before(a.host().begin(), a.host().end());
  rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());
  a.set_placement(Placement::remote);  // writes the dirty pages back and drops them
  EXPECT_EQ(a.placement(), Placement::remote);
  rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());  // now zero-copy
  a.set_placement(Placement::migrate);
  rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());
  a.set_placement(Placement::automatic);  // the cached pages stay
  rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());
  rt.flush();
  const auto expected = rewritten(rewritten(rewritten(rewritten(before))));
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), a.host().begin()));
}

/// Every thread adds its draws into `counts` (atomics) and sums reads of `table`, both picked at
/// random, and copies its share of `stream` (a migrate object larger than the cache, so that the
/// cache evicts throughout) into `copy`.
__global__ void resident_beside_eviction(array<std::uint32_t> counts, array<std::uint32_t> table,
                                         array<std::uint32_t> stream, array<std::uint32_t> copy, unsigned rounds,
                                         std::uint64_t* sums) {
  const std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::uint64_t threads = std::uint64_t{gridDim.x} * blockDim.x;
  std::uint64_t sum = 0;
  for (unsigned r = 0; r < rounds; ++r) {
    counts.fetch_add(mix(t * rounds + r) % counts.size(), 1u);
    sum += table[mix(~(t * rounds + r)) % table.size()];
  }
  sums[t] = sum;
  for (std::uint64_t i = t; i < stream.size(); i += threads) copy.store(i, stream[i]);
}

TEST_F(Api, ResidentObjectsStayAndAreExactWhileTheCacheEvicts) {
  constexpr std::uint64_t counters = 3 * 1024 + 5;  // a partial last page
  constexpr std::uint64_t table_size = 1u << 16;
  Runtime rt(Config{.cache_bytes = 4ull << 20, .resident_bytes = 320ull << 10, .max_pages_held_per_thread = 1});
  auto counts = rt.alloc<std::uint32_t>(counters, Placement::resident, "counts");
  auto table = rt.alloc<std::uint32_t>(table_size, Placement::resident, "table");
  auto stream = rt.alloc<std::uint32_t>(4u << 20, Placement::migrate, "stream");  // 16 MiB over 4
  auto copy = rt.alloc<std::uint32_t>(4u << 20, Placement::migrate, "copy");
  EXPECT_EQ(counts.placement(), Placement::resident);
  std::fill(counts.host().begin(), counts.host().end(), 7u);
  fill_initial(table, 11);
  fill_initial(stream, 12);
  const dim3 grid(8), block(128);  // 1024 threads holding a page each: the 4 MiB cache's 1024 frames
  const unsigned rounds = 64;
  DeviceVector<std::uint64_t> sums(grid.x * block.x);
  rt.launch(resident_beside_eviction, grid, block, 0, counts.device(), table.device(), stream.device(), copy.device(),
            rounds, sums.get());
  rt.flush();
  std::vector<std::uint32_t> expected(counters, 7u);
  std::vector<std::uint64_t> expected_sums(grid.x * block.x, 0);
  for (std::uint64_t t = 0; t < expected_sums.size(); ++t)
    for (unsigned r = 0; r < rounds; ++r) {
      ++expected[mix(t * rounds + r) % counters];
      expected_sums[t] += initial_value(mix(~(t * rounds + r)) % table_size, 11);
    }
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), counts.host().begin()));
  EXPECT_EQ(sums.to_host(), expected_sums);
  for (std::size_t i = 0; i < copy.size(); ++i) ASSERT_EQ(copy.host()[i], initial_value(i, 12)) << i;
  const Stats stats = rt.stats();
  EXPECT_GT(stats.evictions, 0u);
  // Every resident page is still there, held by nobody, in one frame past the cache's.
  for (const std::uint32_t id : {counts.id(), table.id()})
    for (const std::uint32_t word : detail::page_states(rt, id)) {
      EXPECT_TRUE(detail::page_word::is_resident(word));
      EXPECT_EQ(detail::page_word::holders(word), 0u);
    }
  const std::vector<std::uint64_t> owners = detail::frame_owners(rt);
  std::map<std::uint64_t, std::uint64_t> frame_of_resident_page;
  for (std::uint64_t f = 0; f < owners.size(); ++f) {
    if (owners[f] == detail::empty_page_key) continue;
    const std::uint32_t id = detail::key_object(owners[f]);
    if (id != counts.id() && id != table.id()) continue;
    EXPECT_GT(f, rt.frame_count()) << "a resident page in the cache's frame " << f;
    EXPECT_TRUE(frame_of_resident_page.emplace(owners[f], f).second) << "a resident page in two frames";
  }
  EXPECT_EQ(frame_of_resident_page.size(), 4u + 64u);  // counts' pages and table's

  // drop_cached() makes host writes visible to a resident object too.
  std::fill(counts.host().begin(), counts.host().end(), 100u);
  rt.drop_cached();
  rt.launch(resident_beside_eviction, grid, block, 0, counts.device(), table.device(), stream.device(), copy.device(),
            rounds, sums.get());
  rt.flush();
  for (std::uint64_t k = 0; k < counters; ++k) ASSERT_EQ(counts.host()[k], expected[k] - 7u + 100u) << k;
}

TEST_F(Api, SwitchingToAndFromResidentKeepsDataAndGivesTheFramesBack) {
  const std::uint64_t n = 1u << 16;  // 64 pages
  Runtime rt(Config{.cache_bytes = 4ull << 20, .resident_bytes = 64ull << 12, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint32_t>(n, Placement::migrate, "switching");
  fill_initial(a, 5);
  const std::vector<std::uint32_t> before(a.host().begin(), a.host().end());
  rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());
  a.set_placement(Placement::resident);  // the cached pages are written back, then loaded again as touched
  rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());
  a.set_placement(Placement::automatic);  // written back; the frames are free again
  auto b = rt.alloc<std::uint32_t>(n, Placement::resident, "takes the same frames");
  fill_initial(b, 6);
  const std::vector<std::uint32_t> b_before(b.host().begin(), b.host().end());
  rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());
  rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, b.device());
  rt.flush();
  const auto expected = rewritten(rewritten(rewritten(before)));
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), a.host().begin()));
  const auto b_expected = rewritten(b_before);
  EXPECT_TRUE(std::equal(b_expected.begin(), b_expected.end(), b.host().begin()));
}

TEST_F(Api, ResidentObjectsThatDoNotFitAreClearErrors) {
  Runtime rt(Config{.cache_bytes = 1ull << 20, .resident_bytes = 16ull << 12});
  auto fits = rt.alloc<std::uint32_t>(10u << 10, Placement::resident, "ten pages");
  EXPECT_EQ(fits.placement(), Placement::resident);
  try {
    (void)rt.alloc<std::uint32_t>(8u << 10, Placement::resident, "eight pages");
    FAIL() << "8 pages were made resident where 6 were free";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("'eight pages' cannot be resident: it needs 8 frames"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("has 6 free"), std::string::npos) << e.what();
  }
  auto migrate = rt.alloc<std::uint32_t>(8u << 10, Placement::migrate, "eight pages");
  EXPECT_THROW(migrate.set_placement(Placement::resident), Error);
  EXPECT_EQ(migrate.placement(), Placement::migrate);  // a refused change leaves the placement as it was
  Runtime none(Config{.cache_bytes = 1ull << 20});
  EXPECT_THROW((void)none.alloc<std::uint32_t>(1024, Placement::resident, "no frames set aside"), Error);
}

/// out[t] = a[pick(t)] for t < count: one element of page `first_page + t` each, at an offset
/// drawn from the seed: every page read once, by one lane.
__global__ void read_one_per_page(array<std::uint32_t> a, std::uint64_t first_page, std::uint64_t count,
                                  std::uint32_t seed, std::uint32_t* out) {
  for (std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < count;
       t += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t i = (first_page + t) * a.elements_per_page() + mix(t + seed) % a.elements_per_page();
    out[t] = a[i];
  }
}

/// out[i - first] = a[i] for every element of [first, first + count): dense reads.
__global__ void read_range(array<std::uint32_t> a, std::uint64_t first, std::uint64_t count, std::uint32_t* out) {
  for (std::uint64_t k = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < count;
       k += std::uint64_t{gridDim.x} * blockDim.x)
    out[k] = a[first + k];
}

/// The elements read_one_per_page reads, from the host copy `v`.
std::vector<std::uint32_t> one_per_page(const std::vector<std::uint32_t>& v, std::uint64_t per_page,
                                        std::uint64_t first_page, std::uint64_t count, std::uint32_t seed) {
  std::vector<std::uint32_t> out(count);
  for (std::uint64_t t = 0; t < count; ++t) out[t] = v[(first_page + t) * per_page + mix(t + seed) % per_page];
  return out;
}

TEST_F(Api, AutomaticPlacementReadsSparsePagesRemotelyAndMigratesDenseOnes) {
  Runtime rt(Config{.cache_bytes = 64ull << 20, .max_pages_held_per_thread = 1});
  constexpr std::uint64_t pages = 4096, per_page = 1024, sparse_pages = 2048;
  auto a = rt.alloc<std::uint32_t>(pages * per_page, Placement::automatic, "automatic");
  EXPECT_EQ(a.placement(), Placement::automatic);
  fill_initial(a, 21);
  const std::vector<std::uint32_t> v(a.host().begin(), a.host().end());

  // A page may give remote reads 8 sectors (1/16 of 4 KB) before it migrates. Each sparse page
  // is read by one lane, one sector, three times in all: nothing is loaded.
  ASSERT_EQ(detail::automatic_remote_sectors(4096, rt.config().automatic_remote_share), 8u);
  DeviceVector<std::uint32_t> sparse(sparse_pages);
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    rt.launch(read_one_per_page, dim3(16), dim3(128), 0, a.device(), std::uint64_t{0}, sparse_pages, seed,
              sparse.get());
    rt.synchronize();
    EXPECT_EQ(sparse.to_host(), one_per_page(v, per_page, 0, sparse_pages, seed)) << "seed " << seed;
  }
  EXPECT_EQ(rt.stats().misses, 0u) << "sparse reads must not migrate pages";

  // Dense reads: 32 warp accesses of 4 sectors each per page, so every other page migrates, once
  // (at its third access).
  const std::uint64_t dense = (pages - sparse_pages) * per_page;
  DeviceVector<std::uint32_t> out(dense);
  rt.launch(read_range, dim3(64), dim3(256), 0, a.device(), sparse_pages * per_page, dense, out.get());
  rt.synchronize();
  const std::vector<std::uint32_t> expected(v.begin() + sparse_pages * per_page, v.end());
  EXPECT_EQ(out.to_host(), expected);
  EXPECT_EQ(rt.stats().misses, pages - sparse_pages);

  // Reads four to eight of a sparse page are still remote; the ninth migrates it.
  for (std::uint32_t seed = 4; seed <= 9; ++seed) {
    rt.launch(read_one_per_page, dim3(16), dim3(128), 0, a.device(), std::uint64_t{0}, sparse_pages, seed,
              sparse.get());
    rt.synchronize();
    EXPECT_EQ(sparse.to_host(), one_per_page(v, per_page, 0, sparse_pages, seed)) << "seed " << seed;
    EXPECT_EQ(rt.stats().misses, seed < 9 ? pages - sparse_pages : pages) << "seed " << seed;
  }

  // Dropping the cache forgets the counts: sparse reads are remote again.
  rt.drop_cached();
  rt.reset_stats();
  rt.launch(read_one_per_page, dim3(16), dim3(128), 0, a.device(), std::uint64_t{0}, sparse_pages, 6u,
            sparse.get());
  rt.synchronize();
  EXPECT_EQ(sparse.to_host(), one_per_page(v, per_page, 0, sparse_pages, 6u));
  EXPECT_EQ(rt.stats().misses, 0u);
}

/// out[w * 32 + lane] = a[element]: warp w reads page `first_page + w`, lane l the element at
/// l * lane_stride (mod the page), so a warp access fetches one sector (stride 0) or one per lane.
__global__ void read_lane_strided(array<std::uint32_t> a, std::uint64_t first_page, std::uint64_t pages,
                                  std::uint64_t lane_stride, std::uint32_t* out) {
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  const std::uint32_t lane = threadIdx.x % 32;
  for (std::uint64_t w = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; w < pages; w += warps)
    out[w * 32 + lane] = a[(first_page + w) * a.elements_per_page() + lane * lane_stride % a.elements_per_page()];
}

/// What read_lane_strided reads from pages [0, pages) of the host copy `v`.
std::vector<std::uint32_t> lane_strided(const std::vector<std::uint32_t>& v, std::uint64_t per_page,
                                        std::uint64_t pages, std::uint64_t lane_stride) {
  std::vector<std::uint32_t> out(pages * 32);
  for (std::uint64_t p = 0; p < pages; ++p)
    for (std::uint64_t l = 0; l < 32; ++l) out[p * 32 + l] = v[p * per_page + l * lane_stride % per_page];
  return out;
}

TEST_F(Api, AutomaticPlacementPricesAWarpAccessInTheSectorsItFetches) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .max_pages_held_per_thread = 1});
  constexpr std::uint64_t pages = 512, half = pages / 2, per_page = 1024;
  auto a = rt.alloc<std::uint32_t>(pages * per_page, Placement::automatic, "priced");
  fill_initial(a, 23);
  const std::vector<std::uint32_t> v(a.host().begin(), a.host().end());
  const std::uint32_t budget = detail::automatic_remote_sectors(4096, rt.config().automatic_remote_share);
  ASSERT_GE(budget, 2u);
  ASSERT_LT(budget, 32u);
  auto expected = [&](std::uint64_t first_page, std::uint64_t stride) {
    std::vector<std::uint32_t> out(half * 32);
    for (std::uint64_t w = 0; w < half; ++w)
      for (std::uint64_t l = 0; l < 32; ++l) out[w * 32 + l] = v[(first_page + w) * per_page + l * stride % per_page];
    return out;
  };
  DeviceVector<std::uint32_t> out(half * 32);
  auto read = [&](std::uint64_t first_page, std::uint64_t stride) {
    rt.launch(read_lane_strided, dim3(8), dim3(128), 0, a.device(), first_page, half, stride, out.get());
    rt.synchronize();
    EXPECT_EQ(out.to_host(), expected(first_page, stride)) << "pages from " << first_page << ", stride " << stride;
  };

  // 32 lanes on one element fetch one sector: the budget's worth of such accesses stay remote.
  for (std::uint32_t k = 0; k < budget; ++k) read(0, 0);
  EXPECT_EQ(rt.stats().misses, 0u);
  // One sector per lane (8 elements apart) is more than the budget: those pages migrate at once.
  read(half, 8);
  EXPECT_EQ(rt.stats().misses, half);
  // The first half's next access would pass its budget: it migrates.
  read(0, 0);
  EXPECT_EQ(rt.stats().misses, pages);
}

TEST_F(Api, AutomaticPlacementReadsACoalescedPageRemotelyTwiceThenMigratesIt) {
  // One warp per page, its lanes on 32 consecutive uint32 (128 B, 4 sectors): with a budget of 8
  // sectors the first two accesses are remote and the third migrates the page.
  Runtime rt(Config{.cache_bytes = 16ull << 20, .max_pages_held_per_thread = 1});
  ASSERT_EQ(detail::automatic_remote_sectors(4096, rt.config().automatic_remote_share), 8u);
  constexpr std::uint64_t pages = 256, per_page = 1024;
  auto a = rt.alloc<std::uint32_t>(pages * per_page, Placement::automatic, "coalesced");
  fill_initial(a, 24);
  const std::vector<std::uint32_t> v(a.host().begin(), a.host().end());
  std::vector<std::uint32_t> expected(pages * 32);
  for (std::uint64_t p = 0; p < pages; ++p)
    for (std::uint64_t l = 0; l < 32; ++l) expected[p * 32 + l] = v[p * per_page + l];
  DeviceVector<std::uint32_t> out(pages * 32);
  for (std::uint64_t access = 1; access <= 3; ++access) {
    rt.launch(read_lane_strided, dim3(8), dim3(128), 0, a.device(), std::uint64_t{0}, pages, std::uint64_t{1}, out.get());
    rt.synchronize();
    EXPECT_EQ(out.to_host(), expected) << "access " << access;
    EXPECT_EQ(rt.stats().misses, access < 3 ? 0u : pages) << "access " << access;
  }
}

TEST_F(Api, AutomaticPlacementReadsWhatEvictedWritesLeft) {
  // 64 frames for 1024 pages: the rewrite evicts and writes back almost every page; remote
  // reads of the absent pages must see the written-back values, cached reads the rest.
  Runtime rt(Config{.cache_bytes = 64 * 4096, .max_pages_held_per_thread = 1});
  constexpr std::uint64_t pages = 1024, per_page = 1024;
  auto a = rt.alloc<std::uint32_t>(pages * per_page, Placement::automatic, "automatic, evicting");
  fill_initial(a, 22);
  const std::vector<std::uint32_t> before(a.host().begin(), a.host().end());
  rt.launch(rewrite_pages<std::uint32_t>, dim3(1), dim3(32), 0, a.device());
  const std::vector<std::uint32_t> v = rewritten(before);
  DeviceVector<std::uint32_t> sparse(pages);
  rt.launch(read_one_per_page, dim3(1), dim3(32), 0, a.device(), std::uint64_t{0}, pages, 7u, sparse.get());
  rt.synchronize();
  EXPECT_EQ(sparse.to_host(), one_per_page(v, per_page, 0, pages, 7u));
  DeviceVector<std::uint32_t> all(pages * per_page);
  rt.launch(read_range, dim3(1), dim3(32), 0, a.device(), std::uint64_t{0}, pages * per_page, all.get());
  rt.synchronize();
  EXPECT_EQ(all.to_host(), v);
  rt.flush();
  EXPECT_TRUE(std::equal(v.begin(), v.end(), a.host().begin()));
}

TEST_F(Api, AutomaticPlacementOnAnEvictingCacheReadsAPageRemotelyUntilItPaysForItsCopy) {
  // 64 frames for 1024 pages: the cache evicts, so a page is read remotely until its reads have
  // fetched a page's worth (Config::automatic_remote_share_evicting = 1: 128 sectors of 4 KB);
  // a warp access here fetches 16 sectors (each lane 4 elements from the last), as a 512-byte row does.
  Runtime rt(Config{.cache_bytes = 64 * 4096, .max_pages_held_per_thread = 1});
  ASSERT_EQ(detail::automatic_remote_sectors(4096, rt.config().automatic_remote_share_evicting), 128u);
  constexpr std::uint64_t pages = 1024, per_page = 1024, stride = 4;
  auto a = rt.alloc<std::uint32_t>(pages * per_page, Placement::automatic, "automatic rows");
  fill_initial(a, 25);
  const std::vector<std::uint32_t> v(a.host().begin(), a.host().end());
  const std::vector<std::uint32_t> expected = lane_strided(v, per_page, pages, stride);
  DeviceVector<std::uint32_t> out(pages * 32);
  auto read_rows = [&](std::uint64_t access) {
    rt.launch(read_lane_strided, dim3(1), dim3(64), 0, a.device(), std::uint64_t{0}, pages, stride, out.get());
    rt.synchronize();
    EXPECT_EQ(out.to_host(), expected) << "access " << access;
  };
  for (std::uint64_t access = 1; access <= 8; ++access) read_rows(access);
  EXPECT_EQ(rt.stats().misses, 0u) << "eight 16-sector reads stay within a 128-sector budget";
  read_rows(9);
  EXPECT_EQ(rt.stats().misses, pages) << "the ninth read of every page migrates it";
  // Nearly every page was evicted again; its load restarted its count, so it is read remotely
  // again rather than migrated at every read.
  for (std::uint64_t access = 10; access <= 17; ++access) read_rows(access);
  EXPECT_EQ(rt.stats().misses, pages);
  read_rows(18);
  EXPECT_GT(rt.stats().misses, pages + pages / 2) << "the pages evicted since have paid for a copy again";
}

TEST_F(Api, AutomaticPlacementMigratesAtOnceAgainWhenEverythingFitsOnceMore) {
  // An automatic object of 32 pages beside a migrate one of 64, in 64 frames: the cache can
  // evict, so a 16-sector read of an absent page is remote. Once the migrate object is gone,
  // everything fits, the budget is automatic_remote_share's 8 sectors, and the same read migrates.
  Runtime rt(Config{.cache_bytes = 64 * 4096, .max_pages_held_per_thread = 1});
  constexpr std::uint64_t pages = 32, per_page = 1024, stride = 4;
  auto a = rt.alloc<std::uint32_t>(pages * per_page, Placement::automatic, "automatic");
  std::optional<object<std::uint32_t>> crowd = rt.alloc<std::uint32_t>(64 * per_page, Placement::migrate, "crowd");
  fill_initial(a, 26);
  const std::vector<std::uint32_t> v(a.host().begin(), a.host().end());
  const std::vector<std::uint32_t> expected = lane_strided(v, per_page, pages, stride);
  DeviceVector<std::uint32_t> out(pages * 32);
  auto read_rows = [&] {
    rt.launch(read_lane_strided, dim3(1), dim3(64), 0, a.device(), std::uint64_t{0}, pages, stride, out.get());
    rt.synchronize();
    EXPECT_EQ(out.to_host(), expected);
  };
  read_rows();
  EXPECT_EQ(rt.stats().misses, 0u) << "while the cache can evict";
  crowd.reset();
  read_rows();
  EXPECT_EQ(rt.stats().misses, pages) << "once everything fits";
}

/// 32 bytes: an element wider than one 16-byte load (array<T> allows powers of two up to 512 B).
struct Wide {
  std::uint64_t v[4];
  friend bool operator==(const Wide&, const Wide&) = default;
};

/// out[t] = a[t * stride] for t < count.
__global__ void read_strided(array<Wide> a, std::uint64_t stride, std::uint64_t count, Wide* out) {
  for (std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < count;
       t += std::uint64_t{gridDim.x} * blockDim.x)
    out[t] = a[t * stride];
}

TEST_F(Api, AutomaticPlacementReadsElementsWiderThanSixteenBytes) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .max_pages_held_per_thread = 1});
  constexpr std::uint64_t n = std::uint64_t{1} << 16;  // 2 MiB: 512 pages of 4 KiB
  auto a = rt.alloc<Wide>(n, Placement::automatic, "wide");
  std::vector<Wide> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = Wide{{i, i * 3, ~i, i ^ 0x5555}};
  std::copy(v.begin(), v.end(), a.host().begin());
  const std::uint64_t per_page = a.device().elements_per_page();
  const std::uint64_t pages = n / per_page;

  // One element of each page, once: read remotely, in two 16-byte pieces.
  DeviceVector<Wide> sparse(pages);
  rt.launch(read_strided, dim3(4), dim3(128), 0, a.device(), per_page, pages, sparse.get());
  rt.synchronize();
  std::vector<Wide> expected(pages);
  for (std::uint64_t p = 0; p < pages; ++p) expected[p] = v[p * per_page];
  EXPECT_EQ(sparse.to_host(), expected);
  EXPECT_EQ(rt.stats().misses, 0u);

  // Every element, remote reads and migrated pages alike.
  DeviceVector<Wide> all(n);
  rt.launch(read_strided, dim3(16), dim3(256), 0, a.device(), std::uint64_t{1}, n, all.get());
  rt.synchronize();
  EXPECT_EQ(all.to_host(), v);
}

TEST_F(Api, AdoptedMemoryIsWrittenInPlace) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .max_pages_held_per_thread = 1});
  const std::size_t n = 300001;
  std::unique_ptr<std::uint32_t, decltype(&std::free)> mine(
      static_cast<std::uint32_t*>(std::aligned_alloc(4096, (n * 4 + 4095) / 4096 * 4096)), &std::free);
  for (std::size_t i = 0; i < n; ++i) mine.get()[i] = initial_value(i, 9);
  const std::vector<std::uint32_t> before(mine.get(), mine.get() + n);
  {
    auto a = rt.adopt(mine.get(), n, Placement::migrate, "adopted");
    EXPECT_EQ(a.host().data(), mine.get());
    rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());
    rt.flush();
  }
  const auto expected = rewritten(before);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), mine.get()));
}

TEST_F(Api, AdoptsMemoryTheCallerPinnedAlready) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .max_pages_held_per_thread = 1});
  const std::size_t n = 100000;
  std::uint32_t* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), n * 4, cudaHostAllocMapped), cudaSuccess);
  std::unique_ptr<std::uint32_t, cudaError_t (*)(void*)> owner(pinned, &cudaFreeHost);
  for (std::size_t i = 0; i < n; ++i) pinned[i] = initial_value(i, 10);
  const std::vector<std::uint32_t> before(pinned, pinned + n);
  {
    auto a = rt.adopt(pinned, n, Placement::migrate, "pinned by caller");
    rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());
    rt.flush();
  }
  const auto expected = rewritten(before);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), pinned));
}

__global__ void read_at(array<float> a, std::uint64_t index, float* out) { *out = a[index]; }

TEST_F(Api, CheckedModeNamesObjectAndIndex) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .checked = true});
  auto a = rt.alloc<float>(1000, Placement::migrate, "temperatures");
  DeviceVector<float> out(1);
  rt.launch(read_at, dim3(1), dim3(1), 0, a.device(), std::uint64_t{1000}, out.get());
  try {
    rt.synchronize();
    FAIL() << "expected an index_out_of_range error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::index_out_of_range);
    const std::string what = e.what();
    EXPECT_NE(what.find("temperatures"), std::string::npos) << what;
    EXPECT_NE(what.find("index 1000"), std::string::npos) << what;
    EXPECT_NE(what.find("1000 elements"), std::string::npos) << what;
  }
  // The runtime stays usable after a reported bounds error.
  rt.launch(read_at, dim3(1), dim3(1), 0, a.device(), std::uint64_t{999}, out.get());
  EXPECT_NO_THROW(rt.synchronize());
}

TEST_F(Api, LaunchTooLargeForTheCacheIsRefused) {
  Runtime rt(Config{.cache_bytes = 1ull << 20, .max_pages_held_per_thread = 2});  // 256 frames
  auto a = rt.alloc<std::uint32_t>(1u << 20);
  try {
    rt.launch(rewrite_pages<std::uint32_t>, dim3(1024), dim3(256), 0, a.device());
    FAIL() << "expected the launch to be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_config);
    EXPECT_NE(std::string(e.what()).find("launch at most 0 blocks"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(rt.launch(rewrite_pages<std::uint32_t>, dim3(1), dim3(128), 0, a.device()));
  rt.synchronize();
}

TEST_F(Api, DestroyedObjectsGiveTheirFramesBack) {
  Runtime rt(Config{.cache_bytes = 4ull << 20, .max_pages_held_per_thread = 1});
  std::uint32_t dead_id = 0;
  {
    auto a = rt.alloc<std::uint32_t>(1u << 20, Placement::migrate, "short-lived");
    dead_id = a.id();
    fill_initial(a, 6);
    rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, a.device());
    rt.synchronize();
  }
  for (std::uint64_t key : detail::frame_owners(rt))
    EXPECT_TRUE(key == detail::empty_page_key || detail::key_object(key) != dead_id);
  auto b = rt.alloc<std::uint32_t>(1u << 20, Placement::migrate, "next");
  fill_initial(b, 7);
  const std::vector<std::uint32_t> before(b.host().begin(), b.host().end());
  rt.launch(rewrite_pages<std::uint32_t>, dim3(8), dim3(128), 0, b.device());
  rt.flush();
  const auto expected = rewritten(before);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), b.host().begin()));
}

TEST_F(Api, BadArgumentsAreClearErrors) {
  Runtime rt(Config{.cache_bytes = 1ull << 20});
  try {
    (void)rt.alloc<float>(0, Placement::migrate, "empty");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos);
  }
  alignas(16) static std::uint32_t buffer[64];
  EXPECT_THROW((void)rt.adopt(reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(buffer) + 4), 8), Error);
  EXPECT_THROW(Runtime(Config{.cache_bytes = 1ull << 20, .device = 999}), Error);
}

/// Lanes of one warp hold the same page through spans of different modes; only the odd lanes
/// write, and their writes alone reach the host.
__global__ void mixed_modes_on_one_page(array<std::uint32_t> a) {
  const unsigned lane = threadIdx.x % 32;
  if (lane % 2 == 1) {
    const auto page = a.span<access::read_write>(lane);
    page[lane] = 1000 + lane;
  } else {
    const auto page = a.span<access::read>(lane);
    (void)page[lane];
  }
}

TEST_F(Api, AnyWriterInAGroupMarksThePageDirty) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint32_t>(1024, Placement::migrate, "mixed");
  std::fill(a.host().begin(), a.host().end(), 5u);
  rt.launch(mixed_modes_on_one_page, dim3(1), dim3(32), 0, a.device());
  rt.flush();
  for (unsigned lane = 0; lane < 32; ++lane) EXPECT_EQ(a.host()[lane], lane % 2 == 1 ? 1000 + lane : 5u) << lane;
}

TEST_F(Api, StaleHandleAfterSetPlacementIsReportedInCheckedMode) {
  Runtime rt(Config{.cache_bytes = 16ull << 20, .checked = true, .max_pages_held_per_thread = 1});
  auto a = rt.alloc<std::uint32_t>(1u << 16, Placement::migrate, "moving");
  fill_initial(a, 13);
  const array<std::uint32_t> stale = a.device();
  a.set_placement(Placement::remote);
  rt.launch(rewrite_pages<std::uint32_t>, dim3(1), dim3(32), 0, stale);
  try {
    rt.synchronize();
    FAIL() << "expected the stale handle to be reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("'moving'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("set_placement"), std::string::npos) << e.what();
  }
}

TEST_F(Api, OverlappingAdoptionAndOverflowingSizesAreRefused) {
  Runtime rt(Config{.cache_bytes = 1ull << 20});
  std::vector<std::uint64_t> memory(4096);
  auto first = rt.adopt(memory.data(), 2048, Placement::migrate, "first half");
  try {
    (void)rt.adopt(memory.data() + 1024, 2048, Placement::migrate, "overlapping");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("overlaps object 'first half'"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW((void)rt.adopt(memory.data() + 2048, 2048, Placement::migrate, "second half"));
  EXPECT_THROW((void)rt.alloc<double>(std::numeric_limits<std::size_t>::max() / 4), Error);
}

TEST_F(Api, AMovedFromObjectRaisesOnUse) {
  Runtime rt(Config{.cache_bytes = 1ull << 20});
  auto a = rt.alloc<float>(1000, Placement::migrate, "a");
  auto b = std::move(a);
  try {
    (void)a.device();  // NOLINT(bugprone-use-after-move): the point of the test
    FAIL() << "expected a moved-from object to be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
  }
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(b.name(), "a");
}

/// Copies every element (caching every page), and the first thread also reads one past the end.
__global__ void copy_and_overrun(array<std::uint32_t> from, array<std::uint32_t> to) {
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < from.size();
       i += std::uint64_t{gridDim.x} * blockDim.x)
    to.store(i, from[i]);
  if (blockIdx.x == 0 && threadIdx.x == 0) (void)from[from.size()];
}

TEST_F(Api, AnObjectDestroyedWithAPendingErrorKeepsItForTheNextCallAndLeavesNoFrame) {
  Runtime rt(Config{.cache_bytes = 64ull << 20, .checked = true, .max_pages_held_per_thread = 1});
  auto to = rt.alloc<std::uint32_t>(200000, Placement::migrate, "to");
  std::uint32_t doomed_id = 0;
  {
    auto doomed = rt.alloc<std::uint32_t>(200000, Placement::migrate, "doomed");
    doomed_id = doomed.id();
    fill_initial(doomed, 3);
    rt.launch(copy_and_overrun, dim3(64), dim3(256), 0, doomed.device(), to.device());
  }  // destroyed with the kernel's error on record, unsynchronized
  try {
    rt.synchronize();
    FAIL() << "expected the destroyed object's out-of-range read to be reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::index_out_of_range);
    EXPECT_NE(std::string(e.what()).find("'doomed'"), std::string::npos) << e.what();
  }
  for (const std::uint64_t key : detail::frame_owners(rt))
    if (key != detail::empty_page_key) ASSERT_NE(detail::key_object(key), doomed_id) << "a frame names the freed object";
  // The runtime works on: a new object takes the freed slot.
  auto from = rt.alloc<std::uint32_t>(to.size(), Placement::migrate, "from");
  fill_initial(from, 4);
  rt.launch(copy_elements, dim3(64), dim3(256), 0, from.device(), to.device());
  rt.flush();
  for (std::size_t i = 0; i < to.size(); ++i) ASSERT_EQ(to.host()[i], initial_value(i, 4)) << i;
}

/// Holds two pages per thread while the launch declared one: with one frame this cannot progress.
__global__ void hold_two_pages(array<std::uint32_t> a) {
  const auto first = a.span(0);
  const auto second = a.span(a.elements_per_page());
  if (first[0] == 12345u && second[0] == 12345u) a.store(0, 1);
}

void run_until_watchdog() {
  try {
    Runtime rt(Config{.cache_bytes = 4096, .max_pages_held_per_thread = 1, .watchdog_seconds = 0.5});
    auto a = rt.alloc<std::uint32_t>(2048);
    rt.launch(hold_two_pages, dim3(1), dim3(1), 0, a.device());
    rt.synchronize();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(e.kind() == ErrorKind::no_progress ? 0 : 1);
  }
  std::exit(2);
}

TEST_F(Api, WatchdogTurnsAStuckKernelIntoAnError) {
  EXPECT_EXIT(run_until_watchdog(), ::testing::ExitedWithCode(0), "no frame to evict");
}

/// Every warp of a full grid stalls at once: the error that reaches the host is still the
/// watchdog's no_progress (the first failure is on record before any warp ends the kernel), not
/// a bare launch failure.
void run_many_warps_until_watchdog() {
  try {
    Runtime rt(Config{.cache_bytes = 4096, .max_pages_held_per_thread = 1, .watchdog_seconds = 0.5});
    auto a = rt.alloc<std::uint32_t>(2048);
    // Past the launch check (which refuses this grid): a raw launch on the runtime's stream.
    hold_two_pages<<<4 * rt.multiprocessor_count(), 256, 0, rt.stream()>>>(a.device());
    rt.synchronize();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(e.kind() == ErrorKind::no_progress ? 0 : 1);
  }
  std::exit(2);
}

TEST_F(Api, ManyWarpsStallingAtOnceReportNoProgress) {
  // The first warp to give up may be one waiting for a frame or one waiting for a page another
  // warp holds in transition: either is the watchdog's no_progress.
  for (int run = 0; run < 3; ++run)
    EXPECT_EXIT(run_many_warps_until_watchdog(), ::testing::ExitedWithCode(0),
                "no progress: .*(no frame to evict|waited for another warp)")
        << "run " << run;
}

}  // namespace
}  // namespace warpvm::testing

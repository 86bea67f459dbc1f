// The fuzzer's own parts on the host: configurations are legal and reproducible, the invariant
// check catches what it must, and a run through the simulator notices a corrupted byte.

#include "fuzz_config.hpp"
#include "fuzz_sim.hpp"

#include "warpvm/detail/core/geometry.hpp"

#include <gtest/gtest.h>

#include <set>

namespace warpvm::fuzz {
namespace {

TEST(FuzzConfig, RunsAreReproducibleLegalAndCoverTheGrid) {
  for (Grid grid : {Grid::ci, Grid::quick, Grid::full}) {
    std::set<std::uint32_t> cells_seen;
    for (std::uint64_t seed = 0; seed < 600; ++seed) {  // past the full grid's total weight
      const RunConfig r = make_run(seed, grid);
      const RunConfig again = make_run(seed, grid);
      EXPECT_EQ(r.describe(), again.describe());
      EXPECT_EQ(r.placements, again.placements);
      cells_seen.insert(r.cell);
      // The minimum legal cache, and threads in whole warps and blocks.
      EXPECT_EQ(r.frames, r.threads * r.holds);
      EXPECT_EQ(r.threads % warp_size, 0u);
      EXPECT_EQ(r.threads % r.block, 0u);
      EXPECT_GE(r.holds, 1u);
      EXPECT_LE(r.holds, 4u);
      if (r.shape.large) {
        EXPECT_EQ(r.threads, 256u);
      }
      std::uint64_t pages = 0;
      for (std::uint32_t o = 0; o < object_count; ++o) {
        EXPECT_GT(r.elements[o], 0u);
        pages += r.object_pages(o);
      }
      // Every cached page fits at 1x, so nothing is evicted (the hold-free path); more data at
      // larger ratios.
      EXPECT_GE(pages, std::uint64_t{r.frames} * r.shape.oversubscription);
      if (r.shape.oversubscription == 1) {
        EXPECT_LE(pages, std::max<std::uint64_t>(r.frames, object_count));
      }
      EXPECT_EQ(r.boundaries.size() + 1, r.placements.size());
    }
    EXPECT_EQ(cells_seen.size(), cells(grid).size()) << to_string(grid);
  }
}

TEST(FuzzConfig, TheFullGridHasLargePagesAtTheMinimumLegalCache) {
  std::set<std::uint64_t> large_pages;
  for (const Cell& c : cells(Grid::full))
    if (c.large) large_pages.insert(c.page_bytes);
  EXPECT_EQ(large_pages, (std::set<std::uint64_t>{64u << 10, 256u << 10, 1u << 20, 2u << 20}));
}

/// A cache snapshot of a run with nothing cached and host memory equal to the model.
CacheSnapshot empty_cache(const RunConfig& r, const ReferenceModel& model) {
  CacheSnapshot s;
  s.cache_frames = r.frames;
  s.owners.assign(r.frames + 1, detail::empty_page_key);
  s.dirty.assign(r.frames + 1, 0);
  for (std::uint32_t o = 0; o < object_count; ++o)
    s.objects.push_back({o, Placement::migrate, std::vector<std::uint32_t>(r.object_pages(o), 0), model.bytes(o)});
  return s;
}

TEST(FuzzInvariants, CatchPagesInTwoFramesHeldPagesAndLostWrites) {
  const RunConfig r = make_run(7, Grid::ci);
  const ReferenceModel model(r);
  CacheSnapshot s = empty_cache(r, model);
  EXPECT_EQ(check_cache(r, model, s, true), "");

  CacheSnapshot twice = s;
  twice.owners[0] = twice.owners[1] = detail::make_page_key(2, 0);
  twice.objects[2].states[0] = detail::page_word::valid;
  EXPECT_NE(check_cache(r, model, twice, false).find("in frames 0 and 1"), std::string::npos);

  CacheSnapshot held = s;
  held.objects[1].states[0] = 1;  // one holder left
  EXPECT_NE(check_cache(r, model, held, false).find("left held"), std::string::npos);

  // Host memory differs from the model where no dirty frame explains it: a lost write.
  std::vector<std::byte> host(model.bytes(0).begin(), model.bytes(0).end());
  host[0] ^= std::byte{1};
  CacheSnapshot lost = s;
  lost.objects[0].host = host;
  EXPECT_NE(check_cache(r, model, lost, false).find("host memory differs"), std::string::npos);
  // ... which a dirty frame holding that page does explain (until a flush).
  lost.owners[3] = detail::make_page_key(0, 0);
  lost.objects[0].states[0] = detail::page_word::valid;
  lost.dirty[3] = 1;
  EXPECT_EQ(check_cache(r, model, lost, false), "");
  EXPECT_NE(check_cache(r, model, lost, true).find("dirty after flush"), std::string::npos);
}

TEST(FuzzSimulator, SeedsAreExactAndACorruptedByteIsNoticed) {
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    const RunConfig r = make_run(seed, Grid::ci);
    const SeedResult result = run_seed(r, [&](const ReferenceModel& model) { return make_sim_backend(r, model); });
    EXPECT_TRUE(result.exact) << reproducer("warpvm-fuzz", "sim", r) << ": " << result.failure;
    EXPECT_GT(result.pages_in, 0u);
  }
  // The same run with one byte of host memory changed behind the model's back.
  const RunConfig r = make_run(3, Grid::ci);
  ReferenceModel model(r);
  const std::unique_ptr<Backend> backend = make_sim_backend(r, model);
  backend->host(4)[5] ^= std::byte{0x20};
  SeedResult result;
  EXPECT_ANY_THROW(run_protocol(r, model, *backend, result));
  EXPECT_FALSE(result.exact);
}

}  // namespace
}  // namespace warpvm::fuzz

// The fault-path protocol under real concurrency on the CPU: threads acquire random pages of a
// cache far smaller than the data, read and write them, and the data stays exact.

#include "page_cache_model.hpp"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

namespace warpvm::detail {
namespace {

using sim::PageCacheModel;

struct Scenario {
  EvictionPolicy policy;
  std::uint32_t frames;
};

class ProtocolUnderContention : public ::testing::TestWithParam<Scenario> {};

TEST_P(ProtocolUnderContention, DataStaysExactAndNoPageIsInTwoFrames) {
  constexpr std::uint32_t pages = 64;
  constexpr std::uint32_t words = 16;
  constexpr int threads = 8;
  constexpr int steps = 4000;
  PageCacheModel cache(GetParam().frames, GetParam().policy, words);
  cache.add_object(pages);
  for (std::uint32_t p = 0; p < pages; ++p)
    for (std::uint32_t w = 0; w < words; ++w) cache.backing(0, p)[w] = p * 1000 + w;

  // Each thread owns word t of every page and adds its increments there; reads check that every
  // word of the frame belongs to the page the thread acquired (an in-use eviction would not).
  std::vector<std::vector<std::uint32_t>> added(threads, std::vector<std::uint32_t>(pages, 0));
  std::atomic<int> wrong_page{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::uniform_int_distribution<std::uint32_t> pick(0, pages - 1);
      for (int s = 0; s < steps; ++s) {
        const std::uint32_t page = pick(rng);
        const bool write = (rng() & 3) == 0;
        const std::uint32_t frame = cache.acquire(0, page, write);
        std::uint32_t* data = cache.frame_words(frame);
        for (std::uint32_t w = threads; w < words; ++w)
          if (data[w] != page * 1000 + w) wrong_page.fetch_add(1);
        if (write) {
          cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>(data[t]).fetch_add(1);
          ++added[t][page];
        }
        cache.release(0, page);
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(wrong_page.load(), 0);
  EXPECT_GT(cache.counts().evictions, 0u);

  std::vector<int> frames_of_page(pages, 0);
  for (std::uint32_t f = 0; f < cache.table().count; ++f)
    if (cache.frame_owner(f) != empty_page_key) ++frames_of_page[key_page(cache.frame_owner(f))];
  for (std::uint32_t p = 0; p < pages; ++p) {
    EXPECT_LE(frames_of_page[p], 1) << "page " << p << " is in two frames";
    EXPECT_EQ(page_word::holders(cache.page_word(0, p)), 0u);
  }
  cache.flush();
  for (std::uint32_t p = 0; p < pages; ++p)
    for (int t = 0; t < threads; ++t)
      EXPECT_EQ(cache.backing(0, p)[t], p * 1000 + t + added[t][p]) << "page " << p << " word " << t;
}

INSTANTIATE_TEST_SUITE_P(Policies, ProtocolUnderContention,
                         ::testing::Values(Scenario{EvictionPolicy::clock, 8}, Scenario{EvictionPolicy::fifo, 8},
                                           Scenario{EvictionPolicy::clock, 9}, Scenario{EvictionPolicy::fifo, 40}),
                         [](const ::testing::TestParamInfo<Scenario>& scenario) {
                           return std::string(to_string(scenario.param.policy)) + "_" +
                                  std::to_string(scenario.param.frames) + "frames";
                         });

}  // namespace
}  // namespace warpvm::detail

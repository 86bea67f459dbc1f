// The monitor warp's waiting lists (waiting_lists.hpp), on host memory: a request is ready at
// once when its tags were seen, waits under its first missing tag otherwise, moves along its
// tags as they arrive and is woken exactly once, after its last; requests that do not follow
// their warp's last are refused; the span of polled words covers exactly the words waited on.
// A random model run (batches of arrivals, several requests per warp) checks every wake against
// a brute-force reading of the arrivals.

#include "warpvm/detail/channel/availability.hpp"
#include "warpvm/detail/channel/waiting_lists.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace warpvm::detail {
namespace {

/// The tables of one monitor, in host memory, as the channel clears them.
struct HostMonitor {
  HostMonitor(std::uint32_t tags, std::uint32_t waiters)
      : tag_count(tags),
        heads(tags, no_waiter),
        nodes(waiters),
        taken(waiters, 0),
        seen(AvailabilityBitmap<>::words_required(tags), 0),
        word_waiters(seen.size(), 0),
        counts(monitor_count_slots, 0),
        lists(WarpMonitorTables{heads.data(), nodes.data(), taken.data(), seen.data(), word_waiters.data(), &span,
                                counts.data()},
              tags) {}

  /// The map's word of `tag` with that tag set: absorbs it and passes the new bit on, recording
  /// each wake as (waiter, seq).
  std::uint32_t arrive(std::uint32_t tag, std::vector<std::pair<std::uint32_t, std::uint32_t>>& woken) {
    const std::uint32_t word = tag / availability_tags_per_word;
    const std::uint64_t live = seen[word] | (std::uint64_t{1} << (tag % availability_tags_per_word));
    const std::uint64_t arrived = lists.absorb(word, live);
    return lists.tags_arrived(word, arrived, [&](std::uint32_t w, std::uint32_t seq) { woken.emplace_back(w, seq); });
  }

  std::uint32_t tag_count;
  std::vector<std::uint32_t> heads;
  std::vector<WaitingNode> nodes;
  std::vector<std::uint32_t> taken;
  std::vector<std::uint64_t> seen;
  std::vector<std::uint32_t> word_waiters;
  WaitingSpan span{0, 0};
  std::vector<std::uint64_t> counts;
  WaitingLists lists;
};

Request request(std::uint32_t waiter, std::uint32_t first_tag, std::uint32_t tag_count, std::uint32_t seq) {
  return Request{first_tag, tag_count, waiter, 64, 0, seq};
}

TEST(WaitingLists, ARequestWaitsForItsLastTagAcrossWords) {
  HostMonitor m(256, 4);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> woken;
  EXPECT_EQ(m.lists.admit(request(2, 60, 10, 1), 0), Admission::waiting);  // tags 60..69: words 0 and 1
  EXPECT_EQ(m.span.low, 0u);
  EXPECT_EQ(m.span.high, 1u);
  EXPECT_EQ(m.arrive(61, woken), 0u);  // not its first missing tag: nothing moves
  EXPECT_EQ(m.arrive(60, woken), 0u);  // moves on to 62
  for (std::uint32_t t = 62; t < 64; ++t) EXPECT_EQ(m.arrive(t, woken), 0u);
  EXPECT_EQ(m.span.low, 1u);  // now waiting on tag 64, in word 1
  EXPECT_EQ(m.span.high, 2u);
  for (std::uint32_t t = 64; t < 69; ++t) EXPECT_EQ(m.arrive(t, woken), 0u);
  EXPECT_TRUE(woken.empty());
  EXPECT_EQ(m.arrive(69, woken), 1u);
  ASSERT_EQ(woken.size(), 1u);
  EXPECT_EQ(woken[0], std::make_pair(2u, 1u));
  EXPECT_GE(m.span.low, m.span.high);  // nothing waits: nothing to poll
}

TEST(WaitingLists, SeenTagsMakeARequestReadyAndManyWaitersWakeOnOneTag) {
  HostMonitor m(128, 8);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> woken;
  EXPECT_EQ(m.arrive(5, woken), 0u);
  EXPECT_EQ(m.lists.admit(request(0, 5, 1, 1), 0), Admission::ready);
  for (std::uint32_t w = 1; w < 8; ++w) EXPECT_EQ(m.lists.admit(request(w, 100, 1, 1), 0), Admission::waiting);
  EXPECT_EQ(m.span.low, 1u);
  EXPECT_EQ(m.word_waiters[1], 7u);
  EXPECT_EQ(m.arrive(100, woken), 7u);
  std::vector<std::uint32_t> waiters;
  for (const auto& [w, seq] : woken) {
    waiters.push_back(w);
    EXPECT_EQ(seq, 1u);
  }
  std::sort(waiters.begin(), waiters.end());
  EXPECT_EQ(waiters, (std::vector<std::uint32_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(m.word_waiters[1], 0u);
  EXPECT_EQ(m.heads[100], no_waiter);
}

TEST(WaitingLists, RefusesARequestThatDoesNotFollowTheWarpsLast) {
  HostMonitor m(64, 2);
  EXPECT_EQ(m.lists.admit(request(1, 3, 1, 1), 0), Admission::waiting);
  EXPECT_EQ(m.lists.admit(request(1, 4, 1, 1), 0), Admission::refused);  // a second request with the same number
  EXPECT_EQ(m.lists.admit(request(0, 4, 1, 2), 0), Admission::refused);  // skips a number
  EXPECT_EQ(m.heads[4], no_waiter);
  EXPECT_EQ(m.word_waiters[0], 1u);
  // Served (the count its wake writes), the warp asks again with the next number.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> woken;
  EXPECT_EQ(m.arrive(3, woken), 1u);
  EXPECT_EQ(m.lists.admit(request(1, 3, 1, 2), 1), Admission::ready);
}

TEST(WaitingLists, RandomArrivalsWakeEachRequestOnceAfterItsLastTag) {
  std::random_device fresh;
  const std::uint32_t seed = fresh();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 random(seed);
  constexpr std::uint32_t tags = 700, waiters = 300, rounds = 3;
  HostMonitor m(tags, waiters);
  std::vector<std::uint32_t> first(waiters), count(waiters), served(waiters, 0);
  std::vector<bool> arrived(tags, false), waiting(waiters, false);
  std::vector<std::uint32_t> order(tags);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), random);
  auto all_arrived = [&](std::uint32_t w) {
    return std::all_of(arrived.begin() + first[w], arrived.begin() + first[w] + count[w], [](bool a) { return a; });
  };
  // Warp w asks for a random range; when served, it asks again (up to `rounds` requests each).
  auto ask = [&](std::uint32_t w) {
    count[w] = std::uniform_int_distribution<std::uint32_t>(0, 150)(random);
    first[w] = std::uniform_int_distribution<std::uint32_t>(0, tags - count[w])(random);
    const Admission admitted = m.lists.admit(request(w, first[w], count[w], served[w] + 1), served[w]);
    ASSERT_NE(admitted, Admission::refused);
    EXPECT_EQ(admitted == Admission::ready, all_arrived(w)) << "waiter " << w;
    if (admitted == Admission::ready) ++served[w];
    waiting[w] = admitted == Admission::waiting;
  };
  // A batch of arrivals, as a poll sees them: every word's new bits absorbed first, then passed
  // on word by word (several bits of one word at once).
  auto arrive = [&](std::span<const std::uint32_t> batch) {
    std::vector<std::uint64_t> bits(m.seen.size(), 0);
    for (const std::uint32_t tag : batch) {
      arrived[tag] = true;
      bits[tag / availability_tags_per_word] |= std::uint64_t{1} << (tag % availability_tags_per_word);
    }
    std::vector<std::uint64_t> added(bits.size(), 0);
    for (std::uint32_t word = 0; word < bits.size(); ++word)
      if (bits[word] != 0) added[word] = m.lists.absorb(word, m.seen[word] | bits[word]);
    std::vector<std::pair<std::uint32_t, std::uint32_t>> woken;
    for (std::uint32_t word = 0; word < added.size(); ++word)
      if (added[word] != 0)
        m.lists.tags_arrived(word, added[word], [&](std::uint32_t v, std::uint32_t seq) { woken.emplace_back(v, seq); });
    for (const auto& [v, seq] : woken) {
      EXPECT_TRUE(waiting[v]) << "waiter " << v << " woken while not waiting (twice?)";
      EXPECT_TRUE(all_arrived(v)) << "waiter " << v << " woken before its last tag";
      EXPECT_EQ(seq, served[v] + 1) << "waiter " << v;
      waiting[v] = false;
      ++served[v];
    }
  };
  std::uint32_t next_arrival = 0;
  for (std::uint32_t w = 0; w < waiters; ++w) {
    ask(w);
    // Some tags arrive between requests, so requests find some of theirs seen.
    const std::uint32_t n = std::min<std::uint32_t>(std::uniform_int_distribution<std::uint32_t>(0, 4)(random),
                                                    tags - next_arrival);
    arrive(std::span<const std::uint32_t>(order).subspan(next_arrival, n));
    next_arrival += n;
  }
  while (next_arrival < tags) {
    const std::uint32_t n =
        std::min<std::uint32_t>(std::uniform_int_distribution<std::uint32_t>(1, 20)(random), tags - next_arrival);
    arrive(std::span<const std::uint32_t>(order).subspan(next_arrival, n));
    next_arrival += n;
    // Served warps ask again (their later requests find more tags seen, all once every tag arrived).
    for (std::uint32_t w = 0; w < waiters; ++w)
      if (!waiting[w] && served[w] < rounds) ask(w);
    // The span covers every waiter's first missing tag.
    for (std::uint32_t v = 0; v < waiters; ++v)
      if (waiting[v]) {
        const std::uint32_t word = m.nodes[v].next_tag / availability_tags_per_word;
        EXPECT_FALSE(arrived[m.nodes[v].next_tag]);
        EXPECT_TRUE(word >= m.span.low && word < m.span.high);
      }
  }
  for (std::uint32_t w = 0; w < waiters; ++w)
    while (served[w] < rounds) ask(w);  // every tag is seen now: each request is ready at once
  EXPECT_TRUE(std::none_of(waiting.begin(), waiting.end(), [](bool a) { return a; }));
  EXPECT_TRUE(std::all_of(m.word_waiters.begin(), m.word_waiters.end(), [](std::uint32_t n) { return n == 0; }));
  EXPECT_GE(m.span.low, m.span.high);
}

}  // namespace
}  // namespace warpvm::detail

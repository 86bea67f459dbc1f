// The availability bitmap: ranges across word boundaries, a random differential run against a
// vector<bool>, and producers on threads that OR bits into shared words while a monitor reads.

#include "warpvm/detail/sync/availability.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace warpvm::detail {
namespace {

struct OwnedBitmap {
  explicit OwnedBitmap(std::uint32_t tags)
      : words(AvailabilityBitmap<>::words_required(tags), ~std::uint64_t{0}), bits(words.data(), tags) {
    bits.clear();
  }
  std::vector<std::uint64_t> words;
  AvailabilityBitmap<> bits;
};

TEST(Availability, WordsRequired) {
  EXPECT_EQ(AvailabilityBitmap<>::words_required(0), 0u);
  EXPECT_EQ(AvailabilityBitmap<>::words_required(1), 1u);
  EXPECT_EQ(AvailabilityBitmap<>::words_required(64), 1u);
  EXPECT_EQ(AvailabilityBitmap<>::words_required(65), 2u);
}

TEST(Availability, ClearedBitmapHasNothingAvailable) {
  OwnedBitmap b(200);
  for (std::uint32_t tag = 0; tag < 200; ++tag) EXPECT_FALSE(b.bits.is_available(tag));
  EXPECT_EQ(b.bits.first_missing(0, 200), 0u);
  EXPECT_TRUE(b.bits.all_available(17, 0));  // an empty request waits for nothing
}

TEST(Availability, RangesAcrossWordBoundaries) {
  OwnedBitmap b(200);
  ASSERT_TRUE(b.bits.publish(5));
  EXPECT_TRUE(b.bits.is_available(5));
  EXPECT_TRUE(b.bits.all_available(5, 1));
  EXPECT_FALSE(b.bits.all_available(4, 2));
  EXPECT_FALSE(b.bits.is_available(6));

  ASSERT_TRUE(b.bits.publish(60, 80));  // words 0, 1 and 2
  EXPECT_TRUE(b.bits.all_available(60, 80));
  EXPECT_FALSE(b.bits.all_available(59, 81));
  EXPECT_FALSE(b.bits.all_available(60, 81));
  EXPECT_EQ(b.bits.first_missing(60, 100), 140u);
  EXPECT_EQ(b.bits.first_missing(60, 80), 140u);  // all there: first + count
  EXPECT_EQ(b.bits.first_missing(0, 10), 0u);
  EXPECT_EQ(b.bits.first_missing(5, 10), 6u);

  ASSERT_TRUE(b.bits.retract(64, 64));  // exactly word 1
  EXPECT_EQ(b.bits.first_missing(60, 80), 64u);
  EXPECT_TRUE(b.bits.all_available(60, 4));
  EXPECT_TRUE(b.bits.all_available(128, 12));
  EXPECT_EQ(b.words[1], 0u);
}

TEST(Availability, RefusesRangesPastTheLastTag) {
  OwnedBitmap b(100);
  EXPECT_FALSE(b.bits.publish(99, 2));
  EXPECT_FALSE(b.bits.publish(100));
  EXPECT_FALSE(b.bits.publish(~0u, 2));  // first + count would wrap
  EXPECT_EQ(b.bits.first_missing(0, 100), 0u);  // the refusals set nothing
  EXPECT_FALSE(b.bits.retract(100));
  EXPECT_FALSE(b.bits.all_available(99, 2));
  EXPECT_FALSE(b.bits.is_available(100));
  ASSERT_TRUE(b.bits.publish(0, 100));
  EXPECT_TRUE(b.bits.all_available(0, 100));
  EXPECT_EQ(b.words[1] >> 36, 0u);  // bits past the last tag stay clear
}

TEST(Availability, MatchesAVectorOfBoolUnderRandomRanges) {
  constexpr std::uint32_t tags = 333;
  OwnedBitmap b(tags);
  std::vector<bool> model(tags, false);
  std::mt19937 rng(42);
  for (int step = 0; step < 20000; ++step) {
    const std::uint32_t first = rng() % (tags + 1);
    const std::uint32_t count = rng() % (tags + 1 - first);
    const std::uint32_t op = rng() % 3;
    if (op == 0) {
      ASSERT_TRUE(b.bits.publish(first, count));
      for (std::uint32_t t = first; t < first + count; ++t) model[t] = true;
    } else if (op == 1 && rng() % 2 == 0) {  // retract less often than publish, so ranges fill up
      ASSERT_TRUE(b.bits.retract(first, count));
      for (std::uint32_t t = first; t < first + count; ++t) model[t] = false;
    }
    std::uint32_t expected = first + count;
    for (std::uint32_t t = first; t < first + count; ++t)
      if (!model[t]) {
        expected = t;
        break;
      }
    ASSERT_EQ(b.bits.first_missing(first, count), expected) << "step " << step;
    ASSERT_EQ(b.bits.all_available(first, count), expected == first + count);
  }
}

TEST(Availability, ConcurrentProducersLoseNoBit) {
  // Every thread publishes the tags congruent to its index, so all of them OR into every word
  // at once; any lost update leaves a tag unset.
  constexpr std::uint32_t tags = 4096;
  constexpr std::uint32_t threads = 8;
  for (int round = 0; round < 20; ++round) {
    OwnedBitmap b(tags);
    std::vector<std::thread> pool;
    for (std::uint32_t t = 0; t < threads; ++t)
      pool.emplace_back([&b, t] {
        for (std::uint32_t tag = t; tag < tags; tag += threads) ASSERT_TRUE(b.bits.publish(tag));
      });
    for (auto& th : pool) th.join();
    ASSERT_TRUE(b.bits.all_available(0, tags))
        << "round " << round << ", first missing " << b.bits.first_missing(0, tags);
  }
}

TEST(Availability, ConcurrentRetractsOnlyClearTheirOwnBits) {
  constexpr std::uint32_t tags = 1024;
  constexpr std::uint32_t threads = 4;
  OwnedBitmap b(tags);
  ASSERT_TRUE(b.bits.publish(0, tags));
  std::vector<std::thread> pool;
  for (std::uint32_t t = 0; t < threads; ++t)
    pool.emplace_back([&b, t] {
      // Thread t retracts the tags congruent to t that are even, and republishes them.
      for (int repeat = 0; repeat < 50; ++repeat)
        for (std::uint32_t tag = 2 * t; tag < tags; tag += 2 * threads) {
          ASSERT_TRUE(b.bits.retract(tag));
          ASSERT_TRUE(b.bits.publish(tag));
        }
      for (std::uint32_t tag = 2 * t; tag < tags; tag += 2 * threads) ASSERT_TRUE(b.bits.retract(tag));
    });
  for (auto& th : pool) th.join();
  for (std::uint32_t tag = 0; tag < tags; ++tag) ASSERT_EQ(b.bits.is_available(tag), tag % 2 == 1) << tag;
}

TEST(Availability, ASetTagMakesItsProducersDataVisible) {
  // Producers write the data a tag names with plain stores, then publish the tag; the monitor
  // reads the data only after first_missing has moved past the tag (message passing through
  // release OR / acquire load). Run under ThreadSanitizer, a missing order is a reported race.
  constexpr std::uint32_t tags = 2048;
  constexpr std::uint32_t producers = 4;
  OwnedBitmap b(tags);
  std::vector<std::uint64_t> data(tags, 0);
  std::vector<std::thread> pool;
  for (std::uint32_t p = 0; p < producers; ++p)
    pool.emplace_back([&, p] {
      for (std::uint32_t tag = p; tag < tags; tag += producers) {
        data[tag] = 0x9e3779b97f4a7c15ull * (tag + 1);
        ASSERT_TRUE(b.bits.publish(tag));
      }
    });
  std::uint32_t seen = 0;
  std::uint32_t wrong = 0;
  std::uint32_t rechecks = 0;
  while (seen < tags) {
    const std::uint32_t ready_up_to = b.bits.first_missing(seen, tags - seen);
    for (; seen < ready_up_to; ++seen) wrong += data[seen] != 0x9e3779b97f4a7c15ull * (seen + 1) ? 1u : 0u;
    if (seen < tags) {
      ++rechecks;
      std::this_thread::yield();
    }
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(seen, tags);
  RecordProperty("monitor_rechecks", static_cast<int>(rechecks));
}

}  // namespace
}  // namespace warpvm::detail

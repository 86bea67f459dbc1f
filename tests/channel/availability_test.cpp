// The availability bitmap: ranges across word boundaries, a random differential run against a
// vector<bool>, producers on threads that OR bits into shared words while a monitor reads, and
// a direct-mode consumer's resumable wait for a range (TagRangeWait). The host side's bytes
// (AvailabilityBytes): the same checks, and merging a copy of the device map into them.

#include "warpvm/detail/channel/availability.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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

/// Whether `tags` (a bitmap or bytes) agrees with `model` on [first, first + count): its first
/// missing tag, and whether all are available.
template <class Tags>
::testing::AssertionResult matches_model(const Tags& tags, const std::vector<bool>& model, std::uint32_t first,
                                         std::uint32_t count) {
  std::uint32_t expected = first + count;
  for (std::uint32_t t = first; t < first + count && expected == first + count; ++t)
    if (!model[t]) expected = t;
  if (const std::uint32_t got = tags.first_missing(first, count); got != expected)
    return ::testing::AssertionFailure() << "first_missing(" << first << ", " << count << ") = " << got
                                         << ", the model says " << expected;
  if (tags.all_available(first, count) != (expected == first + count))
    return ::testing::AssertionFailure() << "all_available(" << first << ", " << count << ") disagrees with the model";
  return ::testing::AssertionSuccess();
}

struct MonitorReading {
  std::uint32_t seen = 0;      ///< tags the monitor found set, in order
  std::uint32_t wrong = 0;     ///< of which the data read back wrong
  std::uint32_t rechecks = 0;  ///< scans that found the next tag missing
};

/// Producer threads write each tag's data with plain stores, then publish the tag in `tags`
/// (tags congruent to the thread's index: all of them write the same words or lines at once);
/// the monitor (this thread) reads a tag's data only after first_missing moved past it (release
/// / acquire message passing). Under ThreadSanitizer a missing order is a reported race.
template <class Tags>
MonitorReading produce_and_read(Tags& tags, std::uint32_t tag_count, std::uint32_t producers) {
  std::vector<std::uint64_t> data(tag_count, 0);
  const auto expected = [](std::uint32_t tag) { return 0x9e3779b97f4a7c15ull * (tag + 1); };
  std::vector<std::thread> pool;
  for (std::uint32_t p = 0; p < producers; ++p)
    pool.emplace_back([&, p] {
      for (std::uint32_t tag = p; tag < tag_count; tag += producers) {
        data[tag] = expected(tag);
        ASSERT_TRUE(tags.publish(tag));
      }
    });
  MonitorReading r;
  while (r.seen < tag_count) {
    const std::uint32_t ready_up_to = tags.first_missing(r.seen, tag_count - r.seen);
    for (; r.seen < ready_up_to; ++r.seen) r.wrong += data[r.seen] != expected(r.seen) ? 1u : 0u;
    if (r.seen < tag_count) {
      ++r.rechecks;
      std::this_thread::yield();
    }
  }
  for (auto& th : pool) th.join();
  return r;
}

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
    ASSERT_TRUE(matches_model(b.bits, model, first, count)) << "step " << step;
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
  // Message passing through release OR / acquire load.
  constexpr std::uint32_t tags = 2048;
  OwnedBitmap b(tags);
  const MonitorReading r = produce_and_read(b.bits, tags, 4);
  EXPECT_EQ(r.wrong, 0u);
  EXPECT_EQ(r.seen, tags);
  RecordProperty("monitor_rechecks", static_cast<int>(r.rechecks));
}

TEST(AvailabilityTagWords, CoversTheWordsOfEveryAddedRange) {
  TagWords span;
  EXPECT_TRUE(span.empty());
  EXPECT_EQ(span.count(), 0u);
  span.add(70, 0);  // an empty range adds nothing
  EXPECT_TRUE(span.empty());
  span.add(63, 1);  // the last tag of word 0
  EXPECT_EQ(span.first, 0u);
  EXPECT_EQ(span.end, 1u);
  span.add(64, 1);  // the first of word 1
  EXPECT_EQ(span.end, 2u);
  span.add(200, 57);  // tags 200..256: words 3 and 4
  EXPECT_EQ(span.first, 0u);
  EXPECT_EQ(span.end, 5u);
  EXPECT_EQ(span.count(), 5u);

  TagWords high;
  high.add(130, 1);
  high.add(10, 2);  // a lower range moves the start down
  EXPECT_EQ(high.first, 0u);
  EXPECT_EQ(high.end, 3u);

  TagWords top;
  top.add(~0u - 5, 5);  // tags near 2^32 do not wrap the word count
  EXPECT_EQ(top.first, (~0u - 5) / 64);
  EXPECT_EQ(top.end, (~0u - 1) / 64 + 1);
}

// ---- AvailabilityBytes: the host side's tags ----

TEST(AvailabilityBytes, TagsStartUnavailableAndClearMakesThemUnavailableAgain) {
  constexpr std::uint32_t tags = 70;
  AvailabilityBytes b(tags);
  EXPECT_EQ(b.first_missing(0, tags), 0u);
  ASSERT_TRUE(b.publish(0, tags));
  EXPECT_TRUE(b.all_available(0, tags));
  b.clear();
  for (std::uint32_t t = 0; t < tags; ++t) EXPECT_FALSE(b.is_available(t)) << t;
}

TEST(AvailabilityBytes, MatchesAVectorOfBoolUnderRandomRangesAndRefusesPastTheEnd) {
  constexpr std::uint32_t tags = 333;
  AvailabilityBytes b(tags);
  std::vector<bool> model(tags, false);
  EXPECT_FALSE(b.publish(tags - 2, 3));
  EXPECT_FALSE(b.publish(tags + 1, 0));
  EXPECT_FALSE(b.all_available(tags, 1));
  EXPECT_TRUE(b.all_available(tags, 0));
  std::mt19937 rng(44);
  for (int step = 0; step < 5000; ++step) {
    const std::uint32_t first = rng() % (tags + 1);
    const std::uint32_t count = rng() % (tags + 1 - first) % 40;
    if (rng() % 4 == 0) {
      ASSERT_TRUE(b.publish(first, count));
      for (std::uint32_t t = first; t < first + count; ++t) model[t] = true;
    }
    ASSERT_TRUE(matches_model(b, model, first, count)) << "step " << step;
  }
}

TEST(AvailabilityBytes, ConcurrentProducersLoseNoTagAndTheirDataIsVisible) {
  // Message passing through release store / acquire load, 8 producers in the same cache lines.
  constexpr std::uint32_t tags = 4096;
  AvailabilityBytes b(tags);
  const MonitorReading r = produce_and_read(b, tags, 8);
  EXPECT_EQ(r.wrong, 0u);
  EXPECT_EQ(r.seen, tags);
  EXPECT_TRUE(b.all_available(0, tags));
}

TEST(AvailabilityBytes, MergeSetsACopysTagsAndCountsOnlyNewOnes) {
  AvailabilityBytes host(200);
  OwnedBitmap device(200);
  ASSERT_TRUE(host.publish(0, 10));      // host producers' tags
  ASSERT_TRUE(device.bits.publish(5, 10));    // 5..9 overlap the host's
  ASSERT_TRUE(device.bits.publish(62, 4));    // across words 0 and 1
  ASSERT_TRUE(device.bits.publish(199));      // the last tag
  TagWords all;
  all.add(0, 200);
  EXPECT_EQ(host.merge(device.words.data(), all), 5u + 4u + 1u);
  EXPECT_EQ(host.first_missing(0, 200), 15u);
  EXPECT_TRUE(host.all_available(62, 4));
  EXPECT_TRUE(host.is_available(199));
  EXPECT_FALSE(host.is_available(198));
  EXPECT_EQ(host.merge(device.words.data(), all), 0u);  // nothing new the second time
}

TEST(AvailabilityBytes, MergeTakesOnlyTheSpanAndIgnoresBitsPastTheLastTag) {
  AvailabilityBytes host(100);
  std::vector<std::uint64_t> copy(AvailabilityBitmap<>::words_required(100), ~std::uint64_t{0});
  TagWords word1;
  word1.add(64, 1);
  EXPECT_EQ(host.merge(copy.data(), word1), 36u);  // tags 64..99, not the 28 bits past them
  EXPECT_EQ(host.first_missing(0, 64), 0u);         // word 0 was outside the span
  EXPECT_TRUE(host.all_available(64, 36));
  TagWords past;
  past.add(64, 100);  // reaches word 2, which a 100-tag bitmap does not have
  EXPECT_EQ(host.merge(copy.data(), past), 0u);
  EXPECT_EQ(host.merge(copy.data(), TagWords{}), 0u);
}

TEST(AvailabilityBytes, MergeMatchesTheUnionUnderRandomPublishing) {
  constexpr std::uint32_t tags = 777;
  std::mt19937 rng(43);
  for (int round = 0; round < 200; ++round) {
    AvailabilityBytes host(tags);
    OwnedBitmap device(tags);
    std::vector<bool> model(tags, false);
    TagWords waiting;  // the ranges a monitor would be waiting on
    for (int step = 0; step < 20; ++step) {
      const std::uint32_t first = rng() % tags;
      const std::uint32_t count = rng() % (tags - first) % 70;
      if (rng() % 2 == 0) {
        ASSERT_TRUE(host.publish(first, count));
        for (std::uint32_t t = first; t < first + count; ++t) model[t] = true;
      } else {
        ASSERT_TRUE(device.bits.publish(first, count));
      }
      const std::uint32_t wait_first = rng() % tags;
      waiting.add(wait_first, rng() % (tags - wait_first));
    }
    std::uint32_t expected_new = 0;
    for (std::uint32_t t = 0; t < tags; ++t) {
      const bool in_span = !waiting.empty() && t / 64 >= waiting.first && t / 64 < waiting.end;
      if (in_span && device.bits.is_available(t) && !model[t]) {
        model[t] = true;
        ++expected_new;
      }
    }
    ASSERT_EQ(host.merge(device.words.data(), waiting), expected_new) << "round " << round;
    for (std::uint32_t t = 0; t < tags; ++t) ASSERT_EQ(host.is_available(t), model[t]) << "round " << round;
  }
}

TEST(AvailabilityTagRangeWait, DoneOnlyOnceEveryTagOfTheRangeIsSet) {
  OwnedBitmap m(200);
  TagRangeWait wait(60, 10);  // tags 60..69: across the first word boundary
  EXPECT_FALSE(wait.done());
  EXPECT_FALSE(wait.poll(m.bits));
  EXPECT_EQ(wait.next(), 60u);
  ASSERT_TRUE(m.bits.publish(60, 5));  // 60..64
  ASSERT_TRUE(m.bits.publish(66, 4));  // 66..69: 65 still missing
  EXPECT_FALSE(wait.poll(m.bits));
  EXPECT_EQ(wait.next(), 65u);  // resumes at the first tag not yet seen set
  ASSERT_TRUE(m.bits.publish(0, 60));  // tags outside the range change nothing
  ASSERT_TRUE(m.bits.publish(70, 130));
  EXPECT_FALSE(wait.poll(m.bits));
  ASSERT_TRUE(m.bits.publish(65));
  EXPECT_TRUE(wait.poll(m.bits));
  EXPECT_TRUE(wait.done());
  EXPECT_EQ(wait.next(), 70u);
  EXPECT_TRUE(wait.poll(m.bits));  // stays done
}

TEST(AvailabilityTagRangeWait, AcquiringAndRelaxedPollsResumeAlike) {
  // Direct mode's acquire polls with acquire loads first, then relaxed ones: either kind resumes
  // at the first missing tag, and a wait that saw tags with relaxed loads only is done once all
  // of the range was seen, whichever kind of poll saw the last one.
  OwnedBitmap m(200);
  TagRangeWait wait(60, 10);
  ASSERT_TRUE(m.bits.publish(60, 3));  // 60..62
  EXPECT_FALSE(wait.poll(m.bits, true));
  EXPECT_EQ(wait.next(), 63u);
  ASSERT_TRUE(m.bits.publish(63, 4));  // 63..66
  EXPECT_FALSE(wait.poll(m.bits, false));
  EXPECT_EQ(wait.next(), 67u);
  ASSERT_TRUE(m.bits.publish(67, 3));  // 67..69: all
  EXPECT_TRUE(wait.poll(m.bits, true));
  EXPECT_EQ(wait.next(), 70u);
  EXPECT_TRUE(wait.done());

  TagRangeWait relaxed(0, 64);  // one whole word, seen by a relaxed poll
  ASSERT_TRUE(m.bits.publish(0, 60));
  EXPECT_TRUE(relaxed.poll(m.bits, false));
  EXPECT_EQ(relaxed.next(), 64u);
}

TEST(AvailabilityTagRangeWait, EmptyRangeAndLastTag) {
  OwnedBitmap m(100);
  TagRangeWait empty(100, 0);
  EXPECT_TRUE(empty.done());
  EXPECT_TRUE(empty.poll(m.bits));
  TagRangeWait last(99, 1);
  EXPECT_FALSE(last.poll(m.bits));
  ASSERT_TRUE(m.bits.publish(99));
  EXPECT_TRUE(last.poll(m.bits));
}

TEST(AvailabilityTagRangeWait, MatchesAllAvailableUnderRandomPublishing) {
  // Random ranges polled after every publish: a wait is done exactly when all_available says
  // so, and its resume point never passes a missing tag.
  constexpr std::uint32_t tags = 777;
  OwnedBitmap m(tags);
  std::mt19937 rng(91);
  struct Range {
    std::uint32_t first, count;
    TagRangeWait wait;
  };
  std::vector<Range> ranges;
  for (int i = 0; i < 200; ++i) {
    const std::uint32_t first = rng() % tags;
    const std::uint32_t count = std::min<std::uint32_t>(rng() % 150, tags - first);
    ranges.push_back({first, count, TagRangeWait(first, count)});
  }
  std::vector<std::uint32_t> order(tags);
  for (std::uint32_t t = 0; t < tags; ++t) order[t] = t;
  std::shuffle(order.begin(), order.end(), rng);
  std::uint32_t wrong = 0;
  for (const std::uint32_t tag : order) {
    ASSERT_TRUE(m.bits.publish(tag));
    for (Range& r : ranges) {
      const bool done = r.wait.poll(m.bits);
      wrong += done != m.bits.all_available(r.first, r.count) ? 1u : 0u;
      wrong += m.bits.all_available(r.first, r.wait.next() - r.first) ? 0u : 1u;  // every tag before next is set
    }
  }
  EXPECT_EQ(wrong, 0u);
  for (const Range& r : ranges) EXPECT_TRUE(r.wait.done());
}

}  // namespace
}  // namespace warpvm::detail

// Kernel producers of a channel, on the host: the producer handle's publish into a device-side
// availability map, and the monitor's way of learning the map's tags (copies of the words its
// pending requests wait on, merged into its own tag bytes) against producers on threads, and a
// direct-mode consumer that polls the map itself and reads the data in place.

#include "warpvm/channel.hpp"
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

/// One 64-bit word per tag behind a producer handle that publishes into `map`: what the
/// producer threads below write and publish, and what the consumers check.
struct TaggedWords {
  explicit TaggedWords(std::uint32_t tags)
      : map(AvailabilityBitmap<>::words_required(tags), 0),
        data(tags, 0),
        producer(reinterpret_cast<std::byte*>(data.data()), tags * sizeof(std::uint64_t), map.data(), tags) {}

  [[nodiscard]] static std::uint64_t expected(std::uint32_t tag) { return 0x9e3779b97f4a7c15ull * (tag + 1); }
  /// A producer thread's step: the tag's word into the buffer, then the tag into the map.
  [[nodiscard]] bool produce(std::uint32_t tag) const {
    reinterpret_cast<std::uint64_t*>(producer.buffer())[tag] = expected(tag);
    return producer.publish(tag);
  }

  std::vector<std::uint64_t> map, data;
  channel_producer producer;
};

TEST(ChannelProducer, PublishesIntoItsMapAndRefusesTagsPastTheLast) {
  std::vector<std::uint64_t> map(AvailabilityBitmap<>::words_required(100), 0);
  std::vector<std::byte> buffer(256);
  const channel_producer producer(buffer.data(), buffer.size(), map.data(), 100);
  EXPECT_EQ(producer.buffer(), buffer.data());
  EXPECT_EQ(producer.buffer_bytes(), 256u);
  EXPECT_FALSE(producer.publish(99, 2));
  EXPECT_FALSE(producer.publish(100));
  EXPECT_EQ(map[0] | map[1], 0u);  // refusals set nothing
  EXPECT_TRUE(producer.publish(62, 4));  // across the word boundary
  EXPECT_TRUE(producer.publish(99));
  const AvailabilityBitmap<> view(map.data(), 100);
  EXPECT_TRUE(view.all_available(62, 4));
  EXPECT_TRUE(view.is_available(99));
  EXPECT_EQ(view.first_missing(0, 100), 0u);
  EXPECT_EQ(view.first_missing(62, 38), 66u);
}

TEST(ChannelProducer, MonitorLearnsEveryTagFromCopiesOfTheWordsItWaitsOn) {
  // Producer threads (the kernels) write each tag's data, then publish it into the device map;
  // the monitor keeps requests of random tag ranges pending, copies the map words they still
  // wait on (word by word, as the copy engine would; acquire, standing for the copy's
  // completion event), merges them into its own tag bytes and checks the data of every request
  // that became ready. Under ThreadSanitizer a missing order shows as a race.
  constexpr std::uint32_t tags = 3000;
  constexpr std::uint32_t producers = 4;
  TaggedWords words(tags);
  std::vector<std::uint64_t> snapshot(words.map.size(), 0);
  AvailabilityBytes dab(tags);

  struct Pending {
    std::uint32_t first, end, next;
  };
  std::vector<Pending> pending;
  std::mt19937 rng(44);
  for (std::uint32_t covered = 0; covered < tags;) {  // requests covering every tag, in random sizes
    const std::uint32_t count = std::min<std::uint32_t>(1 + rng() % 90, tags - covered);
    pending.push_back({covered, covered + count, covered});
    covered += count;
  }
  std::shuffle(pending.begin(), pending.end(), rng);

  std::vector<std::thread> pool;
  for (std::uint32_t p = 0; p < producers; ++p)
    pool.emplace_back([&, p] {
      for (std::uint32_t tag = p; tag < tags; tag += producers) ASSERT_TRUE(words.produce(tag));
    });
  std::uint32_t learnt = 0, wrong = 0, polls = 0;
  while (!pending.empty()) {
    TagWords missing;
    std::size_t kept = 0;
    for (Pending& r : pending) {
      r.next = dab.first_missing(r.next, r.end - r.next);
      if (r.next == r.end) {
        for (std::uint32_t t = r.first; t < r.end; ++t) wrong += words.data[t] != TaggedWords::expected(t) ? 1u : 0u;
      } else {
        missing.add(r.next, r.end - r.next);
        pending[kept++] = r;
      }
    }
    pending.resize(kept);
    if (missing.empty()) break;
    for (std::uint32_t w = missing.first; w < missing.end; ++w)
      snapshot[w] = std::atomic_ref<std::uint64_t>(words.map[w]).load(std::memory_order_acquire);
    learnt += dab.merge(snapshot.data(), missing);
    ++polls;
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_TRUE(pending.empty());
  EXPECT_EQ(learnt, tags);  // each tag learnt once: merges count only new tags
  EXPECT_TRUE(dab.all_available(0, tags));
  RecordProperty("monitor_polls", static_cast<int>(polls));
}

TEST(ChannelProducer, DirectConsumersSeeTheDataOfEveryTagTheyWaitedFor) {
  // Direct mode on threads: producer threads write each tag's data in place and publish it into
  // the map; consumer threads each wait for random tag ranges with TagRangeWait (acquire loads of
  // the map, as a warp's lanes do) and then read the data in place. Under ThreadSanitizer a
  // missing order shows as a race.
  constexpr std::uint32_t tags = 2000;
  constexpr std::uint32_t producers = 3;
  constexpr std::uint32_t consumers = 3;
  TaggedWords words(tags);
  const AvailabilityBitmap<> consumer_map(words.map.data(), tags);

  std::atomic<std::uint32_t> wrong{0}, parked{0};
  std::vector<std::thread> pool;
  for (std::uint32_t c = 0; c < consumers; ++c)
    pool.emplace_back([&, c] {
      std::mt19937 rng(100 + c);
      for (std::uint32_t first = 0; first < tags;) {  // consecutive ranges of random sizes
        const std::uint32_t count = std::min<std::uint32_t>(1 + rng() % 70, tags - first);
        TagRangeWait wait(first, count);
        if (!wait.poll(consumer_map)) {
          parked.fetch_add(1, std::memory_order_relaxed);
          while (!wait.poll(consumer_map)) std::this_thread::yield();
        }
        for (std::uint32_t t = first; t < first + count; ++t)
          if (words.data[t] != TaggedWords::expected(t)) wrong.fetch_add(1, std::memory_order_relaxed);
        first += count;
      }
    });
  for (std::uint32_t p = 0; p < producers; ++p)
    pool.emplace_back([&, p] {
      std::vector<std::uint32_t> mine;
      for (std::uint32_t tag = p; tag < tags; tag += producers) mine.push_back(tag);
      std::shuffle(mine.begin(), mine.end(), std::mt19937(200 + p));
      for (const std::uint32_t tag : mine) ASSERT_TRUE(words.produce(tag));
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_TRUE(consumer_map.all_available(0, tags));
  RecordProperty("consumer_waits_that_parked", static_cast<int>(parked.load()));
}

}  // namespace
}  // namespace warpvm::detail

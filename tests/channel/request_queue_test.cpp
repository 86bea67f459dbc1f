// The request queue (PFQ), the batching rule, staging leases and a waiter protocol: known
// cases, many producer threads against one monitor thread, and a whole channel on threads
// (producers, consumer "warps", one monitor) whose consumers check every byte they receive.

#include "warpvm/detail/channel/availability.hpp"
#include "warpvm/detail/channel/request_queue.hpp"
#include "warpvm/detail/channel/segment_tree.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

namespace warpvm::detail {
namespace {

using namespace std::chrono_literals;

// ---- the parked thread's waiter -------------------------------------------------------------
// The channel as these tests model it on host threads: a consumer parks on a waiter that the
// activator wakes with the answer. (The device channel parks a warp on a count of its requests
// served, written by the copy engine: channel_view.hpp.)

/// A waiter's state word. A warp uses its waiter for one request at a time:
///   idle/ready --arm (consumer, before posting)--> waiting --wake (activator)--> ready
enum class WaiterState : std::uint32_t { idle = 0, waiting = 1, ready = 2 };

/// One consumer warp's parking place, in the consumer GPU's memory (the warp polls it locally,
/// never across the link). `lease` and `staging_offset` are the activator's answer, valid once
/// the state is ready.
struct Waiter {
  std::uint32_t state;
  std::uint32_t lease;           ///< index of the batch's StagingLease
  std::uint64_t staging_offset;  ///< byte offset of this warp's data in the staging area
};

/// The consumer arms its waiter before posting the request. Relaxed is enough: the post's
/// release store carries this store to the monitor, and the activator's wake comes after the
/// monitor took the request, so the wake is later in the word's modification order and a warp
/// never sees its own arm hide the wake.
void waiter_arm(Waiter& waiter) {
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(waiter.state)
      .store(static_cast<std::uint32_t>(WaiterState::waiting), cuda::std::memory_order_relaxed);
}

/// The activator, after the warp's data is in staging, tells the warp where it is and wakes it.
/// Release: the data, `lease` and `staging_offset` are visible to the warp that sees ready.
/// A copy done by many lanes must be ordered before this store first (`__syncwarp()` within a
/// warp, or a fence and a barrier across warps).
void waiter_wake(Waiter& waiter, std::uint32_t lease, std::uint64_t staging_offset) {
  waiter.lease = lease;
  waiter.staging_offset = staging_offset;
  cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(waiter.state)
      .store(static_cast<std::uint32_t>(WaiterState::ready), cuda::std::memory_order_release);
}

/// Acquire: once true, the warp may read `lease`, `staging_offset` and its data.
[[nodiscard]] bool waiter_is_ready(Waiter& waiter) {
  return cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>(waiter.state).load(cuda::std::memory_order_acquire) ==
         static_cast<std::uint32_t>(WaiterState::ready);
}

/// Polls the waiter at most `max_polls` times, calling `pause(ns)` between polls with a pause
/// that doubles from 8 ns to 256 ns: `__nanosleep` on the GPU (the warp yields its issue slots to
/// warps with work), a yield or sleep on the host. Returns whether the waiter became ready; a
/// caller that gets false checks its watchdog and parks again, so no wait is unbounded.
template <class Pause>
[[nodiscard]] bool waiter_await(Waiter& waiter, std::uint32_t max_polls, Pause&& pause) {
  std::uint32_t backoff_ns = waiter_backoff_min_ns;
  for (std::uint32_t poll = 0; poll < max_polls; ++poll) {
    if (waiter_is_ready(waiter)) return true;
    if (poll + 1 == max_polls) break;
    pause(backoff_ns);
    backoff_ns = backoff_ns * 2 < waiter_backoff_max_ns ? backoff_ns * 2 : waiter_backoff_max_ns;
  }
  return false;
}

struct OwnedQueue {
  explicit OwnedQueue(std::uint32_t capacity) : slots(capacity), queue(&cursors, slots.data(), capacity) {
    queue.reset();
  }
  RequestQueueCursors cursors{};
  std::vector<RequestSlot> slots;
  RequestQueue<> queue;
};

/// A request that names its poster and the poster's running count (in `source_offset`).
Request tagged(std::uint32_t producer, std::uint64_t sequence) { return Request{0, 0, producer, 0, sequence}; }

void yield_pause(std::uint32_t) { std::this_thread::yield(); }

TEST(RequestQueue, CapacityMustBeAPowerOfTwo) {
  EXPECT_FALSE(RequestQueue<>::valid_capacity(0));
  EXPECT_FALSE(RequestQueue<>::valid_capacity(1));  // one cell cannot tell "full" from "free"
  EXPECT_TRUE(RequestQueue<>::valid_capacity(2));
  EXPECT_TRUE(RequestQueue<>::valid_capacity(64));
  EXPECT_FALSE(RequestQueue<>::valid_capacity(48));
}

TEST(RequestQueue, EmptyQueueHasNothingToTake) {
  OwnedQueue q(4);
  Request r{};
  EXPECT_FALSE(q.queue.try_take(r));
}

TEST(RequestQueue, FifoUpToCapacityThenFull) {
  OwnedQueue q(4);
  for (std::uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(q.queue.try_post(tagged(0, i)));
  EXPECT_FALSE(q.queue.try_post(tagged(0, 4)));
  Request r{};
  ASSERT_TRUE(q.queue.try_take(r));
  EXPECT_EQ(r.source_offset, 0u);
  ASSERT_TRUE(q.queue.try_post(tagged(0, 4)));  // one taken, one place free
  EXPECT_FALSE(q.queue.try_post(tagged(0, 5)));
  for (std::uint64_t i = 1; i <= 4; ++i) {
    ASSERT_TRUE(q.queue.try_take(r));
    EXPECT_EQ(r.source_offset, i);
  }
  EXPECT_FALSE(q.queue.try_take(r));
}

TEST(RequestQueue, ClaimedCellsFillInOrderAndALapAheadWaitsForTheTake) {
  OwnedQueue q(4);
  std::uint64_t positions[5];
  for (std::uint64_t i = 0; i < 5; ++i) positions[i] = q.queue.claim();
  for (std::uint64_t i = 0; i < 5; ++i) EXPECT_EQ(positions[i], i);
  for (std::uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(q.queue.try_fill(positions[i], tagged(0, i)));
  EXPECT_FALSE(q.queue.try_fill(positions[4], tagged(0, 4)));  // the cell still holds position 0
  Request r{};
  ASSERT_TRUE(q.queue.try_take(r));
  EXPECT_EQ(r.source_offset, 0u);
  ASSERT_TRUE(q.queue.try_fill(positions[4], tagged(0, 4)));
  for (std::uint64_t i = 1; i <= 4; ++i) {
    ASSERT_TRUE(q.queue.try_take(r));
    EXPECT_EQ(r.source_offset, i);
  }
  EXPECT_FALSE(q.queue.try_take(r));
}

TEST(RequestQueue, AClaimedButUnfilledCellHoldsBackTheOnesAfterIt) {
  OwnedQueue q(4);
  const std::uint64_t first = q.queue.claim(), second = q.queue.claim();
  ASSERT_TRUE(q.queue.try_fill(second, tagged(0, 1)));
  Request r{};
  EXPECT_FALSE(q.queue.try_take(r));  // FIFO: position 0 is claimed but not written yet
  ASSERT_TRUE(q.queue.try_fill(first, tagged(0, 0)));
  ASSERT_TRUE(q.queue.try_take(r));
  EXPECT_EQ(r.source_offset, 0u);
  ASSERT_TRUE(q.queue.try_take(r));
  EXPECT_EQ(r.source_offset, 1u);
}

TEST(RequestQueue, RequestsSurviveTheRoundTripWhole) {
  OwnedQueue q(2);
  const Request sent{7, 3, 12, 4096, 0x1234'5678'9abcull};
  ASSERT_TRUE(q.queue.try_post(sent));
  Request got{};
  ASSERT_TRUE(q.queue.try_take(got));
  EXPECT_EQ(got.first_tag, 7u);
  EXPECT_EQ(got.tag_count, 3u);
  EXPECT_EQ(got.waiter, 12u);
  EXPECT_EQ(got.bytes, 4096u);
  EXPECT_EQ(got.source_offset, 0x1234'5678'9abcull);
}

TEST(RequestQueue, WrapsAroundManyLapsInOrder) {
  for (const std::uint32_t capacity : {2u, 4u, 8u}) {
    OwnedQueue q(capacity);
    std::uint64_t posted = 0, taken = 0;
    std::mt19937 rng(capacity);
    while (taken < 1000) {
      if (rng() % 2 == 0) {
        if (q.queue.try_post(tagged(0, posted))) {
          ++posted;
        } else {
          ASSERT_EQ(posted - taken, capacity);  // full exactly when capacity are waiting
        }
      } else {
        Request r{};
        if (q.queue.try_take(r)) {
          ASSERT_EQ(r.source_offset, taken++);
        } else {
          ASSERT_EQ(posted, taken);  // empty exactly when nothing is waiting
        }
      }
    }
  }
}

/// Many producers post while one monitor takes: every request arrives exactly once, and each
/// producer's requests arrive in the order it posted them. Parameters: capacity, and whether
/// producers post with try_post (CAS) or with claim + try_fill.
class RequestQueueContention : public ::testing::TestWithParam<std::tuple<std::uint32_t, bool>> {};

TEST_P(RequestQueueContention, NothingLostNothingDuplicatedPerProducerOrderKept) {
  constexpr std::uint32_t producers = 6;
  constexpr std::uint64_t per_producer = 20000;
  const auto [capacity, claim_then_fill] = GetParam();
  OwnedQueue q(capacity);
  std::atomic<std::uint64_t> full_reports{0};
  // Set when the consumer gives up (deadline, or a request from nowhere): producers spinning on a
  // full queue then stop, so a failure is reported instead of join() waiting forever.
  std::atomic<bool> consumer_gone{false};
  std::vector<std::thread> pool;
  for (std::uint32_t p = 0; p < producers; ++p)
    pool.emplace_back([&, p, claim_then_fill = claim_then_fill] {
      for (std::uint64_t i = 0; i < per_producer; ++i) {
        const std::uint64_t position = claim_then_fill ? q.queue.claim() : 0;
        while (claim_then_fill ? !q.queue.try_fill(position, tagged(p, i)) : !q.queue.try_post(tagged(p, i))) {
          if (consumer_gone.load(std::memory_order_relaxed)) return;
          full_reports.fetch_add(1, std::memory_order_relaxed);
          std::this_thread::yield();
        }
      }
    });
  std::vector<std::uint64_t> next(producers, 0);
  std::uint64_t received = 0, out_of_order = 0, unknown_producer = 0;
  // Fails only when progress stops: 60 s with nothing received (slow under load is not a failure).
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (received < producers * per_producer && unknown_producer == 0 && std::chrono::steady_clock::now() < deadline) {
    Request r{};
    if (!q.queue.try_take(r)) {
      std::this_thread::yield();
      continue;
    }
    ++received;
    deadline = std::chrono::steady_clock::now() + 60s;
    if (r.waiter >= producers) {
      ++unknown_producer;
      continue;
    }
    if (r.source_offset != next[r.waiter]) ++out_of_order;
    next[r.waiter] = r.source_offset + 1;
  }
  consumer_gone.store(received < producers * per_producer, std::memory_order_relaxed);
  for (auto& th : pool) th.join();
  Request extra{};
  EXPECT_FALSE(q.queue.try_take(extra));  // nothing duplicated
  EXPECT_EQ(received, producers * per_producer) << "nothing arrived for 60 s";
  EXPECT_EQ(unknown_producer, 0u);
  EXPECT_EQ(out_of_order, 0u);
  for (std::uint32_t p = 0; p < producers; ++p) EXPECT_EQ(next[p], per_producer) << "producer " << p;
  RecordProperty("full_reports", static_cast<int>(full_reports.load()));
}

INSTANTIATE_TEST_SUITE_P(Capacities, RequestQueueContention,
                         ::testing::Combine(::testing::Values(2u, 8u, 64u, 1024u), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<std::uint32_t, bool>>& c) {
                           return std::to_string(std::get<0>(c.param)) + "slots" +
                                  (std::get<1>(c.param) ? "_claim_fill" : "_cas");
                         });

TEST(RequestQueue, ConcurrentPostersGetExactlyCapacityPlaces) {
  // Nobody takes: of 8 x 32 concurrent attempts on 64 places, exactly 64 succeed, all the rest
  // report full, and the 64 are intact and in each poster's order.
  constexpr std::uint32_t capacity = 64;
  constexpr std::uint32_t posters = 8;
  constexpr std::uint32_t attempts = 32;
  for (int round = 0; round < 20; ++round) {
    OwnedQueue q(capacity);
    std::vector<std::uint32_t> accepted(posters, 0);
    std::atomic<std::uint32_t> refused{0};
    std::vector<std::thread> pool;
    for (std::uint32_t p = 0; p < posters; ++p)
      pool.emplace_back([&, p] {
        for (std::uint32_t i = 0; i < attempts; ++i) {
          if (q.queue.try_post(tagged(p, accepted[p]))) {
            ++accepted[p];
          } else {
            refused.fetch_add(1);
          }
        }
      });
    for (auto& th : pool) th.join();
    ASSERT_EQ(std::accumulate(accepted.begin(), accepted.end(), 0u), capacity);
    ASSERT_EQ(refused.load(), posters * attempts - capacity);
    std::vector<std::uint32_t> next(posters, 0);
    Request r{};
    for (std::uint32_t i = 0; i < capacity; ++i) {
      ASSERT_TRUE(q.queue.try_take(r));
      ASSERT_EQ(r.source_offset, next[r.waiter]++);
    }
    EXPECT_FALSE(q.queue.try_take(r));
    for (std::uint32_t p = 0; p < posters; ++p) EXPECT_EQ(next[p], accepted[p]);
  }
}

// kmeans2gpu's failure, replayed: thread 0 of a warp published, the other lanes went on and
// acquired as one group, then thread 0 alone as a second group. Both read served count 0 and
// posted request number 1. Served twice, the warp's count became 2; its next acquire, reading a
// count of 1 before the second answer landed, waited for 2 and woke on the duplicate's answer:
// its own request's offset in staging never read, the previous step's data taken instead.
TEST(RequestSequence, RefusesASecondRequestOfOneWarpInEitherOrder) {
  // A warp that waits for each answer: taken and served move in step, one number at a time.
  EXPECT_TRUE(request_follows(1, 0, 0));
  EXPECT_TRUE(request_follows(2, 1, 1));
  EXPECT_TRUE(request_follows(0, ~0u, ~0u));  // the 32-bit counts wrap
  // The second group's request taken while the first is pending (same number, or any).
  EXPECT_FALSE(request_follows(1, 1, 0));
  EXPECT_FALSE(request_follows(2, 1, 0));
  // Taken after the first was served: its number is the served one, not the next.
  EXPECT_FALSE(request_follows(1, 1, 1));
  // Numbers that skip or go back are no request of this warp's either.
  EXPECT_FALSE(request_follows(3, 1, 1));
  EXPECT_FALSE(request_follows(0, 0, 0));
}

TEST(RequestBatch, TakesSixteenRequestsAtAlignedOffsets) {
  Batch batch;
  const std::uint32_t sizes[] = {100, 16, 1, 0, 33};
  std::uint64_t expected_offset = 0;
  for (std::uint32_t i = 0; i < batch_max_requests; ++i) {
    const std::uint32_t bytes = sizes[i % 5];
    ASSERT_TRUE(batch.try_add(Request{i, 1, i, bytes, std::uint64_t{i} * 256}, ~std::uint64_t{0}));  // disjoint sources
    EXPECT_EQ(batch.offsets[i], expected_offset);
    EXPECT_EQ(batch.offsets[i] % staging_alignment, 0u);
    expected_offset = (expected_offset + bytes + staging_alignment - 1) / staging_alignment * staging_alignment;
  }
  EXPECT_FALSE(batch.try_add(Request{16, 1, 16, 1, 0}, ~std::uint64_t{0}));  // the 17th warp waits
  EXPECT_EQ(batch.count, batch_max_requests);
  EXPECT_EQ(batch.bytes, batch.offsets[15] + sizes[15 % 5]);  // the run ends where the last request does
}

TEST(RequestBatch, OverlappingSourcesShareTheirBytes) {
  // Windows of a banded matrix: rows [128w - 4, 128w + 132) of 8-byte values for warps w = 0, 1, 2.
  Batch batch;
  ASSERT_TRUE(batch.try_add(Request{0, 1, 0, 132 * 8, 0}, ~std::uint64_t{0}));
  ASSERT_TRUE(batch.try_add(Request{0, 1, 1, 136 * 8, 124 * 8}, ~std::uint64_t{0}));
  ASSERT_TRUE(batch.try_add(Request{0, 1, 2, 136 * 8, 252 * 8}, ~std::uint64_t{0}));
  EXPECT_EQ(batch.offsets[1], 124u * 8);  // the displacement of its source, as the first one's
  EXPECT_EQ(batch.offsets[2], 252u * 8);
  EXPECT_EQ(batch.bytes, 388u * 8);       // one mirrored span, no byte twice
  // Not a multiple of 16 past the previous source: its own aligned place after the run.
  ASSERT_TRUE(batch.try_add(Request{0, 1, 3, 64, 252 * 8 + 8}, ~std::uint64_t{0}));
  EXPECT_EQ(batch.offsets[3], 388u * 8);
  // Before the previous source, or after its end: its own place too.
  ASSERT_TRUE(batch.try_add(Request{0, 1, 4, 16, 0}, ~std::uint64_t{0}));
  EXPECT_EQ(batch.offsets[4], 388u * 8 + 64);
  ASSERT_TRUE(batch.try_add(Request{0, 1, 5, 16, 16}, ~std::uint64_t{0}));  // abuts: not inside
  EXPECT_EQ(batch.offsets[5], 388u * 8 + 80);
  for (std::uint32_t i = 0; i < batch.count; ++i) EXPECT_EQ(batch.offsets[i] % staging_alignment, 0u);
  // A shared span still has to fit the run.
  Batch small;
  ASSERT_TRUE(small.try_add(Request{0, 1, 0, 4096, 0}, 4112));
  EXPECT_FALSE(small.try_add(Request{0, 1, 1, 4096, 32}, 4112));
  EXPECT_TRUE(small.try_add(Request{0, 1, 1, 4096, 16}, 4112));
  EXPECT_EQ(small.bytes, 4112u);
}

TEST(RequestBatch, RefusesWhatWouldOutgrowTheRun) {
  Batch batch;
  ASSERT_TRUE(batch.try_add(Request{0, 1, 0, 4000, 0}, 8192));
  EXPECT_FALSE(batch.try_add(Request{1, 1, 1, 4193, 4000}, 8192));  // 4000 -> 4000, + 4193 > 8192
  EXPECT_TRUE(batch.try_add(Request{1, 1, 1, 4192, 4000}, 8192));
  EXPECT_EQ(batch.count, 2u);
  EXPECT_EQ(batch.pages(4096), 2u);
  Batch empty;
  EXPECT_FALSE(empty.try_add(Request{0, 1, 0, 8193, 0}, 8192));
  EXPECT_EQ(empty.count, 0u);
  EXPECT_EQ(empty.pages(4096), 0u);
}

TEST(RequestBatch, StagingPagesRoundUp) {
  EXPECT_EQ(staging_pages_for(0, 4096), 0u);
  EXPECT_EQ(staging_pages_for(1, 4096), 1u);
  EXPECT_EQ(staging_pages_for(4096, 4096), 1u);
  EXPECT_EQ(staging_pages_for(4097, 4096), 2u);
  EXPECT_EQ(staging_pages_for(16 * 4096, 4096), 16u);
}

TEST(RequestLease, DrainsAfterEveryReader) {
  StagingLease lease{};
  lease_open(lease, 5, 3, 2);
  EXPECT_FALSE(lease_drained(lease));
  lease_finish_reading(lease);
  EXPECT_FALSE(lease_drained(lease));
  lease_finish_reading(lease);
  EXPECT_TRUE(lease_drained(lease));
  EXPECT_EQ(lease.first_page, 5u);
  EXPECT_EQ(lease.pages, 3u);
}

TEST(RequestWaiter, AwaitBacksOffFromEightToTwoHundredFiftySixNanoseconds) {
  Waiter w{};
  waiter_arm(w);
  std::vector<std::uint32_t> pauses;
  EXPECT_FALSE(waiter_await(w, 9, [&](std::uint32_t ns) { pauses.push_back(ns); }));
  EXPECT_EQ(pauses, (std::vector<std::uint32_t>{8, 16, 32, 64, 128, 256, 256, 256}));  // none after the last poll
  pauses.clear();
  EXPECT_FALSE(waiter_await(w, 0, [&](std::uint32_t ns) { pauses.push_back(ns); }));
  EXPECT_TRUE(pauses.empty());
}

TEST(RequestWaiter, WakeCarriesTheAnswer) {
  Waiter w{};
  waiter_arm(w);
  EXPECT_FALSE(waiter_is_ready(w));
  waiter_wake(w, 3, 8192);
  std::uint32_t pauses = 0;
  EXPECT_TRUE(waiter_await(w, 5, [&](std::uint32_t) { ++pauses; }));
  EXPECT_EQ(pauses, 0u);
  EXPECT_EQ(w.lease, 3u);
  EXPECT_EQ(w.staging_offset, 8192u);
  waiter_arm(w);  // the next request
  EXPECT_FALSE(waiter_is_ready(w));
}

TEST(RequestWaiter, ParkedThreadWakesAndSeesTheData) {
  for (int round = 0; round < 200; ++round) {
    Waiter w{};
    std::uint64_t payload = 0;
    waiter_arm(w);
    std::thread activator([&] {
      payload = 0xfeedfaceull + static_cast<std::uint64_t>(round);
      waiter_wake(w, 0, 0);
    });
    while (!waiter_await(w, 1000, yield_pause)) {
    }
    EXPECT_EQ(payload, 0xfeedfaceull + static_cast<std::uint64_t>(round));
    activator.join();
  }
}

/// A whole channel on host threads. Producers fill 64-byte records and publish one tag per
/// record, in random order. Consumer "warps" ask for runs of 1-4 consecutive records, park, and
/// check every byte they get, twice (a yield in between): a staging run reused before its
/// readers finished would change under them. One monitor drains the queue, keeps waiting
/// requests with their first missing tag, batches ready ones (at most 16, at most the largest
/// free run), copies, wakes, and recycles drained leases. At the end every staging page is free.
TEST(RequestChannel, EveryConsumerGetsItsBytesAndStagingIsRecycled) {
  constexpr std::uint32_t record_bytes = 64;
  constexpr std::uint32_t tags = 512;
  constexpr std::uint32_t producers = 2;
  constexpr std::uint32_t consumers = 20;  // more than a batch holds
  constexpr std::uint32_t requests_per_consumer = 100;
  constexpr std::uint32_t page_bytes = 256;
  constexpr std::uint32_t staging_pages = 12;  // small: batches wait for runs to come back
  constexpr std::uint32_t lease_slots = 4;

  std::vector<std::uint8_t> source(tags * record_bytes, 0);
  AvailabilityBytes dab(tags);
  OwnedQueue pfq(8);  // fewer places than consumers: posts meet a full queue
  std::vector<StagingTreeNode> tree_nodes(StagingPageTree::nodes_required(staging_pages));
  const StagingPageTree tree(tree_nodes.data(), staging_pages);
  tree.reset();
  std::vector<std::uint8_t> staging(staging_pages * page_bytes, 0);
  std::vector<StagingLease> leases(lease_slots);
  std::vector<Waiter> waiters(consumers, Waiter{});
  const auto expected_byte = [](std::uint64_t at) { return static_cast<std::uint8_t>(at * 131 + at / 251 + 7); };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  const auto late = [&] { return std::chrono::steady_clock::now() > deadline; };

  std::vector<std::thread> threads;
  for (std::uint32_t p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      std::vector<std::uint32_t> mine;
      for (std::uint32_t tag = p; tag < tags; tag += producers) mine.push_back(tag);
      std::shuffle(mine.begin(), mine.end(), std::mt19937(p + 100));
      for (const std::uint32_t tag : mine) {
        for (std::uint32_t b = 0; b < record_bytes; ++b)
          source[tag * record_bytes + b] = expected_byte(tag * record_bytes + b);
        ASSERT_TRUE(dab.publish(tag));
        if (tag % 8 == 0) std::this_thread::sleep_for(20us);  // consumers often ask first
      }
    });

  std::atomic<std::uint32_t> bad_bytes{0};
  for (std::uint32_t c = 0; c < consumers; ++c)
    threads.emplace_back([&, c] {
      std::mt19937 rng(c + 1);
      for (std::uint32_t i = 0; i < requests_per_consumer && !late(); ++i) {
        const std::uint32_t count = 1 + rng() % 4;
        const std::uint32_t first = rng() % (tags - count + 1);
        const Request request{first, count, c, count * record_bytes, std::uint64_t{first} * record_bytes};
        waiter_arm(waiters[c]);
        while (!pfq.queue.try_post(request) && !late()) std::this_thread::yield();
        while (!waiter_await(waiters[c], 1u << 10, yield_pause) && !late()) {
        }
        if (late()) break;
        const std::uint8_t* data = staging.data() + waiters[c].staging_offset;
        for (int pass = 0; pass < 2; ++pass) {
          for (std::uint32_t b = 0; b < request.bytes; ++b)
            if (data[b] != expected_byte(request.source_offset + b)) bad_bytes.fetch_add(1);
          std::this_thread::yield();
        }
        lease_finish_reading(leases[waiters[c].lease]);
      }
    });

  // The monitor.
  struct Pending {
    Request request;
    std::uint32_t next_tag;  ///< tags before this one were seen set
  };
  std::vector<Pending> pending;
  std::vector<bool> lease_in_use(lease_slots, false);
  std::uint32_t served = 0, batches = 0, largest_batch = 0, passes_without_batch = 0;
  bool double_free = false;
  while (served < consumers * requests_per_consumer && !late()) {
    for (Request r{}; pfq.queue.try_take(r);) pending.push_back({r, r.first_tag});
    for (std::uint32_t l = 0; l < lease_slots; ++l)
      if (lease_in_use[l] && lease_drained(leases[l])) {
        double_free |= !tree.release(leases[l].first_page, leases[l].pages);
        lease_in_use[l] = false;
      }
    const auto free_lease = std::find(lease_in_use.begin(), lease_in_use.end(), false);
    if (free_lease == lease_in_use.end()) {
      std::this_thread::yield();
      continue;
    }
    Batch batch;
    const std::uint64_t max_bytes = std::uint64_t{tree.largest_free_run()} * page_bytes;
    for (auto it = pending.begin(); it != pending.end();) {
      const std::uint32_t end = it->request.first_tag + it->request.tag_count;
      it->next_tag = dab.first_missing(it->next_tag, end - it->next_tag);
      if (it->next_tag == end && batch.try_add(it->request, max_bytes)) it = pending.erase(it);
      else ++it;
    }
    if (batch.count == 0) {
      passes_without_batch += pending.empty() ? 0u : 1u;
      std::this_thread::yield();
      continue;
    }
    const std::uint32_t pages = batch.pages(page_bytes);
    const std::uint32_t first_page = tree.allocate(pages);
    if (first_page == StagingPageTree::no_run) {  // cannot happen: the batch fits the largest run
      ADD_FAILURE() << "no run of " << pages << " pages";
      break;
    }
    const auto lease = static_cast<std::uint32_t>(free_lease - lease_in_use.begin());
    lease_open(leases[lease], first_page, pages, batch.count);
    lease_in_use[lease] = true;
    // The activator: every copy of the batch, then the wakes (requests with overlapping sources
    // share staging bytes, which a woken warp may already read), as the channel's stream orders them.
    for (std::uint32_t i = 0; i < batch.count; ++i) {
      const Request& r = batch.requests[i];
      const std::uint64_t at = std::uint64_t{first_page} * page_bytes + batch.offsets[i];
      std::memcpy(staging.data() + at, source.data() + r.source_offset, r.bytes);
    }
    for (std::uint32_t i = 0; i < batch.count; ++i)
      waiter_wake(waiters[batch.requests[i].waiter], lease, std::uint64_t{first_page} * page_bytes + batch.offsets[i]);
    served += batch.count;
    ++batches;
    largest_batch = std::max(largest_batch, batch.count);
  }
  for (auto& th : threads) th.join();
  for (std::uint32_t l = 0; l < lease_slots; ++l)
    if (lease_in_use[l]) {
      ASSERT_TRUE(lease_drained(leases[l]));
      double_free |= !tree.release(leases[l].first_page, leases[l].pages);
    }

  EXPECT_FALSE(late()) << "the channel stalled";
  EXPECT_EQ(served, consumers * requests_per_consumer);
  EXPECT_EQ(bad_bytes.load(), 0u);
  EXPECT_FALSE(double_free);
  EXPECT_EQ(tree.free_pages(), staging_pages);
  EXPECT_EQ(tree.largest_free_run(), staging_pages);
  EXPECT_TRUE(pending.empty());
  EXPECT_GT(batches, 0u);
  EXPECT_LE(largest_batch, batch_max_requests);
  RecordProperty("batches", static_cast<int>(batches));
  RecordProperty("largest_batch", static_cast<int>(largest_batch));
  RecordProperty("passes_without_batch", static_cast<int>(passes_without_batch));
}

}  // namespace
}  // namespace warpvm::detail

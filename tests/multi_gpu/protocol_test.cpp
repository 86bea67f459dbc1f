// The multi-GPU page-table protocol on the host: the page-table word (holds, revoke, drain,
// install) with real threads, the frame pool, its reverse map and eviction clock with real
// threads, and the transition planner driven through placement.hpp's decide()/apply() and
// evict_copy() against a model of a page's contents: every read through any GPU's mapping must
// see the last value written by any GPU, and an evicted page's host copy the last value too;
// pages placed on GPUs in the same model (taken by other GPUs' writes); and how
// place_on_gpus() spreads pages (spread_gpu).

#include "warpvm/detail/multi_gpu/frame_pool.hpp"
#include "warpvm/detail/multi_gpu/pte.hpp"
#include "warpvm/detail/multi_gpu/space_view.hpp"
#include "warpvm/detail/multi_gpu/transition.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace warpvm::detail::mg {
namespace {

TEST(MultiGpuPte, FieldsRoundTrip) {
  const std::uint64_t address = 0x7f12'3456'7000ull;
  const std::uint64_t w = pte::make(address, pte::present | pte::writable);
  EXPECT_EQ(pte::address(w), address);
  EXPECT_TRUE(pte::usable(w, true));
  EXPECT_FALSE(pte::usable(w | pte::revoke, false));
  EXPECT_FALSE(pte::usable(pte::make(address, pte::present), true));
  EXPECT_TRUE(pte::usable(pte::make(address, pte::present), false));
  EXPECT_FALSE(pte::usable(0, false));
  std::uint64_t word = w;
  EXPECT_EQ(pte_hold(word), w);
  EXPECT_EQ(pte::holders(word), 1u);
  pte_install(word, pte::make(address + 4096, pte::present | pte::remote));
  EXPECT_EQ(pte::holders(word), 1u) << "installing keeps the holders";
  EXPECT_EQ(pte::address(word), address + 4096);
  EXPECT_TRUE(pte::is_remote(word));
  pte_release(word);
  EXPECT_TRUE(pte_drained(word));
}

/// Readers hold the word and read the frame it maps; an invalidator revokes, drains, poisons the
/// old frame (as a reuse would) and installs a fresh one. No reader may ever see poison.
TEST(MultiGpuPte, RevokedFramesAreNeverReadAfterTheDrain) {
  constexpr int frames = 64;
  constexpr std::uint64_t poison = ~std::uint64_t{0};
  std::vector<std::atomic<std::uint64_t>> frame(frames);
  for (auto& f : frame) f.store(1);
  auto address_of = [](int f) { return std::uint64_t(f + 1) << pte::address_shift; };
  std::uint64_t word = pte::make(address_of(0), pte::present);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0}, bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 4; ++r)
    readers.emplace_back([&] {
      while (!stop.load()) {
        const std::uint64_t seen = pte_hold(word);
        if (pte::usable(seen, false)) {
          const int f = static_cast<int>((pte::address(seen) >> pte::address_shift) - 1);
          if (frame[f].load() == poison) ++bad;
          ++reads;
          pte_release(word);
        } else {
          pte_drop_unused(word);
          std::this_thread::yield();  // as a warp that saw REVOKE goes off to fault: lets the drain finish
        }
      }
    });
  int current = 0;
  for (int round = 1; round < 2000; ++round) {
    // Each mapping is read at least once before it is revoked (on a loaded machine the readers
    // might otherwise not run between rounds, and the test would check nothing).
    for (const std::uint64_t before = reads.load(); reads.load() == before;) std::this_thread::yield();
    pte_begin_revoke(word);
    while (!pte_drained(word)) std::this_thread::yield();
    frame[current].store(poison);  // the old frame is reused for something else
    const int next = round % frames;
    frame[next].store(1);
    pte_install(word, pte::make(address_of(next), pte::present));
    current = next;
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_GE(reads.load(), 1999u);
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(pte::holders(word), 0u);
}

/// Takes frames from `pool` on four threads until each is told none is free, then on one until
/// as many scans in a row as the bitmap has windows find none (a scan covers one window): every
/// frame taken, sorted.
std::vector<std::uint32_t> take_all(const FramePoolView& pool) {
  std::vector<std::vector<std::uint32_t>> got(4);
  std::vector<std::thread> threads;
  for (auto& mine : got)
    threads.emplace_back([&pool, &mine] {
      for (std::uint32_t f; (f = frame_alloc(pool)) != no_frame;) mine.push_back(f);
    });
  for (auto& th : threads) th.join();
  for (std::uint32_t misses = 0; misses <= pool.bitmap_words() / frame_scan_words + 1;) {
    const std::uint32_t f = frame_alloc(pool);
    if (f == no_frame) {
      ++misses;
    } else {
      misses = 0;
      got[0].push_back(f);
    }
  }
  std::vector<std::uint32_t> all;
  for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  return all;
}

TEST(MultiGpuSpread, BlocksAreContiguousRunsOfEqualSizeAndInterleavingDealsPagesInTurn) {
  for (const unsigned gpus : {1u, 2u, 3u, 8u, 64u})
    for (const std::uint64_t pages : {std::uint64_t{1}, std::uint64_t{gpus}, std::uint64_t{gpus} * 7 + 5, std::uint64_t{1000003}}) {
      SCOPED_TRACE(std::to_string(gpus) + " GPUs, " + std::to_string(pages) + " pages");
      std::vector<std::uint64_t> run(gpus, 0);
      unsigned last = 0;
      for (std::uint64_t p = 0; p < pages; ++p) {
        const unsigned g = spread_gpu(Spread::blocks, p, pages, gpus);
        ASSERT_LT(g, gpus);
        ASSERT_TRUE(g == last || g == last + 1) << "page " << p << ": runs are contiguous and in GPU order";
        last = g;
        run[g] += 1;
        ASSERT_EQ(spread_gpu(Spread::interleaved, p, pages, gpus), p % gpus);
      }
      const auto [fewest, most] = std::minmax_element(run.begin(), run.end());
      EXPECT_LE(*most - *fewest, 1u) << "runs equal to within one page";
    }
  EXPECT_EQ(spread_gpu(Spread::blocks, frame_owner::max_pages - 1, frame_owner::max_pages, 64), 63u) << "the largest object does not overflow";
}

TEST(MultiGpuFramePool, ThreadsGetDistinctFramesAndReuseFreedOnes) {
  constexpr std::uint32_t frames = 1000;
  std::vector<std::uint32_t> words(frame_pool_words(frames), 0);
  const FramePoolView pool{nullptr, words.data(), nullptr, frames};
  const std::vector<std::uint32_t> first = take_all(pool);
  EXPECT_EQ(std::set<std::uint32_t>(first.begin(), first.end()).size(), frames);
  EXPECT_EQ(frame_alloc(pool), no_frame) << "a full pool says so";
  // Free every third frame from two threads, then take them back from four: each exactly once.
  std::vector<std::uint32_t> freed;
  for (std::uint32_t f = 0; f < frames; f += 3) freed.push_back(f);
  std::thread a([&] { for (std::size_t i = 0; i < freed.size(); i += 2) frame_free(pool, freed[i]); });
  std::thread b([&] { for (std::size_t i = 1; i < freed.size(); i += 2) frame_free(pool, freed[i]); });
  a.join();
  b.join();
  EXPECT_EQ(take_all(pool), freed);
}

TEST(MultiGpuFramePool, TakersAndGiversRacingNeverShareAFrame) {
  // A pool run dry by the bump counter, then four threads that each take a frame when they
  // can, hold it for a moment and give it back, against a few frames given back up front:
  // no frame is ever held twice, and at the end exactly the frames given back can be taken.
  constexpr std::uint32_t frames = 32 * 70, spare = 7;  // 70 bitmap words: more than one scan window
  std::vector<std::uint32_t> words(frame_pool_words(frames), 0);
  const FramePoolView pool{nullptr, words.data(), nullptr, frames};
  ASSERT_EQ(take_all(pool).size(), frames);
  for (std::uint32_t f = 0; f < spare; ++f) frame_free(pool, f * 307);
  std::vector<std::atomic<int>> held(frames);
  std::atomic<unsigned> doubles{0}, taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int round = 0; round < 20000; ++round) {
        const std::uint32_t f = frame_alloc(pool);
        if (f == no_frame) continue;
        ASSERT_LT(f, frames);
        if (held[f].fetch_add(1) != 0) ++doubles;
        ++taken;
        held[f].fetch_sub(1);
        frame_free(pool, f);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(doubles.load(), 0u);
  EXPECT_GT(taken.load(), 0u);
  const std::vector<std::uint32_t> left = take_all(pool);
  EXPECT_EQ(std::set<std::uint32_t>(left.begin(), left.end()).size(), left.size()) << "a frame taken twice";
  EXPECT_EQ(left.size(), spare) << "every frame given back can be taken again";
}

TEST(MultiGpuFramePool, AFullPoolSaysSoWithinTheScanWindowAndRotatingScansFindALoneFreeFrame) {
  constexpr std::uint32_t frames = 32 * 100;  // 100 bitmap words, a scan window of 32
  std::vector<std::uint32_t> words(frame_pool_words(frames), 0);
  const FramePoolView pool{nullptr, words.data(), nullptr, frames};
  ASSERT_EQ(take_all(pool).size(), frames);
  EXPECT_EQ(frame_alloc(pool), no_frame);
  frame_free(pool, 77 * 32 + 5);  // one free frame, in word 77
  std::uint32_t misses = 0, found = no_frame;
  while (found == no_frame && misses < 100) {
    found = frame_alloc(pool);
    if (found == no_frame) ++misses;
  }
  EXPECT_EQ(found, 77u * 32 + 5);
  EXPECT_LE(misses, pool.bitmap_words() / frame_scan_words + 1) << "each scan starts a window further on";
  EXPECT_EQ(frame_alloc(pool), no_frame);
}

TEST(MultiGpuFramePool, TheReverseMapRoundTripsAndIsClearedWhenAFrameIsReleased) {
  constexpr std::uint32_t frames = 40;
  std::vector<std::uint32_t> words(frame_pool_words(frames), 0);
  std::vector<std::uint64_t> owners(frames, frame_owner::empty);
  const FramePoolView pool{nullptr, words.data(), owners.data(), frames};
  for (const auto& [object, page] : {std::pair<std::uint32_t, std::uint64_t>{0, 0}, {frame_owner::max_objects - 1, 0},
                                     {7, frame_owner::max_pages - 1}, {12345, 987654321}}) {
    const std::uint64_t w = frame_owner::make(object, page);
    EXPECT_NE(w, frame_owner::empty);
    EXPECT_EQ(frame_owner::object(w), object);
    EXPECT_EQ(frame_owner::page(w), page);
  }
  const std::uint32_t f = frame_alloc(pool);
  frame_set_owner(pool, f, 3, 17);
  EXPECT_EQ(frame_owner::page(frame_owner_of(pool, f)), 17u);
  release_frame(pool, f);
  EXPECT_EQ(frame_owner_of(pool, f), frame_owner::empty);
  constexpr std::uint64_t base = 0x1234000;
  const FramePoolView at{reinterpret_cast<std::byte*>(std::uintptr_t{base}), nullptr, nullptr, 8};
  EXPECT_EQ(frame_at(at, base + 5 * 4096, 12), 5u);
  EXPECT_EQ(frame_address(at, 5, 12), base + 5u * 4096);
}

/// Threads turning the clock together see every frame once per sweep: a sweep of `frames`
/// steps by one evicter proposes each frame once unless others move the hand meanwhile, and all
/// steps together cover the frames evenly.
TEST(MultiGpuFramePool, TheClockProposesEveryFrameEvenly) {
  constexpr std::uint32_t frames = 1000, sweeps = 20;
  std::vector<std::uint32_t> words(frame_pool_words(frames), 0);
  const FramePoolView pool{nullptr, words.data(), nullptr, frames};
  std::vector<std::uint32_t> sweep(frames);
  for (auto& f : sweep) f = clock_next(pool);
  std::sort(sweep.begin(), sweep.end());
  for (std::uint32_t f = 0; f < frames; ++f) ASSERT_EQ(sweep[f], f);
  std::vector<std::atomic<std::uint32_t>> seen(frames);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (std::uint32_t i = 0; i < frames * sweeps / 4; ++i) ++seen[clock_next(pool)];
    });
  for (auto& th : threads) th.join();
  for (std::uint32_t f = 0; f < frames; ++f) EXPECT_EQ(seen[f].load(), sweeps) << "frame " << f;
}

struct ModelCounts {
  std::uint64_t transitions = 0, frees = 0, invalidations = 0, upgrades = 0, evictions = 0, to_host = 0, writebacks = 0;
  std::uint64_t placements = 0, takes = 0, placements_ended = 0;  ///< ended: by the owner's first write
};

/// One page over `gpus` GPUs, served the way the device handler serves it (fault.cuh's serve()),
/// with frames as slots of a value store: checks that every access sees the last write and that
/// the page tables follow the directory after every transition.
class PageModel {
 public:
  PageModel(unsigned gpus, PlacementPolicy policy, std::uint32_t counter_threshold)
      : gpus_(gpus), policy_(policy), counter_threshold_(counter_threshold), words_(gpus, 0), counters_(gpus, 0) {}

  void access(unsigned g, bool write) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (pte::usable(words_[g], write)) {
        hit(g, write);
        return;
      }
      serve(g, write, false);
    }
    FAIL() << "GPU " << g << " still faults after serving (write " << write << ")";
  }

  /// GPU `g`'s pool is full: it gives up its copy of the page (if it has one), as fault.cuh's
  /// begin_eviction(), plan_and_drain() and finish_change() do: a dirty page that goes to the host
  /// is written back; a clean one must already equal the host copy.
  void evict(unsigned g) {
    if (!entry_.has_copy(g)) return;
    DirectoryEntry after = entry_;
    const EvictEffects fx = evict_copy(after, g);
    const std::uint64_t mine = pte::address(words_[g]);
    const std::uint64_t owner_frame =
        owner_frame_after(after, g, mine, words_[after.owner < gpus_ ? after.owner : g]);
    if (fx.to_host) {
      ++counts_.to_host;
      if (dirty_) {
        host_ = values_.at(mine);
        dirty_ = false;
        ++counts_.writebacks;
      } else {
        EXPECT_EQ(values_.at(mine), host_) << "a page going to the host clean equals the host copy";
      }
    }
    for (unsigned h = 0; h < gpus_; ++h) {
      const PteChange c = plan_pte(after, h, g, false, words_[h], owner_frame, mine);
      if (h == g) {
        EXPECT_TRUE(c.revoke && c.frees_frame) << "the evicting GPU's own mapping is dropped";
      } else if (pte::is_present(words_[h]) && pte::address(words_[h]) == mine) {
        EXPECT_TRUE(c.revoke) << "GPU " << h << " mapped the evicted frame remotely";
      } else {
        EXPECT_FALSE(c.frees_frame) << "only the evicting GPU's frame is freed";
      }
      if (c.frees_frame) values_.erase(pte::address(words_[h]));
      if (c.revoke && h != g) ++counts_.invalidations;
      words_[h] = c.after;
    }
    entry_ = after;
    ++counts_.evictions;
    check_invariants();
  }

  /// drop_cached(): every copy given up (dirty ones written back), the page forgotten (not
  /// shared), the O-Table and the access counters cleared.
  void drop() {
    for (unsigned g = 0; g < gpus_; ++g) evict(g);
    entry_ = DirectoryEntry{};
    otable_ = 0;
    std::fill(counters_.begin(), counters_.end(), 0u);
    check_invariants();
  }

  /// place_on_gpus() putting the page on GPU `g`, as multi_gpu.cu's place_pages does: a page on the
  /// host is read through the fault path, then, if that was a first touch, marked placed.
  void place(unsigned g) {
    if (entry_.owner != owner_host) return;
    serve(g, false, false);
    if (!mark_placed(entry_, g)) return;
    ++counts_.placements;
    check_invariants();
  }

  [[nodiscard]] const ModelCounts& counts() const { return counts_; }

 private:
  void hit(unsigned g, bool write) {
    const std::uint64_t address = pte::address(words_[g]);
    ASSERT_TRUE(values_.count(address)) << "GPU " << g << " maps a frame nobody holds";
    EXPECT_EQ(values_[address], truth_) << "GPU " << g << " read a stale copy";
    if (write) {
      ASSERT_TRUE(pte::is_writable(words_[g]));
      values_[address] = ++truth_;
    }
    if (pte::is_remote(words_[g]) && count_remote(counters_[g], 1, counter_threshold_)) serve(g, false, true);
  }

  void serve(unsigned me, bool write, bool counter_migration) {
    Action action = Action::local;
    if (counter_migration) {
      if (entry_.maps_remote(me)) action = Action::counter_migrate;
    } else {
      const std::uint32_t otable_before = otable_;
      const Decision d = decide(entry_, me, write, [&](bool w) {
        switch (policy_) {
          case PlacementPolicy::on_touch: return PagePolicy::on_touch;
          case PlacementPolicy::access_counter: return PagePolicy::access_counter;
          case PlacementPolicy::duplication: return PagePolicy::duplication;
          case PlacementPolicy::oasis: break;
        }
        return otable_shared_fault(otable_, w, 2);
      });
      action = d.action;
      if (action == Action::take_placed) {
        EXPECT_EQ(otable_, otable_before) << "a take teaches the O-Table nothing";
      }
      if ((action == Action::local || action == Action::remote) && write && !pte::is_writable(words_[me])) {
        // The device clears `placed` here unconditionally: only the owner's upgrade can find it set.
        EXPECT_TRUE(entry_.placed == 0 || entry_.owner == me) << "a placed page's upgrade by another GPU";
        words_[me] |= pte::writable;
        dirty_ = true;
        ++counts_.upgrades;
        counts_.placements_ended += owner_write_ends_placement(entry_, me);
        check_invariants();
      }
    }
    if (action == Action::local || action == Action::remote) return;
    counts_.takes += action == Action::take_placed;
    const DirectoryEntry before = entry_;
    DirectoryEntry after = before;
    const Effects fx = apply(after, me, action);
    std::uint64_t requester_frame = pte::address(words_[me]);
    if (fx.pulled) {
      requester_frame = next_frame_ += std::uint64_t{1} << pte::address_shift;
      const std::uint64_t source = fx.source == owner_host ? 0 : pte::address(words_[fx.source]);
      values_[requester_frame] = fx.source == owner_host ? host_ : values_.at(source);
    }
    const std::uint64_t owner_frame = owner_frame_after(after, me, requester_frame, words_[after.owner]);
    std::vector<PteChange> changes(gpus_);
    for (unsigned g = 0; g < gpus_; ++g) changes[g] = plan_pte(after, g, me, write, words_[g], owner_frame, requester_frame);
    for (unsigned g = 0; g < gpus_; ++g) {
      const std::uint64_t old = words_[g], next = changes[g].after;
      if (pte::is_present(old)) {
        const bool dropped = !pte::is_present(next) || pte::address(next) != pte::address(old);
        const bool narrowed = pte::is_writable(old) && !pte::is_writable(next);
        EXPECT_EQ(changes[g].revoke, dropped || narrowed) << "GPU " << g << " " << to_string(action);
      } else {
        EXPECT_FALSE(changes[g].revoke);
      }
      if (changes[g].frees_frame) {
        // The old frame is dropped: its value must already live elsewhere (or be host's).
        values_.erase(pte::address(old));
        ++counts_.frees;
      }
      if (changes[g].revoke && g != me) ++counts_.invalidations;
      words_[g] = next;
    }
    if (pte::is_writable(words_[me])) dirty_ = true;  // as finish_change marks the page
    entry_ = after;
    ++counts_.transitions;
    check_invariants();
  }

  void check_invariants() {
    ASSERT_TRUE(directory_valid(entry_));
    std::set<std::uint64_t> own;
    for (unsigned g = 0; g < gpus_; ++g) {
      const Mapping m = mapping_of(entry_, g);
      const std::uint64_t w = words_[g];
      EXPECT_EQ(pte::is_present(w), m != Mapping::none) << "GPU " << g;
      if (m == Mapping::own) {
        EXPECT_TRUE(own.insert(pte::address(w)).second) << "two GPUs own one frame";
      }
      if (m == Mapping::remote) {
        EXPECT_EQ(pte::address(w), pte::address(words_[entry_.owner]));
      }
      if (pte::is_writable(w)) {
        EXPECT_EQ(entry_.replicas, 0u) << "writable while replicated";
      }
      if (m != Mapping::none) {
        EXPECT_TRUE(values_.count(pte::address(w))) << "GPU " << g << " maps a freed frame";
      }
    }
    EXPECT_EQ(own.size() + 0u, values_.size()) << "a frame leaked";
  }

 private:
  unsigned gpus_;
  PlacementPolicy policy_;
  std::uint32_t counter_threshold_;
  DirectoryEntry entry_{};
  std::vector<std::uint64_t> words_;
  std::vector<std::uint32_t> counters_;
  std::uint32_t otable_ = 0;
  std::map<std::uint64_t, std::uint64_t> values_;  ///< frame address -> the value it holds
  std::uint64_t host_ = 0, truth_ = 0, next_frame_ = 0;
  bool dirty_ = false;  ///< the page's dirty mark: set with every writable mapping, cleared by a write-back
  ModelCounts counts_;
};

/// Random accesses (a few hot GPUs, reads and writes) to one page under every policy and GPU
/// count, in phases of mostly reads, then mostly writes, so replicas build up and collapse; with
/// `evictions`, a random GPU also evicts the page before one access in four (a full pool); with
/// `placements`, the page is dropped (drop_cached()) before one access in 32 and a random GPU
/// places it (if it is on the host) before one access in four.
/// The model checks every read against the last write and the tables against the directory;
/// `check` then looks at its counts.
template <class Check>
void random_accesses(unsigned seed, bool evictions, bool placements, Check&& check) {
  for (unsigned gpus : {1u, 2u, 3u, 4u})
    for (PlacementPolicy policy : {PlacementPolicy::on_touch, PlacementPolicy::access_counter,
                                   PlacementPolicy::duplication, PlacementPolicy::oasis}) {
      SCOPED_TRACE(std::to_string(gpus) + " GPUs, " + to_string(policy));
      PageModel model(gpus, policy, 5);
      std::mt19937 rng(gpus * seed + static_cast<unsigned>(policy));
      for (int i = 0; i < 5000 && !::testing::Test::HasFatalFailure(); ++i) {
        const bool writes_phase = (i / 250) % 2 == 1;
        if (evictions && rng() % 4 == 0) model.evict(rng() % gpus);
        if (placements && rng() % 32 == 0) model.drop();
        if (placements && rng() % 4 == 0) model.place(rng() % gpus);
        model.access(rng() % gpus, rng() % 8 < (writes_phase ? 5u : 1u));
      }
      check(gpus, model.counts());
    }
}

TEST(MultiGpuTransitions, EveryReadSeesTheLastWriteAndTablesFollowTheDirectory) {
  random_accesses(31, false, false, [](unsigned gpus, const ModelCounts& counts) {
    EXPECT_GT(counts.transitions, 0u);
    if (gpus > 1) {
      EXPECT_GT(counts.invalidations, 0u);
      EXPECT_GT(counts.frees, 0u);
    }
  });
}

/// Reads still see the last write with evictions in between, a page re-fetched from the host
/// after a sole owner's eviction too (the dirty page was written back), and the tables still
/// follow the directory.
TEST(MultiGpuTransitions, EvictionsKeepEveryReadExactAndWriteBackDirtyPages) {
  random_accesses(37, true, false, [](unsigned, const ModelCounts& counts) {
    EXPECT_GT(counts.evictions, 0u);
    EXPECT_GT(counts.to_host, 0u);
    EXPECT_GT(counts.writebacks, 0u);
    EXPECT_LT(counts.writebacks, counts.to_host) << "clean pages are not written back";
  });
}

/// Pages placed on a GPU between drops and evictions: another GPU's write takes a placed page,
/// the owner's first write ends a placement, reads stay exact and the tables follow the directory.
TEST(MultiGpuTransitions, PlacedPagesTakenByWritesKeepEveryReadExact) {
  random_accesses(41, true, true, [](unsigned gpus, const ModelCounts& counts) {
    EXPECT_GT(counts.placements, 0u);
    EXPECT_GT(counts.placements_ended, 0u);
    if (gpus > 1) {
      EXPECT_GT(counts.takes, 0u);
    }
  });
}

}  // namespace
}  // namespace warpvm::detail::mg

// The heap's small-request fast path (small_blocks.hpp): size-class math, tickets, slab tags,
// binding-ring entries, pointer location and validation, and the whole protocol played one
// step at a time (tickets, binding, bitmaps, live counts, the free-slab queue, as
// heap_device.cuh does them with atomics) in random alloc/free sequences against a model that
// knows only which byte ranges are live.

#include "warpvm/detail/alloc/heap_ptr.hpp"
#include "warpvm/detail/alloc/small_blocks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <vector>

namespace warpvm::detail {
namespace {

TEST(SmallBlocks, SizeClassesArePowersOfTwoFrom16Bytes) {
  EXPECT_EQ(small_class_of(0), no_small_class);
  EXPECT_EQ(small_class_of(1), 0u);
  EXPECT_EQ(small_class_of(16), 0u);
  EXPECT_EQ(small_class_of(17), 1u);
  EXPECT_EQ(small_class_of(32), 1u);
  EXPECT_EQ(small_class_of(33), 2u);
  EXPECT_EQ(small_class_of(1024), 6u);
  EXPECT_EQ(small_class_of(4096), 8u);
  EXPECT_EQ(small_class_of(8191), 9u);
  EXPECT_EQ(small_class_of(8192), 9u);
  EXPECT_EQ(small_class_of(8193), no_small_class);
  for (std::uint64_t bytes = 1; bytes <= small_max_bytes; ++bytes) {
    const std::uint32_t c = small_class_of(bytes);
    ASSERT_LT(c, small_classes);
    ASSERT_GE(small_class_bytes(c), bytes) << "a class holds its requests";
    ASSERT_TRUE(c == 0 || small_class_bytes(c - 1) < bytes) << "and is the smallest that does";
  }
  EXPECT_EQ(small_blocks_per_slab(0), 4096u);
  EXPECT_EQ(small_blocks_per_slab(9), 8u);
  EXPECT_EQ(std::uint64_t{small_blocks_per_slab(0)}, std::uint64_t{slab_bitmap_words} * 32);
}

TEST(SmallBlocks, TicketsFillVirtualSlabsInOrder) {
  EXPECT_EQ(small_ticket(0, 9).virtual_slab, 0u);
  EXPECT_EQ(small_ticket(7, 9).block, 7u);
  EXPECT_EQ(small_ticket(8, 9).virtual_slab, 1u);
  EXPECT_EQ(small_ticket(8, 9).block, 0u);
  EXPECT_EQ(small_ticket(4096 * 5 + 3, 0).virtual_slab, 5u);
  EXPECT_EQ(small_ticket(4096 * 5 + 3, 0).block, 3u);
}

TEST(SmallBlocks, TagsAreNeverZeroAndCarryTheClass) {
  for (std::uint32_t c = 0; c < small_classes; ++c)
    for (const std::uint64_t v : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1} << 27, ~std::uint64_t{0}}) {
      EXPECT_NE(small_slab_tag(c, v), 0u);
      EXPECT_EQ(small_tag_class(small_slab_tag(c, v)), c);
    }
  EXPECT_NE(small_slab_tag(3, 10), small_slab_tag(3, 11));
  EXPECT_NE(small_slab_tag(3, 10), small_slab_tag(4, 10));
}

TEST(SmallBlocks, BindingEntriesTellPendingBoundAndFailed) {
  EXPECT_EQ(read_binding(0, 0).state, BindingState::pending) << "an entry never written";
  EXPECT_EQ(read_binding(binding_entry(5, 0), 5).state, BindingState::pending);
  const Binding bound = read_binding(binding_entry(5, 8), 5);
  EXPECT_EQ(bound.state, BindingState::bound);
  EXPECT_EQ(bound.slab, 7u);
  EXPECT_EQ(read_binding(binding_entry(5, failed_binding), 5).state, BindingState::failed);
  EXPECT_EQ(read_binding(binding_entry(5, 8), 5 + binding_ring).state, BindingState::pending)
      << "the entry still holds the virtual slab a ring before";
  // Across the 32-bit wrap of the virtual slab number.
  const std::uint64_t high = (std::uint64_t{1} << 32) - 2;
  EXPECT_EQ(read_binding(binding_entry(high + binding_ring, 3), high + binding_ring).slab, 2u);
  EXPECT_EQ(read_binding(binding_entry(high, 3), high + binding_ring).state, BindingState::pending);
  EXPECT_EQ(binding_index(3, 5 + 2 * binding_ring), binding_index(3, 5));
  EXPECT_NE(binding_index(3, 5), binding_index(4, 5));
}

TEST(SmallBlocks, AnEntryIsReboundOnlyOnceEveryLaneReadIt) {
  EXPECT_TRUE(binding_entry_free_for(0, 0, 5)) << "the first lap: an entry never written";
  EXPECT_FALSE(binding_entry_free_for(binding_entry(5, 8), 0, 5)) << "published already";
  const std::uint64_t later = 5 + binding_ring;
  EXPECT_FALSE(binding_entry_free_for(0, 0, later)) << "virtual slab 5 is not published yet";
  EXPECT_FALSE(binding_entry_free_for(binding_entry(5, 8), 3, later)) << "3 of its lanes have not read it";
  EXPECT_TRUE(binding_entry_free_for(binding_entry(5, 8), 0, later));
  EXPECT_TRUE(binding_entry_free_for(binding_entry(5, failed_binding), 0, later)) << "failed ones are read too";
  EXPECT_FALSE(binding_entry_free_for(binding_entry(later, 8), 0, later + binding_ring + binding_ring))
      << "two rings on waits for the one between";
  // Issue #4: the earlier virtual slab never replaces a later one's binding.
  EXPECT_FALSE(binding_entry_free_for(binding_entry(later, 8), 0, 5));
}

TEST(SmallBlocks, QueueEntriesServeOnlyTheirPosition) {
  constexpr std::uint64_t slabs = 4;
  // Position 2 holds slab 6; its taker reads it, the taker of position 6 (a lap on) does not.
  const std::uint64_t queued = queue_entry(2, 7);
  EXPECT_EQ(queued_slab(queued, 2), 7u);
  EXPECT_EQ(queued_slab(queued, 2 + slabs), 0u);
  // Read: the entry waits for position 6's giver, whose compare-exchange expects exactly this.
  const std::uint64_t read = queue_entry(2 + slabs, 0);
  EXPECT_EQ(queued_slab(read, 2 + slabs), 0u);
  EXPECT_NE(read, queue_entry(2 + 2 * slabs, 0)) << "a giver two laps on waits too";
  EXPECT_EQ(queued_slab(queue_entry(2 + slabs, 9), 2 + slabs), 9u);
  // Positions compare in 32 bits: fine across the wrap, laps being far shorter.
  const std::uint64_t wrapped = (std::uint64_t{1} << 32) + 2;
  EXPECT_EQ(queued_slab(queue_entry(wrapped, 5), wrapped), 5u);
  EXPECT_EQ(queued_slab(queue_entry(wrapped, 5), wrapped + slabs), 0u);
}

TEST(SmallBlocks, PointersAreContiguousBlocksOfTheirSlab) {
  const SmallArea area{64ull << 20, 32};
  const heap_ptr p = area.pointer(6, 3, 17, small_slab_tag(6, 40));
  EXPECT_TRUE(p.is_small());
  EXPECT_EQ(p.size(), 1024u);
  EXPECT_EQ(p.region_offset(), (64ull << 20) + 3 * slab_bytes);
  EXPECT_EQ(p.offset_of(0), (64ull << 20) + 3 * slab_bytes + 17 * 1024);
  EXPECT_EQ(p.offset_of(1023), p.offset_of(0) + 1023);
  EXPECT_EQ(p.offset_of(1024), no_offset);
  EXPECT_EQ(p.contiguous_bytes(24), 1000u);
  const SmallArea::Located at = area.locate(p);
  ASSERT_TRUE(at.ok);
  EXPECT_EQ(at.slab, 3u);
  EXPECT_EQ(at.block, 17u);
  EXPECT_EQ(at.size_class, 6u);
  // The largest block index of the smallest class survives the pointer.
  const heap_ptr last = area.pointer(0, 31, 4095, small_slab_tag(0, 1));
  EXPECT_EQ(area.locate(last).block, 4095u);
  EXPECT_EQ(last.offset_of(15), area.slab_offset(31) + slab_bytes - 1);

  EXPECT_FALSE(area.locate(heap_ptr{}).ok);
  EXPECT_FALSE(heap_ptr(0, 1024, 5, 0, 32, HeapLayout::contiguous, LaneOrder::lane_id).is_small())
      << "a region's pointer";
  EXPECT_FALSE(area.locate(heap_ptr::small_block(area.slab_offset(32), 1024, 0, p.tag())).ok) << "past the area";
  EXPECT_FALSE(area.locate(heap_ptr::small_block(0, 1024, 0, p.tag())).ok) << "before the area";
  EXPECT_FALSE(area.locate(heap_ptr::small_block(area.slab_offset(3), 1024, 64, p.tag())).ok) << "block past the slab";
  EXPECT_FALSE(area.locate(heap_ptr::small_block(area.slab_offset(3), 1024, 1, p.tag() + 1)).ok)
      << "a tag of another class";
  EXPECT_FALSE(area.locate(heap_ptr::small_block(area.slab_offset(3), 1040, 1, p.tag())).ok) << "not a class size";
}

/// The fast path's protocol, one step at a time, with the data structures heap_device.cuh
/// keeps and the pure helpers it uses. Its steps (a group taking tickets, a binder publishing, a
/// virtual slab's lanes of one group reading their binding) can be interleaved in any order a
/// GPU might run them.
class SmallSlabs {
 public:
  explicit SmallSlabs(SmallArea area)
      : area_(area),
        tags_(area.slabs, 0),
        live_(area.slabs, 0),
        bitmaps_(std::size_t{area.slabs} * slab_bitmap_words, 0),
        bindings_(std::size_t{small_classes} * binding_ring, 0),
        readers_(std::size_t{small_classes} * binding_ring, 0) {
    for (std::uint32_t slab = 0; slab < area.slabs; ++slab) queue_.push_back(slab);
  }

  /// A group's one ticket add: its first ticket.
  std::uint64_t take_tickets(std::uint32_t size_class, std::uint32_t lanes) {
    const std::uint64_t first = tickets_[size_class];
    tickets_[size_class] += lanes;
    return first;
  }

  /// small_bind's wait: whether virtual slab `virtual_slab`'s binder may publish now.
  [[nodiscard]] bool can_bind(std::uint32_t size_class, std::uint64_t virtual_slab) const {
    const std::uint32_t i = binding_index(size_class, virtual_slab);
    return binding_entry_free_for(bindings_[i], readers_[i], virtual_slab);
  }
  /// small_bind once its wait is over: a slab from the queue (or none), published.
  void bind(std::uint32_t size_class, std::uint64_t virtual_slab) {
    ASSERT_TRUE(can_bind(size_class, virtual_slab));
    std::uint32_t published = failed_binding;
    if (!queue_.empty()) {
      const std::uint32_t slab = queue_.front();
      queue_.pop_front();
      EXPECT_EQ(tags_[slab], 0u);
      EXPECT_EQ(live_[slab], 0u);
      for (std::uint32_t w = 0; w < slab_bitmap_words; ++w)
        EXPECT_EQ(bitmaps_[slab * slab_bitmap_words + w], 0u) << "a queued slab's bitmap is clear";
      tags_[slab] = small_slab_tag(size_class, virtual_slab);
      live_[slab] = small_blocks_per_slab(size_class);
      published = slab + 1;
    }
    const std::uint32_t i = binding_index(size_class, virtual_slab);
    readers_[i] = small_blocks_per_slab(size_class);
    bindings_[i] = binding_entry(virtual_slab, published);
  }

  /// small_malloc's wait: what the lanes of `virtual_slab` find published.
  [[nodiscard]] Binding binding(std::uint32_t size_class, std::uint64_t virtual_slab) const {
    return read_binding(bindings_[binding_index(size_class, virtual_slab)], virtual_slab);
  }
  /// The lanes of one group holding tickets [first, first + lanes), all of one virtual slab,
  /// once its binding is published: they count themselves off the entry and set their bits.
  /// Their pointers (null: left to the host path).
  std::vector<heap_ptr> read(std::uint32_t size_class, std::uint64_t first, std::uint32_t lanes) {
    const std::uint64_t virtual_slab = small_ticket(first, size_class).virtual_slab;
    EXPECT_EQ(small_ticket(first + lanes - 1, size_class).virtual_slab, virtual_slab);
    const Binding b = binding(size_class, virtual_slab);
    EXPECT_NE(b.state, BindingState::pending) << "a virtual slab's lanes read it only once it is published";
    std::uint32_t& readers = readers_[binding_index(size_class, virtual_slab)];
    EXPECT_GE(readers, lanes) << "more readers than the virtual slab's blocks";
    readers -= lanes;
    std::vector<heap_ptr> out(lanes);
    if (b.state != BindingState::bound) return out;
    for (std::uint32_t rank = 0; rank < lanes; ++rank) {
      const std::uint32_t block = small_ticket(first + rank, size_class).block;
      std::uint32_t& word = bitmaps_[b.slab * slab_bitmap_words + block_word(block)];
      EXPECT_EQ(word & block_bit(block), 0u) << "a block handed out twice";
      word |= block_bit(block);
      out[rank] = area_.pointer(size_class, b.slab, block, small_slab_tag(size_class, virtual_slab));
    }
    return out;
  }

  /// One group of `lanes` lanes asking for class `size_class`, its binders and readers run in
  /// turn: their pointers.
  std::vector<heap_ptr> malloc_group(std::uint32_t size_class, std::uint32_t lanes) {
    const std::uint64_t first = take_tickets(size_class, lanes);
    for (std::uint32_t rank = 0; rank < lanes; ++rank) {
      const SmallTicket t = small_ticket(first + rank, size_class);
      if (t.block == 0) bind(size_class, t.virtual_slab);
    }
    std::vector<heap_ptr> out;
    for (const auto& [begin, count] : virtual_slab_runs(size_class, first, lanes)) {
      const std::vector<heap_ptr> got = read(size_class, begin, count);
      out.insert(out.end(), got.begin(), got.end());
    }
    return out;
  }

  /// small_free: false, changing nothing, for a block that is not live.
  bool free(const heap_ptr& p) {
    const SmallArea::Located at = area_.locate(p);
    if (!at.ok || tags_[at.slab] != p.tag()) return false;
    std::uint32_t& word = bitmaps_[at.slab * slab_bitmap_words + block_word(at.block)];
    if ((word & block_bit(at.block)) == 0) return false;
    word &= ~block_bit(at.block);
    if (--live_[at.slab] == 0) {
      tags_[at.slab] = 0;
      queue_.push_back(at.slab);
    }
    return true;
  }

  /// Tickets [first, first + lanes) of `size_class` cut where virtual slabs change: (first
  /// ticket, count) each, as the device's match on the virtual slab groups the lanes.
  static std::vector<std::pair<std::uint64_t, std::uint32_t>> virtual_slab_runs(std::uint32_t size_class,
                                                                                std::uint64_t first,
                                                                                std::uint32_t lanes) {
    std::vector<std::pair<std::uint64_t, std::uint32_t>> runs;
    const std::uint32_t per_slab = small_blocks_per_slab(size_class);
    for (std::uint64_t t = first; t < first + lanes;) {
      const std::uint64_t end = std::min(first + lanes, (t / per_slab + 1) * per_slab);
      runs.emplace_back(t, static_cast<std::uint32_t>(end - t));
      t = end;
    }
    return runs;
  }

  [[nodiscard]] std::size_t queued() const { return queue_.size(); }
  [[nodiscard]] std::size_t bound() const {
    std::size_t n = 0;
    for (const std::uint32_t tag : tags_) n += tag != 0;
    return n;
  }
  [[nodiscard]] std::uint64_t live_bits() const {
    std::uint64_t n = 0;
    for (const std::uint32_t word : bitmaps_) n += static_cast<std::uint64_t>(std::popcount(word));
    return n;
  }
  /// Tickets of `size_class` taken so far.
  [[nodiscard]] std::uint64_t tickets(std::uint32_t size_class) const { return tickets_[size_class]; }

 private:
  SmallArea area_;
  std::vector<std::uint32_t> tags_, live_, bitmaps_;
  std::vector<std::uint64_t> bindings_;
  std::vector<std::uint32_t> readers_;
  std::uint64_t tickets_[small_classes] = {};
  std::deque<std::uint32_t> queue_;
};

/// Random groups of lanes allocate and free blocks of random classes; the model is the set of
/// live byte ranges. Every block lies in the area, inside its slab, overlaps no live block;
/// every free of a live block succeeds once, and a second free, a stale pointer into a
/// recycled slab or a forged pointer fails and changes nothing; nulls come only when every
/// slab is bound; what is freed comes back (the slabs all return once everything is freed
/// and each class's last slab is used up).
TEST(SmallBlocks, RandomAllocFreeMatchesTheLiveRangeModel) {
  for (const std::uint64_t seed : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const SmallArea area{6ull << 20, static_cast<std::uint32_t>(8 + seed * 8)};
    SmallSlabs slabs(area);
    std::map<std::uint64_t, heap_ptr> live;  // offset -> pointer
    std::vector<heap_ptr> dead;
    std::uint64_t nulls = 0;
    for (int step = 0; step < 4000; ++step) {
      if (live.empty() || rng() % 5 < 3) {
        const auto c = static_cast<std::uint32_t>(rng() % small_classes);
        const auto lanes = static_cast<std::uint32_t>(1 + rng() % 32);
        for (const heap_ptr& p : slabs.malloc_group(c, lanes)) {
          if (!p) {
            ++nulls;
            ASSERT_EQ(slabs.queued(), 0u) << "a null while a slab was free";
            continue;
          }
          const std::uint64_t begin = p.offset_of(0);
          ASSERT_EQ(p.size(), small_class_bytes(c));
          ASSERT_GE(begin, area.area_offset);
          ASSERT_LE(begin + p.size(), area.slab_offset(area.slabs));
          ASSERT_EQ(begin / slab_bytes, (begin + p.size() - 1) / slab_bytes) << "a block inside its slab";
          const auto next = live.lower_bound(begin);
          ASSERT_TRUE(next == live.end() || next->first >= begin + p.size()) << "overlaps the next live block";
          if (next != live.begin()) {
            const auto& [before, q] = *std::prev(next);
            ASSERT_LE(before + q.size(), begin) << "overlaps the previous live block";
          }
          live.emplace(begin, p);
        }
      } else {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        const heap_ptr p = it->second;
        live.erase(it);
        ASSERT_TRUE(slabs.free(p));
        dead.push_back(p);
        const heap_ptr stale = dead[rng() % dead.size()];
        if (!live.contains(stale.offset_of(0)) || live.at(stale.offset_of(0)).tag() != stale.tag()) {
          ASSERT_FALSE(slabs.free(stale)) << "a freed block, freed again";
        }
        const heap_ptr forged = heap_ptr::small_block(p.region_offset(), p.size(), p.lane(), p.tag() ^ 0x10u);
        ASSERT_FALSE(slabs.free(forged)) << "a tag the slab never had";
      }
      ASSERT_EQ(slabs.live_bits(), live.size());
      ASSERT_EQ(slabs.bound() + slabs.queued(), area.slabs) << "every slab bound or queued";
    }
    EXPECT_GT(nulls, 0u) << "the small area ran out at times";
    for (const auto& [offset, p] : live) ASSERT_TRUE(slabs.free(p));
    EXPECT_EQ(slabs.live_bits(), 0u);
    // What stays bound are slabs whose blocks no ticket has reached yet: at most one a class.
    EXPECT_LE(slabs.bound(), small_classes);
    for (std::uint32_t c = 0; c < small_classes; ++c) {
      // Use up each class's partial slab, starting no new one: every slab comes back.
      const std::uint32_t per_slab = small_blocks_per_slab(c);
      std::uint64_t rest = (per_slab - slabs.tickets(c) % per_slab) % per_slab;
      std::vector<heap_ptr> taken;
      while (rest != 0) {
        const auto lanes = static_cast<std::uint32_t>(rest < 32 ? rest : 32);
        for (const heap_ptr& p : slabs.malloc_group(c, lanes))
          if (p) taken.push_back(p);
        rest -= lanes;
      }
      for (const heap_ptr& p : taken) ASSERT_TRUE(slabs.free(p));
    }
    EXPECT_EQ(slabs.bound(), 0u);
    EXPECT_EQ(slabs.queued(), area.slabs);
    EXPECT_EQ(slabs.live_bits(), 0u);
  }
}

/// One kernel's `threads` lanes of `size_class`, in warps of 32 that take their tickets at once
/// and then bind and read in any order a GPU may run them: each step is a random one of those
/// that can run now (a binder whose entry is free; a warp whose binders have bound and whose
/// virtual slabs are all published: its lanes count themselves off only after a warp-wide
/// match, so they wait for their own warp's binders). Returns the lanes' pointers; fails the
/// test when no step can run, which on the GPU is lanes waiting for the watchdog.
std::vector<heap_ptr> replay_kernel(SmallSlabs& slabs, std::uint32_t size_class, std::uint64_t threads,
                                    std::mt19937_64& rng) {
  struct Warp {
    std::uint64_t first;
    std::uint32_t lanes, binders_left = 0;
  };
  struct Step {
    std::uint64_t warp;
    std::uint64_t virtual_slab;  ///< a binder's; ~0: the warp's reads
  };
  constexpr std::uint64_t reads = ~std::uint64_t{0};
  std::vector<Warp> warps;
  std::vector<Step> steps;
  for (std::uint64_t t = 0; t < threads; t += 32) {
    const auto lanes = static_cast<std::uint32_t>(std::min<std::uint64_t>(32, threads - t));
    Warp w{slabs.take_tickets(size_class, lanes), lanes};
    for (std::uint32_t rank = 0; rank < lanes; ++rank) {
      const SmallTicket ticket = small_ticket(w.first + rank, size_class);
      if (ticket.block != 0) continue;
      ++w.binders_left;
      steps.push_back({warps.size(), ticket.virtual_slab});
    }
    steps.push_back({warps.size(), reads});
    warps.push_back(w);
  }
  const auto runs = [&](const Warp& w) { return SmallSlabs::virtual_slab_runs(size_class, w.first, w.lanes); };
  const auto can_run = [&](const Step& step) {
    if (step.virtual_slab != reads) return slabs.can_bind(size_class, step.virtual_slab);
    const Warp& w = warps[step.warp];
    if (w.binders_left != 0) return false;
    for (const auto& [begin, count] : runs(w))
      if (slabs.binding(size_class, small_ticket(begin, size_class).virtual_slab).state == BindingState::pending)
        return false;
    return true;
  };
  std::vector<heap_ptr> out(threads);
  std::size_t misses = 0;
  while (!steps.empty()) {
    const std::size_t i = rng() % steps.size();
    if (!can_run(steps[i])) {
      if (++misses < 4 * steps.size()) continue;
      const bool any = std::any_of(steps.begin(), steps.end(), can_run);
      if (!any) {
        ADD_FAILURE() << steps.size() << " steps left and none can run: their lanes would wait for the watchdog";
        return {};
      }
      misses = 0;
      continue;
    }
    misses = 0;
    const Step step = steps[i];
    steps[i] = steps.back();
    steps.pop_back();
    Warp& w = warps[step.warp];
    if (step.virtual_slab != reads) {
      slabs.bind(size_class, step.virtual_slab);
      --w.binders_left;
      continue;
    }
    std::uint64_t lane = step.warp * 32;
    for (const auto& [begin, count] : runs(w))
      for (const heap_ptr& p : slabs.read(size_class, begin, count)) out[lane++] = p;
  }
  return out;
}

/// Issue #4's H200 failures, replayed: 65536 x 8 KB (the GPU test's last round: 8192 virtual
/// slabs, twice the old ring of 4096 entries, whose earlier virtual slabs overwrote later ones'
/// bindings and left their lanes waiting, or lapped, sent to the host), rounds of 32K then 256K
/// x 4 KB (the benchmark's points, 16384 virtual slabs a kernel), and 256K x 8 KB (two rings in
/// one kernel). Every lane is served from the fast path, no block twice, and freeing everything
/// in a random order gives every slab back but each class's partial one.
TEST(SmallBlocks, ConcurrentBindersAndReadersServeEveryLane) {
  std::mt19937_64 rng(4);
  const SmallArea area{6ull << 20, 32768};
  SmallSlabs slabs(area);
  struct Kernel {
    std::uint32_t size_class;
    std::uint64_t threads;
  };
  for (const Kernel k : {Kernel{9, 65536}, Kernel{8, 32768}, Kernel{8, 32768}, Kernel{8, 262144}, Kernel{8, 262144},
                         Kernel{8, 262144}, Kernel{8, 262144}, Kernel{9, 262144}, Kernel{9, 262144}}) {
    SCOPED_TRACE(std::to_string(k.threads) + " threads of class " + std::to_string(k.size_class));
    std::vector<heap_ptr> got = replay_kernel(slabs, k.size_class, k.threads, rng);
    ASSERT_EQ(got.size(), k.threads);
    ASSERT_TRUE(std::all_of(got.begin(), got.end(), [](const heap_ptr& p) { return p.is_small(); }))
        << "a lane left to the host";
    ASSERT_EQ(slabs.live_bits(), k.threads);
    std::shuffle(got.begin(), got.end(), rng);
    for (const heap_ptr& p : got) ASSERT_TRUE(slabs.free(p));
    ASSERT_EQ(slabs.live_bits(), 0u);
    ASSERT_LE(slabs.bound(), 2u) << "only the classes' partial slabs stay bound";
    ASSERT_EQ(slabs.bound() + slabs.queued(), area.slabs);
  }
}

/// A small area that runs out mid-kernel (the GPU test's 32 slabs for 16384 x 1 KB): the
/// virtual slabs past it fail, their lanes go to the host, and nothing waits forever; every
/// slab's blocks are handed out, and all come back.
TEST(SmallBlocks, AnAreaRunningOutMidKernelFailsTheRestWithoutWaiting) {
  std::mt19937_64 rng(5);
  const SmallArea area{6ull << 20, 32};
  SmallSlabs slabs(area);
  for (int round = 0; round < 2; ++round) {
    std::vector<heap_ptr> got = replay_kernel(slabs, 6, 16384, rng);
    ASSERT_EQ(got.size(), 16384u);
    const auto served = std::count_if(got.begin(), got.end(), [](const heap_ptr& p) { return p.is_small(); });
    EXPECT_EQ(served, 32 * 64) << "every slab's 64 blocks handed out";
    for (const heap_ptr& p : got) {
      if (!p) continue;
      ASSERT_TRUE(slabs.free(p));
    }
    EXPECT_EQ(slabs.queued(), area.slabs);
  }
}

}  // namespace
}  // namespace warpvm::detail

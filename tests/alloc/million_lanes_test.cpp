// Issue #28, item 7: random alloc/free at 1M lanes, replayed on the host against a model of the
// whole heap (heap_replay.hpp: the fast path's slabs, then the host's HeapSpace), with the requests
// of the GPU test HeapFastPath.MillionLanesRandomAllocFreeRefuseNothingWhileThereIsRoom
// (million_lanes_workload.hpp). What it establishes: at 1M lanes the heap holds about 4-6 bytes for
// each live byte, so it refuses lanes while most of it is unused. The slabs are the cliff: a slab
// goes back to the free-slab queue only when every block of it is freed, and under random frees few
// ever are, so the small area runs dry; the small lanes then go to the host path, where each warp's
// group becomes a region padded to whole 64 KB blocks, and the region space fills. Reusing partly
// free slabs (SlabReuse) serves the same workload.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "heap_replay.hpp"
#include "million_lanes_workload.hpp"

namespace warpvm::detail::replay {
namespace {

using testing::million::Workload;
constexpr std::uint64_t mib = 1ull << 20;
constexpr std::uint64_t gib = 1ull << 30;

struct Outcome {
  std::uint64_t attempts = 0, refused = 0, small_fallbacks = 0;
  std::uint32_t first_refused_step = ~0u;
  HeapBytes peak{};  ///< each field's own peak at the end of a step
  HeapBytes last{};  ///< at the end of the last step
};

bool is_live(const Allocation& a) { return a.kind == Allocation::Kind::small || a.kind == Allocation::Kind::region; }

/// The GPU test's steps: each step's frees (a kernel of their own there), then its allocations,
/// warp by warp.
Outcome run(const Workload& w, HeapModel& heap) {
  Outcome o;
  std::vector<Allocation> slots(w.threads * w.slots);
  std::vector<std::uint64_t> allocating;  // threads that allocate this step, in order
  std::vector<std::uint64_t> warp_bytes;
  std::vector<Allocation> warp_out(warp_lanes);
  for (std::uint32_t step = 0; step < w.steps; ++step) {
    allocating.clear();
    for (std::uint64_t t = 0; t < w.threads; ++t) {
      Allocation& slot = slots[testing::million::slot_of(w, step, t)];
      if (is_live(slot)) {
        heap.free(slot);
        slot = {};
      } else {
        allocating.push_back(t);
      }
    }
    for (std::size_t begin = 0; begin < allocating.size();) {
      const std::uint64_t warp = allocating[begin] / warp_lanes;
      std::size_t end = begin;
      warp_bytes.clear();
      for (; end < allocating.size() && allocating[end] / warp_lanes == warp; ++end)
        warp_bytes.push_back(testing::million::bytes_of(w, step, allocating[end]));
      heap.allocate_warp(warp_bytes, std::span(warp_out).first(warp_bytes.size()));
      for (std::size_t k = begin; k < end; ++k) {
        ++o.attempts;
        const Allocation& got = warp_out[k - begin];
        if (got.kind == Allocation::Kind::refused) o.first_refused_step = std::min(o.first_refused_step, step);
        slots[testing::million::slot_of(w, step, allocating[k])] = got;  // a refused slot stays empty
      }
      begin = end;
    }
    o.last = heap.bytes();
    o.peak.live_requested = std::max(o.peak.live_requested, o.last.live_requested);
    o.peak.region_reserved = std::max(o.peak.region_reserved, o.last.region_reserved);
    o.peak.small_held = std::max(o.peak.small_held, o.last.small_held);
  }
  o.refused = heap.refused_lanes;
  o.small_fallbacks = heap.small_fallbacks;
  return o;
}

double in_mib(std::uint64_t bytes) { return static_cast<double>(bytes) / mib; }

void report(const char* name, const Workload& w, const HeapModel& heap, const Outcome& o) {
  std::printf(
      "%s: %llu lanes x %u slots, %u steps, %llu-%llu B (1 in %llu: "
      "%llu-%llu B); heap %.0f MiB, small area "
      "%.0f MiB\n",
      name, static_cast<unsigned long long>(w.threads), w.slots, w.steps, static_cast<unsigned long long>(w.small_lo),
      static_cast<unsigned long long>(w.small_hi), static_cast<unsigned long long>(w.large_one_in),
      static_cast<unsigned long long>(w.large_lo), static_cast<unsigned long long>(w.large_hi),
      in_mib(heap.shares().small_bytes + o.last.region_space), in_mib(heap.shares().small_bytes));
  std::printf(
      "  %llu allocations, %llu refused (from step %d; -1: none), %llu "
      "small lanes the slabs could not serve; at the "
      "peaks: live %.0f MiB, slabs held %.0f MiB, regions reserved "
      "%.0f of %.0f MiB\n",
      static_cast<unsigned long long>(o.attempts), static_cast<unsigned long long>(o.refused),
      o.refused == 0 ? -1 : static_cast<int>(o.first_refused_step), static_cast<unsigned long long>(o.small_fallbacks),
      in_mib(o.peak.live_requested), in_mib(o.peak.small_held), in_mib(o.peak.region_reserved),
      in_mib(o.last.region_space));
  if (o.refused != 0)
    std::printf(
        "  first refusal: a region of %llu B with %.0f MiB live, %.0f MiB of "
        "slabs held, regions reserved "
        "%.0f of %.0f MiB\n",
        static_cast<unsigned long long>(heap.first_refused_region_bytes), in_mib(heap.at_first_refusal.live_requested),
        in_mib(heap.at_first_refusal.small_held), in_mib(heap.at_first_refusal.region_reserved),
        in_mib(heap.at_first_refusal.region_space));
}

// The GPU test's workload and heap (4 GiB: a 1 GiB small area, 3 GiB for regions), twice its steps:
// no lane is refused, with the live bytes under a fifth of the heap.
TEST(MillionLanesReplay, SmallBlocksTo256BytesAndOneLargeInSixtyFourRefuseNothing) {
  const Workload w{.steps = 16};
  HeapModel heap(4 * gib, 0, 0, HeapLayout::aligned);
  const Outcome o = run(w, heap);
  report("GPU test's workload", w, heap, o);
  EXPECT_EQ(o.refused, 0u);
  EXPECT_EQ(o.small_fallbacks, 0u) << "the slabs served every small lane";
  EXPECT_GT(o.attempts, w.steps * w.threads / 2);
  EXPECT_LT(o.peak.live_requested, 4 * gib / 5);
}

// The same with small requests to 1 KB: the live bytes stay under a third of the heap, yet the
// slabs hold several times the small blocks' bytes, the small area runs dry, and the lanes the
// slabs cannot serve fill the regions' space. The known gap (docs/bench/alloc.md).
TEST(MillionLanesReplay, SlabsFreedOnlyWhenEmptyRunTheSmallAreaDryWhileTheHeapHasRoom) {
  for (const HeapLayout layout : {HeapLayout::aligned, HeapLayout::contiguous}) {
    const Workload w{.steps = 12, .small_hi = 1024};
    HeapModel heap(4 * gib, 0, 0, layout);
    const Outcome o = run(w, heap);
    report(layout == HeapLayout::aligned ? "small to 1 KB, aligned" : "small to 1 KB, contiguous", w, heap, o);
    EXPECT_GT(o.refused, o.attempts / 4);
    EXPECT_LT(o.peak.live_requested, 4 * gib / 3) << "refused with two thirds of the heap unused by live data";
    // Refusals start only once the small area is dry (the slabs could not serve a lane) and the
    // regions' space is full: the allocator's own rules refuse only a request that does not fit.
    EXPECT_EQ(heap.at_first_refusal.small_held, heap.shares().small_bytes);
    EXPECT_GT(heap.at_first_refusal.region_reserved, heap.at_first_refusal.region_space - 2 * heap_first_fit_slack);
    EXPECT_LT(heap.at_first_refusal.live_requested, 4 * gib / 4);
  }
}

// The same workload with slabs reused while partly free (modelled): the design the device's fast
// path follows (tickets first; a lane they cannot serve takes a free block of a partly free slab of
// its class) and, for comparison, a class that fills its slabs' free blocks before it takes an
// empty slab.
TEST(MillionLanesReplay, ReusingPartlyFreeSlabsServesTheSameWorkload) {
  for (const SlabReuse reuse : {SlabReuse::partly_free_fallback, SlabReuse::partly_free_first}) {
    for (const HeapLayout layout : {HeapLayout::aligned, HeapLayout::contiguous}) {
      const Workload w{.steps = 12, .small_hi = 1024};
      HeapModel heap(4 * gib, 0, 0, layout, reuse);
      const Outcome o = run(w, heap);
      const std::string name = std::string("small to 1 KB, partly free slabs reused ") +
                               (reuse == SlabReuse::partly_free_first ? "first, " : "as a fallback, ") +
                               (layout == HeapLayout::aligned ? "aligned" : "contiguous");
      report(name.c_str(), w, heap, o);
      EXPECT_EQ(o.refused, 0u);
      EXPECT_EQ(o.small_fallbacks, 0u) << "the slabs served every small lane";
    }
  }
}

// A heap too small for the live data refuses, and only then: a 1 GiB heap against about 0.7 GiB of
// live data kept 4-6 times over.
TEST(MillionLanesReplay, AHeapTooSmallForWhatItKeepsRefusesOnceFull) {
  const Workload w{.steps = 4};
  HeapModel heap(1 * gib, 0, 0, HeapLayout::aligned);
  const Outcome o = run(w, heap);
  report("1 GiB heap", w, heap, o);
  EXPECT_GT(o.refused, 0u);
  EXPECT_GT(heap.at_first_refusal.region_reserved, heap.at_first_refusal.region_space - 2 * heap_first_fit_slack);
  EXPECT_GT(heap.first_refused_region_bytes, 0u);
}

}  // namespace
}  // namespace warpvm::detail::replay

#pragma once
// Connected components by Afforest (Sutton, Ben-Nun and Barak, "Optimizing Parallel Graph
// Connectivity Computation via Subgraph Sampling", IPDPS 2018; the GAP benchmark suite's cc.cc):
// the logic that warpvm-graph-bench's kernels (cc_afforest.cuh) and the host replay in
// tests/apps/afforest_test.cpp share. Host-and-device code without CUDA calls.
//
// A union-find over `parents` (parents[v] = v at the start): link(u, v) hooks the larger of the
// two roots under the smaller with a compare-and-swap, compress(v) points v at its root. Every
// write makes a parent smaller (parents[x] <= x always), so each tree's root is its least
// member: once every edge is linked and every vertex compressed, parents[v] is the least id of
// v's component, workloads::reference_cc's label, with no relabelling pass.
//  1. For round r in [0, neighbour_rounds): link every vertex with its r-th neighbour, then
//     compress.
//  2. Read the roots of `samples` vertices drawn from a seed; the most frequent is (very likely)
//     the giant component's.
//  3. Link every vertex outside it with all its neighbours (links_row), then compress.
// Step 3 is correct whatever the sample says: an edge whose two ends both skip their rows joins
// two vertices that were both in the sampled component already. Its gain is that the rows of
// the giant component (most of an R-MAT graph's edges) are never read.
//
// `Parents` is anything with warpvm::array<std::uint32_t>'s element API: load(i), store(i, v) and
// compare_exchange(i, expected, desired), which leaves the value seen in `expected` on failure. Loads may be stale (another SM's
// write not yet seen): a stale parent is still an ancestor, so a stale read costs a failed
// compare-and-swap, whose returned value moves on, never a wrong answer.

#include "warpvm/detail/host_device.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <algorithm>
#include <cstdint>

namespace warpvm::workloads::afforest {

/// Neighbours each vertex links with before the sample (GAPBS's neighbor_rounds).
inline constexpr std::uint32_t neighbour_rounds = 2;
/// Vertices whose roots the sample reads (GAPBS's num_samples).
inline constexpr std::uint32_t samples = 1024;

/// The root of x's tree (x itself when it is one). Parents only fall along a path, so the walk
/// ends.
template <class Parents>
WARPVM_HD std::uint32_t find_root(const Parents& parents, std::uint32_t x) {
  for (std::uint32_t up = parents.load(x); up != x; up = parents.load(x)) x = up;
  return x;
}

/// Joins the sets of u and v: the larger root is hooked under the smaller one with a
/// compare-and-swap that succeeds only while it is still a root; on failure the value seen is
/// its new parent, so the larger of the two candidates falls every round and the loop ends.
template <class Parents>
WARPVM_HD void link(const Parents& parents, std::uint32_t u, std::uint32_t v) {
  std::uint32_t a = find_root(parents, u), b = find_root(parents, v);
  while (a != b) {
    const std::uint32_t high = a > b ? a : b, low = a > b ? b : a;
    std::uint32_t seen = high;
    if (parents.compare_exchange(high, seen, low)) return;  // hooked: low may no longer be a root, but it is in the other set
    a = find_root(parents, seen);
    b = find_root(parents, low);
  }
}

/// Points v straight at its root; writes only when that changes v's parent (a paged store dirties
/// its page). Run when no link is in flight, so that the roots stay put.
template <class Parents>
WARPVM_HD void compress(const Parents& parents, std::uint32_t v) {
  const std::uint32_t up = parents.load(v);
  const std::uint32_t root = find_root(parents, up);
  if (root != up) parents.store(v, root);
}

/// Step 1 for vertex v and round r: links v with its r-th neighbour, if it has one. `Offsets`
/// and `Columns` are the CSR's arrays (pointers or warpvm arrays).
template <class Offsets, class Columns, class Parents>
WARPVM_HD void link_neighbour(const Offsets& offsets, const Columns& columns, const Parents& parents, std::uint32_t v,
                              std::uint32_t round) {
  const std::uint64_t begin = offsets[v], end = offsets[v + 1];
  if (begin + round < end) link(parents, v, columns[begin + round]);
}

/// The i-th sampled vertex (i < samples) of a graph of `vertices` vertices (at least one): drawn
/// with replacement, a pure function of (seed, i).
WARPVM_HD_INLINE std::uint32_t sample_vertex(std::uint32_t i, std::uint64_t vertices, std::uint64_t seed) {
  return static_cast<std::uint32_t>(workloads::mix64(workloads::mix64(seed ^ 0xa4093822299f31d0ull) + i) % vertices);
}

/// The most frequent of `count` (at least one) values, the least of them on a tie. Sorts `values`
/// in place. Host only: the sample's roots come back to the host to be counted.
inline std::uint32_t most_frequent(std::uint32_t* values, std::uint32_t count) {
  std::sort(values, values + count);
  std::uint32_t best = values[0], best_run = 0;
  for (std::uint32_t begin = 0; begin < count;) {
    std::uint32_t end = begin + 1;
    while (end < count && values[end] == values[begin]) ++end;
    if (end - begin > best_run) {  // strictly more: an earlier (smaller) value keeps a tie
      best = values[begin];
      best_run = end - begin;
    }
    begin = end;
  }
  return best;
}

/// Step 3's test for a compressed vertex (`root` its parent): its row is walked unless it is in
/// the sampled component or all its entries were linked in step 1 already.
WARPVM_HD_INLINE bool links_row(std::uint32_t root, std::uint32_t giant, std::uint64_t degree) {
  return root != giant && degree > neighbour_rounds;
}

}  // namespace warpvm::workloads::afforest

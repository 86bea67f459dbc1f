#pragma once
// The random-walk graph clustering workload of the allocator paper (AlignMalloc, Sections II-A
// and VII-H; issues #4 and #5), the part shared by the GPU kernels of warpvm-walk-bench and the
// host replay that checks them. Host-and-device code without CUDA calls (host-tested in
// tests/apps/random_walk_test.cpp).
//
// The graph (a CSR) is split into one piece per walker: walker w owns the vertices
// [first_vertex(w), first_vertex(w + 1)) and holds their adjacency lists, back to back, in one
// allocation it makes itself inside a kernel (the build phase). Walks then cross the pieces of
// every walker: a walker at v reads edge k of v from the piece of v's owner, at
// offsets[v] - offsets[first_vertex(owner)] + k (the row offsets stay a plain directory). Each
// step draws 64 bits from a counter-based generator keyed by (seed, walker, step), so a walk is
// a pure function of the graph and the seed, whatever the interleaving: the device's visit
// counts and per-walker path hashes equal the host's replay exactly.

#include "warpvm/detail/host_device.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace warpvm::workloads::walk {

/// splitmix64's finaliser: a bijection of the word with full avalanche.
WARPVM_HD_INLINE std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Who owns which vertices, and what each walk draws.
struct WalkPlan {
  std::uint64_t vertices = 0;  ///< of the graph (at least 1)
  std::uint32_t walkers = 0;   ///< at least 1; walkers beyond `vertices` own no vertex
  std::uint32_t steps = 0;     ///< moves per walk (the start is visited too)
  std::uint64_t seed = 1;

  /// The first vertex walker w owns (w in [0, walkers]; first_vertex(walkers) == vertices).
  [[nodiscard]] WARPVM_HD std::uint64_t first_vertex(std::uint64_t w) const { return w * vertices / walkers; }
  /// The walker that owns v: the largest w with first_vertex(w) <= v, i.e. w * vertices <
  /// (v + 1) * walkers.
  [[nodiscard]] WARPVM_HD std::uint32_t owner(std::uint64_t v) const {
    return static_cast<std::uint32_t>(((v + 1) * walkers - 1) / vertices);
  }
  /// 64 random bits for step `step` of walker w (step 0 picks the start).
  [[nodiscard]] WARPVM_HD std::uint64_t draw(std::uint32_t w, std::uint32_t step) const {
    return mix(mix(seed ^ 0x6a09e667f3bcc909ull) + (std::uint64_t{w} << 32 | step) * 0x9e3779b97f4a7c15ull);
  }
};

/// The edges walker w's piece holds: the rows of its vertices, which start at offsets[first_vertex(w)].
[[nodiscard]] WARPVM_HD_INLINE std::uint64_t piece_edges(const WalkPlan& plan, const std::uint64_t* offsets,
                                                         std::uint32_t w) {
  return offsets[plan.first_vertex(w + 1)] - offsets[plan.first_vertex(w)];
}

/// Where edge k of vertex v lives: the piece of walker `piece`, at element `index`.
struct EdgeLocation {
  std::uint32_t piece;
  std::uint64_t index;
};

[[nodiscard]] WARPVM_HD_INLINE EdgeLocation locate(const WalkPlan& plan, const std::uint64_t* offsets,
                                                   std::uint64_t v, std::uint64_t k) {
  const std::uint32_t owner = plan.owner(v);
  return {owner, offsets[v] - offsets[plan.first_vertex(owner)] + k};
}

/// Folds a visited vertex into a walk's path hash (order-sensitive: any wrong step changes it).
WARPVM_HD_INLINE std::uint64_t fold(std::uint64_t hash, std::uint64_t v) { return mix(hash ^ (v + 1)); }

/// Walker w's walk: `visit(v)` for the start and after every step; returns the path hash.
/// A step from v moves to neighbour k of v, k drawn uniformly and read with edge_at(v, k); from
/// a vertex without one it jumps to a vertex drawn uniformly (so every walk takes `steps` steps).
template <class EdgeAt, class Visit>
WARPVM_HD std::uint64_t walk(const WalkPlan& plan, const std::uint64_t* offsets, std::uint32_t w, EdgeAt&& edge_at,
                             Visit&& visit) {
  std::uint64_t v = plan.draw(w, 0) % plan.vertices;
  std::uint64_t hash = fold(plan.seed, v);
  visit(v);
  for (std::uint64_t step = 1; step <= plan.steps; ++step) {  // 64-bit: steps may be 2^32 - 1
    const std::uint64_t bits = plan.draw(w, static_cast<std::uint32_t>(step)), degree = offsets[v + 1] - offsets[v];
    v = degree == 0 ? bits % plan.vertices : std::uint64_t{edge_at(v, bits % degree)};
    hash = fold(hash, v);
    visit(v);
  }
  return hash;
}

/// What the walks produce: visits per vertex (the clustering signal: where walks concentrate)
/// and each walker's path hash.
struct WalkResult {
  std::vector<std::uint32_t> visits;
  std::vector<std::uint64_t> path_hashes;
};

/// The host replay of every walk on the CSR itself (no pieces): the reference the GPU must match.
inline WalkResult reference_walks(const WalkPlan& plan, std::span<const std::uint64_t> offsets,
                                  std::span<const std::uint32_t> columns) {
  WalkResult r{std::vector<std::uint32_t>(plan.vertices), std::vector<std::uint64_t>(plan.walkers)};
  for (std::uint32_t w = 0; w < plan.walkers; ++w)
    r.path_hashes[w] = walk(
        plan, offsets.data(), w,
        [&](std::uint64_t v, std::uint64_t k) { return columns[offsets[v] + k]; },
        [&](std::uint64_t v) { ++r.visits[v]; });
  return r;
}

}  // namespace warpvm::workloads::walk

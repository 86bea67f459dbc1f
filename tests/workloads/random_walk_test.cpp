// The random-walk clustering workload's shared logic (warpvm/workloads/walk/random_walk.cuh), which
// warpvm-walk-bench's kernels run and its host replay checks: the split of the vertices among
// the walkers, walks read from the walkers' pieces equal to walks read from the CSR, every step
// along an edge (or a jump from a vertex without one), and the draws a pure function of
// (seed, walker, step).

#include "graph_test_support.hpp"
#include "warpvm/workloads/walk/random_walk.cuh"
#include "warpvm/workloads/graph/graph_inputs.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace warpvm::workloads::walk {
namespace {

using workloads::graph_testing::Csr;

/// Every walk again, each edge read from the piece of its vertex's owner (the pieces built as the
/// bench's build kernel builds them), as the GPU reads them.
WalkResult walks_over_pieces(const WalkPlan& plan, const Csr& g) {
  std::vector<std::vector<std::uint32_t>> pieces(plan.walkers);
  for (std::uint32_t w = 0; w < plan.walkers; ++w) {
    const std::uint64_t first = g.offsets[plan.first_vertex(w)];
    pieces[w].assign(g.columns.begin() + static_cast<std::ptrdiff_t>(first),
                     g.columns.begin() + static_cast<std::ptrdiff_t>(first + piece_edges(plan, g.offsets.data(), w)));
  }
  WalkResult r{std::vector<std::uint32_t>(plan.vertices), std::vector<std::uint64_t>(plan.walkers)};
  for (std::uint32_t w = 0; w < plan.walkers; ++w)
    r.path_hashes[w] = walk(
        plan, g.offsets.data(), w,
        [&](std::uint64_t v, std::uint64_t k) {
          const EdgeLocation at = locate(plan, g.offsets.data(), v, k);
          return pieces.at(at.piece).at(at.index);
        },
        [&](std::uint64_t v) { ++r.visits[v]; });
  return r;
}

Csr uniform_graph(unsigned scale, unsigned edge_factor, std::uint64_t seed) {
  const workloads::UniformParams p{.scale = scale, .edge_factor = edge_factor, .seed = seed};
  Csr g{std::vector<std::uint64_t>(p.vertices() + 1), std::vector<std::uint32_t>(p.directed_edges())};
  workloads::build_uniform_csr(p, g.offsets, g.columns);
  return g;
}

TEST(RandomWalk, WalkersSplitTheVerticesIntoConsecutiveRanges) {
  for (const auto& [vertices, walkers] : std::vector<std::pair<std::uint64_t, std::uint32_t>>{
           {1, 1}, {1, 5}, {16384, 1000}, {1000, 1000}, {65536, 1000}, {7, 3}, {100, 1000}, {1ull << 31, 1u << 31}}) {
    const WalkPlan plan{.vertices = vertices, .walkers = walkers};
    EXPECT_EQ(plan.first_vertex(0), 0u);
    EXPECT_EQ(plan.first_vertex(walkers), vertices);
    for (std::uint64_t w = 0; w < std::min<std::uint64_t>(walkers, 5000); ++w)
      EXPECT_LE(plan.first_vertex(w), plan.first_vertex(w + 1));
    // Every vertex in its owner's range (sampled for the largest plan).
    const std::uint64_t stride = std::max<std::uint64_t>(1, vertices / 100000);
    for (std::uint64_t v = 0; v < vertices; v += stride) {
      const std::uint32_t o = plan.owner(v);
      ASSERT_LT(o, walkers) << "vertex " << v;
      ASSERT_LE(plan.first_vertex(o), v) << "vertex " << v;
      ASSERT_LT(v, plan.first_vertex(std::uint64_t{o} + 1)) << "vertex " << v;
    }
    // With no more walkers than vertices, each walker owns at least one vertex.
    if (walkers <= vertices) {
      EXPECT_EQ(plan.owner(vertices - 1), walkers - 1);
      for (std::uint64_t w = 0; w < std::min<std::uint64_t>(walkers, 5000); ++w)
        EXPECT_LT(plan.first_vertex(w), plan.first_vertex(w + 1));
    }
  }
}

TEST(RandomWalk, PiecesHoldEveryEdgeOnce) {
  const Csr g = workloads::graph_testing::make(workloads::RmatParams{.scale = 10, .edge_factor = 8, .seed = 3});
  for (const std::uint32_t walkers : {1u, 7u, 1000u, 3000u}) {
    const WalkPlan plan{.vertices = g.offsets.size() - 1, .walkers = walkers};
    std::uint64_t total = 0;
    for (std::uint32_t w = 0; w < walkers; ++w) total += piece_edges(plan, g.offsets.data(), w);
    EXPECT_EQ(total, g.columns.size()) << walkers << " walkers";
    // Edge k of v sits at the right place of its owner's piece.
    for (std::uint64_t v = 0; v + 1 < g.offsets.size(); v += 37)
      for (std::uint64_t k = 0; k < g.offsets[v + 1] - g.offsets[v]; ++k) {
        const EdgeLocation at = locate(plan, g.offsets.data(), v, k);
        ASSERT_LT(at.index, piece_edges(plan, g.offsets.data(), at.piece));
        EXPECT_EQ(g.offsets[plan.first_vertex(at.piece)] + at.index, g.offsets[v] + k);
      }
  }
}

TEST(RandomWalk, WalksOverPiecesEqualTheReplay) {
  const Csr rmat = workloads::graph_testing::make(workloads::RmatParams{.scale = 12, .edge_factor = 16, .seed = 1});
  const Csr uniform = uniform_graph(11, 4, 9);
  for (const Csr* g : {&rmat, &uniform})
    for (const std::uint32_t walkers : {1u, 33u, 1000u, 5000u}) {
      const WalkPlan plan{.vertices = g->offsets.size() - 1, .walkers = walkers, .steps = 200, .seed = 17};
      const WalkResult expected = reference_walks(plan, g->offsets, g->columns);
      const WalkResult pieces = walks_over_pieces(plan, *g);
      EXPECT_EQ(pieces.visits, expected.visits) << walkers << " walkers";
      EXPECT_EQ(pieces.path_hashes, expected.path_hashes) << walkers << " walkers";
      EXPECT_EQ(std::accumulate(expected.visits.begin(), expected.visits.end(), std::uint64_t{0}),
                std::uint64_t{walkers} * (plan.steps + 1));
    }
}

TEST(RandomWalk, EveryStepFollowsAnEdgeOrJumpsFromAVertexWithoutOne) {
  // Vertices 5 and 6 have no edge: walks reaching them jump.
  const Csr g = workloads::graph_testing::csr_from_edges(8, {{0, 1}, {1, 2}, {2, 3}, {3, 0}, {0, 2}, {4, 4}, {7, 1}});
  const WalkPlan plan{.vertices = 8, .walkers = 64, .steps = 300, .seed = 5};
  std::uint64_t jumps = 0;
  for (std::uint32_t w = 0; w < plan.walkers; ++w) {
    std::vector<std::uint64_t> path;
    walk(plan, g.offsets.data(), w, [&](std::uint64_t v, std::uint64_t k) { return g.columns[g.offsets[v] + k]; },
         [&](std::uint64_t v) { path.push_back(v); });
    ASSERT_EQ(path.size(), plan.steps + 1u);
    for (std::size_t i = 1; i < path.size(); ++i) {
      const auto row = std::span(g.columns).subspan(g.offsets[path[i - 1]], g.offsets[path[i - 1] + 1] - g.offsets[path[i - 1]]);
      if (row.empty()) ++jumps;
      else ASSERT_TRUE(std::binary_search(row.begin(), row.end(), path[i])) << path[i - 1] << " -> " << path[i];
    }
  }
  EXPECT_GT(jumps, 0u);  // starts are drawn over all vertices, so some walk starts at 5 or 6
}

TEST(RandomWalk, DrawsArePerWalkerAndStepAndFollowTheSeed) {
  const WalkPlan plan{.vertices = 1u << 20, .walkers = 1000, .steps = 100, .seed = 1};
  std::set<std::uint64_t> seen;
  for (std::uint32_t w = 0; w < 200; ++w)
    for (std::uint32_t s = 0; s <= 50; ++s) seen.insert(plan.draw(w, s));
  EXPECT_EQ(seen.size(), 200u * 51u);
  WalkPlan other = plan;
  other.seed = 2;
  EXPECT_NE(plan.draw(3, 4), other.draw(3, 4));
  const Csr g = uniform_graph(10, 8, 1);
  WalkPlan a{.vertices = 1024, .walkers = 100, .steps = 50, .seed = 1}, b = a;
  b.seed = 2;
  EXPECT_EQ(reference_walks(a, g.offsets, g.columns).path_hashes, reference_walks(a, g.offsets, g.columns).path_hashes);
  EXPECT_NE(reference_walks(a, g.offsets, g.columns).path_hashes, reference_walks(b, g.offsets, g.columns).path_hashes);
}

}  // namespace
}  // namespace warpvm::workloads::walk

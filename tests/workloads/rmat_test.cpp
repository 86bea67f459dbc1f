// The R-MAT generator and the reference BFS (warpvm/workloads/graph/rmat.hpp): a graph is a pure
// function of its parameters, whatever the threads; its CSR is well formed and symmetric; the
// reference search gives valid levels, the same serial and threaded.

#include "graph_test_support.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

namespace warpvm::workloads {
namespace {

using graph_testing::Csr;
using graph_testing::csr_from_edges;
using graph_testing::make;
using graph_testing::ThreadedFor;

TEST(Rmat, SameSeedSameGraphWhateverTheThreads) {
  const RmatParams p{.scale = 12, .edge_factor = 16, .seed = 42};
  const Csr serial = make(p);
  const Csr again = make(p);
  const Csr threaded = make(p, ThreadedFor{});
  EXPECT_EQ(serial.offsets, again.offsets);
  EXPECT_EQ(serial.columns, again.columns);
  EXPECT_EQ(serial.offsets, threaded.offsets);
  EXPECT_EQ(serial.columns, threaded.columns);

  const Csr other = make(RmatParams{.scale = 12, .edge_factor = 16, .seed = 43});
  EXPECT_NE(serial.columns, other.columns) << "the seed must change the graph";
}

TEST(Rmat, CsrIsWellFormed) {
  const RmatParams p{.scale = 13, .edge_factor = 8, .seed = 7};
  const Csr g = make(p, ThreadedFor{});
  ASSERT_NO_FATAL_FAILURE(graph_testing::expect_well_formed(g.offsets, g.columns, p.vertices(), p.directed_edges()));
}

TEST(Rmat, EveryEdgeIsStoredBothWays) {
  const RmatParams p{.scale = 10, .edge_factor = 16, .seed = 3};
  const Csr g = make(p);
  std::vector<std::pair<std::uint32_t, std::uint32_t>> forward, backward;
  for (std::uint32_t v = 0; v < p.vertices(); ++v) {
    for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) {
      forward.emplace_back(v, g.columns[e]);
      backward.emplace_back(g.columns[e], v);
    }
  }
  std::sort(forward.begin(), forward.end());
  std::sort(backward.begin(), backward.end());
  EXPECT_EQ(forward, backward);
}

TEST(Rmat, DegreesAreSkewedAndHubsAreSpread) {
  const RmatParams p{.scale = 14, .edge_factor = 16, .seed = 11};
  const Csr g = make(p, ThreadedFor{});
  std::vector<std::uint64_t> degree(p.vertices());
  for (std::uint64_t v = 0; v < p.vertices(); ++v) degree[v] = g.offsets[v + 1] - g.offsets[v];
  const std::uint64_t average = 2 * p.edge_factor;
  const auto hub = std::max_element(degree.begin(), degree.end());
  // R-MAT with a = 0.57: a few vertices carry many times the average degree, many have none.
  EXPECT_GT(*hub, 20 * average);
  EXPECT_GT(std::count(degree.begin(), degree.end(), 0u), static_cast<std::ptrdiff_t>(p.vertices() / 10));
  // Without relabelling the largest hub would be vertex 0.
  EXPECT_NE(hub - degree.begin(), 0);
}

TEST(Rmat, RelabellingIsAPermutation) {
  for (unsigned scale : {1u, 2u, 5u, 12u}) {
    const RmatEdges edges(RmatParams{.scale = scale, .seed = 99});
    std::vector<bool> seen(std::size_t{1} << scale, false);
    for (std::uint64_t v = 0; v < seen.size(); ++v) {
      const std::uint32_t w = edges.relabel(v);
      ASSERT_LT(w, seen.size());
      EXPECT_FALSE(seen[w]) << "scale " << scale << ": " << w << " hit twice";
      seen[w] = true;
    }
  }
}

TEST(Rmat, RefusesWhatItCannotRepresent) {
  EXPECT_THROW(RmatParams{.scale = 0}.validate(), std::invalid_argument);
  EXPECT_THROW(RmatParams{.scale = 32}.validate(), std::invalid_argument);
  EXPECT_THROW(RmatParams{.edge_factor = 0}.validate(), std::invalid_argument);
  EXPECT_THROW((RmatParams{.a = 0.6, .b = 0.3, .c = 0.2}.validate()), std::invalid_argument);
  std::vector<std::uint64_t> offsets(10);
  std::vector<std::uint32_t> columns(10);
  EXPECT_THROW(build_rmat_csr(RmatParams{.scale = 4}, offsets, columns), std::invalid_argument);
}

TEST(ReferenceBfs, LevelsOnAHandMadeGraph) {
  // 0 - 1 - 2 - 3, 0 - 4, 4 - 2, 5 alone, 6 - 6 (a self-loop).
  const auto [offsets, columns] = csr_from_edges(7, {{0, 1}, {1, 2}, {2, 3}, {0, 4}, {4, 2}, {6, 6}});
  const std::vector<std::uint32_t> levels = reference_bfs(offsets, columns, 0);
  EXPECT_EQ(levels, (std::vector<std::uint32_t>{0, 1, 2, 3, 1, bfs_unreached, bfs_unreached}));
  EXPECT_EQ(check_bfs_levels(offsets, columns, 0, levels), "");

  const BfsWork work = bfs_work(offsets, levels);
  EXPECT_EQ(work.reached, 5u);
  EXPECT_EQ(work.depth, 4u);
  EXPECT_EQ(work.scanned_edges, 10u);   // degrees 2 + 2 + 3 + 1 + 2
  EXPECT_EQ(work.traversed_edges(), 5u);
  EXPECT_EQ(work.csr_bytes_touched, 6 * 8 + 10 * 4u);  // offsets[0..5] and the 10 entries

  std::vector<std::uint32_t> wrong = levels;
  wrong[3] = 1;  // a level with no neighbour one level up
  EXPECT_NE(check_bfs_levels(offsets, columns, 0, wrong), "");
  wrong = levels;
  wrong[5] = 2;  // unreachable, yet given a level
  EXPECT_NE(check_bfs_levels(offsets, columns, 0, wrong), "");
}

TEST(ReferenceBfs, ValidAndTheSameSerialAndThreadedOnRmat) {
  const RmatParams p{.scale = 14, .edge_factor = 16, .seed = 5};
  const Csr g = make(p, ThreadedFor{});
  const std::vector<std::uint32_t> roots = pick_roots(g.offsets, g.columns, 4, 1);
  ASSERT_EQ(roots.size(), 4u);
  for (const std::uint32_t root : roots) {
    SCOPED_TRACE(root);
    const std::vector<std::uint32_t> serial = reference_bfs(g.offsets, g.columns, root);
    EXPECT_EQ(check_bfs_levels(g.offsets, g.columns, root, serial), "");
    EXPECT_EQ(reference_bfs(g.offsets, g.columns, root, ThreadedFor{}), serial);
    const BfsWork work = bfs_work(g.offsets, serial);
    EXPECT_GT(work.reached, p.vertices() / 2);  // R-MAT's giant component
    EXPECT_GT(work.depth, 2u);
    EXPECT_LE(work.scanned_edges, p.directed_edges());
  }
}

TEST(ReferenceBfs, RootsAreDistinctConnectedAndDeterministic) {
  const RmatParams p{.scale = 10, .edge_factor = 4, .seed = 8};
  const Csr g = make(p);
  const std::vector<std::uint32_t> roots = pick_roots(g.offsets, g.columns, 16, 3);
  ASSERT_EQ(roots.size(), 16u);
  EXPECT_EQ(roots, pick_roots(g.offsets, g.columns, 16, 3));
  for (std::size_t i = 0; i < roots.size(); ++i) {
    EXPECT_EQ(std::count(roots.begin(), roots.end(), roots[i]), 1);
    EXPECT_GT(g.offsets[roots[i] + 1], g.offsets[roots[i]]);
  }
}

}  // namespace
}  // namespace warpvm::workloads

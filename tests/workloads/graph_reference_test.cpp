// Edge weights and the CPU references for connected components and shortest paths
// (warpvm/workloads/graph/graph_reference.hpp): exact answers on hand-made graphs, and on R-MAT
// graphs agreement with independent slower methods (BFS per component, Bellman-Ford), the same
// serial and threaded.

#include "graph_test_support.hpp"
#include "warpvm/workloads/graph/graph_reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <set>
#include <utility>
#include <vector>

namespace warpvm::workloads {
namespace {

using graph_testing::Csr;
using graph_testing::csr_from_edges;
using graph_testing::make;
using graph_testing::ThreadedFor;

/// weights[e] = weight(v, columns[e]) along the CSR.
std::vector<std::uint32_t> weights_of(const Csr& g, const std::function<std::uint32_t(std::uint32_t, std::uint32_t)>& weight) {
  std::vector<std::uint32_t> weights(g.columns.size());
  for (std::uint32_t v = 0; v + 1 < g.offsets.size(); ++v)
    for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) weights[e] = weight(v, g.columns[e]);
  return weights;
}

/// Components found by a BFS from each vertex not yet labelled, in increasing order: labels are
/// then the least id of each component by construction.
std::vector<std::uint32_t> components_by_bfs(const Csr& g) {
  const std::uint64_t n = g.offsets.size() - 1;
  std::vector<std::uint32_t> labels(n, bfs_unreached);
  for (std::uint32_t v = 0; v < n; ++v) {
    if (labels[v] != bfs_unreached) continue;
    const std::vector<std::uint32_t> levels = reference_bfs(g.offsets, g.columns, v);
    for (std::uint64_t u = 0; u < n; ++u)
      if (levels[u] != bfs_unreached) labels[u] = v;
  }
  return labels;
}

/// Bellman-Ford: relax every edge until nothing changes.
std::vector<std::uint32_t> distances_by_bellman_ford(const Csr& g, const std::vector<std::uint32_t>& weights,
                                                     std::uint32_t root) {
  const std::uint64_t n = g.offsets.size() - 1;
  std::vector<std::uint64_t> d(n, UINT64_MAX);
  d[root] = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (std::uint64_t v = 0; v < n; ++v) {
      if (d[v] == UINT64_MAX) continue;
      for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e)
        if (d[v] + weights[e] < d[g.columns[e]]) {
          d[g.columns[e]] = d[v] + weights[e];
          changed = true;
        }
    }
  }
  std::vector<std::uint32_t> out(n);
  for (std::uint64_t v = 0; v < n; ++v) out[v] = d[v] == UINT64_MAX ? sssp_unreached : static_cast<std::uint32_t>(d[v]);
  return out;
}

TEST(EdgeWeights, SymmetricInRangeVariedAndDeterministic) {
  const RmatParams p{.scale = 12, .edge_factor = 8, .seed = 21};
  const Csr g = make(p);
  std::vector<std::uint32_t> weights(g.columns.size()), threaded(g.columns.size()), other(g.columns.size());
  fill_edge_weights(g.offsets, g.columns, weights, 5);
  fill_edge_weights(g.offsets, g.columns, threaded, 5, ThreadedFor{});
  fill_edge_weights(g.offsets, g.columns, other, 6);
  EXPECT_EQ(weights, threaded);
  EXPECT_NE(weights, other) << "the seed must change the weights";
  std::set<std::uint32_t> seen;
  for (std::uint32_t v = 0; v < p.vertices(); ++v)
    for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) {
      const std::uint32_t u = g.columns[e];
      ASSERT_GE(weights[e], 1u);
      ASSERT_LE(weights[e], max_edge_weight);
      seen.insert(weights[e]);
      // The way back, u -> v, weighs the same (rows are sorted: find v in u's row).
      const auto row = g.columns.begin() + static_cast<std::ptrdiff_t>(g.offsets[u]);
      const auto back = std::lower_bound(row, g.columns.begin() + static_cast<std::ptrdiff_t>(g.offsets[u + 1]), v);
      ASSERT_EQ(*back, v);
      ASSERT_EQ(weights[static_cast<std::uint64_t>(back - g.columns.begin())], weights[e]) << v << " - " << u;
    }
  EXPECT_EQ(seen.size(), max_edge_weight) << "a graph of 64 Ki edges should use every weight";
}

TEST(EdgeWeights, RefusesAMisalignedArray) {
  const Csr g = csr_from_edges(3, {{0, 1}, {1, 2}});
  std::vector<std::uint32_t> weights(g.columns.size() - 1);
  EXPECT_THROW(fill_edge_weights(g.offsets, g.columns, weights, 1), std::invalid_argument);
}

TEST(ReferenceCc, LabelsOnAHandMadeGraph) {
  // {0, 3, 5} through 5 - 3 - 0; {1, 2, 4} a triangle with a duplicate edge; 6 alone; 7 with a self-loop.
  const Csr g = csr_from_edges(8, {{5, 3}, {3, 0}, {4, 2}, {2, 1}, {1, 4}, {4, 2}, {7, 7}});
  const std::vector<std::uint32_t> expected{0, 1, 1, 0, 1, 0, 6, 7};
  EXPECT_EQ(reference_cc(g.offsets, g.columns), expected);
  EXPECT_EQ(reference_cc(g.offsets, g.columns, ThreadedFor{.workers = 3}), expected);
  const CcWork work = cc_work(expected);
  EXPECT_EQ(work.components, 4u);
  EXPECT_EQ(work.largest_component, 3u);
}

TEST(ReferenceCc, OneWayEntriesJoinTheirEnds) {
  // Only 2 -> 0 and 3 -> 1 are stored: the components of the undirected graph are {0, 2}, {1, 3}.
  const std::vector<std::uint64_t> offsets{0, 0, 0, 1, 2};
  const std::vector<std::uint32_t> columns{0, 1};
  EXPECT_EQ(reference_cc(offsets, columns), (std::vector<std::uint32_t>{0, 1, 0, 1}));
}

TEST(ReferenceCc, LabelsOnAPathGivenInTheWorstOrder) {
  // A path whose edges join ever larger ids to ever smaller ones: linking by id must still
  // leave the least id as every label.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  for (std::uint32_t v = 999; v > 0; --v) edges.emplace_back(v, v - 1);
  const Csr g = csr_from_edges(1000, edges);
  EXPECT_EQ(reference_cc(g.offsets, g.columns), std::vector<std::uint32_t>(1000, 0));
}

TEST(ReferenceCc, MatchesBfsPerComponentOnRmat) {
  for (const std::uint64_t seed : {3u, 4u}) {
    SCOPED_TRACE(seed);
    // Edge factor 2: sparse enough for many components besides the isolated vertices.
    const Csr g = make(RmatParams{.scale = 12, .edge_factor = 2, .seed = seed});
    const std::vector<std::uint32_t> expected = components_by_bfs(g);
    EXPECT_EQ(reference_cc(g.offsets, g.columns), expected);
    EXPECT_EQ(reference_cc(g.offsets, g.columns, ThreadedFor{}), expected);
    const CcWork work = cc_work(expected);
    EXPECT_GT(work.components, 100u);
    EXPECT_GT(work.largest_component, 1000u);
  }
}

TEST(ReferenceSssp, DistancesOnAHandMadeGraph) {
  // 0 -10- 1, 0 -3- 2, 2 -4- 1, 1 -2- 3, 2 -8- 3, 3 -7- 4; 5 alone. 1 is closer through 2.
  const Csr g = csr_from_edges(6, {{0, 1}, {0, 2}, {2, 1}, {1, 3}, {2, 3}, {3, 4}});
  const auto weight = [](std::uint32_t u, std::uint32_t v) -> std::uint32_t {
    const std::pair<std::uint32_t, std::uint32_t> e{std::min(u, v), std::max(u, v)};
    if (e == std::pair<std::uint32_t, std::uint32_t>{0, 1}) return 10;
    if (e == std::pair<std::uint32_t, std::uint32_t>{0, 2}) return 3;
    if (e == std::pair<std::uint32_t, std::uint32_t>{1, 2}) return 4;
    if (e == std::pair<std::uint32_t, std::uint32_t>{1, 3}) return 2;
    if (e == std::pair<std::uint32_t, std::uint32_t>{2, 3}) return 8;
    return 7;  // 3 - 4
  };
  const std::vector<std::uint32_t> weights = weights_of(g, weight);
  EXPECT_EQ(reference_sssp(g.offsets, g.columns, weights, 0),
            (std::vector<std::uint32_t>{0, 7, 3, 9, 16, sssp_unreached}));
  EXPECT_EQ(reference_sssp(g.offsets, g.columns, weights, 4),
            (std::vector<std::uint32_t>{16, 9, 13, 7, 0, sssp_unreached}));
  EXPECT_THROW(reference_sssp(g.offsets, g.columns, weights, 6), std::invalid_argument);
}

TEST(ReferenceSssp, RefusesDistancesBeyondUint32) {
  const Csr g = csr_from_edges(3, {{0, 1}, {1, 2}});
  const std::vector<std::uint32_t> weights(g.columns.size(), 0x80000000u);  // 0 -> 2 is 2^32 away
  EXPECT_THROW(reference_sssp(g.offsets, g.columns, weights, 0), std::overflow_error);
}

TEST(ReferenceSssp, MatchesBellmanFordOnRmat) {
  const RmatParams p{.scale = 11, .edge_factor = 8, .seed = 9};
  const Csr g = make(p);
  std::vector<std::uint32_t> weights(g.columns.size());
  fill_edge_weights(g.offsets, g.columns, weights, p.seed);
  for (const std::uint32_t root : pick_roots(g.offsets, g.columns, 3, 2)) {
    SCOPED_TRACE(root);
    const std::vector<std::uint32_t> distances = reference_sssp(g.offsets, g.columns, weights, root);
    EXPECT_EQ(distances, distances_by_bellman_ford(g, weights, root));
    // Weights never change which vertices are reached.
    const std::vector<std::uint32_t> levels = reference_bfs(g.offsets, g.columns, root);
    for (std::uint64_t v = 0; v < p.vertices(); ++v)
      ASSERT_EQ(distances[v] == sssp_unreached, levels[v] == bfs_unreached) << v;
  }
}

TEST(CertifySssp, AcceptsTheDistancesAndOnlyThem) {
  const RmatParams p{.scale = 12, .edge_factor = 8, .seed = 5};
  const Csr g = make(p);
  std::vector<std::uint32_t> weights(g.columns.size());
  fill_edge_weights(g.offsets, g.columns, weights, p.seed);
  const std::uint32_t root = pick_roots(g.offsets, g.columns, 1, 3).front();
  std::vector<std::uint32_t> d = reference_sssp(g.offsets, g.columns, weights, root);
  EXPECT_EQ(certify_sssp(g.offsets, g.columns, weights, root, d), "");
  EXPECT_EQ(certify_sssp(g.offsets, g.columns, weights, root, d, ThreadedFor{4}), "");
  // A reached vertex other than the root, one far enough that no neighbour is at 0.
  std::uint32_t v = 0;
  while (v == root || d[v] == sssp_unreached || d[v] < 2 * max_edge_weight) ++v;
  const auto wrong_by = [&](std::uint32_t vertex, std::uint32_t value) {
    std::vector<std::uint32_t> changed = d;
    changed[vertex] = value;
    return certify_sssp(g.offsets, g.columns, weights, root, changed, ThreadedFor{4});
  };
  EXPECT_NE(wrong_by(v, d[v] + 1), "") << "too far: no tight neighbour";
  EXPECT_NE(wrong_by(v, d[v] - 1), "") << "too near: some neighbour's tight edge is now short";
  EXPECT_NE(wrong_by(v, sssp_unreached), "") << "unreached beside reached neighbours";
  EXPECT_NE(wrong_by(root, 1), "") << "the root is at 0";
  std::uint32_t isolated = 0;  // a vertex the root does not reach, if any: claiming it reached
  while (isolated < d.size() && d[isolated] != sssp_unreached) ++isolated;
  if (isolated < d.size()) {
    EXPECT_NE(wrong_by(isolated, 5), "") << "a reached vertex with no path";
  }
  // Every distance doubled is self-consistent nowhere but at the root's neighbours: refused.
  std::vector<std::uint32_t> doubled = d;
  for (auto& x : doubled)
    if (x != sssp_unreached) x *= 2;
  EXPECT_NE(certify_sssp(g.offsets, g.columns, weights, root, doubled), "");
}

}  // namespace
}  // namespace warpvm::workloads

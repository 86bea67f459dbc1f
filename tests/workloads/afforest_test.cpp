// Afforest's logic (warpvm/workloads/graph/afforest.hpp), which warpvm-graph-bench's cc_afforest kernels run:
// the union-find's link and compress (also with stale reads), the sample and its most frequent
// root, step 3's test, and the whole algorithm replayed on the host, pass by pass as the kernels
// run it, serial and threaded, against workloads::reference_cc.

#include "warpvm/workloads/graph/afforest.hpp"
#include "graph_test_support.hpp"
#include "warpvm/workloads/graph/graph_reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

namespace warpvm::workloads::afforest {
namespace {

using workloads::graph_testing::Csr;
using workloads::graph_testing::csr_from_edges;
using workloads::graph_testing::make;
using workloads::graph_testing::ThreadedFor;

/// Parents in host memory with warpvm::array's element API, safe for threads.
struct AtomicParents {
  std::uint32_t* parents;
  [[nodiscard]] std::uint32_t load(std::uint64_t i) const {
    return std::atomic_ref(parents[i]).load(std::memory_order_relaxed);
  }
  void store(std::uint64_t i, std::uint32_t value) const { std::atomic_ref(parents[i]).store(value, std::memory_order_relaxed); }
  bool compare_exchange(std::uint64_t i, std::uint32_t& expected, std::uint32_t desired) const {
    return std::atomic_ref(parents[i]).compare_exchange_strong(expected, desired, std::memory_order_relaxed);
  }
};

/// A GPU's worst stale reads, serial: every `period`-th load of i says i is its own parent (the
/// oldest value of parents[i], which a load may still see after i was hooked).
struct StaleParents {
  AtomicParents fresh;
  std::uint32_t period;
  std::uint64_t* loads;
  [[nodiscard]] std::uint32_t load(std::uint64_t i) const {
    return ++*loads % period == 0 ? static_cast<std::uint32_t>(i) : fresh.load(i);
  }
  bool compare_exchange(std::uint64_t i, std::uint32_t& expected, std::uint32_t desired) const {
    return fresh.compare_exchange(i, expected, desired);
  }
};

std::vector<std::uint32_t> identity(std::uint64_t n) {
  std::vector<std::uint32_t> parents(n);
  std::iota(parents.begin(), parents.end(), 0u);
  return parents;
}

struct HostRun {
  std::vector<std::uint32_t> labels;
  std::uint32_t giant = 0;
  std::uint64_t rows_linked = 0, entries_linked = 0;
};

/// The algorithm as cc_afforest.cuh's kernels run it, each kernel a pass over the vertices
/// through `parallel_for`: the neighbour rounds, each compressed; the sample; the selection of
/// step 3's vertices (before any of their links, as afforest_select runs before
/// afforest_link_rows); their rows linked; the last compress.
template <class ParallelFor>
HostRun afforest_on_host(const Csr& g, std::uint64_t seed, ParallelFor&& parallel_for) {
  const std::uint64_t n = g.offsets.size() - 1;
  HostRun run{identity(n)};
  const AtomicParents parents{run.labels.data()};
  auto each_vertex = [&](auto&& body) {
    parallel_for(n, [&](std::uint64_t lo, std::uint64_t hi) {
      for (std::uint64_t v = lo; v < hi; ++v) body(static_cast<std::uint32_t>(v));
    });
  };
  auto degree = [&](std::uint32_t v) { return g.offsets[v + 1] - g.offsets[v]; };
  for (std::uint32_t round = 0; round < neighbour_rounds; ++round) {
    each_vertex([&](std::uint32_t v) { link_neighbour(g.offsets.data(), g.columns.data(), parents, v, round); });
    each_vertex([&](std::uint32_t v) { compress(parents, v); });
  }
  std::vector<std::uint32_t> roots(samples);
  for (std::uint32_t i = 0; i < samples; ++i) roots[i] = parents.load(sample_vertex(i, n, seed));
  run.giant = most_frequent(roots.data(), samples);
  std::vector<char> selected(n, 0);
  each_vertex([&](std::uint32_t v) { selected[v] = links_row(parents.load(v), run.giant, degree(v)); });
  std::atomic<std::uint64_t> rows{0}, entries{0};
  each_vertex([&](std::uint32_t v) {
    if (!selected[v]) return;
    ++rows;
    entries += degree(v);
    for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) link(parents, v, g.columns[e]);
  });
  each_vertex([&](std::uint32_t v) { compress(parents, v); });
  run.rows_linked = rows;
  run.entries_linked = entries;
  return run;
}

TEST(AfforestUnionFind, HooksTheLargerRootUnderTheSmaller) {
  std::vector<std::uint32_t> storage = identity(6);
  const AtomicParents parents{storage.data()};
  link(parents, 3, 1);
  EXPECT_EQ(storage[3], 1u);
  link(parents, 5, 4);
  EXPECT_EQ(storage[5], 4u);
  link(parents, 5, 3);  // roots 4 and 1: 4 goes under 1
  EXPECT_EQ(storage[4], 1u);
  EXPECT_EQ(find_root(parents, 5), 1u);
  link(parents, 4, 3);  // one set already: nothing changes
  EXPECT_EQ(storage, (std::vector<std::uint32_t>{0, 1, 2, 1, 1, 4}));
  compress(parents, 5);
  EXPECT_EQ(storage[5], 1u);
  for (std::uint32_t v = 0; v < storage.size(); ++v) EXPECT_LE(storage[v], v) << "parents only point down";
}

TEST(AfforestUnionFind, StaleReadsOnlyCostRetries) {
  // Stale loads in link make it try hooking vertices that are no longer roots: the failed
  // compare-and-swap returns the real parent and the link goes on from there.
  const Csr g = make(workloads::RmatParams{.scale = 11, .edge_factor = 8, .seed = 3});
  const std::uint64_t n = g.offsets.size() - 1;
  for (const std::uint32_t period : {2u, 3u, 7u}) {
    std::vector<std::uint32_t> storage = identity(n);
    std::uint64_t loads = 0;
    const StaleParents stale{AtomicParents{storage.data()}, period, &loads};
    for (std::uint32_t v = 0; v < n; ++v)
      for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) link(stale, v, g.columns[e]);
    const AtomicParents fresh{storage.data()};
    for (std::uint32_t v = 0; v < n; ++v) compress(fresh, v);
    EXPECT_EQ(storage, workloads::reference_cc(g.offsets, g.columns)) << "period " << period;
  }
}

TEST(AfforestSample, MostFrequentTakesTheLeastOnATie) {
  std::vector<std::uint32_t> one{7};
  EXPECT_EQ(most_frequent(one.data(), 1), 7u);
  std::vector<std::uint32_t> majority{9, 4, 9, 1, 9, 4};
  EXPECT_EQ(most_frequent(majority.data(), 6), 9u);
  EXPECT_TRUE(std::is_sorted(majority.begin(), majority.end()));
  std::vector<std::uint32_t> tie{8, 3, 8, 3, 5};
  EXPECT_EQ(most_frequent(tie.data(), 5), 3u);
  std::vector<std::uint32_t> distinct{6, 2, 9};
  EXPECT_EQ(most_frequent(distinct.data(), 3), 2u);
}

TEST(AfforestSample, VerticesInRangeSpreadAndSeeded) {
  constexpr std::uint64_t vertices = 1 << 20;
  std::set<std::uint32_t> seen;
  bool other_seed_differs = false;
  for (std::uint32_t i = 0; i < samples; ++i) {
    const std::uint32_t v = sample_vertex(i, vertices, 5);
    EXPECT_LT(v, vertices);
    EXPECT_EQ(v, sample_vertex(i, vertices, 5));
    seen.insert(v);
    other_seed_differs |= v != sample_vertex(i, vertices, 6);
  }
  EXPECT_GT(seen.size(), samples - 8) << "1024 draws of 2^20 vertices repeat about once";
  EXPECT_TRUE(other_seed_differs);
  EXPECT_EQ(sample_vertex(3, 1, 5), 0u);  // one vertex: always it
}

TEST(AfforestSample, RowsLinkedOutsideTheSampledComponentOnly) {
  EXPECT_FALSE(links_row(4, 4, 100)) << "the sampled component's rows are skipped";
  EXPECT_FALSE(links_row(3, 4, neighbour_rounds)) << "every entry linked in the neighbour rounds";
  EXPECT_TRUE(links_row(3, 4, neighbour_rounds + 1));
}

TEST(AfforestOnHost, LabelsOnHandMadeGraphs) {
  const std::vector<Csr> graphs = {
      // two triangles' worth of joins, a pair, a self-loop, an isolated vertex (6)
      csr_from_edges(8, {{5, 3}, {3, 0}, {4, 2}, {2, 1}, {1, 4}, {4, 2}, {7, 7}}),
      // a star whose centre is the largest id, and two leaves joined
      csr_from_edges(6, {{5, 0}, {5, 1}, {5, 2}, {5, 3}, {5, 4}, {0, 1}}),
      // no edges but self-loops: every vertex its own component
      csr_from_edges(4, {{0, 0}, {2, 2}}),
  };
  for (std::size_t i = 0; i < graphs.size(); ++i)
    for (const std::uint64_t seed : {1u, 2u, 3u})
      EXPECT_EQ(afforest_on_host(graphs[i], seed, workloads::SerialFor{}).labels,
                workloads::reference_cc(graphs[i].offsets, graphs[i].columns))
          << "graph " << i << ", seed " << seed;
}

TEST(AfforestOnHost, LabelsOnAPathGivenInTheWorstOrder) {
  // A path 999 - 998 - ... - 0: each vertex's only neighbours are its two path neighbours, so the
  // neighbour rounds join everything and the last pass has nothing to walk.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  for (std::uint32_t v = 999; v > 0; --v) edges.emplace_back(v, v - 1);
  const Csr g = csr_from_edges(1000, edges);
  const HostRun run = afforest_on_host(g, 1, ThreadedFor{});
  EXPECT_EQ(run.labels, std::vector<std::uint32_t>(1000, 0u));
  EXPECT_EQ(run.giant, 0u);
  EXPECT_EQ(run.rows_linked, 0u);
}

/// Runs the replay on `g`, serial and threaded, against the reference; returns the serial run.
HostRun expect_reference_labels(const Csr& g, std::uint64_t seed, const char* name) {
  const std::uint64_t n = g.offsets.size() - 1;
  const std::vector<std::uint32_t> reference = workloads::reference_cc(g.offsets, g.columns);
  const HostRun serial = afforest_on_host(g, seed, workloads::SerialFor{});
  const HostRun threaded = afforest_on_host(g, seed, ThreadedFor{});
  EXPECT_EQ(serial.labels, reference) << name;
  EXPECT_EQ(threaded.labels, reference) << name;
  // The sets after the neighbour rounds, and so the sample and the selection, are the same
  // whatever the order of the links: roots are the sets' least members.
  EXPECT_EQ(threaded.giant, serial.giant) << name;
  EXPECT_EQ(threaded.rows_linked, serial.rows_linked) << name;
  EXPECT_EQ(threaded.entries_linked, serial.entries_linked) << name;
  // The sample found (a tree of) the largest component; the rows walked are those of the
  // vertices not yet joined to that tree by the neighbour rounds, at least every vertex outside
  // the component with a row to walk.
  std::vector<std::uint64_t> sizes(n, 0);
  for (const std::uint32_t label : reference) ++sizes[label];
  const auto largest = static_cast<std::uint32_t>(std::max_element(sizes.begin(), sizes.end()) - sizes.begin());
  EXPECT_EQ(reference[serial.giant], largest) << name;
  std::uint64_t outside = 0, round_entries = 0;
  for (std::uint32_t v = 0; v < n; ++v) {
    const std::uint64_t degree = g.offsets[v + 1] - g.offsets[v];
    outside += reference[v] != largest && degree > neighbour_rounds;
    round_entries += std::min<std::uint64_t>(degree, neighbour_rounds);
  }
  EXPECT_GE(serial.rows_linked, outside) << name;
  std::printf("[ %s ] %llu vertices, %zu entries: the neighbour rounds read %llu, the last pass %llu rows, %llu entries (%.1f%%)\n",
              name, static_cast<unsigned long long>(n), g.columns.size(), static_cast<unsigned long long>(round_entries),
              static_cast<unsigned long long>(serial.rows_linked), static_cast<unsigned long long>(serial.entries_linked),
              100.0 * static_cast<double>(serial.entries_linked) / static_cast<double>(g.columns.size()));
  return serial;
}

TEST(AfforestOnHost, LinksTheLastPassJoins) {
  // Rows 10: {0, 1, 9} and 9: {2, 3, 10}: the edge {9, 10} is neither end's first two entries, so
  // only the last pass joins {0, 1, 10} and {2, 3, 9}; 4 to 8 are isolated.
  const Csr g = csr_from_edges(11, {{10, 0}, {10, 1}, {10, 9}, {9, 2}, {9, 3}});
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const HostRun run = expect_reference_labels(g, seed, "two trees");
    EXPECT_EQ(run.rows_linked, 1u) << "the row of whichever of 9 and 10 is outside the sampled tree";
    EXPECT_EQ(run.entries_linked, 3u);
  }
}

TEST(AfforestOnHost, MatchesReferenceOnGeneratedGraphs) {
  // R-MAT, dense and sparse (the neighbour rounds leave the last pass nothing at this size: every
  // vertex with more than two entries is in the sampled tree already), and a sparse uniform graph,
  // where the last pass has rows to walk.
  for (const std::uint64_t seed : {1u, 9u}) {
    expect_reference_labels(make(workloads::RmatParams{.scale = 14, .edge_factor = 16, .seed = seed}), seed, "R-MAT 14, 16");
    expect_reference_labels(make(workloads::RmatParams{.scale = 14, .edge_factor = 2, .seed = seed}), seed, "R-MAT 14, 2");
    const workloads::UniformParams uniform{.scale = 14, .edge_factor = 1, .seed = seed};
    Csr g{std::vector<std::uint64_t>(uniform.vertices() + 1), std::vector<std::uint32_t>(uniform.directed_edges())};
    workloads::build_uniform_csr(uniform, g.offsets, g.columns);
    const HostRun run = expect_reference_labels(g, seed, "uniform 14, 1");
    EXPECT_GT(run.rows_linked, 0u);
  }
}

}  // namespace
}  // namespace warpvm::workloads::afforest

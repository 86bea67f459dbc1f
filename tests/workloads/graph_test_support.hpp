#pragma once
// Shared pieces of the host graph tests (rmat_test.cpp, graph_reference_test.cpp,
// graph_inputs_test.cpp): a threaded parallel_for with uneven splits, CSR graphs generated or made
// by hand, and the well-formedness checks of a generated CSR.

#include "warpvm/workloads/graph/graph_inputs.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace warpvm::workloads::graph_testing {

/// body(begin, end) over [0, n) split across `workers` threads, uneven on purpose.
struct ThreadedFor {
  unsigned workers = 7;
  void operator()(std::uint64_t n, const std::function<void(std::uint64_t, std::uint64_t)>& body) const {
    std::vector<std::thread> pool;
    const std::uint64_t chunk = n / workers + 1;
    for (unsigned w = 0; w < workers; ++w) {
      const std::uint64_t lo = std::min(n, w * chunk), hi = std::min(n, lo + chunk);
      pool.emplace_back([&body, lo, hi] { body(lo, hi); });
    }
    for (auto& t : pool) t.join();
  }
};

struct Csr {
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint32_t> columns;
};

template <class ParallelFor = SerialFor>
Csr make(const RmatParams& p, ParallelFor&& parallel_for = {}) {
  Csr g{std::vector<std::uint64_t>(p.vertices() + 1), std::vector<std::uint32_t>(p.directed_edges())};
  build_rmat_csr(p, g.offsets, g.columns, parallel_for);
  return g;
}

/// The symmetric CSR of `vertices` vertices and these undirected edges, each stored both ways
/// (a self-loop twice in its row, as build_rmat_csr stores it): workloads::csr_from_edges, unweighted.
inline Csr csr_from_edges(std::uint32_t vertices, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges) {
  std::vector<GraphEdge> list;
  list.reserve(edges.size());
  for (const auto& [u, v] : edges) list.push_back({u, v});
  CsrGraph g = workloads::csr_from_edges(vertices, list, /*both_ways=*/true, /*weighted=*/false);
  return {std::move(g.offsets), std::move(g.columns)};
}

/// The checks every generated CSR must pass: `vertices` + 1 offsets from 0 to `entries`, never
/// decreasing, `entries` columns, each row sorted, every column a vertex. Fatal failures return
/// from this function only: call it inside ASSERT_NO_FATAL_FAILURE.
inline void expect_well_formed(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns,
                               std::uint64_t vertices, std::uint64_t entries) {
  ASSERT_EQ(offsets.size(), vertices + 1);
  EXPECT_EQ(offsets.front(), 0u);
  EXPECT_EQ(offsets.back(), entries);
  EXPECT_EQ(columns.size(), entries);
  std::uint64_t degree_sum = 0;
  for (std::uint64_t v = 0; v < vertices; ++v) {
    ASSERT_LE(offsets[v], offsets[v + 1]) << "offsets not monotone at " << v;
    degree_sum += offsets[v + 1] - offsets[v];
    EXPECT_TRUE(std::is_sorted(columns.begin() + static_cast<std::ptrdiff_t>(offsets[v]),
                               columns.begin() + static_cast<std::ptrdiff_t>(offsets[v + 1])));
  }
  EXPECT_EQ(degree_sum, entries);
  EXPECT_TRUE(std::all_of(columns.begin(), columns.end(), [&](std::uint32_t u) { return u < vertices; }));
}

}  // namespace warpvm::workloads::graph_testing

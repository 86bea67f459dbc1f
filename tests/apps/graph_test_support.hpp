#pragma once
// Shared pieces of the host graph tests (rmat_test.cpp, graph_reference_test.cpp): a threaded
// parallel_for with uneven splits, and CSR graphs generated or made by hand.

#include "warpvm/sim/rmat.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace warpvm::sim::graph_testing {

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
/// (a self-loop twice in its row, as build_rmat_csr stores it).
inline Csr csr_from_edges(std::uint32_t vertices, const std::vector<std::pair<std::uint32_t, std::uint32_t>>& edges) {
  std::vector<std::vector<std::uint32_t>> rows(vertices);
  for (const auto& [u, v] : edges) {
    rows[u].push_back(v);
    rows[v].push_back(u);
  }
  Csr g{{0}, {}};
  for (auto& row : rows) {
    std::sort(row.begin(), row.end());
    g.columns.insert(g.columns.end(), row.begin(), row.end());
    g.offsets.push_back(g.columns.size());
  }
  return g;
}

}  // namespace warpvm::sim::graph_testing

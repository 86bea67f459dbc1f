#pragma once
/// @file
/// Graphs for the application benchmarks (issue #5): a deterministic R-MAT (Kronecker) generator
/// with the Graph500 parameters that writes a CSR graph into memory the caller owns (through
/// build_csr, which graph_inputs.hpp's generators and loaders share), and a
/// reference breadth-first search with the Graph500 validity check. Host code only; shared by
/// warpvm-graph-bench, the GPU tests and the host tests (mix64 is host and device code).
///
/// @code
///   const warpvm::workloads::RmatParams p{.scale = 20, .seed = 7};
///   std::vector<std::uint64_t> offsets(p.vertices() + 1);
///   std::vector<std::uint32_t> columns(p.directed_edges());
///   warpvm::workloads::build_rmat_csr(p, offsets, columns);                 // serial; pass a
///   auto levels = warpvm::workloads::reference_bfs(offsets, columns, 0);   // parallel_for to spread it
/// @endcode

#include "warpvm/detail/host_device.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace warpvm::workloads {

/// Level of a vertex the search did not reach.
inline constexpr std::uint32_t bfs_unreached = std::numeric_limits<std::uint32_t>::max();

/// An R-MAT graph: 2^scale vertices, edge_factor x 2^scale undirected edges, each stored as two
/// directed edges (duplicates and self-loops stay, as in Graph500's edge list).
struct RmatParams {
  unsigned scale = 16;
  unsigned edge_factor = 16;
  std::uint64_t seed = 1;
  double a = 0.57, b = 0.19, c = 0.19;  ///< quadrant probabilities; d = 1 - a - b - c

  [[nodiscard]] std::uint64_t vertices() const { return std::uint64_t{1} << scale; }
  [[nodiscard]] std::uint64_t undirected_edges() const { return vertices() * edge_factor; }
  /// Entries of the CSR column array.
  [[nodiscard]] std::uint64_t directed_edges() const { return 2 * undirected_edges(); }
  /// Bytes of the CSR: row offsets (uint64, vertices + 1) and column indices (uint32).
  [[nodiscard]] std::uint64_t csr_bytes() const { return (vertices() + 1) * 8 + directed_edges() * 4; }

  /// Throws std::invalid_argument naming what cannot work.
  void validate() const {
    // Vertex ids are uint32 and bfs_unreached must not be one of them.
    if (scale < 1 || scale > 31) throw std::invalid_argument("R-MAT scale must be in [1, 31], got " + std::to_string(scale));
    if (edge_factor < 1) throw std::invalid_argument("R-MAT edge factor must be at least 1");
    if (!(a > 0 && b >= 0 && c >= 0 && a + b + c < 1))
      throw std::invalid_argument("R-MAT probabilities need a > 0, b, c >= 0 and a + b + c < 1");
  }
};

/// Runs body(begin, end) over [0, n) on the calling thread; build_rmat_csr and reference_bfs
/// take any callable of this shape (e.g. warpvm::bench::parallel_for) to spread the work.
struct SerialFor {
  template <class Body>
  void operator()(std::uint64_t n, const Body& body) const {
    body(0, n);
  }
};

/// SplitMix64's output function: a counter-based source of 64 random bits. (Not in a nested
/// `detail` namespace: inside warpvm::sim that would hide warpvm::detail from the other headers.)
/// Host and device: Afforest's sample (graph/afforest.hpp) draws with it in a kernel.
WARPVM_HD_INLINE std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The graph's undirected edges: edge(k) is the k-th (u, v), vertex ids relabelled. A pure
/// function of the parameters and k, so any split of the edges over threads gives the same graph.
class RmatEdges {
 public:
  explicit RmatEdges(const RmatParams& p)
      : scale_(p.scale),
        mask_((std::uint64_t{1} << p.scale) - 1),
        // 32-bit uniform draws against the cumulative quadrant probabilities.
        ta_(static_cast<std::uint64_t>(p.a * 4294967296.0)),
        tab_(static_cast<std::uint64_t>((p.a + p.b) * 4294967296.0)),
        tabc_(static_cast<std::uint64_t>((p.a + p.b + p.c) * 4294967296.0)),
        stream_(mix64(p.seed) ^ 0x5851f42d4c957f2dull) {
    for (std::uint64_t round = 0; round < 3; ++round) keys_[round] = mix64(p.seed * 4 + round);
  }

  [[nodiscard]] std::pair<std::uint32_t, std::uint32_t> operator()(std::uint64_t k) const {
    std::uint64_t u = 0, v = 0, bits = 0;
    for (unsigned level = 0; level < scale_; ++level) {
      if (level % 2 == 0) bits = mix64(stream_ + (k * 16 + level / 2) * 0x9e3779b97f4a7c15ull);
      const std::uint64_t r = level % 2 == 0 ? bits & 0xffffffffu : bits >> 32;
      // Quadrants a (0, 0), b (0, 1), c (1, 0), d (1, 1) in that order along [0, 2^32).
      const std::uint64_t past_a = r >= ta_, past_b = r >= tab_, past_c = r >= tabc_;
      u = u << 1 | past_b;
      v = v << 1 | (past_a ^ past_b ^ past_c);
    }
    return {relabel(u), relabel(v)};
  }

  /// A seeded bijection of [0, 2^scale): rounds of (odd multiply + add) mod 2^scale and an
  /// xor-shift, each invertible. Spreads R-MAT's hubs (all near vertex 0 before it) over the
  /// ids, as Graph500 permutes its vertex labels.
  [[nodiscard]] std::uint32_t relabel(std::uint64_t v) const {
    const unsigned shift = scale_ / 2 + 1;
    for (const std::uint64_t key : keys_) {
      v = (v * (key | 1) + (key >> 32)) & mask_;
      v ^= v >> shift;
    }
    return static_cast<std::uint32_t>(v);
  }

 private:
  unsigned scale_;
  std::uint64_t mask_, ta_, tab_, tabc_, stream_;
  std::uint64_t keys_[3] = {};
};

/// Vertex ids are uint32 and bfs_unreached (2^32 - 1) must not be one of them.
inline constexpr std::uint64_t max_graph_vertices = bfs_unreached;

/// One input edge u -> v with weight w (0 where the input has none).
struct GraphEdge {
  std::uint32_t u = 0, v = 0, w = 0;
};

/// Writes the CSR of `edges` edges over `vertices` vertices; edge_at(k) gives the k-th as a
/// GraphEdge (a pure function of k, with u, v < vertices). With `both_ways` every edge is stored
/// as u -> v and v -> u, as R-MAT stores its edges (a self-loop twice; duplicates stay); without,
/// as u -> v only. `offsets` must hold vertices + 1 entries and `columns` one per stored edge;
/// `weights` is empty (edge_at's weights are dropped) or as long as `columns`. Rows are sorted by
/// (column, weight), so the result does not depend on how `parallel_for` splits the work. Steps:
/// atomic degree counts, prefix sum, rows filled from their ends, rows sorted.
template <class EdgeAt, class ParallelFor = SerialFor>
void build_csr(std::uint64_t vertices, std::uint64_t edges, const EdgeAt& edge_at, bool both_ways,
               std::span<std::uint64_t> offsets, std::span<std::uint32_t> columns, std::span<std::uint32_t> weights,
               ParallelFor&& parallel_for = {}) {
  if (vertices > max_graph_vertices)
    throw std::invalid_argument("build_csr: " + std::to_string(vertices) + " vertices; ids must fit 32 bits (at most " +
                                std::to_string(max_graph_vertices) + " vertices)");
  const std::uint64_t entries = both_ways ? 2 * edges : edges;
  const bool weighted = !weights.empty();
  if (offsets.size() != vertices + 1 || columns.size() != entries || (weighted && weights.size() != entries))
    throw std::invalid_argument("build_csr: offsets need vertices + 1 entries, columns (and weights, if any) one per stored edge");
  using Counter = std::atomic_ref<std::uint64_t>;
  // 1. Degrees, counted into offsets[v + 1].
  parallel_for(vertices + 1, [&](std::uint64_t lo, std::uint64_t hi) {
    std::fill(offsets.begin() + static_cast<std::ptrdiff_t>(lo), offsets.begin() + static_cast<std::ptrdiff_t>(hi), 0);
  });
  parallel_for(edges, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t k = lo; k < hi; ++k) {
      const GraphEdge e = edge_at(k);
      Counter(offsets[e.u + 1]).fetch_add(1, std::memory_order_relaxed);
      if (both_ways) Counter(offsets[e.v + 1]).fetch_add(1, std::memory_order_relaxed);
    }
  });
  // 2. Inclusive prefix sum: offsets[v + 1] is the end of v's row.
  for (std::uint64_t v = 1; v <= vertices; ++v) offsets[v] += offsets[v - 1];
  // 3. Fill each row from its end; afterwards offsets[v + 1] is the start of v's row.
  const auto place = [&](std::uint32_t from, std::uint32_t to, std::uint32_t weight) {
    const std::uint64_t slot = Counter(offsets[from + 1]).fetch_sub(1, std::memory_order_relaxed) - 1;
    columns[slot] = to;
    if (weighted) weights[slot] = weight;
  };
  parallel_for(edges, [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t k = lo; k < hi; ++k) {
      const GraphEdge e = edge_at(k);
      place(e.u, e.v, e.w);
      if (both_ways) place(e.v, e.u, e.w);
    }
  });
  std::memmove(offsets.data(), offsets.data() + 1, vertices * sizeof(std::uint64_t));
  offsets[vertices] = entries;
  // 4. Sorted rows; a weighted row is sorted as (column, weight) pairs.
  parallel_for(vertices, [&](std::uint64_t lo, std::uint64_t hi) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> row;
    for (std::uint64_t v = lo; v < hi; ++v) {
      const auto begin = static_cast<std::ptrdiff_t>(offsets[v]), end = static_cast<std::ptrdiff_t>(offsets[v + 1]);
      if (!weighted) {
        std::sort(columns.begin() + begin, columns.begin() + end);
        continue;
      }
      row.clear();
      for (std::ptrdiff_t e = begin; e < end; ++e) row.emplace_back(columns[e], weights[e]);
      std::sort(row.begin(), row.end());
      for (std::ptrdiff_t e = begin; e < end; ++e) std::tie(columns[e], weights[e]) = row[e - begin];
    }
  });
}

/// The CSR of a generated graph: both directions of the p.undirected_edges() edges that
/// `Edges(p)(k)` draws, as build_rmat_csr describes. `who` names the caller in errors.
template <class Edges, class Params, class ParallelFor>
void build_generated_csr(const char* who, const Params& p, std::span<std::uint64_t> offsets,
                         std::span<std::uint32_t> columns, ParallelFor&& parallel_for) {
  p.validate();
  if (offsets.size() != p.vertices() + 1 || columns.size() != p.directed_edges())
    throw std::invalid_argument(std::string(who) + ": offsets need vertices + 1 entries and columns 2 x edges");
  const Edges edge(p);
  build_csr(
      p.vertices(), p.undirected_edges(),
      [&](std::uint64_t k) {
        const auto [u, v] = edge(k);
        return GraphEdge{u, v};
      },
      /*both_ways=*/true, offsets, columns, {}, std::forward<ParallelFor>(parallel_for));
}

/// Writes the graph as CSR: offsets[v] .. offsets[v + 1] index v's neighbours in `columns`,
/// each row sorted (so the result does not depend on how the work was split). `offsets` must
/// hold vertices() + 1 entries and `columns` directed_edges(). `parallel_for(n, body)` runs
/// body(begin, end) over a split of [0, n), possibly on several threads.
template <class ParallelFor = SerialFor>
void build_rmat_csr(const RmatParams& p, std::span<std::uint64_t> offsets, std::span<std::uint32_t> columns,
                    ParallelFor&& parallel_for = {}) {
  build_generated_csr<RmatEdges>("build_rmat_csr", p, offsets, columns, std::forward<ParallelFor>(parallel_for));
}

/// BFS levels from `root` (bfs_unreached where it does not reach), level by level: every vertex
/// of level d looks at its neighbours and claims the unreached ones for level d + 1 (a
/// compare-and-swap, so that split over threads each is claimed once; the levels are the
/// shortest-path distances, whatever the order). With SerialFor it is the textbook queue BFS.
template <class ParallelFor = SerialFor>
std::vector<std::uint32_t> reference_bfs(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns,
                                         std::uint32_t root, ParallelFor&& parallel_for = {}) {
  const std::uint64_t n = offsets.size() - 1;
  if (root >= n) throw std::invalid_argument("reference_bfs: root " + std::to_string(root) + " is not a vertex");
  std::vector<std::uint32_t> levels(n, bfs_unreached);
  levels[root] = 0;
  std::vector<std::uint32_t> frontier{root}, next;
  std::mutex merge;
  for (std::uint32_t depth = 0; !frontier.empty(); ++depth) {
    next.clear();
    parallel_for(frontier.size(), [&](std::uint64_t lo, std::uint64_t hi) {
      std::vector<std::uint32_t> found;
      for (std::uint64_t i = lo; i < hi; ++i) {
        const std::uint32_t v = frontier[i];
        for (std::uint64_t e = offsets[v]; e < offsets[v + 1]; ++e) {
          std::uint32_t expected = bfs_unreached;
          if (std::atomic_ref<std::uint32_t>(levels[columns[e]]).compare_exchange_strong(expected, depth + 1,
                                                                                        std::memory_order_relaxed))
            found.push_back(columns[e]);
        }
      }
      const std::lock_guard lock(merge);
      next.insert(next.end(), found.begin(), found.end());
    });
    frontier.swap(next);
  }
  return levels;
}

/// Graph500's BFS validation, on levels instead of a parent tree: the root is at level 0; the
/// two ends of every edge are both reached or both unreached and their levels differ by at most
/// one; every other reached vertex has a neighbour one level closer to the root. Returns the
/// first violation in words, or an empty string.
inline std::string check_bfs_levels(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns,
                                    std::uint32_t root, std::span<const std::uint32_t> levels) {
  const std::uint64_t n = offsets.size() - 1;
  if (levels.size() != n) return "levels has " + std::to_string(levels.size()) + " entries for " + std::to_string(n) + " vertices";
  if (levels[root] != 0) return "the root is at level " + std::to_string(levels[root]);
  for (std::uint64_t v = 0; v < n; ++v) {
    bool has_parent = v == root;
    for (std::uint64_t e = offsets[v]; e < offsets[v + 1]; ++e) {
      const std::uint32_t u = columns[e];
      const bool v_reached = levels[v] != bfs_unreached, u_reached = levels[u] != bfs_unreached;
      if (v_reached != u_reached)
        return "edge " + std::to_string(v) + " - " + std::to_string(u) + " joins a reached and an unreached vertex";
      if (!v_reached) continue;
      const std::uint64_t lv = levels[v], lu = levels[u];
      if (lv > lu + 1 || lu > lv + 1)
        return "edge " + std::to_string(v) + " - " + std::to_string(u) + " spans levels " + std::to_string(lv) + " and " +
               std::to_string(lu);
      has_parent = has_parent || lu + 1 == lv;
    }
    if (levels[v] != bfs_unreached && !has_parent)
      return "vertex " + std::to_string(v) + " at level " + std::to_string(levels[v]) + " has no neighbour one level up";
  }
  return {};
}

/// What a search from one root did, for the benchmark's records.
struct BfsWork {
  std::uint64_t reached = 0;        ///< vertices reached, the root included
  std::uint32_t depth = 0;          ///< levels: the deepest level + 1
  std::uint64_t scanned_edges = 0;  ///< CSR entries read: the degrees of the reached vertices summed
  std::uint64_t csr_bytes_touched = 0;  ///< distinct offset entries read x 8 + scanned_edges x 4
  /// Graph500's count for TEPS: input (undirected) edges within the component searched.
  [[nodiscard]] std::uint64_t traversed_edges() const { return scanned_edges / 2; }
};

inline BfsWork bfs_work(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> levels) {
  BfsWork w;
  const std::uint64_t n = levels.size();
  std::uint64_t offset_entries = 0;
  bool previous_read = false;  // offsets[v] was read as the end of v - 1's row
  for (std::uint64_t v = 0; v < n; ++v) {
    const bool reached = levels[v] != bfs_unreached;
    if (reached) {
      ++w.reached;
      w.depth = std::max(w.depth, levels[v] + 1);
      w.scanned_edges += offsets[v + 1] - offsets[v];
      offset_entries += previous_read ? 1 : 2;  // offsets[v] (unless already counted) and offsets[v + 1]
    }
    previous_read = reached;
  }
  w.csr_bytes_touched = offset_entries * 8 + w.scanned_edges * 4;
  return w;
}

/// `count` distinct BFS roots with at least one neighbour other than themselves, drawn from
/// `seed` (Graph500 draws its 64 roots among vertices of positive degree). Fewer when the graph
/// has fewer such vertices.
inline std::vector<std::uint32_t> pick_roots(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns,
                                             unsigned count, std::uint64_t seed) {
  const std::uint64_t n = offsets.size() - 1;
  std::vector<std::uint32_t> roots;
  for (std::uint64_t attempt = 0; roots.size() < count && attempt < 64 * std::uint64_t{count} + n; ++attempt) {
    const auto v = static_cast<std::uint32_t>(mix64(seed * 0x2545f4914f6cdd1dull + attempt) % n);
    bool has_neighbour = false;
    for (std::uint64_t e = offsets[v]; e < offsets[v + 1] && !has_neighbour; ++e) has_neighbour = columns[e] != v;
    if (has_neighbour && std::find(roots.begin(), roots.end(), v) == roots.end()) roots.push_back(v);
  }
  return roots;
}

}  // namespace warpvm::workloads

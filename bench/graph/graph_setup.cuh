#pragma once
// warpvm-graph-bench's setup: the apps it runs, its options (the flags) and the graph they name,
// generated or loaded into pinned host memory. graph_bench.cu measures the apps on it.

#include "harness.cuh"
#include "cli.hpp"
#include "warpvm/workloads/graph/bfs.cuh"
#include "warpvm/workloads/graph/cc.cuh"
#include "warpvm/workloads/graph/cc_afforest.cuh"
#include "warpvm/workloads/graph/graph_inputs.hpp"
#include "warpvm/workloads/graph/rmat.hpp"
#include "warpvm/workloads/graph/sssp.cuh"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace warpvm::bench {

enum class App { bfs, cc, cc_afforest, sssp };

inline const char* to_string(App app) {
  switch (app) {
    case App::bfs: return "bfs";
    case App::cc: return "cc";
    case App::cc_afforest: return "cc_afforest";
    default: return "sssp";
  }
}

/// Connected components, by either algorithm: no root, labels starting at the vertex ids, the
/// same reference.
inline bool components(App app) { return app == App::cc || app == App::cc_afforest; }

/// Pages a thread of the app's paged kernel holds at once.
inline std::uint32_t pages_held(App app) {
  switch (app) {
    case App::bfs: return workloads::bfs_pages_held;
    case App::cc: return workloads::cc_pages_held;
    case App::cc_afforest: return workloads::cc_afforest_pages_held;
    default: return workloads::sssp_pages_held;
  }
}

struct GraphOptions {
  Options common;  ///< modes, cache fractions, repeats, eviction, out, commit, driver, trace
  workloads::RmatParams graph{.scale = 22, .edge_factor = 16, .seed = 1};  ///< the generators' sizes; the seed for all
  bool uniform = false;        ///< --generator uniform: G(n, m) of R-MAT's sizes instead of R-MAT
  std::string graph_file;      ///< --graph-file: load this graph instead of generating one
  std::string graph_cache;     ///< --graph-cache: read the graph from it if it exists, else write it there
  /// The default runs one algorithm per problem (cc_afforest on request), so that a default
  /// run's records and time stay those of earlier commits.
  std::vector<App> apps{App::bfs, App::cc, App::sssp};
  unsigned sources = 4;              ///< roots drawn from the seed
  std::vector<std::uint32_t> roots;  ///< roots given (instead of drawing them)
  /// SSSP's reference: Dijkstra on the CPU (serial; minutes per root at scale 27), or the raw
  /// kernel on device memory, its result certified on the CPU by workloads::certify_sssp.
  bool sssp_certified_gpu = false;
  /// --balanced: the kernels walk DREAM's Balanced CSR, a warp per chunk of at most this many
  /// edges of a frontier vertex's row; 0 (the default): a warp per frontier vertex.
  std::uint32_t balanced_chunk = 0;
  /// --frontier-order: each iteration's warps take the frontier in vertex order (the queue sorted),
  /// or in the order the previous iteration appended it (every mode alike).
  workloads::FrontierOrder frontier_order = workloads::FrontierOrder::vertex;
  /// --auto-migrate-objects: in mode warpvm_auto these objects (offsets, columns, weights, values,
  /// chunk_offsets, vertex_chunks) migrate instead, to see which object's remote reads cost.
  std::vector<std::string> auto_migrate_objects;
  /// --resident-objects: in modes warpvm, warpvm_auto and warpvm_dream these objects are
  /// Placement::resident, their frames set aside out of the cache fraction's memory.
  std::vector<std::string> resident_objects;
  /// --page-bytes: warpvm's page size in modes warpvm, warpvm_auto and warpvm_dream (the uvm
  /// preset keeps 4 KB, as UVM does).
  std::uint64_t page_bytes = 4096;
  [[nodiscard]] bool balanced() const { return balanced_chunk != 0; }
  [[nodiscard]] bool wants(App app) const { return std::find(apps.begin(), apps.end(), app) != apps.end(); }
  [[nodiscard]] bool loaded() const { return !graph_file.empty(); }
  /// --generator uniform's graph: R-MAT's sizes and seed.
  [[nodiscard]] workloads::UniformParams uniform_graph() const {
    return {.scale = graph.scale, .edge_factor = graph.edge_factor, .seed = graph.seed};
  }
};

/// The objects of the paged modes, as Runtime::adopt names them.
inline const std::string graph_object_names[] = {"offsets", "columns", "weights", "values", "chunk_offsets", "vertex_chunks"};

inline const char* const all_modes =
    "explicit, uvm, uvm_read_mostly, uvm_prefetch, zero_copy, warpvm, warpvm_auto, warpvm_dream, warpvm_uvm, device";

inline GraphOptions parse(int argc, char** argv) {
  GraphOptions o;
  o.common.suite = "graph";
  o.common.cache_fractions = {1.0, 0.5, 0.25};
  CLI::App app{std::string(
                   "warpvm-graph-bench: BFS, CC (two algorithms) and SSSP on a generated or loaded graph, JSON Lines out.\n"
                   "BFS and SSSP from --sources roots (vertices with a neighbour, drawn from the seed) or from --roots, and\n"
                   "CC, over an R-MAT graph of 2^scale vertices and edge-factor x 2^scale undirected edges (--generator\n"
                   "uniform: both ends of each edge uniform, no hubs), or over --graph-file: MatrixMarket (.mtx), a graph\n"
                   "cache (.wvg) or an edge list (U V per line, ids from 0), each edge stored both ways, the file's values\n"
                   "ignored. SSSP's weights in [1, 255] are drawn from the seed.\nmodes: ") +
                   all_modes,
               "warpvm-graph-bench"};
  add_shared_options(app, o.common);
  add_automatic_option(app, o.common);
  app.get_option("--modes")->check(cli::one_of(all_modes));
  app.get_option("--cache-fractions")->check(cli::unit_fraction);
  std::vector<std::string> apps;
  cli::add_list(app, "--apps", apps, "bfs, cc (label propagation), cc_afforest (Afforest: not in the default list), sssp")
      ->check(CLI::IsMember({"bfs", "cc", "cc_afforest", "sssp"}));
  auto* generator = app.add_option_function<std::string>(
                           "--generator", [&o](const std::string& value) { o.uniform = value == "uniform"; }, "rmat or uniform")
                        ->check(CLI::IsMember({"rmat", "uniform"}));
  auto* scale = app.add_option("--scale", o.graph.scale, "2^scale vertices");
  auto* edge_factor = app.add_option("--edge-factor", o.graph.edge_factor, "edge-factor x 2^scale undirected edges");
  app.add_option("--seed", o.graph.seed, "seed of the graph, its weights and the roots");
  auto* graph_file = app.add_option("--graph-file", o.graph_file, "load this graph (.mtx, .wvg or an edge list)");
  app.add_option("--graph-cache", o.graph_cache,
                 "read the graph from this cache when it exists, else write it there after parsing --graph-file")
      ->needs(graph_file);
  graph_file->excludes(generator)->excludes(scale)->excludes(edge_factor);
  app.add_option("--sources", o.sources, "roots drawn from the seed");
  cli::add_list(app, "--roots", o.roots, "roots given (instead of drawing them)");
  app.add_option_function<std::string>(
         "--sssp-reference", [&o](const std::string& value) { o.sssp_certified_gpu = value == "certified-gpu"; },
         "SSSP's reference: Dijkstra on the CPU (serial), or the raw kernel on device memory, certified on the CPU in "
         "O(edges) (certified-gpu)")
      ->check(CLI::IsMember({"dijkstra", "certified-gpu"}));
  app.add_option("--balanced", o.balanced_chunk,
                 "every mode's kernels work a warp per chunk of at most CHUNK edges of a frontier vertex's row (DREAM's "
                 "Balanced CSR) instead of a warp per vertex")
      ->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--frontier-order",
         [&o](const std::string& value) {
           o.frontier_order = value == "vertex" ? workloads::FrontierOrder::vertex : workloads::FrontierOrder::arrival;
         },
         "each iteration takes the frontier in vertex order (the default: rows that share pages are walked at the "
         "same time) or in the order the previous iteration appended it (arrival)")
      ->check(CLI::IsMember({"vertex", "arrival"}));
  const std::vector<std::string> objects(std::begin(graph_object_names), std::end(graph_object_names));
  cli::add_list(app, "--auto-migrate-objects", o.auto_migrate_objects,
                "in mode warpvm_auto these objects migrate instead (records: migrate_<object> 1)")
      ->check(CLI::IsMember(objects));
  cli::add_list(app, "--resident-objects", o.resident_objects,
                "in modes warpvm, warpvm_auto and warpvm_dream these objects are resident, taken out of the cache "
                "fraction's memory (records: resident_<object> 1)")
      ->check(CLI::IsMember(objects));
  cli::add_page_bytes(app, o.page_bytes, "warpvm's page size in modes warpvm, warpvm_auto and warpvm_dream");
  app.footer("--eviction applies to mode warpvm (warpvm_dream is FIFO); --trace writes the fault batches of the\n"
             "warpvm_uvm runs (the uvm preset) as CSV");
  cli::parse(app, argc, argv);
  if (!apps.empty()) {
    o.apps.clear();
    for (const std::string& name : apps)
      for (const App a : {App::bfs, App::cc, App::cc_afforest, App::sssp})
        if (name == to_string(a) && !o.wants(a)) o.apps.push_back(a);
  }
  if (o.sources < 1 && o.roots.empty()) cli::refuse(app, "--sources must be at least 1");
  try {
    if (o.uniform) o.uniform_graph().validate();
    else o.graph.validate();
  } catch (const std::invalid_argument& e) {
    cli::refuse(app, e.what());
  }
  // A loaded graph's roots are checked once it is loaded (GraphBench::generate).
  for (const std::uint32_t root : o.roots)
    if (!o.loaded() && root >= o.graph.vertices()) cli::refuse(app, "root " + std::to_string(root) + " is not a vertex");
  return o;
}

/// The benchmark's graph in pinned host memory (the buffers the warpvm modes adopt).
struct HostGraph {
  HostGraph(std::uint64_t vertex_count, std::uint64_t directed_edge_count)
      : vertices(vertex_count),
        // Refused before any pinned memory is asked for (directed_edges is initialised first).
        directed_edges(directed_edge_count != 0 ? directed_edge_count : throw std::runtime_error("the graph has no edges")),
        offsets((vertex_count + 1) * sizeof(std::uint64_t)),
        columns(directed_edges * sizeof(std::uint32_t)) {}
  [[nodiscard]] std::span<std::uint64_t> offset_span() const { return {offsets.as<std::uint64_t>(), vertices + 1}; }
  [[nodiscard]] std::span<std::uint32_t> column_span() const { return {columns.as<std::uint32_t>(), directed_edges}; }

  std::uint64_t vertices, directed_edges;
  PinnedArray offsets, columns;
  std::string origin;  ///< what the graph is and how it was made, for the log
};

/// A pinned graph of a cache's counts, read from it (checksums checked).
inline HostGraph read_cache(const std::string& path) {
  const workloads::GraphCacheInfo info = workloads::graph_cache_info(path);
  HostGraph g(info.vertices, info.directed_edges);
  workloads::read_graph_cache(path, g.offset_span(), g.column_span());
  g.origin = "graph cache " + path;
  return g;
}

/// The graph the options ask for: generated (R-MAT, or uniform) or loaded (a graph cache, else
/// a MatrixMarket file or an edge list by its extension, each edge stored both ways as the apps
/// assume a symmetric graph; written to --graph-cache when one is named).
inline HostGraph make_graph(const GraphOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  auto timed = [&](HostGraph g, const char* verb) {
    char took[64];
    std::snprintf(took, sizeof took, ", %s in %.1f s", verb, seconds_since(start));
    g.origin += took;
    return g;
  };
  const std::string seed = std::to_string(o.graph.seed);
  if (!o.loaded() && !o.uniform) {
    HostGraph g(o.graph.vertices(), o.graph.directed_edges());
    workloads::build_rmat_csr(o.graph, g.offset_span(), g.column_span(), parallel_for);
    g.origin = "R-MAT scale " + std::to_string(o.graph.scale) + ", edge factor " + std::to_string(o.graph.edge_factor) +
               ", seed " + seed;
    return timed(std::move(g), "generated");
  }
  if (!o.loaded()) {
    const workloads::UniformParams p = o.uniform_graph();
    HostGraph g(p.vertices(), p.directed_edges());
    workloads::build_uniform_csr(p, g.offset_span(), g.column_span(), parallel_for);
    g.origin = "uniform scale " + std::to_string(p.scale) + ", edge factor " + std::to_string(p.edge_factor) + ", seed " + seed;
    return timed(std::move(g), "generated");
  }
  if (!o.graph_cache.empty() && std::filesystem::exists(o.graph_cache)) return timed(read_cache(o.graph_cache), "loaded");
  const std::filesystem::path path(o.graph_file);
  if (path.extension() == ".wvg") return timed(read_cache(o.graph_file), "loaded");
  const workloads::GraphLoadOptions load{.weights = false, .undirected = true};
  const workloads::CsrGraph loaded =
      path.extension() == ".mtx" ? workloads::load_matrix_market(path, load) : workloads::load_edge_list(path, load);
  if (!o.graph_cache.empty()) workloads::write_graph_cache(o.graph_cache, loaded);
  HostGraph g(loaded.vertices(), loaded.directed_edges());
  std::copy(loaded.offsets.begin(), loaded.offsets.end(), g.offset_span().begin());
  std::copy(loaded.columns.begin(), loaded.columns.end(), g.column_span().begin());
  g.origin = "file " + o.graph_file + (o.graph_cache.empty() ? "" : " (cached in " + o.graph_cache + ")");
  return timed(std::move(g), "loaded");
}

}  // namespace warpvm::bench

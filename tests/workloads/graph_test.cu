// The benchmark's graph kernels on an R-MAT graph against the CPU references. Breadth-first
// search (warpvm/workloads/graph/bfs.cuh), from several roots: through warpvm with the whole graph cached,
// with a quarter of it, and with the least cache the launch may have; through the uvm preset
// where it can run (and its refusal where it cannot); and the plain-pointer kernel the
// benchmark's other modes use. Connected components (cc.cuh) and shortest paths (sssp.cuh, from
// the same roots, weights drawn from the seed): the plain-pointer kernels on device memory and on
// pinned host memory (zero-copy), and through warpvm with the whole graph cached and with caches
// small enough to evict. All three over DREAM's Balanced CSR too (a warp per chunk of a row, the
// chunk table one more array or object): plain pointers on device and pinned host memory, and
// through warpvm whole and evicting. Components by Afforest (cc_afforest.cuh) the same ways, on
// the R-MAT graph and on a sparse uniform one whose last linking pass has rows to walk.

#include "warpvm/workloads/graph/bfs.cuh"
#include "warpvm/workloads/graph/cc.cuh"
#include "warpvm/workloads/graph/cc_afforest.cuh"
#include "gpu_test_support.cuh"
#include "warpvm/workloads/graph/sssp.cuh"

#include "warpvm/workloads/graph/graph_inputs.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

/// Scale 16: 64 Ki vertices, 2 Mi directed edges (8 MiB of columns).
constexpr workloads::RmatParams graph_params{.scale = 16, .edge_factor = 16, .seed = 2024};
constexpr unsigned roots_per_test = 3;

struct Graph {
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint32_t> columns;
  std::vector<std::uint32_t> weights;  ///< SSSP's, aligned with columns
  std::vector<std::uint32_t> roots;
  std::vector<std::vector<std::uint32_t>> expected;  ///< reference levels per root
  std::vector<std::uint32_t> labels;                 ///< reference component labels
  std::vector<std::vector<std::uint32_t>> distances;  ///< reference distances per root
};

/// Generated once for the suite, with the reference results.
const Graph& graph() {
  static const Graph g = [] {
    Graph built{std::vector<std::uint64_t>(graph_params.vertices() + 1),
                std::vector<std::uint32_t>(graph_params.directed_edges()),
                std::vector<std::uint32_t>(graph_params.directed_edges()), {}, {}, {}, {}};
    workloads::build_rmat_csr(graph_params, built.offsets, built.columns);
    workloads::fill_edge_weights(built.offsets, built.columns, built.weights, graph_params.seed);
    built.roots = workloads::pick_roots(built.offsets, built.columns, roots_per_test, 17);
    for (const std::uint32_t root : built.roots) {
      built.expected.push_back(workloads::reference_bfs(built.offsets, built.columns, root));
      built.distances.push_back(workloads::reference_sssp(built.offsets, built.columns, built.weights, root));
    }
    built.labels = workloads::reference_cc(built.offsets, built.columns);
    return built;
  }();
  return g;
}

/// Chunks of the Balanced CSR the balanced tests use: 8 edges, a quarter of R-MAT's mean degree
/// here, so most rows are cut and chunks start off the 128-byte windows of walk_row.
constexpr std::uint32_t balanced_chunk_edges = 8;

/// The graph's Balanced CSR and each vertex's first chunk (workloads::first_chunks): the chunk table.
struct Balanced {
  workloads::BalancedCsr csr;
  std::vector<std::uint32_t> first_chunks;
};

const Balanced& balanced() {
  static const Balanced b = [] {
    Balanced built{workloads::balance_csr(graph().offsets, balanced_chunk_edges), {}};
    built.first_chunks = workloads::first_chunks(built.csr, graph_params.vertices());
    return built;
  }();
  return b;
}

std::uint64_t pages_of(std::uint64_t bytes) { return (bytes + 4095) / 4096; }

/// Pages of the chunk table's two objects.
std::uint64_t chunk_table_pages() {
  return pages_of(balanced().csr.chunk_offsets.size() * 8) + pages_of(balanced().first_chunks.size() * 4);
}

/// Pages of the three objects (offsets, columns, levels): the cache that holds them all.
std::uint64_t footprint_pages() {
  const std::uint64_t n = graph_params.vertices();
  return pages_of((n + 1) * 8) + pages_of(graph_params.directed_edges() * 4) + pages_of(n * 4);
}

Config gpu_initiated(std::uint64_t frames, EvictionPolicy eviction = EvictionPolicy::clock,
                     std::uint32_t pages_held = workloads::bfs_pages_held) {
  return Config{.cache_bytes = frames * 4096, .eviction = eviction, .max_pages_held_per_thread = pages_held};
}

/// "" when `values` (levels, labels or distances) equal the reference, else the first
/// difference and how many there are.
std::string compare_values(const std::uint32_t* values, const std::vector<std::uint32_t>& expected) {
  std::uint64_t wrong = 0, first = 0;
  for (std::uint64_t v = expected.size(); v-- > 0;) {
    if (values[v] != expected[v]) {
      ++wrong;
      first = v;
    }
  }
  if (wrong == 0) return {};
  return std::to_string(wrong) + " vertices differ; vertex " + std::to_string(first) + ": " +
         std::to_string(values[first]) + ", expected " + std::to_string(expected[first]);
}

std::uint32_t depth_of(const std::vector<std::uint32_t>& expected) {
  std::uint32_t depth = 0;
  for (const std::uint32_t level : expected)
    if (level != workloads::bfs_unreached) depth = std::max(depth, level + 1);
  return depth;
}

/// A migrate object of `rt` holding a copy of `contents`.
template <class T>
object<T> upload(Runtime& rt, const std::vector<T>& contents, const char* name) {
  auto o = rt.alloc<T>(contents.size(), Placement::migrate, name);
  std::copy(contents.begin(), contents.end(), o.host().begin());
  return o;
}

/// The chunk table (`of`: the suite graph's by default) as objects (migrate) of `rt` when
/// `wanted`, else none: what the paged helpers below pass their kernels (null: a warp per vertex).
class PagedChunks {
 public:
  PagedChunks(Runtime& rt, bool wanted, const Balanced& of = balanced()) {
    if (!wanted) return;
    chunk_offsets_ = upload(rt, of.csr.chunk_offsets, "chunk_offsets");
    vertex_chunks_ = upload(rt, of.first_chunks, "vertex_chunks");
    table_ = workloads::PagedChunkTable{chunk_offsets_.device(), vertex_chunks_.device()};
    chunks_ = of.csr.chunks();
  }
  /// The chunk queue's room (FrontierQueues): 0 without the table.
  [[nodiscard]] std::uint64_t chunks() const { return chunks_; }
  [[nodiscard]] const workloads::PagedChunkTable* table() const { return table_ ? &*table_ : nullptr; }

 private:
  object<std::uint64_t> chunk_offsets_;
  object<std::uint32_t> vertex_chunks_;
  std::optional<workloads::PagedChunkTable> table_;
  std::uint64_t chunks_ = 0;
};

/// The graph as warpvm objects (migrate) of `rt`, searched from every root with blocks of
/// `block_threads`, each result compared with the reference on the levels' host copy.
/// `balanced_rows`: over the Balanced CSR (its chunk table objects of `rt` too).
void expect_paged_bfs_matches(Runtime& rt, std::uint64_t wanted_blocks, unsigned block_threads = workloads::graph_block_threads,
                              bool balanced_rows = false, workloads::FrontierOrder order = workloads::FrontierOrder::vertex) {
  const Graph& g = graph();
  const std::uint64_t n = graph_params.vertices();
  auto offsets = upload(rt, g.offsets, "offsets");
  auto columns = upload(rt, g.columns, "columns");
  auto levels = rt.alloc<std::uint32_t>(n, Placement::migrate, "levels");
  const PagedChunks chunks(rt, balanced_rows);
  workloads::FrontierQueues queues(n, chunks.chunks(), order);
  const std::uint64_t max_blocks = workloads::max_paged_blocks(rt, wanted_blocks, block_threads);
  for (std::size_t r = 0; r < g.roots.size(); ++r) {
    SCOPED_TRACE("root " + std::to_string(g.roots[r]));
    rt.drop_cached();  // nothing of the last search stays cached; its levels are on the host
    std::fill(levels.host().begin(), levels.host().end(), workloads::bfs_unreached);
    levels.host()[g.roots[r]] = 0;
    const std::uint32_t depth = workloads::bfs_paged(rt, queues, offsets.device(), columns.device(), levels.device(),
                                                g.roots[r], max_blocks, block_threads, chunks.table());
    rt.flush();
    EXPECT_EQ(compare_values(levels.host().data(), g.expected[r]), "");
    EXPECT_EQ(depth, depth_of(g.expected[r]));
  }
}

class Graph500Bfs : public GpuTest {};

// Runs without a GPU too: the graph and its reference levels the GPU tests compare against.
TEST(Graph500BfsReference, LevelsAreValid) {
  const Graph& g = graph();
  ASSERT_EQ(g.roots.size(), roots_per_test);
  for (std::size_t r = 0; r < g.roots.size(); ++r)
    EXPECT_EQ(workloads::check_bfs_levels(g.offsets, g.columns, g.roots[r], g.expected[r]), "");
}

/// BFS from every root with the plain-pointer kernel on this graph (device or pinned host
/// memory), over the Balanced CSR when `chunks` is given; the levels in device memory.
void expect_raw_bfs_matches(const std::uint64_t* offsets, const std::uint32_t* columns, std::uint64_t max_blocks,
                            const workloads::RawChunkTable* chunks = nullptr) {
  const Graph& g = graph();
  const std::uint64_t n = graph_params.vertices();
  DeviceVector<std::uint32_t> levels(n);
  workloads::FrontierQueues queues(n, chunks != nullptr ? balanced().csr.chunks() : 0);
  for (std::size_t r = 0; r < g.roots.size(); ++r) {
    SCOPED_TRACE("root " + std::to_string(g.roots[r]));
    workloads::reset_from_root<<<64, 256>>>(levels.get(), n, g.roots[r]);
    WARPVM_CUDA_TRY(cudaDeviceSynchronize());
    const std::uint32_t depth =
        workloads::bfs_raw(nullptr, queues, offsets, columns, levels.get(), g.roots[r], max_blocks, chunks);
    EXPECT_EQ(compare_values(levels.to_host().data(), g.expected[r]), "");
    EXPECT_EQ(depth, depth_of(g.expected[r]));
  }
}

TEST_F(Graph500Bfs, RawKernelOnDeviceMemoryMatchesReference) {
  const Graph& g = graph();
  const DeviceVector offsets(g.offsets);
  const DeviceVector columns(g.columns);
  expect_raw_bfs_matches(offsets.get(), columns.get(), sm_count() * 8);
}

/// The frontier of every BFS level from `root` as the level kernels were handed it (plain
/// pointers on device memory, queues in `order`); the levels are checked against the reference.
std::vector<std::vector<std::uint32_t>> frontiers_handed_over(workloads::FrontierOrder order, std::uint32_t root,
                                                              const std::vector<std::uint32_t>& expected) {
  const Graph& g = graph();
  const std::uint64_t n = graph_params.vertices();
  const DeviceVector offsets(g.offsets);
  const DeviceVector columns(g.columns);
  DeviceVector<std::uint32_t> levels(n);
  workloads::reset_from_root<<<64, 256>>>(levels.get(), n, root);
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());
  workloads::FrontierQueues queues(n, 0, order);
  EXPECT_EQ(queues.order(), order);
  std::vector<std::vector<std::uint32_t>> frontiers;
  queues.run_from(nullptr, root, [&](const std::uint32_t* frontier, std::uint32_t size, std::uint32_t* next,
                                     std::uint32_t* next_size, std::uint32_t*, std::uint32_t level) {
    std::vector<std::uint32_t>& seen = frontiers.emplace_back(size);
    WARPVM_CUDA_TRY(cudaMemcpy(seen.data(), frontier, size * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    workloads::bfs_expand_raw<<<workloads::frontier_grid(size, sm_count() * 8), workloads::graph_block_threads>>>(
        workloads::graph_detail::FrontierRows<const std::uint64_t*>{offsets.get(), frontier, size}, columns.get(), levels.get(),
        next, next_size, level);
  });
  EXPECT_EQ(compare_values(levels.to_host().data(), expected), "");
  return frontiers;
}

// Vertex order hands every level its frontier sorted, and the same vertices as arrival order
// (a BFS level's vertices do not depend on the order its frontier is walked in).
TEST_F(Graph500Bfs, VertexOrderHandsEachLevelItsFrontierSorted) {
  const Graph& g = graph();
  const auto by_vertex = frontiers_handed_over(workloads::FrontierOrder::vertex, g.roots[0], g.expected[0]);
  auto by_arrival = frontiers_handed_over(workloads::FrontierOrder::arrival, g.roots[0], g.expected[0]);
  ASSERT_EQ(by_vertex.size(), by_arrival.size());
  ASSERT_GT(by_vertex.size(), 3u);
  bool arrival_ever_unsorted = false;
  for (std::size_t level = 0; level < by_vertex.size(); ++level) {
    SCOPED_TRACE("level " + std::to_string(level + 1));
    EXPECT_TRUE(std::is_sorted(by_vertex[level].begin(), by_vertex[level].end()));
    arrival_ever_unsorted |= !std::is_sorted(by_arrival[level].begin(), by_arrival[level].end());
    std::sort(by_arrival[level].begin(), by_arrival[level].end());
    EXPECT_EQ(by_vertex[level], by_arrival[level]);
  }
  EXPECT_TRUE(arrival_ever_unsorted);  // else this test could not tell the orders apart
}

TEST_F(Graph500Bfs, WholeGraphCached) {
  Runtime rt(gpu_initiated(footprint_pages()));  // nothing is ever evicted: hold-free hits
  expect_paged_bfs_matches(rt, sm_count() * 8);
  EXPECT_EQ(rt.stats().evictions, 0u);
}

TEST_F(Graph500Bfs, QuarterCacheEvictsAndStillMatches) {
  // 560 frames for 2241 pages: 280 threads may run, in blocks of 64 (4 blocks, 16 warps).
  Runtime rt(gpu_initiated(footprint_pages() / 4));
  expect_paged_bfs_matches(rt, sm_count() * 8, 64);
  const Stats stats = rt.stats();
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_GT(stats.writebacks, 0u);  // level pages written back (flush and eviction)
}

TEST_F(Graph500Bfs, QuarterCacheInArrivalOrder) {
  Runtime rt(gpu_initiated(footprint_pages() / 4));
  expect_paged_bfs_matches(rt, sm_count() * 8, 64, false, workloads::FrontierOrder::arrival);
  EXPECT_GT(rt.stats().evictions, 0u);
}

TEST_F(Graph500Bfs, QuarterCacheWithFifoEviction) {
  Runtime rt(gpu_initiated(footprint_pages() / 4, EvictionPolicy::fifo));
  expect_paged_bfs_matches(rt, sm_count() * 8, 64);
  EXPECT_GT(rt.stats().evictions, 0u);
}

TEST_F(Graph500Bfs, LeastCacheTheLaunchMayHave) {
  // One block of 64 threads, each holding a column page and one element: 128 frames (512 KiB,
  // 6% of the graph) is the least check_launch accepts, and enough to finish.
  constexpr unsigned threads = 64;
  const std::uint64_t least = detail::frames_required(threads, workloads::bfs_pages_held);
  {
    Runtime rt(gpu_initiated(least));
    EXPECT_EQ(rt.max_resident_threads(), threads);
    expect_paged_bfs_matches(rt, 1, threads);
    EXPECT_GT(rt.stats().evictions, 0u);
  }
  Runtime rt(gpu_initiated(least - 1));
  try {
    expect_paged_bfs_matches(rt, 1, threads);
    FAIL() << "a launch with one frame fewer than its progress bound was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_config);
    EXPECT_NE(std::string(e.what()).find("frames are needed to guarantee progress"), std::string::npos) << e.what();
  }
}

Config uvm_preset(std::uint64_t chunks) {
  Config config = Config::preset(Preset::uvm);
  config.cache_bytes = chunks << 21;
  return config;
}

/// 2 MB chunks the uvm preset needs: each object rounded up to whole chunks.
std::uint64_t uvm_chunks() {
  const std::uint64_t n = graph_params.vertices(), chunk = 2ull << 20;
  auto chunks = [&](std::uint64_t bytes) { return (bytes + chunk - 1) / chunk; };
  return chunks((n + 1) * 8) + chunks(graph_params.directed_edges() * 4) + chunks(n * 4);
}

TEST_F(Graph500Bfs, UvmPresetWithTheWholeGraph) {
  Runtime rt(uvm_preset(uvm_chunks()));
  expect_paged_bfs_matches(rt, sm_count() * 8);
  const std::vector<FaultBatch> batches = rt.fault_batches();
  EXPECT_FALSE(batches.empty());
  for (const FaultBatch& b : batches) EXPECT_LE(b.faults, 256u);
}

TEST_F(Graph500Bfs, UvmPresetWithOneChunkTooFewEvictsOrSaysWhy) {
  // One chunk fewer than the objects need. A build with the evicting path evicts (UVM's LRU by
  // last migration) and the search stays exact; any other refuses the launch, naming the chunks.
  const std::uint64_t needed = uvm_chunks();
  Runtime rt(uvm_preset(needed - 1));
  if (!WARPVM_HOST_BATCHED_EVICTION) {
    try {
      expect_paged_bfs_matches(rt, sm_count() * 8);
      FAIL() << "the uvm preset accepted a cache smaller than its objects in a build that cannot evict";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_config);
      const std::string what = e.what();
      EXPECT_NE(what.find("WARPVM_HOST_BATCHED_EVICTION=ON"), std::string::npos) << what;
      EXPECT_NE(what.find("need " + std::to_string(needed)), std::string::npos) << what;
    }
    return;
  }
  expect_paged_bfs_matches(rt, sm_count() * 8);
  std::uint64_t chunks_evicted = 0;
  for (const FaultBatch& b : rt.fault_batches()) chunks_evicted += b.chunks_evicted;
  EXPECT_GT(chunks_evicted, 0u);
}

// Connected components and shortest paths (cc.cuh, sssp.cuh).

// Runs without a GPU too: the references the GPU tests compare against agree with BFS.
TEST(GraphReferences, ComponentsAndDistancesAgreeWithBfs) {
  const Graph& g = graph();
  ASSERT_EQ(g.distances.size(), roots_per_test);
  for (std::uint64_t v = 0; v < graph_params.vertices(); ++v) {
    ASSERT_LE(g.labels[v], v);
    for (std::uint64_t e = g.offsets[v]; e < g.offsets[v + 1]; ++e) ASSERT_EQ(g.labels[v], g.labels[g.columns[e]]);
  }
  for (std::size_t r = 0; r < g.roots.size(); ++r)
    for (std::uint64_t v = 0; v < graph_params.vertices(); ++v) {
      const std::uint32_t level = g.expected[r][v], distance = g.distances[r][v];
      ASSERT_EQ(level == workloads::bfs_unreached, distance == workloads::sssp_unreached) << v;
      if (level == workloads::bfs_unreached) continue;
      ASSERT_EQ(g.labels[v], g.labels[g.roots[r]]);  // reached: in the root's component
      ASSERT_GE(distance, level);                     // weights are at least 1 ...
      ASSERT_LE(distance, std::uint64_t{level} * workloads::max_edge_weight);  // ... and at most 255
    }
}

/// CC, then SSSP from every root, with the plain-pointer kernels on this graph (device or
/// pinned host memory), over the Balanced CSR when `chunks` is given; the values in device
/// memory, compared with the references.
void expect_raw_cc_and_sssp_match(const std::uint64_t* offsets, const std::uint32_t* columns,
                                  const std::uint32_t* weights, std::uint64_t max_blocks,
                                  const workloads::RawChunkTable* chunks = nullptr) {
  const Graph& g = graph();
  const std::uint64_t n = graph_params.vertices();
  DeviceVector<std::uint32_t> values(n);
  workloads::FrontierQueues queues(n, chunks != nullptr ? balanced().csr.chunks() : 0);
  workloads::fill_identity<<<64, 256>>>(values.get(), n);
  WARPVM_CUDA_TRY(cudaGetLastError());
  const std::uint32_t iterations = workloads::cc_raw(nullptr, queues, offsets, columns, values.get(), max_blocks, chunks);
  EXPECT_EQ(compare_values(values.to_host().data(), g.labels), "");
  EXPECT_GT(iterations, 1u);
  for (std::size_t r = 0; r < g.roots.size(); ++r) {
    SCOPED_TRACE("sssp from root " + std::to_string(g.roots[r]));
    workloads::reset_from_root<<<64, 256>>>(values.get(), n, g.roots[r]);
    WARPVM_CUDA_TRY(cudaGetLastError());
    workloads::sssp_raw(nullptr, queues, offsets, columns, weights, values.get(), g.roots[r], max_blocks, chunks);
    EXPECT_EQ(compare_values(values.to_host().data(), g.distances[r]), "");
  }
}

class GraphCcSssp : public Graph500Bfs {};

TEST_F(GraphCcSssp, RawKernelsOnDeviceMemoryMatchReferences) {
  const Graph& g = graph();
  const DeviceVector offsets(g.offsets);
  const DeviceVector columns(g.columns), weights(g.weights);
  expect_raw_cc_and_sssp_match(offsets.get(), columns.get(), weights.get(), sm_count() * 8);
}

TEST_F(GraphCcSssp, RawKernelsOnPinnedHostMemoryMatchReferences) {
  // Zero-copy, as the benchmark's zero_copy mode: the kernels read the graph over PCIe.
  const Graph& g = graph();
  const MappedBuffer offsets(g.offsets), columns(g.columns), weights(g.weights);
  expect_raw_cc_and_sssp_match(offsets.device<std::uint64_t>(), columns.device<std::uint32_t>(),
                               weights.device<std::uint32_t>(), sm_count() * 8);
}

/// Pages of CC's objects (offsets, columns, labels) and of SSSP's (the same and the weights).
std::uint64_t cc_footprint_pages() { return footprint_pages(); }
std::uint64_t sssp_footprint_pages() { return footprint_pages() + pages_of(graph_params.directed_edges() * 4); }

/// CC through warpvm objects (migrate) of `rt`, twice (the second run starts from an emptied
/// cache), each compared with the reference on the labels' host copy; `balanced_rows` as for
/// expect_paged_bfs_matches.
void expect_paged_cc_matches(Runtime& rt, std::uint64_t wanted_blocks, unsigned block_threads = workloads::graph_block_threads,
                             bool balanced_rows = false) {
  const Graph& g = graph();
  const std::uint64_t n = graph_params.vertices();
  auto offsets = upload(rt, g.offsets, "offsets");
  auto columns = upload(rt, g.columns, "columns");
  auto labels = rt.alloc<std::uint32_t>(n, Placement::migrate, "labels");
  const PagedChunks chunks(rt, balanced_rows);
  workloads::FrontierQueues queues(n, chunks.chunks());
  const std::uint64_t max_blocks = workloads::max_paged_blocks(rt, wanted_blocks, block_threads);
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    rt.drop_cached();
    std::iota(labels.host().begin(), labels.host().end(), 0u);
    const std::uint32_t iterations =
        workloads::cc_paged(rt, queues, offsets.device(), columns.device(), labels.device(), max_blocks, block_threads, chunks.table());
    rt.flush();
    EXPECT_EQ(compare_values(labels.host().data(), g.labels), "");
    EXPECT_GT(iterations, 1u);
  }
}

/// SSSP from every root through warpvm objects (migrate) of `rt`, each compared with the
/// reference on the distances' host copy; `balanced_rows` as for expect_paged_bfs_matches.
void expect_paged_sssp_matches(Runtime& rt, std::uint64_t wanted_blocks, unsigned block_threads = workloads::graph_block_threads,
                               bool balanced_rows = false) {
  const Graph& g = graph();
  const std::uint64_t n = graph_params.vertices();
  auto offsets = upload(rt, g.offsets, "offsets");
  auto columns = upload(rt, g.columns, "columns");
  auto weights = upload(rt, g.weights, "weights");
  auto distances = rt.alloc<std::uint32_t>(n, Placement::migrate, "distances");
  const PagedChunks chunks(rt, balanced_rows);
  workloads::FrontierQueues queues(n, chunks.chunks());
  const std::uint64_t max_blocks = workloads::max_paged_blocks(rt, wanted_blocks, block_threads);
  for (std::size_t r = 0; r < g.roots.size(); ++r) {
    SCOPED_TRACE("root " + std::to_string(g.roots[r]));
    rt.drop_cached();
    std::fill(distances.host().begin(), distances.host().end(), workloads::sssp_unreached);
    distances.host()[g.roots[r]] = 0;
    workloads::sssp_paged(rt, queues, offsets.device(), columns.device(), weights.device(), distances.device(), g.roots[r],
                     max_blocks, block_threads, chunks.table());
    rt.flush();
    EXPECT_EQ(compare_values(distances.host().data(), g.distances[r]), "");
  }
}

TEST_F(GraphCcSssp, CcWholeGraphCached) {
  Runtime rt(gpu_initiated(cc_footprint_pages(), EvictionPolicy::clock, workloads::cc_pages_held));
  expect_paged_cc_matches(rt, sm_count() * 8);
  EXPECT_EQ(rt.stats().evictions, 0u);
}

TEST_F(GraphCcSssp, CcQuarterCacheEvictsAndStillMatches) {
  Runtime rt(gpu_initiated(cc_footprint_pages() / 4, EvictionPolicy::clock, workloads::cc_pages_held));
  expect_paged_cc_matches(rt, sm_count() * 8, 64);
  const Stats stats = rt.stats();
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_GT(stats.writebacks, 0u);  // label pages written back (flush and eviction)
}

TEST_F(GraphCcSssp, CcQuarterCacheWithTheDreamPreset) {
  Config config = Config::preset(Preset::dream);
  config.cache_bytes = cc_footprint_pages() / 4 * 4096;
  config.max_pages_held_per_thread = workloads::cc_pages_held;
  Runtime rt(config);
  expect_paged_cc_matches(rt, sm_count() * 8, 64);
  EXPECT_GT(rt.stats().evictions, 0u);
}

TEST_F(GraphCcSssp, SsspWholeGraphCached) {
  Runtime rt(gpu_initiated(sssp_footprint_pages(), EvictionPolicy::clock, workloads::sssp_pages_held));
  expect_paged_sssp_matches(rt, sm_count() * 8);
  EXPECT_EQ(rt.stats().evictions, 0u);
}

TEST_F(GraphCcSssp, SsspQuarterCacheEvictsAndStillMatches) {
  Runtime rt(gpu_initiated(sssp_footprint_pages() / 4, EvictionPolicy::clock, workloads::sssp_pages_held));
  expect_paged_sssp_matches(rt, sm_count() * 8, 64);
  const Stats stats = rt.stats();
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_GT(stats.writebacks, 0u);
}

TEST_F(GraphCcSssp, LeastCacheTheLaunchesMayHave) {
  // One block of 64 threads: 128 frames for CC (a column page and a label each), 192 for SSSP
  // (a column page, its weight page and a distance): both finish, evicting all the way.
  constexpr unsigned threads = 64;
  {
    Runtime rt(gpu_initiated(detail::frames_required(threads, workloads::cc_pages_held), EvictionPolicy::clock,
                             workloads::cc_pages_held));
    EXPECT_EQ(rt.max_resident_threads(), threads);
    expect_paged_cc_matches(rt, 1, threads);
    EXPECT_GT(rt.stats().evictions, 0u);
  }
  Runtime rt(gpu_initiated(detail::frames_required(threads, workloads::sssp_pages_held), EvictionPolicy::clock,
                           workloads::sssp_pages_held));
  EXPECT_EQ(rt.max_resident_threads(), threads);
  expect_paged_sssp_matches(rt, 1, threads);
  EXPECT_GT(rt.stats().evictions, 0u);
}

TEST_F(GraphCcSssp, UvmPresetWithTheWholeGraph) {
  // Every object in whole 2 MB chunks: offsets 1, columns 4, weights 4, values 1.
  {
    Runtime rt(uvm_preset(uvm_chunks()));
    expect_paged_cc_matches(rt, sm_count() * 8);
  }
  Runtime rt(uvm_preset(uvm_chunks() + 4));
  expect_paged_sssp_matches(rt, sm_count() * 8);
}

// DREAM's Balanced CSR: the same kernels, a warp per chunk of a frontier vertex's row.

// Runs without a GPU too: the chunks are small enough that the hubs' rows are cut into more
// chunks than a warp has lanes (expand_to_chunks writes those with the whole warp) and most rows
// into several.
TEST(GraphBalancedReference, HubsHaveMoreChunksThanAWarpHasLanes) {
  const Balanced& b = balanced();
  ASSERT_EQ(b.first_chunks.size(), graph_params.vertices() + 1);
  std::uint32_t most = 0;
  std::uint64_t cut = 0;
  for (std::uint64_t v = 0; v < graph_params.vertices(); ++v) {
    most = std::max(most, b.first_chunks[v + 1] - b.first_chunks[v]);
    cut += b.first_chunks[v + 1] - b.first_chunks[v] > 1;
  }
  EXPECT_GT(most, 32u);
  EXPECT_GT(cut, graph_params.vertices() / 4);
}

class GraphBalanced : public Graph500Bfs {};

TEST_F(GraphBalanced, RawKernelsOnDeviceMemoryMatchReferences) {
  const Graph& g = graph();
  const Balanced& b = balanced();
  const DeviceVector offsets(g.offsets), chunk_offsets(b.csr.chunk_offsets);
  const DeviceVector columns(g.columns), weights(g.weights), vertex_chunks(b.first_chunks);
  const workloads::RawChunkTable chunks{chunk_offsets.get(), vertex_chunks.get()};
  expect_raw_bfs_matches(offsets.get(), columns.get(), sm_count() * 8, &chunks);
  expect_raw_cc_and_sssp_match(offsets.get(), columns.get(), weights.get(), sm_count() * 8, &chunks);
}

TEST_F(GraphBalanced, RawKernelsOnPinnedHostMemoryMatchReferences) {
  // Zero-copy, the chunk table in pinned host memory too.
  const Graph& g = graph();
  const MappedBuffer offsets(g.offsets), chunk_offsets(balanced().csr.chunk_offsets);
  const MappedBuffer columns(g.columns), weights(g.weights), vertex_chunks(balanced().first_chunks);
  const workloads::RawChunkTable chunks{chunk_offsets.device<std::uint64_t>(), vertex_chunks.device<std::uint32_t>()};
  expect_raw_bfs_matches(offsets.device<std::uint64_t>(), columns.device<std::uint32_t>(), sm_count() * 8, &chunks);
  expect_raw_cc_and_sssp_match(offsets.device<std::uint64_t>(), columns.device<std::uint32_t>(),
                               weights.device<std::uint32_t>(), sm_count() * 8, &chunks);
}

TEST_F(GraphBalanced, PagedWholeGraphCached) {
  {
    Runtime rt(gpu_initiated(footprint_pages() + chunk_table_pages()));
    expect_paged_bfs_matches(rt, sm_count() * 8, workloads::graph_block_threads, true);
    EXPECT_EQ(rt.stats().evictions, 0u);
  }
  {
    Runtime rt(gpu_initiated(cc_footprint_pages() + chunk_table_pages(), EvictionPolicy::clock, workloads::cc_pages_held));
    expect_paged_cc_matches(rt, sm_count() * 8, workloads::graph_block_threads, true);
    EXPECT_EQ(rt.stats().evictions, 0u);
  }
  Runtime rt(gpu_initiated(sssp_footprint_pages() + chunk_table_pages(), EvictionPolicy::clock, workloads::sssp_pages_held));
  expect_paged_sssp_matches(rt, sm_count() * 8, workloads::graph_block_threads, true);
  EXPECT_EQ(rt.stats().evictions, 0u);
}

TEST_F(GraphBalanced, PagedQuarterCacheEvictsAndStillMatches) {
  {
    Runtime rt(gpu_initiated((footprint_pages() + chunk_table_pages()) / 4));
    expect_paged_bfs_matches(rt, sm_count() * 8, 64, true);
    EXPECT_GT(rt.stats().evictions, 0u);
  }
  {
    Runtime rt(gpu_initiated((cc_footprint_pages() + chunk_table_pages()) / 4, EvictionPolicy::clock, workloads::cc_pages_held));
    expect_paged_cc_matches(rt, sm_count() * 8, 64, true);
    EXPECT_GT(rt.stats().evictions, 0u);
  }
  Runtime rt(gpu_initiated((sssp_footprint_pages() + chunk_table_pages()) / 4, EvictionPolicy::clock, workloads::sssp_pages_held));
  expect_paged_sssp_matches(rt, sm_count() * 8, 64, true);
  EXPECT_GT(rt.stats().evictions, 0u);
}

// Connected components by Afforest (cc_afforest.cuh).

/// A graph whose last Afforest pass has rows to walk (on the R-MAT graph the neighbour rounds
/// join nearly everything): uniform, one undirected edge per vertex, with its reference labels
/// and a Balanced CSR of one edge per chunk (every row of the last pass cut into several).
struct SparseGraph {
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint32_t> columns;
  std::vector<std::uint32_t> labels;
  Balanced table;
};

const SparseGraph& sparse_graph() {
  static const SparseGraph g = [] {
    const workloads::UniformParams p{.scale = 16, .edge_factor = 1, .seed = 2024};
    SparseGraph built{std::vector<std::uint64_t>(p.vertices() + 1), std::vector<std::uint32_t>(p.directed_edges()), {}, {}};
    workloads::build_uniform_csr(p, built.offsets, built.columns);
    built.labels = workloads::reference_cc(built.offsets, built.columns);
    built.table.csr = workloads::balance_csr(built.offsets, 1);
    built.table.first_chunks = workloads::first_chunks(built.table.csr, p.vertices());
    return built;
  }();
  return g;
}

/// One graph of the Afforest tests, with its reference labels and chunk table.
struct AfforestCase {
  const char* name;
  const std::vector<std::uint64_t>& offsets;
  const std::vector<std::uint32_t>& columns;
  const std::vector<std::uint32_t>& labels;
  const Balanced& table;  ///< its Balanced CSR
  bool last_pass_has_rows;
  [[nodiscard]] std::uint64_t vertices() const { return offsets.size() - 1; }
  /// Pages of the objects (offsets, columns, labels, and the chunk table when `balanced_rows`).
  [[nodiscard]] std::uint64_t footprint_pages(bool balanced_rows) const {
    const std::uint64_t table_pages =
        balanced_rows ? pages_of(table.csr.chunk_offsets.size() * 8) + pages_of(table.first_chunks.size() * 4) : 0;
    return pages_of(offsets.size() * 8) + pages_of(columns.size() * 4) + pages_of(vertices() * 4) + table_pages;
  }
};

std::vector<AfforestCase> afforest_cases() {
  const Graph& g = graph();
  const SparseGraph& sparse = sparse_graph();
  return {{"R-MAT", g.offsets, g.columns, g.labels, balanced(), false},
          {"sparse uniform", sparse.offsets, sparse.columns, sparse.labels, sparse.table, true}};
}

/// What every Afforest run must show besides its labels: the sampled root is in the largest
/// component (some vertex of it), and on the sparse graph the last pass walked rows of more than
/// neighbour_rounds entries each.
void expect_afforest_counts(const AfforestCase& c, const workloads::AfforestCounts& counts) {
  std::vector<std::uint64_t> sizes(c.vertices(), 0);
  for (const std::uint32_t label : c.labels) ++sizes[label];
  EXPECT_EQ(sizes[c.labels[counts.giant]], *std::max_element(sizes.begin(), sizes.end()));
  if (c.last_pass_has_rows) EXPECT_GT(counts.rows_linked, 0u);
  if (counts.rows_linked == 0) EXPECT_EQ(counts.entries_linked, 0u);
  else EXPECT_GT(counts.entries_linked, std::uint64_t{counts.rows_linked} * workloads::afforest::neighbour_rounds);
}

/// Afforest with the plain-pointer kernels on this graph (device or pinned host memory), over
/// the Balanced CSR when `chunks` is given, twice (the labels reset in between); the labels in
/// device memory, compared with the reference.
void expect_raw_afforest_matches(const AfforestCase& c, const std::uint64_t* offsets, const std::uint32_t* columns,
                                 const workloads::RawChunkTable* chunks = nullptr) {
  SCOPED_TRACE(std::string(c.name) + (chunks != nullptr ? ", balanced" : ""));
  const std::uint64_t n = c.vertices();
  DeviceVector<std::uint32_t> labels(n);
  workloads::FrontierQueues queues(n, chunks != nullptr ? c.table.csr.chunks() : 0);
  workloads::AfforestScratch scratch;
  for (int run = 0; run < 2; ++run) {
    workloads::fill_identity<<<64, 256>>>(labels.get(), n);
    WARPVM_CUDA_TRY(cudaGetLastError());
    const workloads::AfforestCounts counts =
        workloads::cc_afforest_raw(nullptr, queues, scratch, offsets, columns, labels.get(), sm_count() * 8, 1, chunks);
    EXPECT_EQ(compare_values(labels.to_host().data(), c.labels), "");
    expect_afforest_counts(c, counts);
  }
}

/// Afforest through warpvm objects (migrate) of `rt`, twice (the second from an emptied cache),
/// each compared with the reference on the labels' host copy; `balanced_rows` as for
/// expect_paged_bfs_matches, with the case's chunk table.
void expect_paged_afforest_matches(Runtime& rt, const AfforestCase& c, std::uint64_t wanted_blocks, unsigned block_threads,
                                   bool balanced_rows = false) {
  SCOPED_TRACE(std::string(c.name) + (balanced_rows ? ", balanced" : ""));
  const std::uint64_t n = c.vertices();
  auto offsets = upload(rt, c.offsets, "offsets");
  auto columns = upload(rt, c.columns, "columns");
  auto labels = rt.alloc<std::uint32_t>(n, Placement::migrate, "labels");
  const PagedChunks chunks(rt, balanced_rows, c.table);
  workloads::FrontierQueues queues(n, chunks.chunks());
  workloads::AfforestScratch scratch;
  const std::uint64_t max_blocks = workloads::max_paged_blocks(rt, wanted_blocks, block_threads);
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    rt.drop_cached();
    std::iota(labels.host().begin(), labels.host().end(), 0u);
    const workloads::AfforestCounts counts = workloads::cc_afforest_paged(rt, queues, scratch, offsets.device(), columns.device(),
                                                                labels.device(), max_blocks, 1, block_threads, chunks.table());
    rt.flush();
    EXPECT_EQ(compare_values(labels.host().data(), c.labels), "");
    expect_afforest_counts(c, counts);
  }
}

class GraphAfforest : public Graph500Bfs {};

TEST_F(GraphAfforest, RawKernelsOnDeviceMemoryMatchReference) {
  for (const AfforestCase& c : afforest_cases()) {
    const DeviceVector offsets(c.offsets), chunk_offsets(c.table.csr.chunk_offsets);
    const DeviceVector columns(c.columns), vertex_chunks(c.table.first_chunks);
    expect_raw_afforest_matches(c, offsets.get(), columns.get());
    const workloads::RawChunkTable chunks{chunk_offsets.get(), vertex_chunks.get()};
    expect_raw_afforest_matches(c, offsets.get(), columns.get(), &chunks);
  }
}

TEST_F(GraphAfforest, RawKernelsOnPinnedHostMemoryMatchReference) {
  for (const AfforestCase& c : afforest_cases()) {
    const MappedBuffer offsets(c.offsets), columns(c.columns);
    expect_raw_afforest_matches(c, offsets.device<std::uint64_t>(), columns.device<std::uint32_t>());
  }
}

TEST_F(GraphAfforest, PagedWholeGraphCached) {
  // The whole graph, and at least what one block of graph_block_threads may hold at once (the
  // sparse graph is smaller than that): nothing is evicted either way.
  const std::uint64_t least = detail::frames_required(workloads::graph_block_threads, workloads::cc_afforest_pages_held);
  for (const AfforestCase& c : afforest_cases())
    for (const bool balanced_rows : {false, true}) {
      Runtime rt(gpu_initiated(std::max(c.footprint_pages(balanced_rows), least), EvictionPolicy::clock,
                               workloads::cc_afforest_pages_held));
      expect_paged_afforest_matches(rt, c, sm_count() * 8, workloads::graph_block_threads, balanced_rows);
      EXPECT_EQ(rt.stats().evictions, 0u);
    }
}

TEST_F(GraphAfforest, PagedQuarterCacheEvictsAndStillMatches) {
  // A quarter of the sparse graph's pages is less than a block of 64 threads needs: that, then.
  const std::uint64_t least = detail::frames_required(64, workloads::cc_afforest_pages_held);
  for (const AfforestCase& c : afforest_cases())
    for (const bool balanced_rows : {false, true}) {
      Runtime rt(gpu_initiated(std::max(c.footprint_pages(balanced_rows) / 4, least), EvictionPolicy::clock,
                               workloads::cc_afforest_pages_held));
      expect_paged_afforest_matches(rt, c, sm_count() * 8, 64, balanced_rows);
      EXPECT_GT(rt.stats().evictions, 0u);
    }
}

TEST_F(GraphAfforest, LeastCacheTheLaunchesMayHave) {
  // One block of 64 threads, 128 frames (a column page and a label each): it finishes, evicting.
  constexpr unsigned threads = 64;
  for (const AfforestCase& c : afforest_cases()) {
    Runtime rt(gpu_initiated(detail::frames_required(threads, workloads::cc_afforest_pages_held), EvictionPolicy::clock,
                             workloads::cc_afforest_pages_held));
    EXPECT_EQ(rt.max_resident_threads(), threads);
    expect_paged_afforest_matches(rt, c, 1, threads);
    EXPECT_GT(rt.stats().evictions, 0u);
  }
}

TEST_F(GraphAfforest, UvmPresetWithTheWholeGraph) {
  // Whole 2 MB chunks: the R-MAT graph's objects need the most (offsets 1, columns 4, labels 1).
  for (const AfforestCase& c : afforest_cases()) {
    Runtime rt(uvm_preset(uvm_chunks()));
    expect_paged_afforest_matches(rt, c, sm_count() * 8, workloads::graph_block_threads);
  }
}

}  // namespace
}  // namespace warpvm::testing

// Breadth-first search (bench/apps/bfs.cuh) on an R-MAT graph against the CPU reference, from
// several roots: through warpvm with the whole graph cached, with a quarter of it, and with the
// least cache the launch may have; through the uvm preset where it can run (and its refusal
// where it cannot); and the plain-pointer kernel the benchmark's other modes use.

#include "bfs.cuh"
#include "gpu_test_support.cuh"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

/// Scale 16: 64 Ki vertices, 2 Mi directed edges (8 MiB of columns).
constexpr sim::RmatParams graph_params{.scale = 16, .edge_factor = 16, .seed = 2024};
constexpr unsigned roots_per_test = 3;

struct Graph {
  std::vector<std::uint64_t> offsets;
  std::vector<std::uint32_t> columns;
  std::vector<std::uint32_t> roots;
  std::vector<std::vector<std::uint32_t>> expected;  ///< reference levels per root
};

/// Generated once for the suite, with the reference levels of each root.
const Graph& graph() {
  static const Graph g = [] {
    Graph built{std::vector<std::uint64_t>(graph_params.vertices() + 1),
                std::vector<std::uint32_t>(graph_params.directed_edges()), {}, {}};
    sim::build_rmat_csr(graph_params, built.offsets, built.columns);
    built.roots = sim::pick_roots(built.offsets, built.columns, roots_per_test, 17);
    for (const std::uint32_t root : built.roots) built.expected.push_back(sim::reference_bfs(built.offsets, built.columns, root));
    return built;
  }();
  return g;
}

std::uint64_t pages_of(std::uint64_t bytes) { return (bytes + 4095) / 4096; }

/// Pages of the three objects (offsets, columns, levels): the cache that holds them all.
std::uint64_t footprint_pages() {
  const std::uint64_t n = graph_params.vertices();
  return pages_of((n + 1) * 8) + pages_of(graph_params.directed_edges() * 4) + pages_of(n * 4);
}

Config gpu_initiated(std::uint64_t frames, EvictionPolicy eviction = EvictionPolicy::clock) {
  return Config{.cache_bytes = frames * 4096, .eviction = eviction, .max_pages_held_per_thread = apps::bfs_pages_held};
}

/// "" when `levels` equals the reference, else the first difference and how many there are.
std::string compare_levels(const std::uint32_t* levels, const std::vector<std::uint32_t>& expected) {
  std::uint64_t wrong = 0, first = 0;
  for (std::uint64_t v = expected.size(); v-- > 0;) {
    if (levels[v] != expected[v]) {
      ++wrong;
      first = v;
    }
  }
  if (wrong == 0) return {};
  return std::to_string(wrong) + " vertices differ; vertex " + std::to_string(first) + ": level " +
         std::to_string(levels[first]) + ", expected " + std::to_string(expected[first]);
}

std::uint32_t depth_of(const std::vector<std::uint32_t>& expected) {
  std::uint32_t depth = 0;
  for (const std::uint32_t level : expected)
    if (level != apps::bfs_unreached) depth = std::max(depth, level + 1);
  return depth;
}

/// The graph as warpvm objects (migrate) of `rt`, searched from every root with blocks of
/// `block_threads`, each result compared with the reference on the levels' host copy.
void expect_paged_bfs_matches(Runtime& rt, std::uint64_t wanted_blocks, unsigned block_threads = apps::bfs_block_threads) {
  const Graph& g = graph();
  const std::uint64_t n = graph_params.vertices();
  auto offsets = rt.alloc<std::uint64_t>(n + 1, Placement::migrate, "offsets");
  auto columns = rt.alloc<std::uint32_t>(g.columns.size(), Placement::migrate, "columns");
  auto levels = rt.alloc<std::uint32_t>(n, Placement::migrate, "levels");
  std::copy(g.offsets.begin(), g.offsets.end(), offsets.host().begin());
  std::copy(g.columns.begin(), g.columns.end(), columns.host().begin());
  apps::BfsQueues queues(n);
  const std::uint64_t max_blocks = apps::max_paged_blocks(rt, wanted_blocks, block_threads);
  for (std::size_t r = 0; r < g.roots.size(); ++r) {
    SCOPED_TRACE("root " + std::to_string(g.roots[r]));
    rt.drop_cached();  // nothing of the last search stays cached; its levels are on the host
    std::fill(levels.host().begin(), levels.host().end(), apps::bfs_unreached);
    levels.host()[g.roots[r]] = 0;
    const std::uint32_t depth = apps::bfs_paged(rt, queues, offsets.device(), columns.device(), levels.device(),
                                                g.roots[r], max_blocks, block_threads);
    rt.flush();
    EXPECT_EQ(compare_levels(levels.host().data(), g.expected[r]), "");
    EXPECT_EQ(depth, depth_of(g.expected[r]));
  }
}

class Graph500Bfs : public GpuTest {
 protected:
  static std::uint64_t sm_count() {
    int sms = 0;
    WARPVM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    return static_cast<std::uint64_t>(sms);
  }
};

// Runs without a GPU too: the graph and its reference levels the GPU tests compare against.
TEST(Graph500BfsReference, LevelsAreValid) {
  const Graph& g = graph();
  ASSERT_EQ(g.roots.size(), roots_per_test);
  for (std::size_t r = 0; r < g.roots.size(); ++r)
    EXPECT_EQ(sim::check_bfs_levels(g.offsets, g.columns, g.roots[r], g.expected[r]), "");
}

TEST_F(Graph500Bfs, RawKernelOnDeviceMemoryMatchesReference) {
  const Graph& g = graph();
  const std::uint64_t n = graph_params.vertices();
  DeviceVector<std::uint64_t> offsets(n + 1);
  DeviceVector<std::uint32_t> columns(g.columns.size());
  DeviceVector<std::uint32_t> levels(n);
  WARPVM_CUDA_TRY(cudaMemcpy(offsets.get(), g.offsets.data(), (n + 1) * 8, cudaMemcpyHostToDevice));
  WARPVM_CUDA_TRY(cudaMemcpy(columns.get(), g.columns.data(), g.columns.size() * 4, cudaMemcpyHostToDevice));
  apps::BfsQueues queues(n);
  for (std::size_t r = 0; r < g.roots.size(); ++r) {
    SCOPED_TRACE("root " + std::to_string(g.roots[r]));
    apps::bfs_reset_levels<<<64, 256>>>(levels.get(), n, g.roots[r]);
    WARPVM_CUDA_TRY(cudaDeviceSynchronize());
    const std::uint32_t depth = apps::bfs_raw(nullptr, queues, offsets.get(), columns.get(), levels.get(), g.roots[r],
                                              sm_count() * 8);
    EXPECT_EQ(compare_levels(levels.to_host().data(), g.expected[r]), "");
    EXPECT_EQ(depth, depth_of(g.expected[r]));
  }
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

TEST_F(Graph500Bfs, QuarterCacheWithFifoEviction) {
  Runtime rt(gpu_initiated(footprint_pages() / 4, EvictionPolicy::fifo));
  expect_paged_bfs_matches(rt, sm_count() * 8, 64);
  EXPECT_GT(rt.stats().evictions, 0u);
}

TEST_F(Graph500Bfs, LeastCacheTheLaunchMayHave) {
  // One block of 64 threads, each holding a column page and one element: 128 frames (512 KiB,
  // 6% of the graph) is the least check_launch accepts, and enough to finish.
  constexpr unsigned threads = 64;
  const std::uint64_t least = detail::frames_required(threads, apps::bfs_pages_held);
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

}  // namespace
}  // namespace warpvm::testing

// warpvm-walk-bench: the random-walk graph clustering case of the allocator paper (AlignMalloc,
// Sections II-A and VII-H; issues #4 and #5). W walkers, one thread each (as the paper's 1,000
// threads: one thread per walker is what puts 32 walkers' allocations in one warp's region, the
// case AlignMalloc's layout is made for), over one generated graph (R-MAT or uniform, fixed seed):
//
//   build   each walker allocates, inside a kernel, one piece of its list size and copies the
//           adjacency lists of the vertices it owns into it (warpvm/workloads/walk/random_walk.cuh);
//   walk    each walker takes --steps steps from a drawn start, reading every edge from the
//           piece of the vertex's owner (so walks cross every walker's allocation), and counts
//           its visits per vertex (the clustering signal) and hashes its path.
//
// Both phases are timed alone with CUDA events; every run's visit counts and path hashes are
// compared with the host's replay of the same walks (same counter-based draws) and the pieces
// are freed (untimed). Modes:
//
//   device                 one cudaMalloc'd CSR; "allocation" hands out slices of it: the bound
//   cuda_malloc            CUDA's device malloc/free, its heap sized to fit (cudaDeviceSetLimit)
//   warpvm_aligned         warpvm::Heap, AlignMalloc's layout, warpvm's default transport
//   warpvm_contiguous      warpvm::Heap, each walker's bytes in one piece (SyncMalloc-like)
//   warpvm_uvm_aligned     the two layouts under the uvm preset (UVM's fault policy served by a
//   warpvm_uvm_contiguous  host thread: batches, tree prefetch)
//
// In the warpvm modes the cache is emptied between the phases (untimed; --warm-walk keeps it),
// so the walk reads the pieces through the fault path, as the paper's walks read UVM memory.
// The row offsets (the directory), the visit counts and the path hashes are device memory in
// every mode. JSON Lines (bench/common's Recorder), one record per mode: seconds (build + walk
// per run), lists alloc_seconds and walk_seconds, faults and bytes_moved of the walk phase
// (warpvm), extra build_faults, build_bytes_moved, failed (walkers given null), requests (heap
// host round trips), peak_reserved_bytes; docs/bench/walk.md. Exits 1 when a mode is not verified.

#include "harness.cuh"
#include "cli.hpp"
#include "warpvm/workloads/walk/random_walk.cuh"

#include "warpvm/heap.hpp"
#include "warpvm/workloads/graph/graph_inputs.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::bench {
namespace {

using workloads::walk::WalkPlan;

const char* const all_modes =
    "device, cuda_malloc, warpvm_aligned, warpvm_contiguous, warpvm_uvm_aligned, warpvm_uvm_contiguous";

struct WalkOptions {
  Options common;  ///< modes, repeats, out, commit, driver, suite
  std::string generator = "rmat";
  unsigned scale = 16, edge_factor = 16;
  std::uint64_t seed = 1;
  std::uint32_t walkers = 1000, steps = 1000;
  std::uint64_t heap_bytes = 0;   ///< 0: sized from the graph (heap_capacity)
  std::uint64_t cache_bytes = 0;  ///< warpvm modes' cache (0: the heap's capacity)
  bool cold_walk = true;          ///< empty the cache between the phases
  Placement heap_placement = Placement::migrate;  ///< the default-config warpvm modes' heap
};

WalkOptions parse(int argc, char** argv) {
  WalkOptions o;
  o.common.suite = "walk";
  CLI::App app{std::string("warpvm-walk-bench: the random-walk clustering case, JSON Lines out.\n"
                           "W walkers (one thread each) build their pieces of a graph of 2^scale vertices and edge-factor x\n"
                           "2^scale undirected edges with device-side allocation, then walk it.\nmodes: ") + all_modes,
               "warpvm-walk-bench"};
  add_shared_options(app, o.common);
  app.get_option("--modes")->check(cli::one_of(all_modes));
  app.add_option("--generator", o.generator, "rmat, or uniform (both ends of each edge uniform)")
      ->check(CLI::IsMember({"rmat", "uniform"}));
  app.add_option("--scale", o.scale, "2^scale vertices");
  app.add_option("--edge-factor", o.edge_factor, "edge-factor x 2^scale undirected edges");
  app.add_option("--seed", o.seed, "seed of the graph and the walks");
  // The owner arithmetic multiplies a vertex by the walker count in 64 bits (random_walk.cuh).
  app.add_option("--walkers", o.walkers, "walkers, one thread each")->check(CLI::Range(1u, 1u << 31));
  app.add_option("--steps", o.steps, "steps per walker")->check(CLI::Range(std::uint32_t{1}, ~std::uint32_t{0}));
  cli::add_bytes(app, "--heap", o.heap_bytes, "warpvm heap capacity (default: 16 x the edge bytes + 64 MiB)");
  cli::add_bytes(app, "--cache", o.cache_bytes,
                 "the cache of the default-config warpvm modes (default: the heap's capacity; the uvm modes cache the "
                 "whole heap, as that preset needs)");
  app.add_flag_function(
      "--warm-walk", [&o](std::int64_t) { o.cold_walk = false; }, "keep the pieces cached between the phases");
  app.add_option_function<std::string>(
         "--heap-placement",
         [&o](const std::string& value) {
           for (const Placement p : {Placement::migrate, Placement::automatic, Placement::remote})
             if (value == to_string(p)) o.heap_placement = p;
         },
         "the placement of the default-config warpvm modes' heap (HeapOptions::placement; the record's policy field "
         "says so when not migrate)")
      ->check(CLI::IsMember({"migrate", "automatic", "remote"}));
  cli::parse(app, argc, argv);
  try {
    if (o.generator == "rmat") workloads::RmatParams{.scale = o.scale, .edge_factor = o.edge_factor, .seed = o.seed}.validate();
    else workloads::UniformParams{.scale = o.scale, .edge_factor = o.edge_factor, .seed = o.seed}.validate();
  } catch (const std::invalid_argument& e) {
    cli::refuse(app, e.what());
  }
  return o;
}

// ---- where the pieces live: one face for the kernels ------------------------------------------

__device__ std::uint64_t thread_index() { return std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; }

/// warpvm::Heap: pieces are heap_ptr, read and written through warpvm's page cache.
struct HeapPieces {
  using pointer = heap_ptr;
  device_heap heap;
  __device__ pointer allocate(std::uint64_t /*first_edge*/, std::uint64_t bytes) const { return heap.malloc(bytes); }
  __device__ void release(const pointer& p) const { heap.free(p); }
  __device__ std::uint32_t load(const pointer& p, std::uint64_t i) const { return heap.load<std::uint32_t>(p, i); }
  __device__ void store(const pointer& p, std::uint64_t i, std::uint32_t v) const { heap.store<std::uint32_t>(p, i, v); }
};

/// CUDA's device malloc and free.
struct CudaMallocPieces {
  using pointer = std::uint32_t*;
  __device__ pointer allocate(std::uint64_t /*first_edge*/, std::uint64_t bytes) const {
    return static_cast<pointer>(malloc(bytes));
  }
  __device__ void release(pointer p) const { free(p); }
  __device__ std::uint32_t load(pointer p, std::uint64_t i) const { return p[i]; }
  __device__ void store(pointer p, std::uint64_t i, std::uint32_t v) const { p[i] = v; }
};

/// The bound: one CSR column array in device memory, a piece is the slice at its first edge.
struct CsrPieces {
  using pointer = std::uint32_t*;
  std::uint32_t* columns;
  __device__ pointer allocate(std::uint64_t first_edge, std::uint64_t /*bytes*/) const { return columns + first_edge; }
  __device__ void release(pointer /*p*/) const {}
  __device__ std::uint32_t load(pointer p, std::uint64_t i) const { return p[i]; }
  __device__ void store(pointer p, std::uint64_t i, std::uint32_t v) const { p[i] = v; }
};

/// Walker w allocates its piece and copies its vertices' rows into it (counts[0]: walkers given
/// null; such a walker leaves its piece null and the walk phase is not run).
template <class Pieces>
__global__ void build_pieces(Pieces pieces, WalkPlan plan, const std::uint64_t* offsets, const std::uint32_t* columns,
                             typename Pieces::pointer* piece_of, unsigned long long* counts) {
  const std::uint64_t w = thread_index();
  if (w >= plan.walkers) return;
  const auto walker = static_cast<std::uint32_t>(w);
  const std::uint64_t first = offsets[plan.first_vertex(walker)], edges = workloads::walk::piece_edges(plan, offsets, walker);
  const typename Pieces::pointer piece =
      edges == 0 ? typename Pieces::pointer{} : pieces.allocate(first, edges * sizeof(std::uint32_t));
  piece_of[w] = piece;
  if (edges != 0 && !piece) {
    atomicAdd(counts, 1ull);
    return;
  }
  for (std::uint64_t k = 0; k < edges; ++k) pieces.store(piece, k, columns[first + k]);
}

/// Walker w's walk over everyone's pieces: visits counted per vertex, the path hash kept.
template <class Pieces>
__global__ void walk_pieces(Pieces pieces, WalkPlan plan, const std::uint64_t* offsets,
                            const typename Pieces::pointer* piece_of, std::uint32_t* visits, std::uint64_t* path_hashes) {
  const std::uint64_t w = thread_index();
  if (w >= plan.walkers) return;
  path_hashes[w] = workloads::walk::walk(
      plan, offsets, static_cast<std::uint32_t>(w),
      [&](std::uint64_t v, std::uint64_t k) {
        const workloads::walk::EdgeLocation at = workloads::walk::locate(plan, offsets, v, k);
        return pieces.load(piece_of[at.piece], at.index);
      },
      [&](std::uint64_t v) { atomicAdd(visits + v, 1u); });
}

template <class Pieces>
__global__ void free_pieces(Pieces pieces, WalkPlan plan, const typename Pieces::pointer* piece_of) {
  const std::uint64_t w = thread_index();
  if (w < plan.walkers) pieces.release(piece_of[w]);
}

constexpr unsigned block_threads = 256;

/// What a mode does around the phases, host side.
struct PhaseHooks {
  std::function<void()> wait{};         ///< waits for the stream (warpvm: raising the heap's errors)
  std::function<void()> before_build{};  ///< untimed, ahead of each run (warpvm: reset the counters)
  std::function<void()> after_build{};  ///< untimed, once the build is done (warpvm: stats, drop the cache)
  std::function<void()> after_walk{};   ///< untimed, once the walk is done (warpvm: stats)
};

class WalkBench {
 public:
  explicit WalkBench(const WalkOptions& o)
      : o_(o), recorder_(o.common) {
    generate();
    plan_ = WalkPlan{.vertices = offsets_.size() - 1, .walkers = o_.walkers, .steps = o_.steps, .seed = o_.seed};
    const auto start = std::chrono::steady_clock::now();
    expected_ = workloads::walk::reference_walks(plan_, offsets_, columns_);
    std::fprintf(stderr, "walk-bench: %u walkers x %u steps replayed on the host in %.2f s\n", o_.walkers, o_.steps,
                 seconds_since(start));
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  }
  ~WalkBench() { cudaStreamDestroy(stream_); }
  WalkBench(const WalkBench&) = delete;
  WalkBench& operator=(const WalkBench&) = delete;

  /// Every wanted mode, one record each (a wrong result fails the run: bench_main).
  void run() {
    // CUDA's heap size is fixed before its first malloc kernel: set it before anything runs.
    if (o_.common.wants_mode("cuda_malloc")) size_cuda_heap();
    DeviceBuffer<std::uint64_t> offsets(offsets_.size());
    DeviceBuffer<std::uint32_t> columns(columns_.size());
    check(cudaMemcpy(offsets.data, offsets_.data(), offsets_.size() * sizeof(std::uint64_t), cudaMemcpyHostToDevice),
          "copy offsets");
    check(cudaMemcpy(columns.data, columns_.data(), columns_.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice),
          "copy columns");
    d_offsets_ = offsets.data;
    d_columns_ = columns.data;
    auto wait_stream = [this] { check(cudaStreamSynchronize(stream_), "wait for the walk kernels"); };
    if (o_.common.wants_mode("device")) {
      DeviceBuffer<std::uint32_t> csr(columns_.size());
      write(measure("device", CsrPieces{csr.data}, stream_, {.wait = wait_stream}));
    }
    if (o_.common.wants_mode("cuda_malloc")) {
      Record r = measure("cuda_malloc", CudaMallocPieces{}, stream_, {.wait = wait_stream});
      r.policy = "cuda_heap_" + std::to_string(cuda_heap_bytes_ >> 20) + "MiB";
      write(std::move(r));
    }
    for (const bool uvm_preset : {false, true})
      for (const HeapLayout layout : {HeapLayout::aligned, HeapLayout::contiguous}) {
        const std::string mode = std::string(uvm_preset ? "warpvm_uvm_" : "warpvm_") +
                                 (layout == HeapLayout::aligned ? "aligned" : "contiguous");
        if (o_.common.wants_mode(mode)) write(paged(mode, layout, uvm_preset));
      }
  }

 private:
  void generate() {
    const auto start = std::chrono::steady_clock::now();
    const auto pfor = [](std::uint64_t n, const std::function<void(std::uint64_t, std::uint64_t)>& body) {
      parallel_for(n, body);
    };
    if (o_.generator == "rmat") {
      const workloads::RmatParams p{.scale = o_.scale, .edge_factor = o_.edge_factor, .seed = o_.seed};
      offsets_.resize(p.vertices() + 1);
      columns_.resize(p.directed_edges());
      workloads::build_rmat_csr(p, offsets_, columns_, pfor);
    } else {
      const workloads::UniformParams p{.scale = o_.scale, .edge_factor = o_.edge_factor, .seed = o_.seed};
      offsets_.resize(p.vertices() + 1);
      columns_.resize(p.directed_edges());
      workloads::build_uniform_csr(p, offsets_, columns_, pfor);
    }
    std::fprintf(stderr, "walk-bench: %s scale %u, edge factor %u, seed %llu: %zu vertices, %zu directed edges, "
                 "generated in %.1f s\n", o_.generator.c_str(), o_.scale, o_.edge_factor,
                 static_cast<unsigned long long>(o_.seed), offsets_.size() - 1, columns_.size(), seconds_since(start));
  }

  std::uint64_t edge_bytes() const { return columns_.size() * sizeof(std::uint32_t); }
  std::uint64_t largest_piece_bytes() const {
    std::uint64_t largest = 0;
    for (std::uint32_t w = 0; w < plan_.walkers; ++w)
      largest = std::max(largest, workloads::walk::piece_edges(plan_, offsets_.data(), w) * sizeof(std::uint32_t));
    return largest;
  }
  /// The heap's capacity: --heap, else room for AlignMalloc's padding (a region's lanes all get
  /// the group's largest size, placement rounds regions up, the small area takes a quarter).
  std::uint64_t heap_capacity() const { return o_.heap_bytes != 0 ? o_.heap_bytes : 16 * edge_bytes() + (64ull << 20); }

  /// CUDA's malloc heap: twice the pieces' bytes and 64 MiB for its own bookkeeping, within 40%
  /// of the device (as warpvm-alloc-bench sizes it).
  void size_cuda_heap() {
    std::size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    cuda_heap_bytes_ = std::min<std::uint64_t>(2 * edge_bytes() + (64ull << 20), total_bytes / 10 * 4);
    check(cudaDeviceSetLimit(cudaLimitMallocHeapSize, cuda_heap_bytes_), "cudaDeviceSetLimit(cudaLimitMallocHeapSize)");
  }

  dim3 grid() const { return dim3(static_cast<unsigned>((plan_.walkers + block_threads - 1) / block_threads)); }

  /// One mode: a warm-up run and --repeats timed ones, each hooks.before_build, build (timed),
  /// hooks.after_build, walk (timed), hooks.after_walk, then the check against the replay and the
  /// frees.
  template <class Pieces>
  Record measure(const std::string& mode, const Pieces& pieces, cudaStream_t stream, const PhaseHooks& hooks) {
    DeviceBuffer<typename Pieces::pointer> piece_of(plan_.walkers);
    DeviceBuffer<std::uint32_t> visits(plan_.vertices);
    DeviceBuffer<std::uint64_t> path_hashes(plan_.walkers);
    DeviceBuffer<unsigned long long> counts(1);
    std::vector<std::uint32_t> visits_out(plan_.vertices);
    std::vector<std::uint64_t> hashes_out(plan_.walkers);
    cudaEvent_t build_start = nullptr, build_end = nullptr, walk_start = nullptr, walk_end = nullptr;
    for (cudaEvent_t* e : {&build_start, &build_end, &walk_start, &walk_end}) check(cudaEventCreate(e), "cudaEventCreate");
    Record r;
    r.workload = "random_walk";
    r.mode = mode;
    r.verified = true;
    std::uint64_t failed = 0;
    for (int run = 0; run <= o_.common.repeats; ++run) {  // run 0: warm-up
      if (hooks.before_build) hooks.before_build();
      check(cudaMemsetAsync(visits.data, 0, plan_.vertices * sizeof(std::uint32_t), stream), "clear visits");
      check(cudaMemsetAsync(path_hashes.data, 0, plan_.walkers * sizeof(std::uint64_t), stream), "clear hashes");
      check(cudaMemsetAsync(counts.data, 0, sizeof(unsigned long long), stream), "clear counts");
      check(cudaEventRecord(build_start, stream), "cudaEventRecord");
      build_pieces<<<grid(), block_threads, 0, stream>>>(pieces, plan_, d_offsets_, d_columns_, piece_of.data,
                                                         counts.data);
      check(cudaGetLastError(), "build_pieces launch");
      check(cudaEventRecord(build_end, stream), "cudaEventRecord");
      hooks.wait();
      float build_ms = 0, walk_ms = 0;
      check(cudaEventElapsedTime(&build_ms, build_start, build_end), "cudaEventElapsedTime");
      unsigned long long nulls = 0;
      check(cudaMemcpy(&nulls, counts.data, sizeof nulls, cudaMemcpyDeviceToHost), "copy counts");
      if (hooks.after_build) hooks.after_build();
      // A walk over a missing piece has nothing to read: the run is counted and not verified.
      if (nulls == 0) {
        check(cudaEventRecord(walk_start, stream), "cudaEventRecord");
        walk_pieces<<<grid(), block_threads, 0, stream>>>(pieces, plan_, d_offsets_, piece_of.data, visits.data,
                                                          path_hashes.data);
        check(cudaGetLastError(), "walk_pieces launch");
        check(cudaEventRecord(walk_end, stream), "cudaEventRecord");
        hooks.wait();
        check(cudaEventElapsedTime(&walk_ms, walk_start, walk_end), "cudaEventElapsedTime");
      }
      if (hooks.after_walk) hooks.after_walk();
      check(cudaMemcpy(visits_out.data(), visits.data, plan_.vertices * sizeof(std::uint32_t), cudaMemcpyDeviceToHost),
            "copy visits");
      check(cudaMemcpy(hashes_out.data(), path_hashes.data, plan_.walkers * sizeof(std::uint64_t),
                       cudaMemcpyDeviceToHost),
            "copy path hashes");
      free_pieces<<<grid(), block_threads, 0, stream>>>(pieces, plan_, piece_of.data);
      check(cudaGetLastError(), "free_pieces launch");
      hooks.wait();
      failed += nulls;
      r.verified = r.verified && nulls == 0 && matches(mode, visits_out, hashes_out);
      if (run == 0) continue;
      r.lists["alloc_seconds"].push_back(build_ms / 1e3);
      r.lists["walk_seconds"].push_back(walk_ms / 1e3);
      r.seconds.push_back((build_ms + walk_ms) / 1e3);
    }
    for (cudaEvent_t e : {build_start, build_end, walk_start, walk_end}) check(cudaEventDestroy(e), "cudaEventDestroy");
    r.extra["failed"] = static_cast<double>(failed) / (o_.common.repeats + 1);
    return r;
  }

  /// A warpvm mode: a Runtime (default config, or the uvm preset with the whole heap cached, as
  /// that preset needs) and a Heap in `layout`; the walk phase's counters go into faults and
  /// bytes_moved, the build's into build_*; every region back to the heap after the frees.
  Record paged(const std::string& mode, HeapLayout layout, bool uvm_preset) {
    const std::uint64_t capacity = heap_capacity();
    Config config = uvm_preset ? uvm_preset_config({capacity}, 1.0)
                               : Config{.cache_bytes = o_.cache_bytes != 0 ? o_.cache_bytes : capacity};
    config.max_pages_held_per_thread = 1;  // an element access at a time
    Runtime rt(config);
    const Placement placement = uvm_preset ? Placement::migrate : o_.heap_placement;
    Heap heap(rt, HeapOptions{.capacity_bytes = capacity, .layout = layout, .placement = placement});
    const HeapPieces pieces{heap.device()};
    for (const void* kernel : {reinterpret_cast<const void*>(build_pieces<HeapPieces>),
                               reinterpret_cast<const void*>(walk_pieces<HeapPieces>),
                               reinterpret_cast<const void*>(free_pieces<HeapPieces>)})
      rt.check_launch(kernel, grid(), dim3(block_threads), 0);
    Stats build{}, walk{};
    auto add = [](Stats& sum, const Stats& s) {
      sum.misses += s.misses;
      sum.bytes_in += s.bytes_in;
      sum.bytes_out += s.bytes_out;
      sum.evictions += s.evictions;
    };
    heap.reset_stats();
    // The untimed write-back between the phases (and the frees) count in neither phase.
    Record r = measure(mode, pieces, rt.stream(),
                       {.wait = [&] { rt.synchronize(); },
                        .before_build = [&] { rt.reset_stats(); },
                        .after_build =
                            [&] {
                              add(build, rt.stats());
                              if (o_.cold_walk) rt.drop_cached();  // written back, then read through faults
                              rt.reset_stats();
                            },
                        .after_walk = [&] { add(walk, rt.stats()); }});
    const HeapStats hs = heap.stats();
    const double runs = o_.common.repeats + 1;  // the warm-up counts too
    r.policy = (uvm_preset ? uvm_policy(config) : to_string(config.eviction)) +
               (layout == HeapLayout::aligned ? "-aligned" : "-contiguous") +
               (placement == Placement::migrate ? "" : std::string("-") + to_string(placement));
    r.cache_fraction = static_cast<double>(rt.cache_bytes()) / static_cast<double>(capacity);
    r.faults = static_cast<std::int64_t>(walk.misses / runs);
    r.bytes_moved = static_cast<std::int64_t>((walk.bytes_in + walk.bytes_out) / runs);
    r.extra["evictions"] = walk.evictions / runs;
    r.extra["build_faults"] = build.misses / runs;
    r.extra["build_bytes_moved"] = (build.bytes_in + build.bytes_out) / runs;
    r.extra["cache_bytes"] = static_cast<double>(rt.cache_bytes());
    r.extra["heap_bytes"] = static_cast<double>(capacity);
    r.extra["cold_walk"] = o_.cold_walk ? 1 : 0;
    r.extra["requests"] = hs.requests / runs;
    r.extra["peak_reserved_bytes"] = static_cast<double>(hs.peak_reserved_bytes);
    // Nulls are counted by the service as well; every region and small block must be back.
    const bool heap_clean = hs.reserved_bytes == 0 && hs.small_live_blocks == 0 &&
                            hs.failed_allocations == static_cast<std::uint64_t>(std::llround(r.extra["failed"] * runs));
    if (!heap_clean)
      std::fprintf(stderr, "walk-bench: %s: the heap holds %llu bytes and %llu small blocks after the frees\n",
                   mode.c_str(), static_cast<unsigned long long>(hs.reserved_bytes),
                   static_cast<unsigned long long>(hs.small_live_blocks));
    r.verified = r.verified && heap_clean;
    return r;
  }

  /// The device's visits and path hashes equal the replay's; says how many differ if not.
  bool matches(const std::string& mode, const std::vector<std::uint32_t>& visits,
               const std::vector<std::uint64_t>& hashes) const {
    std::uint64_t wrong_visits = 0, wrong_walks = 0;
    for (std::uint64_t v = 0; v < plan_.vertices; ++v) wrong_visits += visits[v] != expected_.visits[v];
    for (std::uint32_t w = 0; w < plan_.walkers; ++w) wrong_walks += hashes[w] != expected_.path_hashes[w];
    if (wrong_visits != 0 || wrong_walks != 0)
      std::fprintf(stderr, "walk-bench: %s: %llu of %llu visit counts and %llu of %u walks differ from the replay\n",
                   mode.c_str(), static_cast<unsigned long long>(wrong_visits),
                   static_cast<unsigned long long>(plan_.vertices), static_cast<unsigned long long>(wrong_walks),
                   plan_.walkers);
    return wrong_visits == 0 && wrong_walks == 0;
  }

  /// The fields every record shares, then the record written; returns whether it was verified.
  void write(Record r) {
    r.dataset_bytes = edge_bytes();
    r.useful_bytes = std::uint64_t{plan_.walkers} * plan_.steps * sizeof(std::uint32_t);  // an edge read per step
    r.extra["walkers"] = plan_.walkers;
    r.extra["steps"] = plan_.steps;
    r.extra["scale"] = o_.scale;
    r.extra["edge_factor"] = o_.edge_factor;
    r.extra["seed"] = static_cast<double>(o_.seed);
    r.extra["uniform"] = o_.generator == "uniform" ? 1 : 0;
    r.extra["vertices"] = static_cast<double>(plan_.vertices);
    r.extra["directed_edges"] = static_cast<double>(columns_.size());
    r.extra["largest_piece_bytes"] = static_cast<double>(largest_piece_bytes());
    r.extra["alloc_s"] = median(r.lists["alloc_seconds"]);
    r.extra["walk_s"] = median(r.lists["walk_seconds"]);
    recorder_.write(r);
  }

  const WalkOptions& o_;
  Recorder recorder_;
  std::vector<std::uint64_t> offsets_;
  std::vector<std::uint32_t> columns_;
  WalkPlan plan_{};
  workloads::walk::WalkResult expected_;
  const std::uint64_t* d_offsets_ = nullptr;  // the graph in device memory, the build's input
  const std::uint32_t* d_columns_ = nullptr;
  std::uint64_t cuda_heap_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  const auto options = warpvm::bench::parse(argc, argv);
  return warpvm::bench::bench_main("warpvm-walk-bench", "", [&] { warpvm::bench::WalkBench(options).run(); });
}

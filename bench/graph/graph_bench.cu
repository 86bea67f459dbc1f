// warpvm-graph-bench: breadth-first search, connected components (label propagation, and Afforest
// with --apps cc_afforest) and single-source shortest paths over one graph (R-MAT with Graph500
// parameters by default, a uniform random graph, or one loaded from a MatrixMarket file, an edge
// list or a graph cache; weights drawn from the seed) in every memory mode, each run verified
// against the CPU reference, one JSON Lines record per app, mode, cache size and root. The
// workloads, their modes and their fields: docs/bench/graph.md.

#include "graph_setup.cuh"
#include "harness.cuh"
#include "uvm_counters.hpp"
#include "warpvm/workloads/graph/bfs.cuh"
#include "warpvm/workloads/graph/cc.cuh"
#include "warpvm/workloads/graph/cc_afforest.cuh"
#include "warpvm/workloads/graph/sssp.cuh"
#include "warpvm/workloads/graph/graph_inputs.hpp"
#include "warpvm/workloads/graph/graph_reference.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::bench {
namespace {

/// One verified computation: an app, from a root (none for CC), with its reference result.
struct Task {
  App app = App::bfs;
  std::uint32_t root = 0;
  std::vector<std::uint32_t> expected{};  ///< levels, labels or distances per vertex
  std::uint32_t depth = 0;              ///< BFS: the iterations the search must take; else 0 (not fixed)
  std::uint64_t useful_bytes = 0;       ///< bytes of the graph the app must read
  std::uint64_t traversed_edges = 0;    ///< undirected edges of the component(s) worked on: TEPS's numerator
  std::map<std::string, double> fields{};  ///< what the reference says about the work, for the record
};

/// A mode's graph as plain pointers (weights null when no SSSP runs; the chunk table only with
/// --balanced).
struct RawGraph {
  const std::uint64_t* offsets;
  const std::uint32_t* columns;
  const std::uint32_t* weights;
  std::optional<workloads::RawChunkTable> chunks{};
  [[nodiscard]] const workloads::RawChunkTable* chunk_table() const { return chunks ? &*chunks : nullptr; }
};

class GraphBench {
 public:
  explicit GraphBench(const GraphOptions& o) : GraphBench(o, make_graph(o)) {}
  GraphBench(const GraphOptions& o, HostGraph graph)
      : o_(o),
        n_(graph.vertices),
        m_(graph.directed_edges),
        graph_origin_(std::move(graph.origin)),
        offsets_(std::move(graph.offsets)),
        columns_(std::move(graph.columns)),
        values_(values_bytes()),
        recorder_(o.common) {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    check(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, 0), "SM count");
    // CUPTI counts UVM traffic only for managed memory allocated after its counters were first
    // enabled, so arm them before any (as warpvm-bench does).
    if (o_.common.wants_mode("uvm") || o_.common.wants_mode("uvm_read_mostly") || o_.common.wants_mode("uvm_prefetch"))
      UvmCounters().stop();
    if (!o_.common.trace.empty()) {
      trace_.open(o_.common.trace);
      if (!trace_) throw std::runtime_error("cannot write " + o_.common.trace);
      write_batch_trace_header(trace_);
    }
    if (o_.wants(App::sssp)) weights_.emplace(columns_bytes());
    if (o_.balanced()) build_chunk_table();
    // Before generate(): a certified-gpu SSSP reference runs the kernels.
    queues_.emplace(n_, chunk_count_, o_.frontier_order);
    if (o_.wants(App::cc_afforest)) afforest_scratch_.emplace();
    generate();
  }
  ~GraphBench() { cudaStreamDestroy(stream_); }
  GraphBench(const GraphBench&) = delete;
  GraphBench& operator=(const GraphBench&) = delete;

  void run() {
    if (o_.common.wants_mode("explicit")) on_device("explicit", true);
    for (const char* mode : {"uvm", "uvm_read_mostly", "uvm_prefetch"})
      if (o_.common.wants_mode(mode)) uvm(mode);
    if (o_.common.wants_mode("zero_copy")) zero_copy();
    for (const App app : o_.apps) {
      if (o_.common.wants_mode("warpvm"))
        for (const double fraction : o_.common.cache_fractions)
          paged(app, warpvm_config(app, Config{.eviction = o_.common.eviction}, fraction), "warpvm", fraction);
      if (o_.common.wants_mode("warpvm_auto"))
        for (const double fraction : o_.common.cache_fractions)
          paged(app,
                warpvm_config(app,
                              Config{.eviction = o_.common.eviction,
                                     .automatic_remote_share = o_.common.automatic_remote_share,
                                     .automatic_remote_share_evicting = o_.common.automatic_remote_share_evicting},
                              fraction),
                "warpvm_auto", fraction, Placement::automatic);
      if (o_.common.wants_mode("warpvm_dream"))
        for (const double fraction : o_.common.cache_fractions)
          paged(app, warpvm_config(app, Config::preset(Preset::dream), fraction), "warpvm_dream", fraction);
      if (o_.common.wants_mode("warpvm_uvm")) paged(app, uvm_config(app), "warpvm_uvm", 1.0);
    }
    if (o_.common.wants_mode("device")) on_device("device", false);
  }

 private:
  const std::uint64_t* host_offsets() const { return offsets_.as<std::uint64_t>(); }
  const std::uint32_t* host_columns() const { return columns_.as<std::uint32_t>(); }
  const std::uint32_t* host_weights() const { return weights_ ? weights_->as<std::uint32_t>() : nullptr; }
  const std::uint64_t* host_chunk_offsets() const { return chunk_offsets_ ? chunk_offsets_->as<std::uint64_t>() : nullptr; }
  const std::uint32_t* host_vertex_chunks() const { return vertex_chunks_ ? vertex_chunks_->as<std::uint32_t>() : nullptr; }
  std::uint64_t offsets_bytes() const { return (n_ + 1) * sizeof(std::uint64_t); }
  std::uint64_t columns_bytes() const { return m_ * sizeof(std::uint32_t); }
  std::uint64_t csr_bytes() const { return offsets_bytes() + columns_bytes(); }
  std::uint64_t values_bytes() const { return n_ * sizeof(std::uint32_t); }
  /// The Balanced CSR's chunk table (--balanced; 0 without): the first edge of each chunk, then
  /// the end, and the first chunk of each vertex, then the chunk count.
  std::uint64_t chunk_offsets_bytes() const { return o_.balanced() ? (chunk_count_ + 1) * sizeof(std::uint64_t) : 0; }
  std::uint64_t vertex_chunks_bytes() const { return o_.balanced() ? (n_ + 1) * sizeof(std::uint32_t) : 0; }
  std::uint64_t chunk_table_bytes() const { return chunk_offsets_bytes() + vertex_chunks_bytes(); }
  /// The graph an app reads: the CSR, the weights for SSSP, and the chunk table with --balanced.
  std::uint64_t graph_bytes(App app) const {
    return offsets_bytes() + columns_bytes() + (app == App::sssp ? columns_bytes() : 0) + chunk_table_bytes();
  }
  /// The graph arrays every mode holds: the CSR, the weights when SSSP runs, the chunk table.
  std::uint64_t all_graph_bytes() const { return graph_bytes(o_.wants(App::sssp) ? App::sssp : App::bfs); }
  /// The data an app works on: its graph and the per-vertex array (levels, labels, distances).
  std::uint64_t dataset_bytes(App app) const { return graph_bytes(app) + values_bytes(); }
  std::uint64_t raw_blocks() const { return std::uint64_t(sms_) * 8; }  // 2048 threads per SM
  /// Device memory of the frontier queues and stamps, and of the chunk queue with --balanced
  /// (FrontierQueues), for the fit checks.
  std::uint64_t queue_bytes() const {
    const std::uint64_t queues = o_.frontier_order == workloads::FrontierOrder::vertex ? 3 : 2;  // + the sort's buffer
    return (queues + 1) * values_bytes() + 2 * chunk_count_ * sizeof(std::uint32_t);
  }

  /// The Balanced CSR's chunk table of --balanced, into pinned memory (the buffers the warpvm
  /// modes adopt and the zero-copy mode reads).
  void build_chunk_table() {
    const auto start = std::chrono::steady_clock::now();
    const workloads::BalancedCsr balanced = workloads::balance_csr(std::span<const std::uint64_t>(host_offsets(), n_ + 1), o_.balanced_chunk);
    const std::vector<std::uint32_t> first = workloads::first_chunks(balanced, n_);
    chunk_count_ = balanced.chunks();
    chunk_offsets_.emplace(chunk_offsets_bytes());
    vertex_chunks_.emplace(vertex_chunks_bytes());
    std::copy(balanced.chunk_offsets.begin(), balanced.chunk_offsets.end(), chunk_offsets_->as<std::uint64_t>());
    std::copy(first.begin(), first.end(), vertex_chunks_->as<std::uint32_t>());
    std::fprintf(stderr, "graph-bench: Balanced CSR of chunks of at most %u edges: %llu chunks, chunk table %.3f GiB, in %.1f s\n",
                 o_.balanced_chunk, static_cast<unsigned long long>(chunk_count_), chunk_table_bytes() / double(1ull << 30),
                 seconds_since(start));
  }
  /// The chunk table at these pointers for the raw kernels; none without --balanced.
  std::optional<workloads::RawChunkTable> raw_chunks(const std::uint64_t* chunk_offsets, const std::uint32_t* vertex_chunks) const {
    if (!o_.balanced()) return std::nullopt;
    return workloads::RawChunkTable{chunk_offsets, vertex_chunks};
  }

  using ParallelFor = std::function<void(std::uint64_t, const std::function<void(std::uint64_t, std::uint64_t)>&)>;

  /// The weights (into pinned memory), the roots, and each task's reference result.
  void generate() {
    const ParallelFor pfor = parallel_for;
    const std::span<const std::uint64_t> offsets(host_offsets(), n_ + 1);
    const std::span<const std::uint32_t> columns(host_columns(), m_);
    if (weights_) workloads::fill_edge_weights(offsets, columns, std::span(weights_->as<std::uint32_t>(), m_), seed(), pfor);
    std::fprintf(stderr, "graph-bench: %s: %llu vertices, %llu directed edges, CSR %.3f GiB%s\n", graph_origin_.c_str(),
                 static_cast<unsigned long long>(n_), static_cast<unsigned long long>(m_), csr_bytes() / double(1ull << 30),
                 weights_ ? " + weights" : "");
    for (const std::uint32_t root : o_.roots)
      if (root >= n_) throw std::runtime_error("root " + std::to_string(root) + " is not a vertex of the graph");
    std::vector<std::uint32_t> roots = o_.roots.empty() ? workloads::pick_roots(offsets, columns, o_.sources, seed()) : o_.roots;
    if (roots.empty() && (o_.wants(App::bfs) || o_.wants(App::sssp)))
      throw std::runtime_error("the graph has no vertex with a neighbour to start from");
    const auto start = std::chrono::steady_clock::now();
    if (o_.wants(App::bfs))
      for (const std::uint32_t root : roots) tasks_.push_back(bfs_task(offsets, columns, root, pfor));
    if (o_.wants(App::cc) || o_.wants(App::cc_afforest)) {
      const std::vector<std::uint32_t> labels = workloads::reference_cc(offsets, columns, pfor);  // once for both
      for (const App app : {App::cc, App::cc_afforest})
        if (o_.wants(app)) tasks_.push_back(cc_task(app, offsets, labels, pfor));
    }
    if (o_.wants(App::sssp)) {
      std::vector<std::vector<std::uint32_t>> on_gpu =
          o_.sssp_certified_gpu ? sssp_on_device(roots) : std::vector<std::vector<std::uint32_t>>(roots.size());
      for (std::size_t r = 0; r < roots.size(); ++r)
        tasks_.push_back(sssp_task(offsets, columns, roots[r], std::move(on_gpu[r]), pfor));
    }
    std::fprintf(stderr, "graph-bench: %zu reference results (%zu roots) in %.1f s\n", tasks_.size(), roots.size(),
                 seconds_since(start));
  }

  static Task bfs_task(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns,
                       std::uint32_t root, const ParallelFor& pfor) {
    Task t{.app = App::bfs, .root = root, .expected = workloads::reference_bfs(offsets, columns, root, pfor)};
    const workloads::BfsWork work = workloads::bfs_work(offsets, t.expected);
    t.depth = work.depth;
    t.useful_bytes = work.csr_bytes_touched;
    t.traversed_edges = work.traversed_edges();
    t.fields = {{"reached_vertices", static_cast<double>(work.reached)},
                {"bfs_depth", static_cast<double>(work.depth)},
                {"scanned_edges", static_cast<double>(work.scanned_edges)}};
    return t;
  }

  /// `labels`: workloads::reference_cc's. Afforest's `useful_bytes` stay the CSR, as for cc (the same
  /// problem: useful_gbps compares the two); its entries read are a field of each run (finish).
  Task cc_task(App app, std::span<const std::uint64_t> offsets, std::vector<std::uint32_t> labels,
               const ParallelFor& pfor) const {
    Task t{.app = app, .expected = std::move(labels)};
    const workloads::CcWork work = workloads::cc_work(t.expected);
    t.useful_bytes = offsets_bytes() + columns_bytes();  // label propagation reads every row at least once
    t.traversed_edges = m_ / 2;  // each undirected edge stored both ways
    t.fields = {{"components", static_cast<double>(work.components)},
                {"largest_component", static_cast<double>(work.largest_component)}};
    if (app == App::cc) {
      t.fields["scanned_edges"] = static_cast<double>(m_);
      return t;
    }
    // Afforest's neighbour rounds read min(degree, rounds) entries of every row.
    std::atomic<std::uint64_t> round_entries{0};
    pfor(n_, [&](std::uint64_t lo, std::uint64_t hi) {
      std::uint64_t entries = 0;
      for (std::uint64_t v = lo; v < hi; ++v)
        entries += std::min<std::uint64_t>(offsets[v + 1] - offsets[v], workloads::afforest::neighbour_rounds);
      round_entries += entries;
    });
    t.fields["afforest_round_entries"] = static_cast<double>(round_entries.load());
    return t;
  }

  /// `on_gpu`: the root's distances from sssp_on_device (--sssp-reference certified-gpu), else
  /// empty.
  Task sssp_task(std::span<const std::uint64_t> offsets, std::span<const std::uint32_t> columns, std::uint32_t root,
                 std::vector<std::uint32_t> on_gpu, const ParallelFor& pfor) const {
    const std::span<const std::uint32_t> weights(host_weights(), m_);
    Task t{.app = App::sssp, .root = root};
    if (o_.sssp_certified_gpu) {
      t.expected = std::move(on_gpu);
      const std::string wrong = workloads::certify_sssp(offsets, columns, weights, root, std::span<const std::uint32_t>(t.expected), pfor);
      if (!wrong.empty())
        throw std::runtime_error("the GPU's SSSP from root " + std::to_string(root) + " fails its certificate: " + wrong);
    } else {
      t.expected = workloads::reference_sssp(offsets, columns, weights, root);
    }
    // Distances mark the reached vertices as levels do (sssp_unreached == bfs_unreached): the
    // rows read are those of BFS from the root, each at least once, with their weights.
    const workloads::BfsWork reach = workloads::bfs_work(offsets, t.expected);
    std::uint32_t farthest = 0;
    for (const std::uint32_t d : t.expected)
      if (d != workloads::sssp_unreached) farthest = std::max(farthest, d);
    t.useful_bytes = reach.csr_bytes_touched + reach.scanned_edges * sizeof(std::uint32_t);
    t.traversed_edges = reach.traversed_edges();
    t.fields = {{"reached_vertices", static_cast<double>(reach.reached)},
                {"max_distance", static_cast<double>(farthest)},
                {"scanned_edges", static_cast<double>(reach.scanned_edges)}};
    return t;
  }

  /// Each root's distances by the raw kernel on device memory, the graph copied in once (the
  /// reference when --sssp-reference certified-gpu; the caller certifies them).
  std::vector<std::vector<std::uint32_t>> sssp_on_device(const std::vector<std::uint32_t>& roots) {
    DeviceBuffer<std::uint64_t> offsets(n_ + 1);
    DeviceBuffer<std::uint32_t> columns(m_), weights(m_), values(n_);
    check(cudaMemcpy(offsets.data, host_offsets(), offsets_bytes(), cudaMemcpyHostToDevice), "copy offsets");
    check(cudaMemcpy(columns.data, host_columns(), columns_bytes(), cudaMemcpyHostToDevice), "copy columns");
    check(cudaMemcpy(weights.data, host_weights(), columns_bytes(), cudaMemcpyHostToDevice), "copy weights");
    std::vector<std::vector<std::uint32_t>> distances;
    for (const std::uint32_t root : roots) {
      const Task t{.app = App::sssp, .root = root};
      reset_on_device(t, values.data);
      run_raw(t, RawGraph{offsets.data, columns.data, weights.data}, values.data);
      check(cudaStreamSynchronize(stream_), "the SSSP reference run");
      distances.emplace_back(n_);
      check(cudaMemcpy(distances.back().data(), values.data, values_bytes(), cudaMemcpyDeviceToHost),
            "copy the distances out");
    }
    return distances;
  }

  bool fits_on_device(const char* mode, std::uint64_t bytes) const {
    return bench::fits_on_device("graph-bench", mode, bytes);
  }

  Record base(const char* mode, const Task& t) const {
    Record rec;
    rec.workload = to_string(t.app);
    rec.mode = mode;
    rec.dataset_bytes = dataset_bytes(t.app);
    rec.useful_bytes = t.useful_bytes;
    if (!components(t.app)) rec.extra["root"] = t.root;
    if (!o_.loaded()) {  // a loaded graph has no generator sizes
      rec.extra["scale"] = o_.graph.scale;
      rec.extra["edge_factor"] = o_.graph.edge_factor;
    }
    if (o_.uniform) rec.extra["uniform"] = 1;
    if (o_.loaded()) rec.extra["loaded_graph"] = 1;
    rec.extra["seed"] = static_cast<double>(seed());
    rec.extra["vertices"] = static_cast<double>(n_);
    rec.extra["directed_edges"] = static_cast<double>(m_);
    rec.extra["csr_bytes"] = static_cast<double>(csr_bytes());
    if (o_.balanced()) {
      rec.extra["balanced_chunk"] = o_.balanced_chunk;
      rec.extra["chunks"] = static_cast<double>(chunk_count_);
      rec.extra["chunk_table_bytes"] = static_cast<double>(chunk_table_bytes());
    }
    rec.extra["frontier_vertex_order"] = o_.frontier_order == workloads::FrontierOrder::vertex ? 1 : 0;
    rec.extra["traversed_edges"] = static_cast<double>(t.traversed_edges);
    for (const auto& [name, value] : t.fields) rec.extra[name] = value;
    return rec;
  }

  /// TEPS (traversed edges over the median time), the iterations and where the result is, into
  /// the record, which is then written.
  void finish(Record rec, const Task& t, std::uint32_t iterations, bool result_on_host) {
    if (t.app == App::cc_afforest) {  // the last run's counts (every run's: the sample has a fixed seed)
      rec.extra["afforest_giant"] = afforest_counts_.giant;
      rec.extra["afforest_rows_linked"] = afforest_counts_.rows_linked;
      rec.extra["afforest_entries_linked"] = static_cast<double>(afforest_counts_.entries_linked);
      rec.extra["scanned_edges"] = t.fields.at("afforest_round_entries") + static_cast<double>(afforest_counts_.entries_linked);
    }
    rec.extra["teps"] = static_cast<double>(t.traversed_edges) / median(rec.seconds);
    rec.extra["iterations"] = iterations;
    rec.extra["result_on_host"] = result_on_host ? 1 : 0;
    recorder_.write(rec);
  }

  /// The per-vertex result equal to the reference (and BFS as deep); says what differs if not.
  bool matches(const Task& t, const std::uint32_t* values, std::uint32_t iterations) const {
    std::atomic<std::uint64_t> wrong{0};
    parallel_for(n_, [&](std::uint64_t lo, std::uint64_t hi) {
      std::uint64_t w = 0;
      for (std::uint64_t v = lo; v < hi; ++v) w += values[v] != t.expected[v];
      wrong += w;
    });
    const bool depth_ok = t.app != App::bfs || iterations == t.depth;
    if (wrong != 0 || !depth_ok)
      std::fprintf(stderr, "graph-bench: %s%s: %llu of %llu vertices wrong; %u iterations%s\n", to_string(t.app),
                   components(t.app) ? "" : (" from root " + std::to_string(t.root)).c_str(),
                   static_cast<unsigned long long>(wrong.load()), static_cast<unsigned long long>(n_), iterations,
                   depth_ok ? "" : (" (expected " + std::to_string(t.depth) + ")").c_str());
    return wrong == 0 && depth_ok;
  }

  /// The task's starting values in host memory (pinned or managed): labels v, or 0 at the root
  /// and unreached elsewhere.
  void reset_on_host(const Task& t, std::uint32_t* values) const {
    parallel_for(n_, [&](std::uint64_t lo, std::uint64_t hi) {
      if (components(t.app)) std::iota(values + lo, values + hi, static_cast<std::uint32_t>(lo));
      else std::fill(values + lo, values + hi, workloads::bfs_unreached);
    });
    if (!components(t.app)) values[t.root] = 0;
  }
  void reset_on_device(const Task& t, std::uint32_t* values) const {
    if (components(t.app)) workloads::fill_identity<<<sms_ * 4, 256, 0, stream_>>>(values, n_);
    else workloads::reset_from_root<<<sms_ * 4, 256, 0, stream_>>>(values, n_, t.root);
    check(cudaGetLastError(), "reset the per-vertex values");
  }

  /// Runs the task's kernels on plain pointers on the benchmark's stream; returns the iterations.
  std::uint32_t run_raw(const Task& t, const RawGraph& g, std::uint32_t* values) {
    switch (t.app) {
      case App::bfs:
        return workloads::bfs_raw(stream_, *queues_, g.offsets, g.columns, values, t.root, raw_blocks(), g.chunk_table());
      case App::cc: return workloads::cc_raw(stream_, *queues_, g.offsets, g.columns, values, raw_blocks(), g.chunk_table());
      case App::cc_afforest:
        afforest_counts_ = workloads::cc_afforest_raw(stream_, *queues_, *afforest_scratch_, g.offsets, g.columns, values,
                                                 raw_blocks(), seed(), g.chunk_table());
        return workloads::cc_afforest_passes;
      default:
        return workloads::sssp_raw(stream_, *queues_, g.offsets, g.columns, g.weights, values, t.root, raw_blocks(),
                              g.chunk_table());
    }
  }

  Record measure(Record rec, const std::function<void()>& before, const std::function<void()>& run,
                 const std::function<bool()>& verify) const {
    rec.seconds = time_runs(stream_, o_.common.repeats, before, run);
    rec.verified = verify();
    return rec;
  }

  /// The graph in device memory. `explicit`: copy the app's graph in, run, copy the result out,
  /// timed together. `device`: the graph already there, the result left there (the ceiling).
  void on_device(const char* mode, bool copies_timed) {
    if (!fits_on_device(mode, all_graph_bytes() + values_bytes() + queue_bytes())) return;
    DeviceBuffer<std::uint64_t> offsets(n_ + 1);
    DeviceBuffer<std::uint32_t> columns(m_), values(n_);
    std::optional<DeviceBuffer<std::uint32_t>> weights;
    if (weights_) weights.emplace(m_);
    std::optional<DeviceBuffer<std::uint64_t>> chunk_offsets;
    std::optional<DeviceBuffer<std::uint32_t>> vertex_chunks;
    if (o_.balanced()) {
      chunk_offsets.emplace(chunk_count_ + 1);
      vertex_chunks.emplace(n_ + 1);
    }
    auto copy_graph_in = [&](App app) {
      check(cudaMemcpyAsync(offsets.data, host_offsets(), offsets_bytes(), cudaMemcpyHostToDevice, stream_), "copy offsets");
      check(cudaMemcpyAsync(columns.data, host_columns(), columns_bytes(), cudaMemcpyHostToDevice, stream_), "copy columns");
      if (app == App::sssp)
        check(cudaMemcpyAsync(weights->data, host_weights(), columns_bytes(), cudaMemcpyHostToDevice, stream_), "copy weights");
      if (o_.balanced()) {
        check(cudaMemcpyAsync(chunk_offsets->data, host_chunk_offsets(), chunk_offsets_bytes(), cudaMemcpyHostToDevice, stream_),
              "copy chunk offsets");
        check(cudaMemcpyAsync(vertex_chunks->data, host_vertex_chunks(), vertex_chunks_bytes(), cudaMemcpyHostToDevice, stream_),
              "copy vertex chunks");
      }
    };
    if (!copies_timed) {
      copy_graph_in(o_.wants(App::sssp) ? App::sssp : App::bfs);
      check(cudaStreamSynchronize(stream_), "copy the graph in");
    }
    const RawGraph g{offsets.data, columns.data, weights ? weights->data : nullptr,
                     raw_chunks(chunk_offsets ? chunk_offsets->data : nullptr, vertex_chunks ? vertex_chunks->data : nullptr)};
    PinnedArray out(values_bytes());
    for (const Task& t : tasks_) {
      std::uint32_t iterations = 0;
      Record rec = measure(base(mode, t), [&] {
        std::memset(out.as<void>(), 0xAB, values_bytes());
        reset_on_device(t, values.data);
      }, [&] {
        if (copies_timed) copy_graph_in(t.app);
        iterations = run_raw(t, g, values.data);
        if (copies_timed)
          check(cudaMemcpyAsync(out.as<void>(), values.data, values_bytes(), cudaMemcpyDeviceToHost, stream_), "copy out");
      }, [&] {
        if (!copies_timed) check(cudaMemcpy(out.as<void>(), values.data, values_bytes(), cudaMemcpyDeviceToHost), "copy out");
        return matches(t, out.as<std::uint32_t>(), iterations);
      });
      rec.bytes_moved = copies_timed ? static_cast<std::int64_t>(dataset_bytes(t.app)) : 0;
      finish(rec, t, iterations, copies_timed);
    }
  }

  /// EMOGI's zero-copy: the kernels read the graph straight from pinned host memory (128-byte
  /// aligned windows, a warp per vertex); the per-vertex values in device memory, left there.
  void zero_copy() {
    if (!fits_on_device("zero_copy", values_bytes() + queue_bytes())) return;
    DeviceBuffer<std::uint32_t> values(n_);
    const RawGraph g{host_offsets(), host_columns(), host_weights(), raw_chunks(host_chunk_offsets(), host_vertex_chunks())};
    std::vector<std::uint32_t> out(n_);
    for (const Task& t : tasks_) {
      std::uint32_t iterations = 0;
      Record rec = measure(base("zero_copy", t), [&] { reset_on_device(t, values.data); },
                           [&] { iterations = run_raw(t, g, values.data); }, [&] {
        check(cudaMemcpy(out.data(), values.data, values_bytes(), cudaMemcpyDeviceToHost), "copy out");
        return matches(t, out.data(), iterations);
      });
      finish(rec, t, iterations, false);
    }
  }

  /// cudaMallocManaged for the graph and the values, all on the host before every run; demand
  /// paging, in-core only. `uvm`: no hints. `uvm_read_mostly`: cudaMemAdviseSetReadMostly on
  /// the graph arrays (read-only copies on the GPU; the advice is lifted and set again around
  /// the untimed move back to the host, which would otherwise keep the GPU's copies).
  /// `uvm_prefetch`: cudaMemPrefetchAsync of the app's graph and values to the GPU inside the
  /// timed region, as warpvm-bench's uvm_prefetch. The values stay on the GPU when the clock
  /// stops. Then --uvm-counted-runs more runs under CUPTI's unified-memory counters for the traffic.
  void uvm(const char* mode) {
    // Never ask for more managed memory than the GPU has free (it can hang the GPU).
    if (!fits_on_device(mode, all_graph_bytes() + values_bytes() + queue_bytes())) return;
    const bool read_mostly = std::string(mode) == "uvm_read_mostly", prefetch = std::string(mode) == "uvm_prefetch";
    Managed offsets(host_offsets(), offsets_bytes()), columns(host_columns(), columns_bytes()), values(values_bytes());
    std::optional<Managed> weights, chunk_offsets, vertex_chunks;
    if (weights_) weights.emplace(host_weights(), columns_bytes());
    if (o_.balanced()) {
      chunk_offsets.emplace(host_chunk_offsets(), chunk_offsets_bytes());
      vertex_chunks.emplace(host_vertex_chunks(), vertex_chunks_bytes());
    }
    const std::vector<std::pair<const Managed*, std::uint64_t>> graph = [&] {
      std::vector<std::pair<const Managed*, std::uint64_t>> arrays{{&offsets, offsets_bytes()}, {&columns, columns_bytes()}};
      if (weights) arrays.emplace_back(&*weights, columns_bytes());
      if (chunk_offsets) {
        arrays.emplace_back(&*chunk_offsets, chunk_offsets_bytes());
        arrays.emplace_back(&*vertex_chunks, vertex_chunks_bytes());
      }
      return arrays;
    }();
    auto advise_read_mostly = [&](cudaMemoryAdvise advice) {
      for (const auto& [managed, bytes] : graph)
        check(cudaMemAdvise(managed->as<void>(), bytes, advice, cudaMemLocation{cudaMemLocationTypeDevice, 0}), "advise");
    };
    if (read_mostly) advise_read_mostly(cudaMemAdviseSetReadMostly);
    const RawGraph g{offsets.as<std::uint64_t>(), columns.as<std::uint32_t>(),
                     weights ? weights->as<std::uint32_t>() : nullptr,
                     raw_chunks(chunk_offsets ? chunk_offsets->as<std::uint64_t>() : nullptr,
                                vertex_chunks ? vertex_chunks->as<std::uint32_t>() : nullptr)};
    for (const Task& t : tasks_) {
      std::uint32_t iterations = 0;
      auto before = [&] {
        if (read_mostly) advise_read_mostly(cudaMemAdviseUnsetReadMostly);
        for (const auto& entry : graph) entry.first->to_host();
        check(cudaDeviceSynchronize(), "prefetch to host");
        if (read_mostly) advise_read_mostly(cudaMemAdviseSetReadMostly);
        reset_on_host(t, values.as<std::uint32_t>());  // CPU writes: the pages come to the host
      };
      auto run = [&] {
        if (prefetch) {
          offsets.to_device(stream_);
          columns.to_device(stream_);
          if (t.app == App::sssp) weights->to_device(stream_);
          if (chunk_offsets) {
            chunk_offsets->to_device(stream_);
            vertex_chunks->to_device(stream_);
          }
          values.to_device(stream_);
        }
        iterations = run_raw(t, g, values.as<std::uint32_t>());
      };
      Record rec = measure(base(mode, t), before, run, [&] {
        check(cudaDeviceSynchronize(), "uvm run");
        return matches(t, values.as<std::uint32_t>(), iterations);
      });
      add_uvm_traffic(rec, before, run, o_.common.uvm_counted_runs);
      finish(rec, t, iterations, false);
    }
    if (read_mostly) advise_read_mostly(cudaMemAdviseUnsetReadMostly);
  }

  /// Pages of warpvm's page size (--page-bytes) that `bytes` take.
  std::uint64_t pages(std::uint64_t bytes) const { return (bytes + o_.page_bytes - 1) / o_.page_bytes; }
  /// Bytes of the object `name` (one of graph_object_names) when `app` runs: 0 when it does not
  /// read it.
  std::uint64_t object_bytes(App app, const std::string& name) const {
    if (name == "offsets") return offsets_bytes();
    if (name == "columns") return columns_bytes();
    if (name == "weights") return app == App::sssp ? columns_bytes() : 0;
    if (name == "values") return values_bytes();
    if (name == "chunk_offsets") return chunk_offsets_bytes();
    return vertex_chunks_bytes();
  }
  /// Pages of the app's objects: the graph arrays it reads (the chunk table's with --balanced)
  /// and the values.
  std::uint64_t footprint_pages(App app) const {
    std::uint64_t total = 0;
    for (const std::string& name : graph_object_names) total += pages(object_bytes(app, name));
    return total;
  }
  /// Pages of the app's --resident-objects.
  std::uint64_t resident_pages(App app) const {
    std::uint64_t total = 0;
    for (const std::string& name : o_.resident_objects) total += pages(object_bytes(app, name));
    return total;
  }

  /// `preset` (warpvm's default, or DREAM's) with `fraction` of the app's pages in device memory
  /// (1: all of them, nothing ever evicted): the --resident-objects' frames, and the cache the
  /// rest, but at least what one block of its kernel needs.
  Config warpvm_config(App app, Config preset, double fraction) const {
    const std::uint64_t least = detail::frames_required(workloads::graph_block_threads, pages_held(app));
    const auto in_memory = static_cast<std::uint64_t>(fraction * static_cast<double>(footprint_pages(app)));
    const std::uint64_t resident = resident_pages(app);
    preset.page_bytes = o_.page_bytes;
    preset.cache_bytes = std::max(least, in_memory > resident ? in_memory - resident : 0) * o_.page_bytes;
    preset.resident_bytes = resident * o_.page_bytes;
    preset.max_pages_held_per_thread = pages_held(app);
    return preset;
  }

  /// The uvm preset with a cache of whole 2 MB chunks for each of the app's objects.
  Config uvm_config(App app) const {
    // An object of 0 bytes (the weights but for SSSP, the chunk table without --balanced) takes
    // no chunk of the cache.
    return uvm_preset_config({offsets_bytes(), columns_bytes(), app == App::sssp ? columns_bytes() : 0, values_bytes(),
                              chunk_offsets_bytes(), vertex_chunks_bytes()}, 1.0);
  }

  /// The app's tasks through warpvm: the graph as objects over the pinned host copies
  /// (`placement`: migrate, or automatic in mode warpvm_auto), the cache emptied and the values reset on the host before every run; the
  /// values are flushed to the host inside the timed region. `config`: warpvm's default or the
  /// dream preset at a cache fraction, or the uvm preset (mode warpvm_uvm).
  void paged(App app, const Config& config, const char* mode, double fraction,
             Placement placement = Placement::migrate) {
    const bool uvm_preset = config.transport == Transport::host_batched;
    std::vector<std::string> migrated;  // the objects --auto-migrate-objects moved out of automatic
    Runtime rt(config);
    // One of graph_object_names over `data`, placed as --resident-objects and --auto-migrate-objects say.
    const auto listed = [](const std::vector<std::string>& names, const std::string& name) {
      return std::find(names.begin(), names.end(), name) != names.end();
    };
    const auto adopt = [&](auto* data, std::uint64_t count, const std::string& name) {
      if (!uvm_preset && listed(o_.resident_objects, name)) return rt.adopt(data, count, Placement::resident, name);
      const bool migrates = placement == Placement::automatic && listed(o_.auto_migrate_objects, name);
      if (migrates) migrated.push_back(name);
      return rt.adopt(data, count, migrates ? Placement::migrate : placement, name);
    };
    auto offsets = adopt(offsets_.as<std::uint64_t>(), n_ + 1, "offsets");
    auto columns = adopt(columns_.as<std::uint32_t>(), m_, "columns");
    object<std::uint32_t> weights;
    if (app == App::sssp) weights = adopt(weights_->as<std::uint32_t>(), m_, "weights");
    auto values = adopt(values_.as<std::uint32_t>(), n_, "values");
    object<std::uint64_t> chunk_offsets;
    object<std::uint32_t> vertex_chunks;
    std::optional<workloads::PagedChunkTable> chunk_table;
    if (o_.balanced()) {
      chunk_offsets = adopt(chunk_offsets_->as<std::uint64_t>(), chunk_count_ + 1, "chunk_offsets");
      vertex_chunks = adopt(vertex_chunks_->as<std::uint32_t>(), n_ + 1, "vertex_chunks");
      chunk_table = workloads::PagedChunkTable{chunk_offsets.device(), vertex_chunks.device()};
    }
    const workloads::PagedChunkTable* chunks = chunk_table ? &*chunk_table : nullptr;
    const std::uint64_t max_blocks = workloads::max_paged_blocks(rt, raw_blocks());
    for (const Task& t : tasks_) {
      if (t.app != app) continue;
      std::uint32_t iterations = 0;
      auto before = [&] {
        rt.drop_cached();  // the last run's values are written back first, then overwritten here
        reset_on_host(t, values_.as<std::uint32_t>());
      };
      auto run = [&] {
        switch (app) {
          case App::bfs:
            iterations = workloads::bfs_paged(rt, *queues_, offsets.device(), columns.device(), values.device(), t.root, max_blocks,
                                         workloads::graph_block_threads, chunks);
            break;
          case App::cc:
            iterations = workloads::cc_paged(rt, *queues_, offsets.device(), columns.device(), values.device(), max_blocks,
                                        workloads::graph_block_threads, chunks);
            break;
          case App::cc_afforest:
            afforest_counts_ = workloads::cc_afforest_paged(rt, *queues_, *afforest_scratch_, offsets.device(), columns.device(),
                                                       values.device(), max_blocks, seed(), workloads::graph_block_threads, chunks);
            iterations = workloads::cc_afforest_passes;
            break;
          case App::sssp:
            iterations = workloads::sssp_paged(rt, *queues_, offsets.device(), columns.device(), weights.device(), values.device(),
                                          t.root, max_blocks, workloads::graph_block_threads, chunks);
            break;
        }
        rt.flush();  // the values are on the host when the clock stops
      };
      Record rec = base(mode, t);
      rec.policy = uvm_preset ? uvm_policy(config) : to_string(config.eviction);
      rec.cache_fraction = fraction;
      rt.reset_stats();
      rec.seconds = time_runs(rt.stream(), o_.common.repeats, before, run);
      rt.synchronize();
      add_paging_stats(rec, rt, o_.common.repeats + 1);  // the warm-up run counts too
      // In bytes: the uvm preset's frames are 4 KiB whatever --page-bytes says.
      rec.extra["cache_share"] = static_cast<double>(rt.cache_bytes()) /
                                 static_cast<double>(footprint_pages(app) * o_.page_bytes);
      rec.extra["page_bytes"] = static_cast<double>(rt.page_bytes());
      if (!uvm_preset)
        for (const std::string& name : o_.resident_objects)
          if (object_bytes(app, name) != 0) rec.extra["resident_" + name] = 1;
      rec.extra["max_blocks"] = static_cast<double>(max_blocks);
      if (placement == Placement::automatic) {
        rec.extra["automatic_remote_share"] = config.automatic_remote_share;
        rec.extra["automatic_remote_share_evicting"] = config.automatic_remote_share_evicting;
        for (const std::string& name : migrated) rec.extra["migrate_" + name] = 1;
      }
      rec.verified = matches(t, values_.as<std::uint32_t>(), iterations);
      if (uvm_preset) add_batch_summary(rec, rt, before, run, trace_);
      finish(rec, t, iterations, true);
    }
  }

  /// Drawn roots and SSSP's weights follow --seed, whatever the graph.
  std::uint64_t seed() const { return o_.graph.seed; }

  const GraphOptions& o_;
  const std::uint64_t n_, m_;  // vertices and directed edges
  const std::string graph_origin_;
  PinnedArray offsets_, columns_, values_;  // the graph, and the values warpvm modes adopt
  std::optional<PinnedArray> weights_;      // SSSP's edge weights, aligned with columns_
  std::uint64_t chunk_count_ = 0;           // the Balanced CSR's chunks (--balanced), else 0
  std::optional<PinnedArray> chunk_offsets_, vertex_chunks_;  // its chunk table (build_chunk_table)
  std::vector<Task> tasks_;                 // BFS per root, CC, CC by Afforest, SSSP per root, in that order
  std::optional<workloads::FrontierQueues> queues_;
  std::optional<workloads::AfforestScratch> afforest_scratch_;  // with cc_afforest
  workloads::AfforestCounts afforest_counts_{};                  // of the last cc_afforest run
  Recorder recorder_;
  std::ofstream trace_;
  cudaStream_t stream_ = nullptr;
  int sms_ = 0;
};

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  const auto options = warpvm::bench::parse(argc, argv);
  return warpvm::bench::bench_main("warpvm-graph-bench", "", [&] { warpvm::bench::GraphBench(options).run(); });
}

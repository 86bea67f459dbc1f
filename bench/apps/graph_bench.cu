// warpvm-graph-bench: breadth-first search over an R-MAT graph (Graph500 parameters) in every
// memory mode, each search verified against the CPU reference, one JSON Lines record per mode,
// cache size and root. The workload, its modes and its fields: docs/benchmarks.md ("bfs").

#include "../micro/bench_support.cuh"
#include "../micro/uvm_counters.hpp"
#include "bfs.cuh"

#include "cli_args.hpp"
#include "warpvm/sim/rmat.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::bench {
namespace {

struct GraphOptions {
  Options common;  ///< modes, cache fractions, repeats, eviction, out, commit, driver, trace
  sim::RmatParams graph{.scale = 22, .edge_factor = 16, .seed = 1};
  unsigned sources = 4;              ///< roots drawn from the seed
  std::vector<std::uint32_t> roots;  ///< roots given (instead of drawing them)
};

const char* const all_modes = "explicit, uvm, warpvm, warpvm_uvm, device";

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "%s\nusage: warpvm-graph-bench [--scale 22] [--edge-factor 16] [--seed 1] [--sources 4] [--roots a,b]\n"
               "       [--modes m,n] [--cache-fractions 1,0.5,0.25] [--repeats 3] [--eviction clock|fifo]\n"
               "       [--out file.jsonl] [--commit SHA] [--driver VER] [--suite graph] [--trace batches.csv]\n"
               "BFS from --sources roots (vertices with a neighbour, drawn from the seed) or from --roots,\n"
               "over an R-MAT graph of 2^scale vertices and edge-factor x 2^scale undirected edges.\n"
               "modes: %s\n"
               "--trace writes the fault batches of the warpvm_uvm runs (the uvm preset) as CSV\n",
               message, all_modes);
  std::exit(2);
}

GraphOptions parse(int argc, char** argv) {
  GraphOptions o;
  o.common.suite = "graph";
  o.common.cache_fractions = {1.0, 0.5, 0.25};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("warpvm-graph-bench: BFS on an R-MAT graph, JSON Lines out");
    if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
    const std::string value = argv[++i];
    try {
      if (parse_shared_option(o.common, flag, value)) continue;
      if (flag == "--scale") o.graph.scale = static_cast<unsigned>(std::stoul(value));
      else if (flag == "--edge-factor") o.graph.edge_factor = static_cast<unsigned>(std::stoul(value));
      else if (flag == "--seed") o.graph.seed = std::stoull(value);
      else if (flag == "--sources") o.sources = static_cast<unsigned>(std::stoul(value));
      else if (flag == "--roots") {
        for (const std::string& r : tools::split_list(value)) o.roots.push_back(static_cast<std::uint32_t>(std::stoul(r)));
      } else usage(("unknown option " + flag).c_str());
    } catch (const std::logic_error&) {  // stoul and friends
      usage(("cannot read the value of " + flag + ": " + value).c_str());
    }
  }
  if (o.common.repeats < 1) usage("--repeats must be at least 1");
  if (o.sources < 1 && o.roots.empty()) usage("--sources must be at least 1");
  for (const std::string& mode : o.common.modes)
    if ((", " + std::string(all_modes) + ",").find(", " + mode + ",") == std::string::npos)
      usage(("unknown mode " + mode).c_str());
  for (const double f : o.common.cache_fractions)
    if (!(f > 0 && f <= 1)) usage("cache fractions must be in (0, 1]");
  try {
    o.graph.validate();
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  for (const std::uint32_t root : o.roots)
    if (root >= o.graph.vertices()) usage(("root " + std::to_string(root) + " is not a vertex").c_str());
  return o;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

class GraphBench {
 public:
  explicit GraphBench(const GraphOptions& o)
      : o_(o),
        p_(o.graph),
        n_(p_.vertices()),
        offsets_((n_ + 1) * sizeof(std::uint64_t)),
        columns_(p_.directed_edges() * sizeof(std::uint32_t)),
        levels_(n_ * sizeof(std::uint32_t)),
        recorder_(o.common) {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    check(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, 0), "SM count");
    // CUPTI counts UVM traffic only for managed memory allocated after its counters were first
    // enabled, so arm them before any (as warpvm-bench does).
    if (o_.common.wants_mode("uvm")) UvmCounters().stop();
    if (!o_.common.trace.empty()) {
      trace_.open(o_.common.trace);
      if (!trace_) throw std::runtime_error("cannot write " + o_.common.trace);
      write_batch_trace_header(trace_);
    }
    generate();
  }
  ~GraphBench() { cudaStreamDestroy(stream_); }
  GraphBench(const GraphBench&) = delete;
  GraphBench& operator=(const GraphBench&) = delete;

  void run() {
    if (o_.common.wants_mode("explicit")) explicit_copy();
    if (o_.common.wants_mode("uvm")) uvm();
    if (o_.common.wants_mode("warpvm"))
      for (const double fraction : o_.common.cache_fractions) paged(warpvm_config(fraction), fraction);
    if (o_.common.wants_mode("warpvm_uvm")) paged(uvm_config(), 1.0);
    if (o_.common.wants_mode("device")) device();
  }

 private:
  const std::uint64_t* host_offsets() const { return offsets_.as<std::uint64_t>(); }
  const std::uint32_t* host_columns() const { return columns_.as<std::uint32_t>(); }
  std::uint64_t offsets_bytes() const { return (n_ + 1) * sizeof(std::uint64_t); }
  std::uint64_t columns_bytes() const { return p_.directed_edges() * sizeof(std::uint32_t); }
  std::uint64_t levels_bytes() const { return n_ * sizeof(std::uint32_t); }
  /// The data every mode works on: the CSR and the level array.
  std::uint64_t dataset_bytes() const { return offsets_bytes() + columns_bytes() + levels_bytes(); }
  std::uint64_t raw_blocks() const { return std::uint64_t(sms_) * 8; }  // 2048 threads per SM

  /// The graph into pinned memory, the roots, and each root's reference levels.
  void generate() {
    auto start = std::chrono::steady_clock::now();
    auto pfor = [](std::uint64_t n, const std::function<void(std::uint64_t, std::uint64_t)>& body) { parallel_for(n, body); };
    sim::build_rmat_csr(p_, std::span(offsets_.as<std::uint64_t>(), n_ + 1),
                        std::span(columns_.as<std::uint32_t>(), p_.directed_edges()), pfor);
    std::fprintf(stderr, "graph-bench: R-MAT scale %u, edge factor %u, seed %llu: %llu vertices, %llu directed edges, "
                 "CSR %.3f GiB, generated in %.1f s\n", p_.scale, p_.edge_factor, static_cast<unsigned long long>(p_.seed),
                 static_cast<unsigned long long>(n_), static_cast<unsigned long long>(p_.directed_edges()),
                 p_.csr_bytes() / double(1ull << 30), seconds_since(start));
    const std::span<const std::uint64_t> offsets(host_offsets(), n_ + 1);
    const std::span<const std::uint32_t> columns(host_columns(), p_.directed_edges());
    roots_ = o_.roots.empty() ? sim::pick_roots(offsets, columns, o_.sources, p_.seed) : o_.roots;
    if (roots_.empty()) throw std::runtime_error("the graph has no vertex with a neighbour to start from");
    start = std::chrono::steady_clock::now();
    for (const std::uint32_t root : roots_) {
      expected_.push_back(sim::reference_bfs(offsets, columns, root, pfor));
      work_.push_back(sim::bfs_work(offsets, expected_.back()));
    }
    std::fprintf(stderr, "graph-bench: reference BFS from %zu roots in %.1f s\n", roots_.size(), seconds_since(start));
  }

  bool fits_on_device(const char* mode, std::uint64_t bytes) const {
    std::size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    const std::uint64_t margin = 512ull << 20;
    if (bytes + margin <= free) return true;
    std::fprintf(stderr, "graph-bench: %s skipped: it needs %.2f GiB of device memory and %.2f GiB are free\n", mode,
                 bytes / double(1ull << 30), free / double(1ull << 30));
    return false;
  }

  Record base(const char* mode, std::size_t r) const {
    Record rec;
    rec.workload = "bfs";
    rec.mode = mode;
    rec.dataset_bytes = dataset_bytes();
    rec.useful_bytes = work_[r].csr_bytes_touched;
    rec.extra["root"] = roots_[r];
    rec.extra["scale"] = p_.scale;
    rec.extra["edge_factor"] = p_.edge_factor;
    rec.extra["vertices"] = static_cast<double>(n_);
    rec.extra["directed_edges"] = static_cast<double>(p_.directed_edges());
    rec.extra["csr_bytes"] = static_cast<double>(p_.csr_bytes());
    rec.extra["reached_vertices"] = static_cast<double>(work_[r].reached);
    rec.extra["bfs_depth"] = work_[r].depth;
    rec.extra["scanned_edges"] = static_cast<double>(work_[r].scanned_edges);
    rec.extra["traversed_edges"] = static_cast<double>(work_[r].traversed_edges());
    return rec;
  }

  /// TEPS (Graph500's: input edges in the searched component per second) into the record.
  void finish(Record rec, std::size_t r, bool levels_on_host) {
    rec.extra["teps"] = static_cast<double>(work_[r].traversed_edges()) / median(rec.seconds);
    rec.extra["levels_on_host"] = levels_on_host ? 1 : 0;
    recorder_.write(rec);
  }

  /// Levels equal to the reference of root r, and the search as deep.
  bool matches(const std::uint32_t* levels, std::size_t r, std::uint32_t depth) const {
    std::atomic<std::uint64_t> wrong{0};
    const std::vector<std::uint32_t>& expected = expected_[r];
    parallel_for(n_, [&](std::uint64_t lo, std::uint64_t hi) {
      std::uint64_t w = 0;
      for (std::uint64_t v = lo; v < hi; ++v) w += levels[v] != expected[v];
      wrong += w;
    });
    if (wrong != 0 || depth != work_[r].depth)
      std::fprintf(stderr, "graph-bench: root %u: %llu levels wrong, depth %u (expected %u)\n", roots_[r],
                   static_cast<unsigned long long>(wrong.load()), depth, work_[r].depth);
    return wrong == 0 && depth == work_[r].depth;
  }

  /// Every vertex unreached but the root, in host memory (pinned or managed).
  void reset_levels_on_host(std::uint32_t* levels, std::uint32_t root) const {
    parallel_for(n_, [&](std::uint64_t lo, std::uint64_t hi) { std::fill(levels + lo, levels + hi, apps::bfs_unreached); });
    levels[root] = 0;
  }
  void reset_levels_on_device(std::uint32_t* levels, std::uint32_t root) const {
    apps::bfs_reset_levels<<<sms_ * 4, 256, 0, stream_>>>(levels, n_, root);
    check(cudaGetLastError(), "reset levels");
  }

  Record measure(Record rec, const std::function<void()>& before, const std::function<void()>& run,
                 const std::function<bool()>& verify) const {
    rec.seconds = time_runs(stream_, o_.common.repeats, before, run);
    rec.verified = verify();
    return rec;
  }

  /// Copy the CSR in, search on device memory, copy the levels out: timed together.
  void explicit_copy() {
    if (!fits_on_device("explicit", dataset_bytes() + 2 * levels_bytes())) return;
    DeviceBuffer<std::uint64_t> offsets(n_ + 1);
    DeviceBuffer<std::uint32_t> columns(p_.directed_edges()), levels(n_);
    apps::BfsQueues queues(n_);
    PinnedArray out(levels_bytes());
    for (std::size_t r = 0; r < roots_.size(); ++r) {
      std::uint32_t depth = 0;
      Record rec = base("explicit", r);
      rec.bytes_moved = static_cast<std::int64_t>(offsets_bytes() + columns_bytes() + levels_bytes());
      rec = measure(rec, [&] {
        std::memset(out.as<void>(), 0xAB, levels_bytes());
        reset_levels_on_device(levels.data, roots_[r]);
      }, [&] {
        check(cudaMemcpyAsync(offsets.data, host_offsets(), offsets_bytes(), cudaMemcpyHostToDevice, stream_), "copy offsets");
        check(cudaMemcpyAsync(columns.data, host_columns(), columns_bytes(), cudaMemcpyHostToDevice, stream_), "copy columns");
        depth = apps::bfs_raw(stream_, queues, offsets.data, columns.data, levels.data, roots_[r], raw_blocks());
        check(cudaMemcpyAsync(out.as<void>(), levels.data, levels_bytes(), cudaMemcpyDeviceToHost, stream_), "copy levels");
      }, [&] { return matches(out.as<std::uint32_t>(), r, depth); });
      finish(rec, r, true);
    }
  }

  /// The CSR already in device memory: the ceiling.
  void device() {
    if (!fits_on_device("device", dataset_bytes() + 2 * levels_bytes())) return;
    DeviceBuffer<std::uint64_t> offsets(n_ + 1);
    DeviceBuffer<std::uint32_t> columns(p_.directed_edges()), levels(n_);
    check(cudaMemcpy(offsets.data, host_offsets(), offsets_bytes(), cudaMemcpyHostToDevice), "copy offsets");
    check(cudaMemcpy(columns.data, host_columns(), columns_bytes(), cudaMemcpyHostToDevice), "copy columns");
    apps::BfsQueues queues(n_);
    std::vector<std::uint32_t> out(n_);
    for (std::size_t r = 0; r < roots_.size(); ++r) {
      std::uint32_t depth = 0;
      Record rec = measure(base("device", r), [&] { reset_levels_on_device(levels.data, roots_[r]); }, [&] {
        depth = apps::bfs_raw(stream_, queues, offsets.data, columns.data, levels.data, roots_[r], raw_blocks());
      }, [&] {
        check(cudaMemcpy(out.data(), levels.data, levels_bytes(), cudaMemcpyDeviceToHost), "copy levels");
        return matches(out.data(), r, depth);
      });
      rec.bytes_moved = 0;
      finish(rec, r, false);
    }
  }

  /// cudaMallocManaged for the CSR and the levels, all first on the host before every run;
  /// demand paging, in-core only. The levels stay on the GPU when the clock stops. Then one
  /// more run under CUPTI's unified-memory counters for the traffic (they slow UVM down).
  void uvm() {
    // Never ask for more managed memory than the GPU has free (it can hang the GPU).
    if (!fits_on_device("uvm", dataset_bytes() + 2 * levels_bytes())) return;
    Managed offsets(host_offsets(), offsets_bytes()), columns(host_columns(), columns_bytes()), levels(levels_bytes());
    apps::BfsQueues queues(n_);
    for (std::size_t r = 0; r < roots_.size(); ++r) {
      std::uint32_t depth = 0;
      auto before = [&] {
        offsets.to_host();
        columns.to_host();
        check(cudaDeviceSynchronize(), "prefetch to host");
        reset_levels_on_host(levels.as<std::uint32_t>(), roots_[r]);  // CPU writes: the pages come to the host
      };
      auto run = [&] {
        depth = apps::bfs_raw(stream_, queues, offsets.as<std::uint64_t>(), columns.as<std::uint32_t>(),
                              levels.as<std::uint32_t>(), roots_[r], raw_blocks());
      };
      Record rec = measure(base("uvm", r), before, run, [&] {
        check(cudaDeviceSynchronize(), "uvm bfs");
        return matches(levels.as<std::uint32_t>(), r, depth);
      });
      add_uvm_traffic(rec, before, run);
      finish(rec, r, false);
    }
  }

  std::uint64_t footprint_pages() const {
    auto pages = [](std::uint64_t bytes) { return (bytes + 4095) / 4096; };
    return pages(offsets_bytes()) + pages(columns_bytes()) + pages(levels_bytes());
  }

  /// warpvm's default with the cache at `fraction` of the three objects' pages (1: all of them,
  /// nothing ever evicted), but at least what one block of the level kernel needs.
  Config warpvm_config(double fraction) const {
    const std::uint64_t least = std::uint64_t{apps::bfs_block_threads} * apps::bfs_pages_held;
    const std::uint64_t frames = std::max(least, static_cast<std::uint64_t>(fraction * static_cast<double>(footprint_pages())));
    return Config{.cache_bytes = frames * 4096, .eviction = o_.common.eviction,
                  .max_pages_held_per_thread = apps::bfs_pages_held};
  }

  /// The uvm preset with a cache of whole 2 MB chunks for each object.
  Config uvm_config() const {
    Config config = Config::preset(Preset::uvm);
    config.cache_bytes = uvm_cache_bytes({offsets_bytes(), columns_bytes(), levels_bytes()});
    return config;
  }

  /// The graph as warpvm objects over the pinned host copies (migrate), the cache emptied and
  /// the levels reset on the host before every run; the levels are flushed to the host inside
  /// the timed region. `config` is warpvm's (mode warpvm) or the uvm preset (warpvm_uvm).
  void paged(const Config& config, double fraction) {
    const bool uvm_preset = config.transport == Transport::host_batched;
    const char* mode = uvm_preset ? "warpvm_uvm" : "warpvm";
    Runtime rt(config);
    auto offsets = rt.adopt(offsets_.as<std::uint64_t>(), n_ + 1, Placement::migrate, "offsets");
    auto columns = rt.adopt(columns_.as<std::uint32_t>(), p_.directed_edges(), Placement::migrate, "columns");
    auto levels = rt.adopt(levels_.as<std::uint32_t>(), n_, Placement::migrate, "levels");
    apps::BfsQueues queues(n_);
    const std::uint64_t max_blocks = apps::max_paged_blocks(rt, raw_blocks());
    for (std::size_t r = 0; r < roots_.size(); ++r) {
      std::uint32_t depth = 0;
      auto before = [&] {
        rt.drop_cached();  // the last run's levels are written back first, then overwritten here
        reset_levels_on_host(levels_.as<std::uint32_t>(), roots_[r]);
      };
      auto run = [&] {
        depth = apps::bfs_paged(rt, queues, offsets.device(), columns.device(), levels.device(), roots_[r], max_blocks);
        rt.flush();  // the levels are on the host when the clock stops
      };
      Record rec = base(mode, r);
      rec.policy = uvm_preset ? uvm_policy(config) : to_string(config.eviction);
      rec.cache_fraction = fraction;
      rt.reset_stats();
      rec.seconds = time_runs(rt.stream(), o_.common.repeats, before, run);
      rt.synchronize();
      add_paging_stats(rec, rt, o_.common.repeats + 1);  // the warm-up run counts too
      rec.extra["cache_share"] = static_cast<double>(rt.frame_count()) / static_cast<double>(footprint_pages());
      rec.extra["max_blocks"] = static_cast<double>(max_blocks);
      rec.verified = matches(levels_.as<std::uint32_t>(), r, depth);
      if (uvm_preset) add_batch_summary(rec, rt, before, run, trace_);
      finish(rec, r, true);
    }
  }

  const GraphOptions& o_;
  const sim::RmatParams p_;
  const std::uint64_t n_;
  PinnedArray offsets_, columns_, levels_;  // the graph, and the levels warpvm modes adopt
  std::vector<std::uint32_t> roots_;
  std::vector<std::vector<std::uint32_t>> expected_;  // reference levels per root
  std::vector<sim::BfsWork> work_;
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

// warpvm-sim: replays the benchmark access patterns on the CPU, at any cache size, through
// warpvm's own device-cache policy code (page table, CLOCK/FIFO victim search) or through UVM's
// policy as the open driver states it (--model uvm: 256-fault batches, duplicates dropped,
// per-2 MB-block tree prefetch, chunk eviction by last migration; --batch-size and
// --no-prefetch change the batch limit and turn the prefetcher off), and reports faults,
// batches, evictions and bytes moved as JSON Lines. No GPU needed; no timings.

#include "cli.hpp"
#include "placement_sim.hpp"
#include "page_cache_model.hpp"
#include "warpvm/detail/alloc/warp_layout.hpp"
#include "warpvm/workloads/patterns.hpp"
#include "warpvm/workloads/graph/rmat.hpp"
#include "warpvm/detail/policy/uvm_model.hpp"
#include "warpvm/trace.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using warpvm::EvictionPolicy;
using warpvm::sim::ModelCounts;
using warpvm::sim::PageCacheModel;
using warpvm::detail::UvmBatch;
using warpvm::detail::UvmModel;
using warpvm::BatchRun;
using warpvm::write_batch_trace_header;
using warpvm::write_batch_trace_rows;

struct Options {
  std::vector<std::string> workloads{"stream", "vadd", "random_page", "hotset"};
  std::vector<double> cache_fractions{1.0, 0.5, 0.25, 0.125};
  std::uint64_t dataset_bytes = 1ull << 30;
  std::uint64_t page_bytes = 4096;
  EvictionPolicy eviction = EvictionPolicy::clock;
  std::string commit = "unknown";
  std::string model = "warpvm";
  std::string trace;  ///< --model uvm: per-batch CSV (docs/tracing.md)
  unsigned batch_size = 256;  ///< --model uvm: most faults taken per batch
  bool prefetch = true;       ///< --model uvm: tree prefetch within 2 MB blocks
  bool uvm_options = false;   ///< --batch-size or --no-prefetch given
  std::string replay;         ///< fault events recorded on a GPU (docs/tracing.md) to replay
};

/// The page accesses of one recorded run, in the order the GPU faulted on them.
struct RecordedRun {
  struct Access {
    std::uint64_t start_ns;
    std::uint32_t object;
    std::uint64_t page;
    bool write;
  };
  std::vector<Access> accesses;
  std::map<std::uint32_t, std::uint64_t> object_pages;  ///< pages each object needs (highest page + 1)

  [[nodiscard]] std::uint64_t pages() const {
    std::uint64_t n = 0;
    for (const auto& [object, count] : object_pages) n += count;
    return n;
  }
};
using RecordedRuns = std::map<std::string, RecordedRun>;

constexpr std::uint64_t uvm_chunk_bytes = 2u << 20;

/// A run that cannot go on (an unreadable file, a combination of options that does not apply):
/// the message on stderr, exit code 2, as for a bad option.
[[noreturn]] void usage(const std::string& message) {
  std::fprintf(stderr, "warpvm-sim: %s\nRun with --help for more information.\n", message.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{"warpvm-sim: the paging policy replayed on the CPU. Prints one JSON Lines record per workload and\n"
               "cache size on stdout. With --gpus or --placement: page placement across GPUs (warpvm-sim --gpus 2 --help).",
               "warpvm-sim"};
  warpvm::cli::add_list(app, "--workloads", o.workloads,
                        "stream, vadd, random_page, hotset, bfs, alloc_contiguous, alloc_rearranged");
  warpvm::cli::add_bytes(app, "--bytes", o.dataset_bytes, "dataset size");
  warpvm::cli::add_list(app, "--cache-fractions", o.cache_fractions, "cache sizes as fractions of the pages");
  app.add_option("--model", o.model, "the fault path modelled")->check(CLI::IsMember({"warpvm", "uvm"}));
  app.add_option_function<std::string>(
         "--eviction", [&o](const std::string& v) { o.eviction = v == "fifo" ? EvictionPolicy::fifo : EvictionPolicy::clock; },
         "victim policy of warpvm's cache")
      ->check(CLI::IsMember({"clock", "fifo"}));
  warpvm::cli::add_page_bytes(app, o.page_bytes, "page size");
  app.add_option("--commit", o.commit, "commit, for the records");
  app.add_option("--trace", o.trace, "--model uvm: write its fault batches as CSV");
  auto* batch = app.add_option("--batch-size", o.batch_size, "--model uvm: most faults taken per batch")
                    ->check(CLI::Range(1u, 1u << 20));
  auto* no_prefetch = app.add_flag_function(
      "--no-prefetch", [&o](std::int64_t) { o.prefetch = false; }, "--model uvm: no tree prefetch");
  app.add_option("--replay", o.replay,
                 "replay the runs of a fault-event file recorded on a GPU (warpvm-bench --events) instead of the "
                 "generated workloads; cache fractions are of each run's pages");
  std::string out;
  app.add_option("--out", out, "accepted for symmetry with the benchmarks: records go to stdout");
  warpvm::cli::parse(app, argc, argv);
  o.uvm_options = batch->count() > 0 || no_prefetch->count() > 0;
  return o;
}

/// Reads a fault-event CSV (docs/tracing.md): every event is one access by one warp, in start
/// order per run. Only faults were recorded, so a replay sees first touches and duplicates but
/// not the hits of the recorded run: at a cache smaller than the recorded one it undercounts.
RecordedRuns read_recorded(const std::string& path) {
  std::ifstream in(path);
  if (!in) usage("cannot read " + path);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = warpvm::cli::split_list(line);
  auto column = [&](const char* name) {
    const auto at = std::find(header.begin(), header.end(), name);
    if (at == header.end()) usage(path + ": no column " + name + " (a fault-event file: warpvm-bench --events)");
    return static_cast<std::size_t>(at - header.begin());
  };
  const std::size_t run_at = column("workload"), start_at = column("start_ns"), object_at = column("object"),
                    page_at = column("page"), write_at = column("write");
  RecordedRuns runs;
  for (std::size_t number = 2; std::getline(in, line); ++number) {
    const std::vector<std::string> field = warpvm::cli::split_list(line);
    if (field.size() != header.size()) usage(path + ":" + std::to_string(number) + ": expected " + std::to_string(header.size()) + " fields");
    RecordedRun& run = runs[field[run_at]];
    const RecordedRun::Access access{std::stoull(field[start_at]), static_cast<std::uint32_t>(std::stoul(field[object_at])),
                                     std::stoull(field[page_at]), field[write_at] == "1"};
    run.accesses.push_back(access);
    auto& pages = run.object_pages[access.object];
    pages = std::max(pages, access.page + 1);
  }
  if (runs.empty()) usage(path + " holds no events");
  for (auto& [name, run] : runs)
    std::stable_sort(run.accesses.begin(), run.accesses.end(),
                     [](const RecordedRun::Access& a, const RecordedRun::Access& b) { return a.start_ns < b.start_ns; });
  return runs;
}

struct Replay {
  std::uint64_t useful_bytes;
};

/// warpvm's device cache: each touch acquires and releases the page.
struct WarpvmSink {
  PageCacheModel& model;
  std::uint32_t add_object(std::uint64_t pages) { return model.add_object(pages); }
  void touch(std::uint32_t object, std::uint64_t page, bool write, bool overwrite) {
    model.acquire(object, page, write, overwrite);
    model.release(object, page);
  }
  void end_kernel(bool outputs_to_host) {
    if (outputs_to_host) model.flush();
  }
};

/// UVM's fault path: each touch of a non-resident page is a fault entry. Objects are 2^40-page
/// aligned in one address space, so no 2 MB block spans two objects. UVM cannot know that a
/// page will be overwritten, and its outputs stay on the GPU.
struct UvmSink {
  UvmModel& model;
  std::uint32_t objects = 0;
  std::uint32_t add_object(std::uint64_t) { return objects++; }
  void touch(std::uint32_t object, std::uint64_t page, bool, bool) {
    model.access(warpvm::detail::make_page_key(object, page));
  }
  void end_kernel(bool) { model.drain(); }
};

/// Replays `workload` (a recorded run, or a generated pattern over `pages` pages) into `sink`.
template <class Sink>
Replay replay(const std::string& workload, Sink& sink, std::uint64_t pages, std::uint64_t page_bytes,
              const RecordedRuns& recorded) {
  auto touch = [&](std::uint32_t object, std::uint64_t page, bool write, bool overwrite) {
    sink.touch(object, page, write, overwrite);
  };
  if (const auto run = recorded.find(workload); run != recorded.end()) {
    std::map<std::uint32_t, std::uint32_t> object_of;  // recorded object id -> the sink's
    for (const auto& [object, count] : run->second.object_pages) object_of[object] = sink.add_object(count);
    for (const RecordedRun::Access& a : run->second.accesses) touch(object_of.at(a.object), a.page, a.write, false);
    sink.end_kernel(false);
    return {run->second.accesses.size() * page_bytes};
  }
  if (workload == "stream") {
    const auto a = sink.add_object(pages);
    for (std::uint64_t p = 0; p < pages; ++p) touch(a, p, false, false);
    sink.end_kernel(false);
    return {pages * page_bytes};
  }
  if (workload == "vadd") {  // C = A + B; A, B and C together make the dataset
    const std::uint64_t each = pages / 3;
    const auto a = sink.add_object(each), b = sink.add_object(each), c = sink.add_object(each);
    for (std::uint64_t p = 0; p < each; ++p) {
      touch(a, p, false, false);
      touch(b, p, false, false);
      touch(c, p, true, true);
    }
    sink.end_kernel(true);  // C ends on the host (warpvm)
    return {3 * each * page_bytes};
  }
  if (workload == "random_page") {
    const auto a = sink.add_object(pages);
    const std::uint64_t touches = std::min<std::uint64_t>(pages / 2, 2u << 20);
    for (std::uint64_t k = 0; k < touches; ++k) touch(a, warpvm::workloads::touched_page(k, pages), false, false);
    sink.end_kernel(false);
    return {touches * page_bytes};
  }
  if (workload == "bfs") {
    // Breadth-first search over an R-MAT graph (Graph500's parameters, edge factor 16) whose CSR
    // and level array about fill the dataset, from one root, level by level in queue order:
    // each vertex reads its row bounds, walks its adjacency list a page at a time (as a warp's
    // page span does) and reads, and for unreached neighbours writes, their levels.
    warpvm::workloads::RmatParams graph;
    graph.scale = 4;
    while (graph.scale < 31) {
      warpvm::workloads::RmatParams bigger = graph;
      ++bigger.scale;
      if (bigger.csr_bytes() + bigger.vertices() * 4 > pages * page_bytes) break;
      graph = bigger;
    }
    const std::uint64_t n = graph.vertices();
    std::vector<std::uint64_t> offsets(n + 1);
    std::vector<std::uint32_t> columns(graph.directed_edges());
    warpvm::workloads::build_rmat_csr(graph, offsets, columns);
    const auto pages_of = [&](std::uint64_t bytes) { return (bytes + page_bytes - 1) / page_bytes; };
    const auto offsets_object = sink.add_object(pages_of((n + 1) * 8));
    const auto columns_object = sink.add_object(pages_of(columns.size() * 4));
    const auto levels_object = sink.add_object(pages_of(n * 4));
    std::vector<std::uint32_t> level(n, warpvm::workloads::bfs_unreached);
    const std::uint32_t root = warpvm::workloads::pick_roots(offsets, columns, 1, graph.seed).at(0);
    level[root] = 0;
    std::vector<std::uint32_t> frontier{root}, next;
    std::uint64_t touched_bytes = 0;
    for (std::uint32_t depth = 0; !frontier.empty(); ++depth, frontier.swap(next)) {
      next.clear();
      for (const std::uint32_t v : frontier) {
        touch(offsets_object, v * 8 / page_bytes, false, false);
        touch(offsets_object, (v + 1) * 8 / page_bytes, false, false);
        touched_bytes += 16 + (offsets[v + 1] - offsets[v]) * 4;
        for (std::uint64_t e = offsets[v]; e < offsets[v + 1]; ++e) {
          if (e == offsets[v] || e * 4 % page_bytes == 0) touch(columns_object, e * 4 / page_bytes, false, false);
          const std::uint32_t u = columns[e];
          const bool claims = level[u] == warpvm::workloads::bfs_unreached;
          touch(levels_object, u * std::uint64_t{4} / page_bytes, claims, false);
          if (claims) {
            level[u] = depth + 1;
            next.push_back(u);
          }
        }
      }
    }
    sink.end_kernel(true);  // the levels end on the host (warpvm)
    return {touched_bytes};
  }
  if (workload == "alloc_contiguous" || workload == "alloc_rearranged") {
    // AlignMalloc's random-access case (Sec. VII): 1024 threads, each with its own range (the
    // dataset / 1024), make 100 random 4-byte accesses in it, a warp's 32 lanes at a time. The
    // ranges lie one after another (contiguous, as a per-thread allocator places them) or in
    // each warp's region as AlignMalloc's intra-warp layout places them (64 KB tiles side by
    // side, detail/alloc/warp_layout.hpp).
    constexpr std::uint32_t threads = 1024, lanes = 32, accesses = 100;
    const std::uint64_t range = pages * page_bytes / threads / 4096 * 4096;
    if (range == 0) usage(workload + " needs --bytes of at least 4 MiB (4 KB per thread)");
    const warpvm::detail::WarpLayout layout(lanes, range);
    const auto heap = sink.add_object(threads * range / page_bytes);
    const bool rearranged = workload == "alloc_rearranged";
    for (std::uint32_t step = 0; step < accesses; ++step) {
      for (std::uint32_t t = 0; t < threads; ++t) {
        const std::uint64_t offset = warpvm::workloads::mix64((std::uint64_t{t} << 32) | step) % (range / 4) * 4;
        const std::uint32_t warp = t / lanes, lane = t % lanes;
        const std::uint64_t address = rearranged ? warp * layout.region_bytes() + layout.offset_of(lane, offset)
                                                 : std::uint64_t{t} * range + offset;
        touch(heap, address / page_bytes, false, false);
      }
    }
    sink.end_kernel(false);
    return {std::uint64_t{threads} * accesses * 4};
  }
  if (workload == "hotset") {  // 80% of touches on 10% of the pages: where CLOCK beats FIFO
    const auto a = sink.add_object(pages);
    const std::uint64_t touches = 4 * pages, hot = std::max<std::uint64_t>(1, pages / 10);
    std::uint64_t x = 88172645463325252ull;
    for (std::uint64_t k = 0; k < touches; ++k) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      touch(a, (x % 10 < 8) ? (x >> 8) % hot : (x >> 8) % pages, false, false);
    }
    sink.end_kernel(false);
    return {touches * page_bytes};
  }
  usage("unknown workload " + workload);
}

}  // namespace

int main(int argc, char** argv) {
  if (warpvm::sim::wants_placement_sim(argc, argv)) return warpvm::sim::run_placement_sim(argc, argv);  // issue #6
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    usage(e.what());
  }
  const RecordedRuns recorded = o.replay.empty() ? RecordedRuns{} : read_recorded(o.replay);
  if (!recorded.empty()) {
    o.workloads.clear();
    for (const auto& [name, run] : recorded) o.workloads.push_back(name);
  }
  const std::uint64_t generated_pages = o.dataset_bytes / o.page_bytes;
  if (recorded.empty() && generated_pages < 3) usage("--bytes must cover at least three pages");
  if (o.model != "warpvm" && o.model != "uvm") usage("--model must be warpvm or uvm");
  if (o.model == "uvm" && o.page_bytes != 4096) usage("--model uvm works in the driver's 4 KB pages");
  if (!o.trace.empty() && o.model != "uvm") usage("--trace records UVM fault batches: use it with --model uvm");
  if (o.uvm_options && o.model != "uvm") usage("--batch-size and --no-prefetch set UVM's fault path: use them with --model uvm");
  std::ofstream trace;
  if (!o.trace.empty()) {
    trace.open(o.trace);
    if (!trace) usage("cannot write " + o.trace);
    write_batch_trace_header(trace);  // docs/tracing.md
  }
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const std::string header = "{\"suite\":\"sim\",\"device\":\"cpu-simulator\",\"driver\":\"-\",\"commit\":\"" +
                             o.commit + "\",\"date\":\"" + date + "\",\"simulated\":true,\"verified\":false," +
                             "\"seconds\":null,\"useful_gbps\":null,\"page_bytes\":" + std::to_string(o.page_bytes);
  for (const auto& workload : o.workloads) {
    const auto run = recorded.find(workload);
    const std::uint64_t pages = run != recorded.end() ? run->second.pages() : generated_pages;
    for (double fraction : o.cache_fractions) {
      const std::uint64_t cache_bytes = static_cast<std::uint64_t>(std::max<double>(1, pages * fraction)) * o.page_bytes;
      std::cout << header << ",\"workload\":\"" << workload << "\",\"cache_fraction\":" << fraction
                << ",\"dataset_bytes\":" << pages * o.page_bytes;
      if (o.model == "uvm") {
        UvmModel model(cache_bytes / uvm_chunk_bytes, o.prefetch, o.batch_size);
        UvmSink sink{model};
        const Replay r = replay(workload, sink, pages, o.page_bytes, recorded);
        std::uint64_t faults = 0, unique = 0, faulted = 0, prefetched = 0, chunks = 0, evicted = 0;
        // The simulator has no time: the timing columns stay empty.
        if (trace.is_open())
          write_batch_trace_rows(trace, BatchRun{workload, fraction, o.batch_size, o.prefetch, false}, model.batches());
        for (const UvmBatch& b : model.batches()) {
          faults += b.faults;
          unique += b.unique_faults;
          faulted += b.pages_faulted;
          prefetched += b.pages_prefetched;
          chunks += b.chunks_evicted;
          evicted += b.pages_evicted;
        }
        std::cout << ",\"mode\":\"uvm_sim\",\"policy\":\"uvm\",\"useful_bytes\":" << r.useful_bytes
                  << ",\"faults\":" << faults << ",\"unique_faults\":" << unique << ",\"batches\":"
                  << model.batches().size() << ",\"pages_faulted\":" << faulted << ",\"pages_prefetched\":"
                  << prefetched << ",\"chunks_evicted\":" << chunks << ",\"evictions\":" << evicted
                  << ",\"hits\":" << model.hits() << ",\"bytes_moved\":" << (faulted + prefetched + evicted) * o.page_bytes
                  << ",\"cache_bytes\":" << cache_bytes / uvm_chunk_bytes * uvm_chunk_bytes << "}" << std::endl;
      } else {
        PageCacheModel model(static_cast<std::uint32_t>(cache_bytes / o.page_bytes), o.eviction);
        WarpvmSink sink{model};
        const Replay r = replay(workload, sink, pages, o.page_bytes, recorded);
        const ModelCounts n = model.counts();
        std::cout << ",\"mode\":\"warpvm_sim\",\"policy\":\"" << warpvm::to_string(o.eviction)
                  << "\",\"useful_bytes\":" << r.useful_bytes << ",\"faults\":" << n.misses
                  << ",\"bytes_moved\":" << (n.loads + n.writebacks) * o.page_bytes << ",\"evictions\":" << n.evictions
                  << ",\"writebacks\":" << n.writebacks << ",\"hits\":" << n.hits << ",\"cache_bytes\":" << cache_bytes
                  << "}" << std::endl;
      }
    }
  }
  return 0;
}

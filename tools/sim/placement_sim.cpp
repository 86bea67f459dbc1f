// warpvm-sim --gpus N --placement on_touch|access_counter|duplication|oasis|ideal|all: replays
// generated multi-GPU versions of issue #6's workloads through the placement policy code
// (PlacementModel) and prints one JSON Lines record per workload, GPU count and policy. Each GPU
// owns a partition of the work as a multi-GPU implementation would; the GPUs' streams are
// interleaved one step (a tile, a row, a vertex) at a time. Data starts on the host, or with
// --initial-placement blocks|interleaved on the GPUs (as MultiGpuSpace::place_on_gpus puts it).

#include "placement_sim.hpp"

#include "cli.hpp"
#include "warpvm/workloads/patterns.hpp"
#include "placement_model.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace warpvm::sim {
namespace {

using sim::Placement;
using sim::PlacementModel;

constexpr std::uint32_t line_bytes = detail::remote_access_bytes;

struct PlacementOptions {
  std::vector<std::string> workloads{"transpose", "stencil2d", "pagerank", "gemm", "shared_read_private_write"};
  std::vector<unsigned> gpus{2};
  std::vector<Placement> placements{Placement::on_touch, Placement::access_counter, Placement::duplication,
                                    Placement::oasis, Placement::ideal};
  std::uint64_t dataset_bytes = 64ull << 20;
  std::uint32_t page_bytes = 4096;
  std::uint32_t reset_threshold = detail::default_reset_threshold;
  std::uint32_t counter_threshold = detail::default_counter_threshold;
  unsigned iterations = 4;  ///< stencil2d sweeps, pagerank iterations
  std::optional<Spread> initial_spread;  ///< --initial-placement: nullopt for the host
  std::string commit = "unknown";
};

/// A run that cannot go on: the message on stderr, exit code 2, as for a bad option.
[[noreturn]] void usage(const std::string& message) {
  std::fprintf(stderr, "warpvm-sim: %s\nRun with --help for more information.\n", message.c_str());
  std::exit(2);
}

PlacementOptions parse(int argc, char** argv) {
  PlacementOptions o;
  CLI::App app{"warpvm-sim --gpus: page placement across GPUs replayed on the CPU. Prints one JSON Lines record per\n"
               "workload, GPU count and placement; modelled_seconds comes from the cost model in docs/placement.md\n"
               "(a model, not a measurement).",
               "warpvm-sim"};
  cli::add_list(app, "--gpus", o.gpus, "GPU counts")->check(CLI::Range(1u, unsigned(detail::placement_max_gpus)));
  app.add_option_function<std::vector<std::string>>(
         "--placement",
         [&o](const std::vector<std::string>& names) {
           if (names.size() == 1 && names[0] == "all") return;
           o.placements.clear();
           try {
             for (const auto& name : names) o.placements.push_back(sim::placement_from_string(name));
           } catch (const std::invalid_argument& e) {
             throw CLI::ValidationError("--placement", e.what());
           }
         },
         "on_touch, access_counter, duplication, oasis, ideal, or all")
      ->delimiter(',');
  cli::add_list(app, "--workloads", o.workloads, "transpose, stencil2d, pagerank, gemm, shared_read_private_write");
  cli::add_bytes(app, "--bytes", o.dataset_bytes, "dataset size");
  app.add_option("--page-bytes", o.page_bytes, "page size in bytes, a multiple of 128")->check(CLI::Range(line_bytes, 1u << 21));
  app.add_option("--reset-threshold", o.reset_threshold, "OASIS: shared faults before an object's O-Table entry resets")
      ->check(CLI::Range(1u, unsigned(detail::otable::max_reset_threshold)));
  app.add_option("--counter-threshold", o.counter_threshold, "access-counter: remote lines before a page migrates")
      ->check(CLI::Range(1u, 1u << 30));
  app.add_option("--iterations", o.iterations, "stencil2d sweeps, pagerank iterations")->check(CLI::Range(1u, 1000u));
  cli::add_initial_placement(app, o.initial_spread);
  app.add_option("--commit", o.commit, "commit, for the records");
  std::string out;
  app.add_option("--out", out, "accepted for symmetry with the benchmarks: records go to stdout");
  cli::parse(app, argc, argv);
  if (o.gpus.empty() || o.placements.empty() || o.workloads.empty()) usage("nothing to run");
  if (o.page_bytes % line_bytes != 0) usage("--page-bytes must be a multiple of 128");
  return o;
}

/// Makes the objects (placed on the GPUs first with an initial spread) and emits the accesses of
/// one byte range [begin, begin + bytes) of an object, split at page boundaries, each piece as
/// one access of the 128 B lines it covers.
struct Stream {
  PlacementModel& model;
  std::uint32_t page_bytes;
  std::optional<Spread> initial_spread;

  [[nodiscard]] std::uint64_t pages(std::uint64_t bytes) const { return (bytes + page_bytes - 1) / page_bytes; }
  std::uint32_t object(std::uint64_t bytes) {
    const std::uint32_t id = model.add_object(pages(bytes));
    if (initial_spread) model.place_on_gpus(id, *initial_spread);
    return id;
  }

  void range(unsigned gpu, std::uint32_t obj, std::uint64_t begin, std::uint64_t bytes, bool write) {
    for (std::uint64_t at = begin, end = begin + bytes; at < end;) {
      const std::uint64_t page_end = (at / page_bytes + 1) * page_bytes, piece_end = std::min(end, page_end);
      const std::uint64_t first_line = at / line_bytes, last_line = (piece_end - 1) / line_bytes;
      model.access(gpu, obj, at / page_bytes, write, static_cast<std::uint32_t>(last_line - first_line + 1));
      at = piece_end;
    }
  }
};

/// The first of GPU g's share of [0, n) split into `gpus` contiguous parts.
std::uint64_t part_begin(std::uint64_t n, unsigned g, unsigned gpus) { return n * g / gpus; }

/// Matrix transpose, out = in^T, n x n floats, 32 x 32 tiles. Tile rows of `out` go to the GPUs
/// round-robin (as a launch's blocks are dealt out to the GPUs): `out` is private and written,
/// `in` is read by every GPU (each of its pages holds columns of every GPU's tiles).
std::uint64_t transpose(Stream& s, std::uint64_t bytes, unsigned gpus) {
  const std::uint64_t n = std::max<std::uint64_t>(32, static_cast<std::uint64_t>(std::sqrt(bytes / 8.0)) / 32 * 32);
  const std::uint64_t tiles = n / 32;
  const auto in = s.object(n * n * 4), out = s.object(n * n * 4);
  const std::uint64_t rows_per_gpu = (tiles + gpus - 1) / gpus;
  for (std::uint64_t step = 0; step < rows_per_gpu * tiles; ++step)
    for (unsigned g = 0; g < gpus; ++g) {
      const std::uint64_t ti = (step / tiles) * gpus + g, tj = step % tiles;
      if (ti >= tiles) continue;
      for (std::uint64_t r = 0; r < 32; ++r) s.range(g, in, ((tj * 32 + r) * n + ti * 32) * 4, 128, false);
      for (std::uint64_t r = 0; r < 32; ++r) s.range(g, out, ((ti * 32 + r) * n + tj * 32) * 4, 128, true);
    }
  return 2 * n * n * 4;
}

/// 2D five-point stencil over two n x n float grids, rows split into one contiguous band per
/// GPU; each sweep reads the current grid (the band and one halo row each side) and writes the
/// next; the grids swap after each sweep inside the one kernel (implicit phases: no
/// begin_phase).
std::uint64_t stencil2d(Stream& s, std::uint64_t bytes, unsigned gpus, unsigned sweeps) {
  const std::uint64_t n = std::max<std::uint64_t>(gpus * 2, static_cast<std::uint64_t>(std::sqrt(bytes / 8.0)));
  const std::uint64_t row = n * 4;
  std::uint32_t grid[2] = {s.object(n * row), s.object(n * row)};
  const std::uint64_t rows_per_gpu = (n + gpus - 1) / gpus;
  for (unsigned sweep = 0; sweep < sweeps; ++sweep) {
    const std::uint32_t cur = grid[sweep % 2], next = grid[(sweep + 1) % 2];
    for (std::uint64_t step = 0; step < rows_per_gpu; ++step)
      for (unsigned g = 0; g < gpus; ++g) {
        const std::uint64_t r = part_begin(n, g, gpus) + step;
        if (r >= part_begin(n, g + 1, gpus)) continue;
        for (std::uint64_t rr = r == 0 ? 0 : r - 1; rr <= std::min(n - 1, r + 1); ++rr) s.range(g, cur, rr * row, row, false);
        s.range(g, next, r * row, row, true);
      }
  }
  return 2 * n * row;
}

/// PageRank-like pull gather over an R-MAT graph (CSR and two rank arrays about fill the
/// dataset): vertices split into one contiguous range per GPU; each vertex reads its row
/// bounds, its adjacency list and its neighbours' ranks (random, shared) and writes its new rank
/// (private). One kernel per iteration (begin_phase), the rank arrays swapped between them.
std::uint64_t pagerank(Stream& s, std::uint64_t bytes, unsigned gpus, unsigned iterations) {
  workloads::RmatParams graph;
  graph.scale = 4;
  const auto footprint = [](const workloads::RmatParams& p) { return p.csr_bytes() + 2 * p.vertices() * 4; };
  while (graph.scale < 31) {
    workloads::RmatParams bigger = graph;
    ++bigger.scale;
    if (footprint(bigger) > bytes) break;
    graph = bigger;
  }
  const std::uint64_t n = graph.vertices();
  std::vector<std::uint64_t> offsets(n + 1);
  std::vector<std::uint32_t> columns(graph.directed_edges());
  workloads::build_rmat_csr(graph, offsets, columns);
  const auto offsets_obj = s.object((n + 1) * 8), columns_obj = s.object(columns.size() * 4);
  std::uint32_t rank[2] = {s.object(n * 4), s.object(n * 4)};
  const std::uint64_t per_gpu = (n + gpus - 1) / gpus;
  for (unsigned it = 0; it < iterations; ++it) {
    s.model.begin_phase();
    const std::uint32_t cur = rank[it % 2], next = rank[(it + 1) % 2];
    for (std::uint64_t step = 0; step < per_gpu; ++step)
      for (unsigned g = 0; g < gpus; ++g) {
        const std::uint64_t v = part_begin(n, g, gpus) + step;
        if (v >= part_begin(n, g + 1, gpus)) continue;
        s.range(g, offsets_obj, v * 8, 16, false);
        s.range(g, columns_obj, offsets[v] * 4, (offsets[v + 1] - offsets[v]) * 4, false);
        for (std::uint64_t e = offsets[v]; e < offsets[v + 1]; ++e) s.range(g, cur, std::uint64_t{columns[e]} * 4, 4, false);
        s.range(g, next, v * 4, 4, true);
      }
  }
  return footprint(graph);
}

/// C = A x B, n x n floats, 64 x 64 tiles of C dealt to the GPUs round-robin: A and B are read
/// by every GPU, C is written privately.
std::uint64_t gemm(Stream& s, std::uint64_t bytes, unsigned gpus) {
  const std::uint64_t n = std::max<std::uint64_t>(64, static_cast<std::uint64_t>(std::sqrt(bytes / 12.0)) / 64 * 64);
  const std::uint64_t tiles = n / 64, row = n * 4;
  const auto a = s.object(n * row), b = s.object(n * row), c = s.object(n * row);
  for (std::uint64_t first = 0; first < tiles * tiles; first += gpus)
    for (unsigned g = 0; g < gpus && first + g < tiles * tiles; ++g) {
      const std::uint64_t ti = (first + g) / tiles, tj = (first + g) % tiles;
      for (std::uint64_t k = 0; k < tiles; ++k)
        for (std::uint64_t r = 0; r < 64; ++r) {
          s.range(g, a, (ti * 64 + r) * row + k * 256, 256, false);
          s.range(g, b, (k * 64 + r) * row + tj * 256, 256, false);
        }
      for (std::uint64_t r = 0; r < 64; ++r) s.range(g, c, (ti * 64 + r) * row + tj * 256, 256, true);
    }
  return 3 * n * row;
}

/// A lookup table read at random by every GPU (shared, read-only) and an output that each GPU
/// writes in its own contiguous part (private, write-only), half the dataset each. Each step a
/// GPU writes one page of its output and reads 32 random table entries.
std::uint64_t shared_read_private_write(Stream& s, std::uint64_t bytes, unsigned gpus) {
  const std::uint64_t half = std::max<std::uint64_t>(s.page_bytes, bytes / 2 / s.page_bytes * s.page_bytes);
  const auto table = s.object(half), out = s.object(half);
  const std::uint64_t out_pages = half / s.page_bytes, per_gpu = (out_pages + gpus - 1) / gpus;
  std::uint64_t k = 0;
  for (std::uint64_t step = 0; step < per_gpu; ++step)
    for (unsigned g = 0; g < gpus; ++g) {
      const std::uint64_t page = part_begin(out_pages, g, gpus) + step;
      if (page >= part_begin(out_pages, g + 1, gpus)) continue;
      for (int i = 0; i < 32; ++i) s.range(g, table, workloads::sparse_index(k++, half / 4) * 4, 4, false);
      s.range(g, out, page * s.page_bytes, s.page_bytes, true);
    }
  return 2 * half;
}

std::uint64_t replay(const std::string& workload, Stream& s, const PlacementOptions& o, unsigned gpus) {
  if (workload == "transpose") return transpose(s, o.dataset_bytes, gpus);
  if (workload == "stencil2d") return stencil2d(s, o.dataset_bytes, gpus, o.iterations);
  if (workload == "pagerank") return pagerank(s, o.dataset_bytes, gpus, o.iterations);
  if (workload == "gemm") return gemm(s, o.dataset_bytes, gpus);
  if (workload == "shared_read_private_write") return shared_read_private_write(s, o.dataset_bytes, gpus);
  usage("unknown workload " + workload + " in the placement mode");
}

}  // namespace

bool wants_placement_sim(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (const std::string flag = argv[i]; flag == "--gpus" || flag == "--placement" || flag.starts_with("--gpus=") ||
                                          flag.starts_with("--placement="))
      return true;
  return false;
}

int run_placement_sim(int argc, char** argv) {
  const PlacementOptions o = parse(argc, argv);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const sim::PlacementCosts costs;
  for (const auto& workload : o.workloads)
    for (const unsigned gpus : o.gpus)
      for (const Placement placement : o.placements) {
        PlacementModel model(gpus, placement, o.page_bytes, o.reset_threshold, o.counter_threshold, costs);
        Stream stream{model, o.page_bytes, o.initial_spread};
        const std::string policy = to_string(placement) + cli::initial_placement_suffix(o.initial_spread);
        const std::uint64_t dataset = replay(workload, stream, o, gpus);
        const sim::PlacementCounts& n = model.counts();
        std::cout << "{\"suite\":\"sim\",\"device\":\"cpu-simulator\",\"driver\":\"-\",\"commit\":\"" << o.commit
                  << "\",\"date\":\"" << date << "\",\"simulated\":true,\"verified\":false,\"seconds\":null,\"useful_gbps\":null"
                  << ",\"mode\":\"placement_sim\",\"workload\":\"" << workload << "\",\"policy\":\"" << policy
                  << "\",\"gpus\":" << gpus << ",\"page_bytes\":" << o.page_bytes << ",\"dataset_bytes\":" << dataset
                  << ",\"reset_threshold\":" << o.reset_threshold << ",\"counter_threshold\":" << o.counter_threshold
                  << ",\"accesses\":" << n.accesses << ",\"local_accesses\":" << n.local << ",\"remote_accesses\":" << n.remote
                  << ",\"faults\":" << n.faults() << ",\"first_touches\":" << n.first_touches
                  << ",\"shared_faults\":" << n.shared_faults << ",\"migrations\":" << n.migrations
                  << ",\"counter_migrations\":" << n.counter_migrations << ",\"replications\":" << n.replications
                  << ",\"collapses\":" << n.collapses << ",\"remote_maps\":" << n.remote_maps
                  << ",\"invalidations\":" << n.invalidations << ",\"nvlink_bytes\":" << n.nvlink_bytes
                  << ",\"host_bytes\":" << n.host_bytes << ",\"modelled_seconds\":" << model.modelled_seconds() << "}"
                  << std::endl;
      }
  return 0;
}

}  // namespace warpvm::sim

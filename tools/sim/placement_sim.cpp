// warpvm-sim --gpus N --placement on_touch|access_counter|duplication|oasis|ideal|all: replays
// generated multi-GPU versions of issue #6's workloads through the placement policy code
// (PlacementModel) and prints one JSON Lines record per workload, GPU count and policy. Each GPU
// owns a partition of the work as a multi-GPU implementation would; the GPUs' streams are
// interleaved one step (a tile, a row, a vertex) at a time. Data starts on the host, or with
// --initial-placement blocks|interleaved on the GPUs (as MultiGpuSpace::place_on_gpus puts it).
// --pool-fraction caps each GPU's frame pool (a fraction of the footprint; pages are evicted as
// on the device), and --pressure-evictions sets OASIS's capacity-aware controller.

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
  std::vector<std::string> workloads{"transpose", "stencil2d", "pagerank", "gemm", "gemm_bands", "fft",
                                     "shared_read_private_write"};
  std::vector<unsigned> gpus{2};
  std::vector<Placement> placements{Placement::on_touch, Placement::access_counter, Placement::duplication,
                                    Placement::oasis, Placement::ideal};
  std::uint64_t dataset_bytes = 64ull << 20;
  std::uint32_t page_bytes = 4096;
  std::uint32_t reset_threshold = detail::default_reset_threshold;
  std::uint32_t counter_threshold = detail::default_counter_threshold;
  std::vector<double> pool_fractions{1.0};
  std::vector<std::uint32_t> pressure_evictions{detail::default_pressure_evictions};  ///< OASIS only
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
  cli::add_list(app, "--workloads", o.workloads,
                "transpose, stencil2d, pagerank, gemm, gemm_bands, fft, shared_read_private_write");
  cli::add_bytes(app, "--bytes", o.dataset_bytes, "dataset size");
  app.add_option("--page-bytes", o.page_bytes, "page size in bytes, a multiple of 128")->check(CLI::Range(line_bytes, 1u << 21));
  app.add_option("--reset-threshold", o.reset_threshold, "OASIS: shared faults before an object's O-Table entry resets")
      ->check(CLI::Range(1u, unsigned(detail::otable::max_reset_threshold)));
  app.add_option("--counter-threshold", o.counter_threshold, "access-counter: remote lines before a page migrates")
      ->check(CLI::Range(1u, 1u << 30));
  cli::add_list(app, "--pool-fraction", o.pool_fractions,
                "each GPU's frame pool as fractions of the footprint (1: in core, nothing evicted)")
      ->check(cli::unit_fraction);
  cli::add_list(app, "--pressure-evictions", o.pressure_evictions,
                "OASIS's capacity-aware controller: redundant copies of an object a GPU evicts in a phase before it\n"
                "stops replicating it (0: off); oasis runs once per value");
  app.add_option("--iterations", o.iterations, "stencil2d sweeps, pagerank iterations")->check(CLI::Range(1u, 1000u));
  cli::add_initial_placement(app, o.initial_spread);
  app.add_option("--commit", o.commit, "commit, for the records");
  std::string out;
  app.add_option("--out", out, "accepted for symmetry with the benchmarks: records go to stdout");
  cli::parse(app, argc, argv);
  if (o.gpus.empty() || o.placements.empty() || o.workloads.empty() || o.pool_fractions.empty() ||
      o.pressure_evictions.empty())
    usage("nothing to run");
  if (o.page_bytes % line_bytes != 0) usage("--page-bytes must be a multiple of 128");
  return o;
}

/// Makes the objects and emits the accesses of one byte range [begin, begin + bytes) of an
/// object, split at page boundaries, each piece as one access of the 128 B lines it covers. With
/// an initial spread the objects are placed on the GPUs before the first access, once all exist
/// (the pools are sized from the footprint then).
struct Stream {
  PlacementModel& model;
  std::uint32_t page_bytes;
  std::optional<Spread> initial_spread;
  std::vector<std::uint32_t> to_place = {};

  [[nodiscard]] std::uint64_t pages(std::uint64_t bytes) const { return (bytes + page_bytes - 1) / page_bytes; }
  std::uint32_t object(std::uint64_t bytes) {
    const std::uint32_t id = model.add_object(pages(bytes));
    if (initial_spread) to_place.push_back(id);
    return id;
  }

  void range(unsigned gpu, std::uint32_t obj, std::uint64_t begin, std::uint64_t bytes, bool write) {
    for (const std::uint32_t id : to_place) model.place_on_gpus(id, *initial_spread);
    to_place.clear();
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

/// C = A x B, n x n floats, 64 x 64 tiles of C. Dealt to the GPUs round-robin, A and B are read
/// by every GPU and each page of C has several writers; in bands (`bands`: each GPU a contiguous
/// run of tiles, as the GPU suite's gemm deals its 64 x 256 tiles), each GPU reads its rows of A
/// and all of B and is the one writer of its rows of C.
std::uint64_t gemm(Stream& s, std::uint64_t bytes, unsigned gpus, bool bands) {
  const std::uint64_t n = std::max<std::uint64_t>(64, static_cast<std::uint64_t>(std::sqrt(bytes / 12.0)) / 64 * 64);
  const std::uint64_t tiles = n / 64, row = n * 4, count = tiles * tiles;
  const auto a = s.object(n * row), b = s.object(n * row), c = s.object(n * row);
  const std::uint64_t steps = (count + gpus - 1) / gpus;
  for (std::uint64_t step = 0; step < steps; ++step)
    for (unsigned g = 0; g < gpus; ++g) {
      const std::uint64_t tile = bands ? part_begin(count, g, gpus) + step : step * gpus + g;
      if (tile >= (bands ? part_begin(count, g + 1, gpus) : count)) continue;
      const std::uint64_t ti = tile / tiles, tj = tile % tiles;
      for (std::uint64_t k = 0; k < tiles; ++k)
        for (std::uint64_t r = 0; r < 64; ++r) {
          s.range(g, a, (ti * 64 + r) * row + k * 256, 256, false);
          s.range(g, b, (k * 64 + r) * row + tj * 256, 256, false);
        }
      for (std::uint64_t r = 0; r < 64; ++r) s.range(g, c, (ti * 64 + r) * row + tj * 256, 256, true);
    }
  return 3 * n * row;
}

/// A radix-2 Stockham FFT of n complex floats (8 B each, n the largest power of two whose two
/// buffers fit the dataset), its stages inside one kernel separated by a grid barrier (implicit
/// phases), as the GPU suite's fft: stage s reads in[j] and in[j + n/2] and writes
/// out[2j - j % m] and out[2j - j % m + m] (m = 2^s) for every j in [0, n/2), the j split into one
/// contiguous part per GPU, a warp's 32 per step. Each GPU writes its own part of `out`; from the
/// second stage on, half of what it reads another GPU wrote, and no page is read by two GPUs in a
/// stage: the data changes hands at every stage.
std::uint64_t fft(Stream& s, std::uint64_t bytes, unsigned gpus) {
  constexpr std::uint64_t warp = 32, complex_bytes = 8;
  std::uint64_t n = 2 * warp;
  while (2 * (2 * n) * complex_bytes <= bytes) n *= 2;
  const std::uint64_t half = n / 2, chunks = half / warp, per_gpu = (chunks + gpus - 1) / gpus;
  const std::uint32_t buffer[2] = {s.object(n * complex_bytes), s.object(n * complex_bytes)};
  for (unsigned stage = 0; (std::uint64_t{1} << stage) < n; ++stage) {
    const std::uint64_t m = std::uint64_t{1} << stage;
    const std::uint32_t in = buffer[stage % 2], out = buffer[(stage + 1) % 2];
    for (std::uint64_t step = 0; step < per_gpu; ++step)
      for (unsigned g = 0; g < gpus; ++g) {
        const std::uint64_t chunk = part_begin(chunks, g, gpus) + step;
        if (chunk >= part_begin(chunks, g + 1, gpus)) continue;
        const std::uint64_t j = chunk * warp, o = 2 * j - j % m;
        s.range(g, in, j * complex_bytes, warp * complex_bytes, false);
        s.range(g, in, (j + half) * complex_bytes, warp * complex_bytes, false);
        if (m >= warp) {
          s.range(g, out, o * complex_bytes, warp * complex_bytes, true);
          s.range(g, out, (o + m) * complex_bytes, warp * complex_bytes, true);
        } else {  // butterflies of span m < 32: a warp's outputs are 64 consecutive elements
          s.range(g, out, o * complex_bytes, 2 * warp * complex_bytes, true);
        }
      }
  }
  return 2 * n * complex_bytes;
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
  if (workload == "gemm") return gemm(s, o.dataset_bytes, gpus, false);
  if (workload == "gemm_bands") return gemm(s, o.dataset_bytes, gpus, true);
  if (workload == "fft") return fft(s, o.dataset_bytes, gpus);
  if (workload == "shared_read_private_write") return shared_read_private_write(s, o.dataset_bytes, gpus);
  usage("unknown workload " + workload + " in the placement mode");
}

void print_record(const PlacementOptions& o, const char* date, const std::string& workload, const std::string& policy,
                  unsigned gpus, std::uint64_t dataset, double pool_fraction, std::uint32_t pressure_evictions,
                  const PlacementModel& model) {
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
            << ",\"host_bytes\":" << n.host_bytes << ",\"pool_fraction\":" << pool_fraction
            << ",\"pool_frames\":" << model.pool_frames() << ",\"pressure_evictions\":" << pressure_evictions
            << ",\"evictions\":" << n.evictions << ",\"writebacks\":" << n.writebacks
            << ",\"modelled_seconds\":" << model.modelled_seconds() << "}" << std::endl;
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
  for (const auto& workload : o.workloads)
    for (const double pool_fraction : o.pool_fractions)
      for (const unsigned gpus : o.gpus)
        for (const Placement placement : o.placements)
          for (const std::uint32_t pressure : o.pressure_evictions) {
            // The controller is OASIS's: the other placements run once, recorded with 0.
            if (placement != Placement::oasis && pressure != o.pressure_evictions.front()) continue;
            const std::uint32_t pressure_evictions = placement == Placement::oasis ? pressure : 0;
            PlacementModel model({.gpus = gpus,
                                  .placement = placement,
                                  .page_bytes = o.page_bytes,
                                  .reset_threshold = o.reset_threshold,
                                  .counter_threshold = o.counter_threshold,
                                  .pool_fraction = pool_fraction,
                                  .pressure_evictions = pressure_evictions});
            Stream stream{model, o.page_bytes, o.initial_spread};
            const std::uint64_t dataset = replay(workload, stream, o, gpus);
            print_record(o, date, workload, to_string(placement) + cli::initial_placement_suffix(o.initial_spread), gpus,
                         dataset, pool_fraction, pressure_evictions, model);
          }
  return 0;
}

}  // namespace warpvm::sim

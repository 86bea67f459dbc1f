// warpvm-apps-bench: Polybench's MVT, ATAX and BICG (warpvm/workloads/dense/linear_algebra.cuh) and DREAM's
// columnar filter-aggregate query (warpvm/workloads/query/query.cuh) in every memory mode, each run's result
// checked exactly against the CPU reference, one JSON Lines record per workload, mode and cache
// size. The workloads, modes and fields: docs/bench/apps.md.

#include "harness.cuh"
#include "uvm_counters.hpp"
#include "warpvm/workloads/dense/linear_algebra.cuh"
#include "warpvm/workloads/query/query.cuh"

#include "cli.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace warpvm::bench {
namespace {

using workloads::LinearApp;
using workloads::trip_value_columns;

struct AppsOptions {
  Options common;  ///< workloads, modes, cache fractions, repeats, eviction, out, commit, driver, trace
  std::uint64_t n = 32768;                 ///< matrix order: 4 GiB of floats
  std::uint64_t rows = 1'000'000'000;      ///< trip table rows: 24 GB in six columns
  std::uint64_t seed = 1;
  std::uint64_t chunk_rows = 1ull << 28;   ///< bulk copy (explicit): rows per chunk of each column
  std::uint64_t page_bytes = 4096;         ///< warpvm, warpvm_dream, warpvm_remote (the uvm preset keeps 4 KB)
  workloads::ColumnProduct column_product = workloads::ColumnProduct::tiles;
};

const char* const all_workloads = "mvt, atax, bicg, query";
const char* const all_modes =
    "explicit, uvm, uvm_read_mostly, uvm_prefetch, zero_copy, warpvm, warpvm_auto, warpvm_dream, warpvm_uvm, warpvm_remote";

AppsOptions parse(int argc, char** argv) {
  AppsOptions o;
  o.common.suite = "apps";
  o.common.cache_fractions = {1.0, 0.5, 0.25};
  CLI::App app{std::string("warpvm-apps-bench: MVT, ATAX, BICG and a filter-aggregate query, JSON Lines out.\n"
                           "mvt, atax, bicg: an N x N float matrix (--size N); query: a trip table of --rows rows.\n"
                           "modes: ") + all_modes,
               "warpvm-apps-bench"};
  add_shared_options(app, o.common);
  add_automatic_option(app, o.common);
  app.get_option("--modes")->check(cli::one_of(all_modes));
  app.get_option("--cache-fractions")->check(cli::unit_fraction);
  cli::add_list(app, "--workloads", o.common.workloads, all_workloads)->check(cli::one_of(all_workloads));
  app.add_option("--size", o.n, "matrix order N");
  app.add_option_function<double>(
      "--rows", [&o](double rows) { o.rows = static_cast<std::uint64_t>(rows); }, "trip table rows (1e9 reads as it should)");
  app.add_option("--seed", o.seed, "seed of the inputs");
  app.add_option("--chunk-rows", o.chunk_rows, "rows per chunk of each column in the query's bulk copy (explicit)")
      ->check(CLI::PositiveNumber);
  cli::add_page_bytes(app, o.page_bytes, "warpvm's page size in modes warpvm, warpvm_dream, warpvm_remote");
  app.add_option_function<std::string>(
         "--column-product",
         [&o](const std::string& value) {
           o.column_product = value == "tiles" ? workloads::ColumnProduct::tiles : workloads::ColumnProduct::bands;
         },
         "A^T w by warp tiles taken from the right (tiles, the default) or PolyBench's thread per column over bands "
         "of rows (bands)")
      ->check(CLI::IsMember({"tiles", "bands"}));
  cli::parse(app, argc, argv);
  try {
    workloads::validate_linear_size(o.n);
    workloads::validate_trip_rows(o.rows);
  } catch (const std::invalid_argument& e) {
    cli::refuse(app, e.what());
  }
  return o;
}

/// Host data copied into managed memory (real UVM) for one of the uvm modes: `uvm` no hints,
/// `uvm_read_mostly` cudaMemAdviseSetReadMostly, `uvm_prefetch` everything prefetched to the GPU
/// at the start of each run. Sent back to the host before every run.
class ManagedObjects {
 public:
  explicit ManagedObjects(const std::string& mode)
      : read_mostly_(mode == "uvm_read_mostly"), prefetch_(mode == "uvm_prefetch") {}

  template <class T>
  T* add(const T* contents, std::uint64_t count) {
    objects_.push_back({std::make_unique<Managed>(contents, count * sizeof(T)), count * sizeof(T)});
    if (read_mostly_) advise(objects_.back(), cudaMemAdviseSetReadMostly);
    return objects_.back().memory->template as<T>();
  }
  /// Every page on the host. With read-mostly set, a prefetch to the host would leave the GPU's
  /// read-only duplicates in place (the next run would start warm), so the advice is dropped
  /// around it: the driver collapses the duplicates, the prefetch moves them all home.
  void before_run() const {
    for (const Object& o : objects_) {
      if (read_mostly_) advise(o, cudaMemAdviseUnsetReadMostly);
      o.memory->to_host();
    }
    check(cudaDeviceSynchronize(), "managed memory to the host");
    if (read_mostly_)
      for (const Object& o : objects_) advise(o, cudaMemAdviseSetReadMostly);
  }
  void start_run(cudaStream_t stream) const {
    if (prefetch_)
      for (const Object& o : objects_) o.memory->to_device(stream);
  }

 private:
  struct Object {
    std::unique_ptr<Managed> memory;
    std::uint64_t bytes;
  };
  static void advise(const Object& o, cudaMemoryAdvise advice) {
    check(cudaMemAdvise(o.memory->as<void>(), o.bytes, advice, cudaMemLocation{cudaMemLocationTypeDevice, 0}),
          "cudaMemAdvise");
  }
  bool read_mostly_, prefetch_;
  std::vector<Object> objects_;
};

/// One warpvm point: a mode, its configuration and the cache's share of the footprint.
struct PagedRun {
  const char* mode;
  Config config;
  double cache_fraction;
  Placement placement = Placement::migrate;  ///< of the objects the mode does not place itself
  [[nodiscard]] bool uvm_preset() const { return config.transport == Transport::host_batched; }
};

class AppsBench {
 public:
  explicit AppsBench(const AppsOptions& o) : o_(o), recorder_(o.common) {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    check(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, 0), "SM count");
    // CUPTI counts UVM traffic only for managed memory allocated after its counters were first
    // enabled, so arm them before any (as warpvm-bench does).
    if (wants_uvm()) UvmCounters().stop();
    if (!o_.common.trace.empty()) {
      trace_.open(o_.common.trace);
      if (!trace_) throw std::runtime_error("cannot write " + o_.common.trace);
      write_batch_trace_header(trace_);
    }
  }
  ~AppsBench() { cudaStreamDestroy(stream_); }
  AppsBench(const AppsBench&) = delete;
  AppsBench& operator=(const AppsBench&) = delete;

  void run() {
    const bool any_matrix = o_.common.wants("mvt") || o_.common.wants("atax") || o_.common.wants("bicg");
    if (any_matrix) {
      PinnedArray matrix(o_.n * o_.n * sizeof(float));
      const auto start = std::chrono::steady_clock::now();
      workloads::fill_matrix(matrix.as<float>(), o_.n, o_.seed, parallel_for);
      std::fprintf(stderr, "apps-bench: %llu x %llu matrix, %.3f GiB, generated in %.1f s\n",
                   static_cast<unsigned long long>(o_.n), static_cast<unsigned long long>(o_.n),
                   matrix.bytes() / double(1ull << 30), seconds_since(start));
      for (const LinearApp app : {LinearApp::mvt, LinearApp::atax, LinearApp::bicg})
        if (o_.common.wants(workloads::to_string(app))) linear(app, matrix);
    }
    if (o_.common.wants("query")) query();
  }

 private:
  bool wants_uvm() const {
    return o_.common.wants_mode("uvm") || o_.common.wants_mode("uvm_read_mostly") || o_.common.wants_mode("uvm_prefetch");
  }
  std::uint64_t raw_blocks() const { return std::uint64_t(sms_) * 8; }  // 2048 threads per SM

  bool fits_on_device(const std::string& mode, std::uint64_t bytes) const {
    return bench::fits_on_device("apps-bench", mode, bytes);
  }

  /// A GPU-initiated preset with --page-bytes pages and the cache at `fraction` of `migrate_bytes`
  /// (in pages), but never below what `least_threads` threads holding `holds` pages each need
  /// (a larger grid is cut to what the cache allows: paged_blocks).
  Config paged_config(Preset preset, std::uint64_t migrate_bytes, double fraction, std::uint32_t holds,
                      std::uint64_t least_threads) const {
    Config config = Config::preset(preset);
    if (preset == Preset::warpvm) config.eviction = o_.common.eviction;
    config.automatic_remote_share = o_.common.automatic_remote_share;
    config.automatic_remote_share_evicting = o_.common.automatic_remote_share_evicting;
    config.page_bytes = o_.page_bytes;
    const std::uint64_t pages = (migrate_bytes + o_.page_bytes - 1) / o_.page_bytes;
    const auto frames = static_cast<std::uint64_t>(fraction * static_cast<double>(pages));
    config.cache_bytes = std::max(frames, least_threads * holds) * o_.page_bytes;
    config.max_pages_held_per_thread = holds;
    return config;
  }

  /// The points of the migrate-everything modes: warpvm's default and DREAM's presets at each
  /// cache fraction, the uvm preset at fraction 1 (and below in a WARPVM_HOST_BATCHED_EVICTION
  /// build, the only one where it evicts) with a cache of whole 2 MB chunks per object. Caches
  /// are at least one block's (`block_threads` x `holds` frames).
  std::vector<PagedRun> paged_runs(std::initializer_list<std::uint64_t> object_bytes, std::uint32_t holds,
                                   std::uint64_t block_threads) const {
    std::uint64_t footprint = 0;
    for (const std::uint64_t b : object_bytes) footprint += b;
    std::vector<PagedRun> runs;
    for (const double fraction : o_.common.cache_fractions) {
      if (o_.common.wants_mode("warpvm"))
        runs.push_back({"warpvm", paged_config(Preset::warpvm, footprint, fraction, holds, block_threads), fraction});
      if (o_.common.wants_mode("warpvm_auto"))
        runs.push_back({"warpvm_auto", paged_config(Preset::warpvm, footprint, fraction, holds, block_threads), fraction,
                        Placement::automatic});
      if (o_.common.wants_mode("warpvm_dream"))
        runs.push_back({"warpvm_dream", paged_config(Preset::dream, footprint, fraction, holds, block_threads), fraction});
      if (o_.common.wants_mode("warpvm_uvm") && (fraction >= 1.0 || WARPVM_HOST_BATCHED_EVICTION))
        runs.push_back({"warpvm_uvm", uvm_preset_config(object_bytes, fraction), fraction});
    }
    return runs;
  }

  /// The most blocks of `block_threads` a paged launch on `rt` may have: `wanted`, cut to what
  /// the cache guarantees progress for. The uvm preset holds nothing: `wanted` as is.
  static std::uint64_t paged_blocks(const Runtime& rt, std::uint64_t wanted, unsigned block_threads) {
    if (rt.config().transport == Transport::host_batched) return wanted;
    return std::max<std::uint64_t>(1, std::min(wanted, rt.max_resident_threads() / block_threads));
  }

  /// Times `run` on `stream` (`before` untimed ahead of each run), then verifies.
  Record measure(Record r, cudaStream_t stream, const std::function<void()>& before, const std::function<void()>& run,
                 const std::function<bool()>& verify) const {
    r.seconds = time_runs(stream, o_.common.repeats, before, run);
    r.verified = verify();
    return r;
  }

  /// A real-UVM point: timed, verified, then one more run under CUPTI's counters for its traffic.
  Record measure_uvm(Record r, const ManagedObjects& managed, const std::function<void()>& before,
                     const std::function<void()>& run, const std::function<bool()>& verify) const {
    auto cold_before = [&] {
      if (before) before();
      managed.before_run();
    };
    auto run_in_stream = [&] {
      managed.start_run(stream_);
      run();
    };
    r = measure(std::move(r), stream_, cold_before, run_in_stream, verify);
    add_uvm_traffic(r, cold_before, run_in_stream);
    return r;
  }

  /// A warpvm point: the cache emptied (and `before` run) ahead of every run, so each starts
  /// from host memory; paging counters averaged over the runs; the uvm preset's fault batches.
  Record paged_point(Record r, Runtime& rt, const PagedRun& run, std::uint64_t footprint_bytes,
                     const std::function<void()>& before, const std::function<void()>& launch,
                     const std::function<bool()>& verify) {
    r.mode = run.mode;
    r.policy = run.uvm_preset() ? uvm_policy(rt.config()) : to_string(rt.config().eviction);
    r.cache_fraction = run.cache_fraction;
    auto cold_before = [&] {
      rt.drop_cached();
      if (before) before();
    };
    rt.reset_stats();
    r.seconds = time_runs(rt.stream(), o_.common.repeats, cold_before, launch);
    rt.synchronize();
    add_paging_stats(r, rt, o_.common.repeats + 1);  // the warm-up run counts too
    r.extra["page_bytes"] = static_cast<double>(rt.page_bytes());
    r.extra["cache_share"] = footprint_bytes == 0 ? 0.0 : static_cast<double>(rt.cache_bytes()) / footprint_bytes;
    if (run.placement == Placement::automatic) {
      r.extra["automatic_remote_share"] = rt.config().automatic_remote_share;
      r.extra["automatic_remote_share_evicting"] = rt.config().automatic_remote_share_evicting;
    }
    r.verified = verify();
    if (run.uvm_preset()) add_batch_summary(r, rt, cold_before, launch, trace_);
    return r;
  }

  // ---- MVT, ATAX, BICG ----

  void linear(LinearApp app, const PinnedArray& matrix) {
    const std::uint64_t n = o_.n, matrix_bytes = n * n * sizeof(float);
    float* host_matrix = matrix.as<float>();
    const workloads::LinearVectors vectors(app, n, o_.seed);
    auto start = std::chrono::steady_clock::now();
    const workloads::LinearResult expected = workloads::reference_linear(app, host_matrix, n, vectors, parallel_for);
    std::fprintf(stderr, "apps-bench: %s reference in %.1f s\n", workloads::to_string(app), seconds_since(start));

    // The vectors live in device memory in every mode (N doubles each, 0.02% of the matrix's
    // bytes at N = 32768): the modes differ in how the matrix reaches the GPU.
    DeviceBuffer<double> row_input(n), column_input(n), out1(n), out2(n);
    const std::uint64_t vector_bytes = n * sizeof(double);
    check(cudaMemcpy(row_input.data, vectors.row_input.data(), vector_bytes, cudaMemcpyHostToDevice), "copy vector");
    check(cudaMemcpy(column_input.data, vectors.column_input.data(), vector_bytes, cudaMemcpyHostToDevice), "copy vector");
    auto reset_outputs = [&] {
      check(cudaMemcpy(out1.data, vectors.row_init.data(), vector_bytes, cudaMemcpyHostToDevice), "reset output");
      check(cudaMemcpy(out2.data, vectors.column_init.data(), vector_bytes, cudaMemcpyHostToDevice), "reset output");
    };
    auto verify = [&] {
      workloads::LinearResult got{std::vector<double>(n), std::vector<double>(n)};
      check(cudaMemcpy(got.out1.data(), out1.data, vector_bytes, cudaMemcpyDeviceToHost), "read output");
      check(cudaMemcpy(got.out2.data(), out2.data, vector_bytes, cudaMemcpyDeviceToHost), "read output");
      const std::string diff = workloads::compare_vectors("row product", got.out1, expected.out1) +
                               workloads::compare_vectors("column product", got.out2, expected.out2);
      if (!diff.empty()) std::fprintf(stderr, "apps-bench: %s: %s\n", workloads::to_string(app), diff.c_str());
      return diff.empty();
    };
    const std::uint64_t full_grid = workloads::linear_grid(n, raw_blocks());
    const bool tiles = o_.column_product == workloads::ColumnProduct::tiles;
    const std::uint64_t bands = workloads::linear_column_bands(n, static_cast<std::uint64_t>(sms_));
    const auto bands_grid = static_cast<unsigned>(workloads::linear_grid(n * bands, raw_blocks()));
    // The tiles' grids: what is resident at once (column_tiles_grid says why).
    const auto multiprocessors = static_cast<std::uint64_t>(sms_);
    const unsigned raw_tiles_grid = tiles ? workloads::column_tiles_grid(workloads::column_tiles_raw, n, multiprocessors) : 0;
    const unsigned paged_tiles_grid = tiles ? workloads::column_tiles_grid(workloads::column_tiles_paged, n, multiprocessors) : 0;
    auto run_raw = [&](const float* a) {
      workloads::run_linear(app, row_input.data, column_input.data, out1.data, out2.data,
                       [&](const double* v, double* out) {
                         workloads::row_product_raw<<<static_cast<unsigned>(full_grid), workloads::linear_block_threads, 0,
                                                 stream_>>>(a, n, v, out);
                       },
                       [&](const double* w, double* out) {
                         if (tiles)
                           workloads::column_tiles_raw<<<raw_tiles_grid, workloads::linear_block_threads, 0, stream_>>>(a, n, w,
                                                                                                               out);
                         else
                           workloads::column_bands_raw<<<bands_grid, workloads::linear_block_threads, 0, stream_>>>(a, n, bands,
                                                                                                          w, out);
                       });
    };
    auto base = [&](const std::string& mode) {
      Record r;
      r.workload = workloads::to_string(app);
      r.mode = mode;
      r.dataset_bytes = matrix_bytes;
      r.useful_bytes = matrix_bytes;  // every entry is needed; reading it twice is the kernels' choice
      r.extra["n"] = static_cast<double>(n);
      r.extra["column_tiles"] = tiles ? 1 : 0;
      if (!tiles) r.extra["column_bands"] = static_cast<double>(bands);
      r.extra["column_blocks"] = tiles ? raw_tiles_grid : bands_grid;  // the paged modes' own below
      return r;
    };

    if (o_.common.wants_mode("explicit") && fits_on_device("explicit", matrix_bytes + 4 * vector_bytes)) {
      DeviceBuffer<float> a(n * n);
      Record r = base("explicit");
      r.bytes_moved = static_cast<std::int64_t>(matrix_bytes);
      recorder_.write(measure(r, stream_, reset_outputs, [&] {
        check(cudaMemcpyAsync(a.data, host_matrix, matrix_bytes, cudaMemcpyHostToDevice, stream_), "copy matrix");
        run_raw(a.data);
      }, verify));
    }
    if (o_.common.wants_mode("zero_copy"))
      recorder_.write(measure(base("zero_copy"), stream_, reset_outputs, [&] { run_raw(host_matrix); }, verify));
    for (const char* mode : {"uvm", "uvm_read_mostly", "uvm_prefetch"}) {
      // In-core only: never ask for more managed memory than the GPU has free (it can hang the GPU).
      if (!o_.common.wants_mode(mode) || !fits_on_device(mode, matrix_bytes + 4 * vector_bytes)) continue;
      ManagedObjects managed(mode);
      const float* a = managed.add(host_matrix, n * n);
      recorder_.write(measure_uvm(base(mode), managed, reset_outputs, [&] { run_raw(a); }, verify));
    }

    std::vector<PagedRun> runs = paged_runs({matrix_bytes}, workloads::linear_pages_held, workloads::linear_block_threads);
    // All of A remote: zero-copy through warpvm; the cache only has to pass the row product's
    // launch check (the column product's larger grid is cut to what the cache guarantees
    // progress for, as in every paged mode: paged_blocks).
    const std::uint64_t launch_threads = full_grid * workloads::linear_block_threads;
    if (o_.common.wants_mode("warpvm_remote"))
      runs.push_back({"warpvm_remote", paged_config(Preset::warpvm, 0, 0, workloads::linear_pages_held, launch_threads), 0});
    for (const PagedRun& run : runs) {
      const bool remote = std::string(run.mode) == "warpvm_remote";
      Runtime rt(run.config);
      auto a = rt.adopt(host_matrix, n * n, remote ? Placement::remote : run.placement, "A");
      const auto blocks = static_cast<unsigned>(paged_blocks(rt, full_grid, workloads::linear_block_threads));
      const auto column_blocks =
          static_cast<unsigned>(paged_blocks(rt, tiles ? paged_tiles_grid : bands_grid, workloads::linear_block_threads));
      auto launch = [&] {
        workloads::run_linear(app, row_input.data, column_input.data, out1.data, out2.data,
                         [&](const double* v, double* out) {
                           rt.launch(workloads::row_product_paged, dim3(blocks), dim3(workloads::linear_block_threads), 0,
                                     a.device(), n, v, out);
                         },
                         [&](const double* w, double* out) {
                           if (tiles)
                             rt.launch(workloads::column_tiles_paged, dim3(column_blocks), dim3(workloads::linear_block_threads),
                                       0, a.device(), n, w, out);
                           else
                             rt.launch(workloads::column_bands_paged, dim3(column_blocks), dim3(workloads::linear_block_threads),
                                       0, a.device(), n, bands, w, out);
                         });
      };
      Record r = paged_point(base(run.mode), rt, run, remote ? 0 : matrix_bytes, reset_outputs, launch, verify);
      r.extra["blocks"] = blocks;
      r.extra["column_blocks"] = column_blocks;
      recorder_.write(r);
    }
  }

  // ---- the filter-aggregate query ----

  /// The trip table in pinned host memory: duration, then the five value columns.
  struct TripTable {
    explicit TripTable(std::uint64_t rows) : duration(rows * sizeof(std::int32_t)) {
      for (unsigned c = 0; c < trip_value_columns; ++c) values.emplace_back(rows * sizeof(float));
    }
    workloads::TripColumnPointers pointers() const {
      workloads::TripColumnPointers p{duration.as<std::int32_t>(), {}};
      for (unsigned c = 0; c < trip_value_columns; ++c) p.value[c] = values[c].as<float>();
      return p;
    }
    PinnedArray duration;
    std::vector<PinnedArray> values;
  };

  void query() {
    const std::uint64_t rows = o_.rows, column_bytes = rows * 4, table_bytes = 6 * column_bytes;
    TripTable table(rows);
    const workloads::TripColumnPointers host = table.pointers();
    auto start = std::chrono::steady_clock::now();
    workloads::fill_trips(host, rows, o_.seed, parallel_for);
    const workloads::TripTotals expected = workloads::reference_query(host, rows, parallel_for);
    std::fprintf(stderr, "apps-bench: trip table of %llu rows (%.3f GiB), %llu longer than %d s (%.4f%%), "
                 "generated and answered on the CPU in %.1f s\n", static_cast<unsigned long long>(rows),
                 table_bytes / double(1ull << 30), expected.trips, workloads::long_trip_seconds,
                 100.0 * static_cast<double>(expected.trips) / static_cast<double>(rows), seconds_since(start));

    DeviceBuffer<workloads::TripTotals> totals(1);
    workloads::TripTotals answer;
    auto zero_totals = [&](cudaStream_t stream) {
      check(cudaMemsetAsync(totals.data, 0, sizeof(workloads::TripTotals), stream), "zero totals");
    };
    auto verify = [&] {
      check(cudaMemcpy(&answer, totals.data, sizeof answer, cudaMemcpyDeviceToHost), "read totals");
      const std::string diff = workloads::compare_totals(answer, expected);
      if (!diff.empty()) std::fprintf(stderr, "apps-bench: query: %s\n", diff.c_str());
      return diff.empty();
    };
    auto raw_query = [&](const workloads::TripColumnsView& columns, std::uint64_t count) {
      workloads::trip_query_raw<<<static_cast<unsigned>(raw_blocks()), workloads::query_block_threads, 0, stream_>>>(
          columns, count, totals.data);
    };
    auto view_of = [](const std::int32_t* duration, const float* const* values) {
      workloads::TripColumnsView v{duration, {}};
      for (unsigned c = 0; c < trip_value_columns; ++c) v.value[c] = values[c];
      return v;
    };
    auto write = [&](Record r) {
      r.dataset_bytes = table_bytes;
      r.useful_bytes = column_bytes + static_cast<std::uint64_t>(expected.trips) * trip_value_columns * sizeof(float);
      r.extra["rows"] = static_cast<double>(rows);
      r.extra["matching_rows"] = static_cast<double>(answer.trips);
      r.extra["selectivity"] = static_cast<double>(expected.trips) / static_cast<double>(rows);
      const char* const keys[trip_value_columns] = {"q1_miles", "q2_fare", "q3_extras", "q4_tips", "q5_tolls"};
      for (unsigned c = 0; c < trip_value_columns; ++c) r.extra[keys[c]] = answer.sum[c];
      recorder_.write(r);
    };
    auto named = [](const char* mode) {
      Record r;
      r.workload = "query";
      r.mode = mode;
      return r;
    };

    if (o_.common.wants_mode("explicit"))
      bulk_copy_query(named("explicit"), table, rows, totals.data, zero_totals, verify, write);
    if (o_.common.wants_mode("zero_copy"))
      write(measure(named("zero_copy"), stream_, nullptr, [&] {
        zero_totals(stream_);
        raw_query(view_of(host.duration, host.value), rows);
      }, verify));
    for (const char* mode : {"uvm", "uvm_read_mostly", "uvm_prefetch"}) {
      if (!o_.common.wants_mode(mode) || !fits_on_device(mode, table_bytes)) continue;
      ManagedObjects managed(mode);
      const std::int32_t* duration = managed.add(host.duration, rows);
      const float* values[trip_value_columns];
      for (unsigned c = 0; c < trip_value_columns; ++c) values[c] = managed.add(host.value[c], rows);
      write(measure_uvm(named(mode), managed, nullptr, [&] {
        zero_totals(stream_);
        raw_query(view_of(duration, values), rows);
      }, verify));
    }

    std::vector<PagedRun> runs =
        paged_runs({column_bytes, column_bytes, column_bytes, column_bytes, column_bytes, column_bytes},
                   workloads::query_pages_held, workloads::query_block_threads);
    // The value columns remote (read only at the matching rows, a 32-byte sector each instead of
    // a 4 KB page), the duration column migrated, its cache at each fraction of its own pages.
    if (o_.common.wants_mode("warpvm_remote"))
      for (const double fraction : o_.common.cache_fractions)
        runs.push_back({"warpvm_remote",
                        paged_config(Preset::warpvm, column_bytes, fraction, workloads::query_pages_held, workloads::query_block_threads),
                        fraction});
    for (const PagedRun& run : runs) {
      const bool remote_values = std::string(run.mode) == "warpvm_remote";
      Runtime rt(run.config);
      auto duration = rt.adopt(host.duration, rows, run.placement, "duration");
      std::vector<object<float>> values;
      for (unsigned c = 0; c < trip_value_columns; ++c)
        values.push_back(rt.adopt(host.value[c], rows, remote_values ? Placement::remote : run.placement,
                                  workloads::trip_value_names[c]));
      workloads::TripColumnsPaged columns{duration.device(), {}};
      for (unsigned c = 0; c < trip_value_columns; ++c) columns.value[c] = values[c].device();
      const auto blocks = static_cast<unsigned>(paged_blocks(rt, raw_blocks(), workloads::query_block_threads));
      Record r = paged_point(named(run.mode), rt, run, remote_values ? column_bytes : table_bytes, nullptr, [&] {
        zero_totals(rt.stream());
        rt.launch(workloads::trip_query_paged, dim3(blocks), dim3(workloads::query_block_threads), 0, columns, totals.data);
      }, verify);
      r.extra["blocks"] = blocks;
      r.extra["values_remote"] = remote_values ? 1 : 0;
      write(r);
    }
  }

  /// Bulk copy of whole columns, as RAPIDS does: each chunk of --chunk-rows rows of all six
  /// columns copied to the device, then queried there; copies and kernels timed together.
  template <class ZeroTotals, class Verify, class Write>
  void bulk_copy_query(Record r, const TripTable& table, std::uint64_t rows, workloads::TripTotals* totals,
                       ZeroTotals&& zero_totals, Verify&& verify, Write&& write) {
    const std::uint64_t chunk = std::min(rows, o_.chunk_rows);
    if (!fits_on_device("explicit", 6 * chunk * 4)) return;
    DeviceBuffer<std::int32_t> duration(chunk);
    std::vector<std::unique_ptr<DeviceBuffer<float>>> values;
    for (unsigned c = 0; c < trip_value_columns; ++c) values.push_back(std::make_unique<DeviceBuffer<float>>(chunk));
    workloads::TripColumnsView device_view{duration.data, {}};
    for (unsigned c = 0; c < trip_value_columns; ++c) device_view.value[c] = values[c]->data;
    const workloads::TripColumnPointers host = table.pointers();
    r.bytes_moved = static_cast<std::int64_t>(6 * rows * 4);
    r.extra["chunk_rows"] = static_cast<double>(chunk);
    r = measure(r, stream_, nullptr, [&] {
      zero_totals(stream_);
      for (std::uint64_t first = 0; first < rows; first += chunk) {
        const std::uint64_t count = std::min(chunk, rows - first);
        check(cudaMemcpyAsync(duration.data, host.duration + first, count * 4, cudaMemcpyHostToDevice, stream_),
              "copy duration");
        for (unsigned c = 0; c < trip_value_columns; ++c)
          check(cudaMemcpyAsync(values[c]->data, host.value[c] + first, count * 4, cudaMemcpyHostToDevice, stream_),
                "copy values");
        workloads::trip_query_raw<<<static_cast<unsigned>(raw_blocks()), workloads::query_block_threads, 0, stream_>>>(
            device_view, count, totals);
      }
    }, verify);
    write(r);
  }

  const AppsOptions& o_;
  Recorder recorder_;
  std::ofstream trace_;
  cudaStream_t stream_ = nullptr;
  int sms_ = 0;
};

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  const auto options = warpvm::bench::parse(argc, argv);
  return warpvm::bench::bench_main("warpvm-apps-bench", "", [&] { warpvm::bench::AppsBench(options).run(); });
}

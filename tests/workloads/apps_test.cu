// Polybench's MVT, ATAX, BICG (warpvm/workloads/dense/linear_algebra.cuh; both forms of the column product,
// tiles and bands) and the filter-aggregate query
// (warpvm/workloads/query/query.cuh) against their CPU references, which they must match exactly: through
// warpvm with everything cached, with a cache small enough to evict (warpvm's default and DREAM's
// preset; also an odd matrix size whose rows straddle pages), with remote placement, and the plain-pointer kernels the benchmark's other modes use
// (on device memory; the query also in chunks, as its bulk copy runs it).

#include "gpu_test_support.cuh"
#include "warpvm/workloads/dense/linear_algebra.cuh"
#include "warpvm/workloads/query/query.cuh"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

using workloads::LinearApp;

constexpr LinearApp all_linear_apps[] = {LinearApp::mvt, LinearApp::atax, LinearApp::bicg};
/// 2048 x 2048 floats: 16 MiB, 4096 pages, two pages per row.
constexpr std::uint64_t matrix_n = 2048;
constexpr std::uint64_t matrix_pages = matrix_n * matrix_n * sizeof(float) / 4096;
/// Enough for two blocks of one-page holders, an eighth of the matrix: every row and column sweep
/// evicts.
constexpr std::uint64_t small_matrix_frames = 2 * workloads::linear_block_threads * workloads::linear_pages_held;
constexpr std::uint64_t matrix_seed = 11;
/// Odd: rows straddle pages, the last page is partial, and the kernels' four-load loop has a tail.
constexpr std::uint64_t unaligned_n = 1003;

/// 3 Mi rows: 12 MiB per column, 3072 pages each, about 2,500 long trips.
constexpr std::uint64_t trip_rows = 3ull << 20;
constexpr std::uint64_t trip_column_pages = trip_rows * 4 / 4096;
/// Two blocks of threads holding two pages each: about a twentieth of the migrated table.
constexpr std::uint64_t small_query_frames = 2 * workloads::query_block_threads * workloads::query_pages_held;
constexpr std::uint64_t trip_seed = 5;

Config with_frames(Preset preset, std::uint64_t frames, std::uint32_t holds) {
  Config config = Config::preset(preset);
  config.cache_bytes = frames * 4096;
  config.max_pages_held_per_thread = holds;
  return config;
}

// ---- MVT, ATAX, BICG ----

/// The n x n test matrix, generated once per size.
const std::vector<float>& host_matrix(std::uint64_t n = matrix_n) {
  static std::map<std::uint64_t, std::vector<float>> matrices;
  auto [it, added] = matrices.try_emplace(n);
  if (added) {
    it->second.resize(n * n);
    workloads::fill_matrix(it->second.data(), n, matrix_seed);
  }
  return it->second;
}

/// The application's vectors in device memory, its kernels run through `row`/`column` launchers
/// (given input and output), its results compared with the reference.
template <class LaunchRow, class LaunchColumn>
void expect_linear_matches(LinearApp app, std::uint64_t n, LaunchRow&& row, LaunchColumn&& column) {
  SCOPED_TRACE(workloads::to_string(app));
  const workloads::LinearVectors vectors(app, n, matrix_seed);
  const workloads::LinearResult expected = workloads::reference_linear(app, host_matrix(n).data(), n, vectors);
  const std::uint64_t bytes = n * sizeof(double);
  DeviceVector<double> row_input(n), column_input(n), out1(n), out2(n);
  WARPVM_CUDA_TRY(cudaMemcpy(row_input.get(), vectors.row_input.data(), bytes, cudaMemcpyHostToDevice));
  WARPVM_CUDA_TRY(cudaMemcpy(column_input.get(), vectors.column_input.data(), bytes, cudaMemcpyHostToDevice));
  WARPVM_CUDA_TRY(cudaMemcpy(out1.get(), vectors.row_init.data(), bytes, cudaMemcpyHostToDevice));
  WARPVM_CUDA_TRY(cudaMemcpy(out2.get(), vectors.column_init.data(), bytes, cudaMemcpyHostToDevice));
  // A copy from pageable memory may still be in flight when cudaMemcpy returns, and the kernels
  // may run on a stream that does not wait for the default one.
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());
  workloads::run_linear(app, row_input.get(), column_input.get(), out1.get(), out2.get(), row, column);
  WARPVM_CUDA_TRY(cudaGetLastError());  // a raw launch's own error
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(workloads::compare_vectors("row product", out1.to_host(), expected.out1), "");
  EXPECT_EQ(workloads::compare_vectors("column product", out2.to_host(), expected.out2), "");
}

/// Every application through warpvm on a runtime of `config`, the n x n matrix A allocated with
/// `placement`, with each form of the column product; returns the runtime's stats.
Stats expect_paged_linear_matches(const Config& config, Placement placement, std::uint64_t n = matrix_n) {
  Runtime rt(config);
  auto a = rt.alloc<float>(n * n, placement, "A");
  std::copy(host_matrix(n).begin(), host_matrix(n).end(), a.host().begin());
  const std::uint64_t bands = workloads::linear_column_bands(n, sm_count());
  const std::uint64_t fitting = rt.max_resident_threads() / workloads::linear_block_threads;
  const unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>(workloads::linear_grid(n, sm_count() * 8), fitting));
  for (const workloads::ColumnProduct form : {workloads::ColumnProduct::tiles, workloads::ColumnProduct::bands}) {
    SCOPED_TRACE(workloads::to_string(form));
    const std::uint64_t column_grid = form == workloads::ColumnProduct::tiles
                                          ? workloads::column_tiles_grid(workloads::column_tiles_paged, n, sm_count())
                                          : workloads::linear_grid(n * bands, sm_count() * 8);
    const auto column_blocks = static_cast<unsigned>(std::min(column_grid, fitting));
    for (const LinearApp app : all_linear_apps) {
      rt.drop_cached();
      expect_linear_matches(app, n, [&](const double* v, double* out) {
        rt.launch(workloads::row_product_paged, dim3(blocks), dim3(workloads::linear_block_threads), 0, a.device(), n, v, out);
      }, [&](const double* w, double* out) {
        if (form == workloads::ColumnProduct::tiles)
          rt.launch(workloads::column_tiles_paged, dim3(column_blocks), dim3(workloads::linear_block_threads), 0, a.device(), n, w,
                    out);
        else
          rt.launch(workloads::column_bands_paged, dim3(column_blocks), dim3(workloads::linear_block_threads), 0, a.device(), n,
                    bands, w, out);
      });
      rt.synchronize();
    }
  }
  return rt.stats();
}

/// Every application on the plain-pointer kernels over the n x n matrix `a` in device memory, the
/// column product by tiles over `column_blocks` blocks.
void expect_raw_tiles_match(const float* a, std::uint64_t n, unsigned column_blocks) {
  const unsigned blocks = workloads::linear_grid(n, sm_count() * 8);
  for (const LinearApp app : all_linear_apps)
    expect_linear_matches(app, n, [&](const double* v, double* out) {
      workloads::row_product_raw<<<blocks, workloads::linear_block_threads>>>(a, n, v, out);
    }, [&](const double* w, double* out) {
      workloads::column_tiles_raw<<<column_blocks, workloads::linear_block_threads>>>(a, n, w, out);
    });
}

class LinearApps : public GpuTest {};

// Runs without a GPU too: the inputs the GPU tests use are the small integers the exactness
// argument needs, and the reference is what the formulas say at a few hand-checked entries.
TEST(LinearAppsReference, InputsAreSmallIntegersAndReferenceFollowsTheFormulas) {
  const std::vector<float>& a = host_matrix();
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](float x) { return x >= 1 && x <= 16 && x == static_cast<int>(x); }));
  EXPECT_GT(std::count_if(a.begin(), a.end(), [&](float x) { return x != a[0]; }), 0);
  const workloads::LinearVectors v(LinearApp::atax, matrix_n, matrix_seed);
  const workloads::LinearResult r = workloads::reference_linear(LinearApp::atax, a.data(), matrix_n, v);
  double tmp0 = 0, y0 = 0;
  for (std::uint64_t j = 0; j < matrix_n; ++j) tmp0 += static_cast<double>(a[j]) * v.row_input[j];
  for (std::uint64_t i = 0; i < matrix_n; ++i) y0 += static_cast<double>(a[i * matrix_n]) * r.out1[i];
  EXPECT_EQ(r.out1[0], tmp0);
  EXPECT_EQ(r.out2[0], y0);
}

TEST_F(LinearApps, RawKernelsOnDeviceMemoryMatchReference) {
  DeviceVector<float> a(matrix_n * matrix_n);
  WARPVM_CUDA_TRY(cudaMemcpy(a.get(), host_matrix().data(), matrix_n * matrix_n * 4, cudaMemcpyHostToDevice));
  const unsigned blocks = workloads::linear_grid(matrix_n, sm_count() * 8);
  // Bands: one (PolyBench's form), the bands this GPU gets, and 1536 bands of 2 rows (the last
  // 512 empty).
  for (const std::uint64_t bands : {std::uint64_t{1}, workloads::linear_column_bands(matrix_n, sm_count()), matrix_n * 3 / 4}) {
    SCOPED_TRACE("bands " + std::to_string(bands));
    const unsigned column_blocks = workloads::linear_grid(matrix_n * bands, sm_count() * 8);
    for (const LinearApp app : all_linear_apps)
      expect_linear_matches(app, matrix_n, [&](const double* v, double* out) {
        workloads::row_product_raw<<<blocks, workloads::linear_block_threads>>>(a.get(), matrix_n, v, out);
      }, [&](const double* w, double* out) {
        workloads::column_bands_raw<<<column_blocks, workloads::linear_block_threads>>>(a.get(), matrix_n, bands, w, out);
      });
  }
  // Tiles: one block (each warp walks 64 tiles), the grid the bench gives, and more warps than
  // tiles (the last ones idle).
  const std::uint64_t tile_threads = workloads::column_tiles_threads(matrix_n);
  for (const unsigned column_blocks : {1u, workloads::column_tiles_grid(workloads::column_tiles_raw, matrix_n, sm_count()),
                                       static_cast<unsigned>(tile_threads / workloads::linear_block_threads + 3)}) {
    SCOPED_TRACE("tiles over " + std::to_string(column_blocks) + " blocks");
    expect_raw_tiles_match(a.get(), matrix_n, column_blocks);
  }
}

TEST_F(LinearApps, RawTilesOfAnUnalignedSizeMatchReference) {
  DeviceVector<float> a(unaligned_n * unaligned_n);
  WARPVM_CUDA_TRY(
      cudaMemcpy(a.get(), host_matrix(unaligned_n).data(), unaligned_n * unaligned_n * 4, cudaMemcpyHostToDevice));
  expect_raw_tiles_match(a.get(), unaligned_n, workloads::column_tiles_grid(workloads::column_tiles_raw, unaligned_n, sm_count()));
}

TEST_F(LinearApps, WholeMatrixCached) {
  const Stats stats = expect_paged_linear_matches(with_frames(Preset::warpvm, matrix_pages, workloads::linear_pages_held),
                                                  Placement::migrate);
  EXPECT_EQ(stats.evictions, 0u);
}

TEST_F(LinearApps, SmallCacheEvicts) {
  const Stats stats = expect_paged_linear_matches(
      with_frames(Preset::warpvm, small_matrix_frames, workloads::linear_pages_held), Placement::migrate);
  EXPECT_GT(stats.evictions, 0u);
}

TEST_F(LinearApps, SmallCacheEvictsWithDreamPreset) {
  const Stats stats = expect_paged_linear_matches(
      with_frames(Preset::dream, small_matrix_frames, workloads::linear_pages_held), Placement::migrate);
  EXPECT_GT(stats.evictions, 0u);
}

TEST_F(LinearApps, UnalignedSizeSmallCacheEvicts) {
  const Stats stats = expect_paged_linear_matches(
      with_frames(Preset::warpvm, small_matrix_frames, workloads::linear_pages_held), Placement::migrate, unaligned_n);
  EXPECT_GT(stats.evictions, 0u);
}

TEST_F(LinearApps, RemoteMatrix) {
  const Stats stats = expect_paged_linear_matches(
      with_frames(Preset::warpvm, small_matrix_frames, workloads::linear_pages_held), Placement::remote);
  EXPECT_EQ(stats.misses, 0u);  // nothing of A goes through the cache
}

// ---- the filter-aggregate query ----

struct HostTrips {
  std::vector<std::int32_t> duration = std::vector<std::int32_t>(trip_rows);
  std::vector<std::vector<float>> values =
      std::vector<std::vector<float>>(workloads::trip_value_columns, std::vector<float>(trip_rows));
  workloads::TripTotals expected;

  workloads::TripColumnPointers pointers() {
    workloads::TripColumnPointers p{duration.data(), {}};
    for (unsigned c = 0; c < workloads::trip_value_columns; ++c) p.value[c] = values[c].data();
    return p;
  }
};

HostTrips& trips() {
  static HostTrips t = [] {
    HostTrips built;
    workloads::fill_trips(built.pointers(), trip_rows, trip_seed);
    built.expected = workloads::reference_query(built.pointers(), trip_rows);
    return built;
  }();
  return t;
}

/// The query through warpvm on a runtime of `config`, the value columns with `value_placement`;
/// returns the runtime's stats.
Stats expect_paged_query_matches(const Config& config, Placement value_placement) {
  HostTrips& t = trips();
  Runtime rt(config);
  auto duration = rt.alloc<std::int32_t>(trip_rows, Placement::migrate, "duration");
  std::copy(t.duration.begin(), t.duration.end(), duration.host().begin());
  std::vector<object<float>> values;
  workloads::TripColumnsPaged columns{duration.device(), {}};
  for (unsigned c = 0; c < workloads::trip_value_columns; ++c) {
    values.push_back(rt.alloc<float>(trip_rows, value_placement, workloads::trip_value_names[c]));
    std::copy(t.values[c].begin(), t.values[c].end(), values.back().host().begin());
    columns.value[c] = values.back().device();
  }
  DeviceVector<workloads::TripTotals> totals(1);
  const unsigned blocks = static_cast<unsigned>(
      std::max<std::uint64_t>(1, std::min(sm_count() * 8, rt.max_resident_threads() / workloads::query_block_threads)));
  rt.launch(workloads::trip_query_paged, dim3(blocks), dim3(workloads::query_block_threads), 0, columns, totals.get());
  rt.synchronize();
  EXPECT_EQ(workloads::compare_totals(totals.to_host()[0], t.expected), "");
  return rt.stats();
}

class TripQuery : public GpuTest {};

// Runs without a GPU too: the generator's selectivity is DREAM's 0.08% and the values are in the
// ranges the exactness argument needs.
TEST(TripQueryReference, SelectivityAndValueRanges) {
  HostTrips& t = trips();
  const double selectivity = static_cast<double>(t.expected.trips) / trip_rows;
  EXPECT_GT(selectivity, 0.0006);
  EXPECT_LT(selectivity, 0.0010);
  for (std::uint64_t i = 0; i < trip_rows; ++i) {
    ASSERT_GE(t.duration[i], 60);
    ASSERT_LE(t.duration[i], workloads::long_trip_seconds + 21000);
    for (unsigned c = 0; c < workloads::trip_value_columns; ++c) {
      ASSERT_EQ(t.values[c][i] * 64, static_cast<float>(static_cast<int>(t.values[c][i] * 64)));
      ASSERT_LT(std::abs(t.values[c][i]), 512.0f);
    }
  }
  for (unsigned c = 0; c < workloads::trip_value_columns; ++c) EXPECT_NE(t.expected.sum[c], 0.0) << workloads::trip_value_names[c];
}

TEST_F(TripQuery, RawKernelOnDeviceMemoryMatchesReference) {
  HostTrips& t = trips();
  DeviceVector<std::int32_t> duration(trip_rows);
  WARPVM_CUDA_TRY(cudaMemcpy(duration.get(), t.duration.data(), trip_rows * 4, cudaMemcpyHostToDevice));
  std::vector<std::unique_ptr<DeviceVector<float>>> values;
  workloads::TripColumnsView view{duration.get(), {}};
  for (unsigned c = 0; c < workloads::trip_value_columns; ++c) {
    values.push_back(std::make_unique<DeviceVector<float>>(trip_rows));
    WARPVM_CUDA_TRY(cudaMemcpy(values.back()->get(), t.values[c].data(), trip_rows * 4, cudaMemcpyHostToDevice));
    view.value[c] = values.back()->get();
  }
  DeviceVector<workloads::TripTotals> totals(1);
  workloads::trip_query_raw<<<static_cast<unsigned>(sm_count() * 8), workloads::query_block_threads>>>(view, trip_rows, totals.get());
  WARPVM_CUDA_TRY(cudaGetLastError());
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(workloads::compare_totals(totals.to_host()[0], t.expected), "");
}

// The bulk copy's way: the kernel once per chunk of rows (an uneven last chunk), totals added up.
TEST_F(TripQuery, RawKernelInChunksMatchesReference) {
  HostTrips& t = trips();
  constexpr std::uint64_t chunk = 1'000'003;
  DeviceVector<std::int32_t> duration(chunk);
  std::vector<std::unique_ptr<DeviceVector<float>>> values;
  workloads::TripColumnsView view{duration.get(), {}};
  for (unsigned c = 0; c < workloads::trip_value_columns; ++c) {
    values.push_back(std::make_unique<DeviceVector<float>>(chunk));
    view.value[c] = values.back()->get();
  }
  DeviceVector<workloads::TripTotals> totals(1);
  for (std::uint64_t first = 0; first < trip_rows; first += chunk) {
    const std::uint64_t count = std::min(chunk, trip_rows - first);
    WARPVM_CUDA_TRY(cudaMemcpy(duration.get(), t.duration.data() + first, count * 4, cudaMemcpyHostToDevice));
    for (unsigned c = 0; c < workloads::trip_value_columns; ++c)
      WARPVM_CUDA_TRY(cudaMemcpy(values[c]->get(), t.values[c].data() + first, count * 4, cudaMemcpyHostToDevice));
    workloads::trip_query_raw<<<13, workloads::query_block_threads>>>(view, count, totals.get());
    WARPVM_CUDA_TRY(cudaGetLastError());
  }
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(workloads::compare_totals(totals.to_host()[0], t.expected), "");
}

TEST_F(TripQuery, WholeTableCached) {
  const Stats stats = expect_paged_query_matches(
      with_frames(Preset::warpvm, 6 * trip_column_pages, workloads::query_pages_held), Placement::migrate);
  EXPECT_EQ(stats.evictions, 0u);
}

TEST_F(TripQuery, SmallCacheEvicts) {
  const Stats stats = expect_paged_query_matches(
      with_frames(Preset::warpvm, small_query_frames, workloads::query_pages_held), Placement::migrate);
  EXPECT_GT(stats.evictions, 0u);
}

TEST_F(TripQuery, SmallCacheEvictsWithDreamPreset) {
  const Stats stats = expect_paged_query_matches(
      with_frames(Preset::dream, small_query_frames, workloads::query_pages_held), Placement::migrate);
  EXPECT_GT(stats.evictions, 0u);
}

// The values remote, the duration column migrated through a cache that evicts.
TEST_F(TripQuery, RemoteValuesSmallCache) {
  const Stats stats = expect_paged_query_matches(
      with_frames(Preset::warpvm, small_query_frames, workloads::query_pages_held), Placement::remote);
  EXPECT_GT(stats.evictions, 0u);
  EXPECT_LE(stats.misses, trip_column_pages * 2);  // only the duration column goes through the cache
}

}  // namespace
}  // namespace warpvm::testing

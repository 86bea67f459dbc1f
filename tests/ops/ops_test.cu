// warpvm::ops on the GPU against CPU references on random inputs: gather, embedding_bag,
// index_add and sample_neighbors, for every dtype they take, with the table in core and
// oversubscribed (a cache smaller than the table), rows that straddle pages, duplicate ids,
// out-of-range inputs (raised, nothing written), flush() landing index_add in host memory, and
// work queued on a stream of the caller's.

#include "gpu_test_support.cuh"

#include "warpvm/detail/ops/sampling.hpp"
#include "warpvm/ops.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

using ops::Dtype;

template <class T>
constexpr Dtype dtype_of() {
  if constexpr (std::is_same_v<T, __half>) return Dtype::float16;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return Dtype::bfloat16;
  else if constexpr (std::is_same_v<T, float>) return Dtype::float32;
  else if constexpr (std::is_same_v<T, double>) return Dtype::float64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return Dtype::int32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return Dtype::int64;
  else return Dtype::uint8;
}
template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return static_cast<double>(v);
}
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(static_cast<float>(v));
  else return static_cast<T>(v);
}
/// Small integers: exact in every dtype, and their sums too (below 256, bfloat16's limit).
template <class T>
T random_small(std::mt19937_64& rng, int spread) {
  const int v = static_cast<int>(rng() % (2 * spread + 1)) - spread;
  return from_double<T>(std::is_unsigned_v<T> ? std::abs(v) : v);
}

/// One row size that straddles 4 KiB pages (rows of 100 elements), one that divides them, and a
/// 1-D table.
constexpr std::uint64_t dims[] = {100, 64, 1};

/// A cache holding the whole table, or a quarter of it (at least what one block needs).
Config cache_for(std::uint64_t table_bytes, bool oversubscribed) {
  const std::uint64_t bytes = oversubscribed ? std::max<std::uint64_t>(table_bytes / 4, 256 * 4096) : 64ull << 20;
  return Config{.cache_bytes = bytes, .max_pages_held_per_thread = 1};
}

template <class I>
std::vector<I> random_ids(std::mt19937_64& rng, std::size_t n, std::uint64_t rows) {
  std::vector<I> ids(n);
  for (auto& id : ids) id = static_cast<I>(rng() % rows);
  return ids;
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const T* b) {
  return std::memcmp(a.data(), b, a.size() * sizeof(T)) == 0;
}

struct Case {
  bool oversubscribed;
  Placement placement;
};
constexpr Case cases[] = {{false, Placement::automatic}, {true, Placement::automatic}, {true, Placement::migrate},
                          {true, Placement::remote}};

std::string describe(const Case& c, std::uint64_t dim) {
  return std::string(c.oversubscribed ? "oversubscribed" : "in core") + ", " + to_string(c.placement) + ", dim " +
         std::to_string(dim);
}

class Ops : public GpuTest {};

// ---- gather ------------------------------------------------------------------------------------

template <class T, class I>
void check_gather() {
  SCOPED_TRACE(ops::to_string(dtype_of<T>()));
  std::mt19937_64 rng(17);
  for (const Case& c : cases) {
    for (const std::uint64_t dim : dims) {
      SCOPED_TRACE(describe(c, dim));
      const std::uint64_t rows = (4ull << 20) / (dim * sizeof(T)) + 7;  // about 4 MiB
      Runtime rt(cache_for(rows * dim * sizeof(T), c.oversubscribed));
      auto object = rt.alloc<T>(rows * dim, c.placement, "features");
      for (auto& v : object.host()) v = random_small<T>(rng, 100);
      const auto table = ops::table(object, dim, dtype_of<T>());
      const auto ids = random_ids<I>(rng, 3000, rows);  // duplicates among them
      const DeviceVector<I> device_ids(ids);
      DeviceVector<T> out(ids.size() * dim);
      ops::gather(rt, table, ops::Indices::of(device_ids.get(), ids.size()), out.get());
      rt.synchronize();
      std::vector<T> expected(ids.size() * dim);
      for (std::size_t k = 0; k < ids.size(); ++k)
        std::memcpy(&expected[k * dim], &object.host()[static_cast<std::uint64_t>(ids[k]) * dim], dim * sizeof(T));
      EXPECT_TRUE(bitwise_equal(expected, out.to_host().data()));
    }
  }
}

TEST_F(Ops, GatherCopiesRowsOfEveryDtype) {
  check_gather<__half, std::int64_t>();
  check_gather<__nv_bfloat16, std::int32_t>();
  check_gather<float, std::int64_t>();
  check_gather<double, std::int32_t>();
  check_gather<std::int32_t, std::int64_t>();
  check_gather<std::int64_t, std::int64_t>();
  check_gather<std::uint8_t, std::int32_t>();
}

TEST_F(Ops, GatherRunsOnTheCallersStream) {
  std::mt19937_64 rng(23);
  Runtime rt(cache_for(0, false));
  const std::uint64_t rows = 50000, dim = 48;
  auto object = rt.alloc<float>(rows * dim, Placement::automatic, "features");
  for (auto& v : object.host()) v = static_cast<float>(rng() % 1000) + 0.5f;
  const auto ids = random_ids<std::int64_t>(rng, 20000, rows);
  cudaStream_t stream = nullptr;
  WARPVM_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::int64_t* device_ids = nullptr;
  float* out = nullptr;
  WARPVM_CUDA_TRY(cudaMallocAsync(&device_ids, ids.size() * sizeof(std::int64_t), stream));
  WARPVM_CUDA_TRY(cudaMallocAsync(&out, ids.size() * dim * sizeof(float), stream));
  // The ids land on the stream just before the gather: only stream order makes it see them.
  WARPVM_CUDA_TRY(cudaMemcpyAsync(device_ids, ids.data(), ids.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice, stream));
  ops::gather(rt, ops::table(object, dim), ops::Indices::of(device_ids, ids.size()), out, stream);
  std::vector<float> got(ids.size() * dim);
  WARPVM_CUDA_TRY(cudaMemcpyAsync(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  WARPVM_CUDA_TRY(cudaStreamSynchronize(stream));
  for (std::size_t k = 0; k < ids.size(); k += 97)
    ASSERT_EQ(std::memcmp(&got[k * dim], &object.host()[static_cast<std::uint64_t>(ids[k]) * dim], dim * sizeof(float)), 0)
        << "row " << k;
  WARPVM_CUDA_TRY(cudaFreeAsync(device_ids, stream));
  WARPVM_CUDA_TRY(cudaFreeAsync(out, stream));
  WARPVM_CUDA_TRY(cudaStreamDestroy(stream));
  rt.synchronize();
}

TEST_F(Ops, GatherRefusesAnOutOfRangeIdAndWritesNothing) {
  Runtime rt(cache_for(0, false));
  const std::uint64_t rows = 1000, dim = 16;
  auto object = rt.alloc<float>(rows * dim, Placement::automatic, "features");
  std::ranges::fill(object.host(), 1.5f);
  for (const std::int64_t bad : {std::int64_t{1000}, std::int64_t{-3}}) {
    std::vector<std::int64_t> ids = {5, 999, bad, 7};
    const DeviceVector<std::int64_t> device_ids(ids);
    const std::vector<float> sentinel(ids.size() * dim, -7.25f);
    DeviceVector<float> out(sentinel);
    ops::gather(rt, ops::table(object, dim), ops::Indices::of(device_ids.get(), ids.size()), out.get());
    try {
      rt.synchronize();
      FAIL() << "no error for id " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::index_out_of_range);
      const std::string what = e.what();
      EXPECT_NE(what.find("gather: ids holds " + std::to_string(bad)), std::string::npos) << what;
      EXPECT_NE(what.find("'features'"), std::string::npos) << what;
      EXPECT_NE(what.find("1000 rows"), std::string::npos) << what;
    }
    EXPECT_EQ(out.to_host(), sentinel);
  }
  // The runtime goes on: a good gather afterwards works.
  const std::vector<std::int32_t> good = {3, 2, 1};
  const DeviceVector<std::int32_t> device_good(good);
  DeviceVector<float> out(good.size() * dim);
  ops::gather(rt, ops::table(object, dim), ops::Indices::of(device_good.get(), good.size()), out.get());
  rt.synchronize();
  EXPECT_EQ(out.to_host(), std::vector<float>(good.size() * dim, 1.5f));
}

// ---- embedding_bag -----------------------------------------------------------------------------

template <class T>
void check_embedding_bag(double tolerance) {
  SCOPED_TRACE(ops::to_string(dtype_of<T>()));
  std::mt19937_64 rng(29);
  for (const Case& c : cases) {
    for (const std::uint64_t dim : {std::uint64_t{100}, std::uint64_t{200}, std::uint64_t{1}}) {  // 200: two chunks
      SCOPED_TRACE(describe(c, dim));
      const std::uint64_t rows = (4ull << 20) / (dim * sizeof(T)) + 3;
      Runtime rt(cache_for(rows * dim * sizeof(T), c.oversubscribed));
      auto object = rt.alloc<T>(rows * dim, c.placement, "embeddings");
      for (auto& v : object.host()) v = from_double<T>(static_cast<double>(rng() % 2001) / 1000.0 - 1.0);
      const auto table = ops::table(object, dim, dtype_of<T>());
      // 500 bags of 0 to 12 ids (empty bags among them), and every 25th of 33 to 72: a warp looks
      // up a bag's rows 32 at a time.
      std::vector<std::int64_t> offsets;
      std::vector<std::int64_t> ids;
      for (int b = 0; b < 500; ++b) {
        offsets.push_back(static_cast<std::int64_t>(ids.size()));
        const std::uint64_t size = b % 25 == 0 ? 33 + rng() % 40 : rng() % 13;
        for (std::uint64_t k = 0; k < size; ++k) ids.push_back(static_cast<std::int64_t>(rng() % rows));
      }
      std::vector<T> weights(ids.size());
      for (auto& w : weights) w = from_double<T>(static_cast<double>(rng() % 9) / 4.0 - 1.0);
      const DeviceVector<std::int64_t> device_ids(ids);
      const DeviceVector<T> device_weights(weights);
      for (const bool include_last : {false, true}) {
        std::vector<std::int64_t> bag_offsets = offsets;
        if (include_last) bag_offsets.push_back(static_cast<std::int64_t>(ids.size()));
        const DeviceVector<std::int64_t> device_offsets(bag_offsets);
        for (const auto& [mode, weighted] : {std::pair{ops::BagMode::sum, false}, std::pair{ops::BagMode::sum, true},
                                            std::pair{ops::BagMode::mean, false}}) {
          SCOPED_TRACE(std::string(mode == ops::BagMode::sum ? "sum" : "mean") + (weighted ? ", weighted" : "") +
                       (include_last ? ", include_last_offset" : ""));
          DeviceVector<T> out(offsets.size() * dim);
          ops::embedding_bag(rt, table, ops::Indices::of(device_ids.get(), ids.size()),
                             ops::Indices::of(device_offsets.get(), bag_offsets.size()), include_last, mode,
                             weighted ? device_weights.get() : nullptr, out.get());
          rt.synchronize();
          const std::vector<T> got = out.to_host();
          for (std::size_t b = 0; b < offsets.size(); ++b) {
            const auto begin = static_cast<std::size_t>(offsets[b]);
            const std::size_t end = b + 1 < offsets.size() ? static_cast<std::size_t>(offsets[b + 1]) : ids.size();
            for (std::uint64_t j = 0; j < dim; ++j) {
              double sum = 0;
              for (std::size_t k = begin; k < end; ++k)
                sum += (weighted ? to_double(weights[k]) : 1.0) *
                       to_double(object.host()[static_cast<std::uint64_t>(ids[k]) * dim + j]);
              if (mode == ops::BagMode::mean && end > begin) sum /= static_cast<double>(end - begin);
              ASSERT_NEAR(to_double(got[b * dim + j]), sum, tolerance * (1 + std::abs(sum)))
                  << "bag " << b << " column " << j;
            }
          }
        }
      }
    }
  }
}

TEST_F(Ops, EmbeddingBagSumsAndAveragesEveryFloatingDtype) {
  check_embedding_bag<__half>(1e-2);
  check_embedding_bag<__nv_bfloat16>(2e-2);
  check_embedding_bag<float>(1e-5);
  check_embedding_bag<double>(1e-12);
}

TEST_F(Ops, EmbeddingBagRefusesBadOffsetsAndIds) {
  Runtime rt(cache_for(0, false));
  auto object = rt.alloc<float>(100 * 8, Placement::automatic, "embeddings");
  std::ranges::fill(object.host(), 2.0f);
  const std::vector<std::int32_t> ids = {1, 2, 3, 4};
  const DeviceVector<std::int32_t> device_ids(ids);
  const std::vector<std::pair<std::vector<std::int32_t>, std::string>> bad = {
      {{0, 3, 2}, "offsets hold 2"}, {{0, 5}, "offsets hold 5"}, {{-1, 2}, "offsets hold -1"}};
  for (const auto& [offsets, message] : bad) {
    const DeviceVector<std::int32_t> device_offsets(offsets);
    const std::vector<float> sentinel(offsets.size() * 8, -1.0f);
    DeviceVector<float> out(sentinel);
    ops::embedding_bag(rt, ops::table(object, 8), ops::Indices::of(device_ids.get(), ids.size()),
                       ops::Indices::of(device_offsets.get(), offsets.size()), false, ops::BagMode::sum, nullptr,
                       out.get());
    try {
      rt.synchronize();
      FAIL() << "no error for " << message;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::index_out_of_range);
      EXPECT_NE(std::string(e.what()).find("embedding_bag: " + message), std::string::npos) << e.what();
    }
    EXPECT_EQ(out.to_host(), sentinel);
  }
  // A host-side mistake is refused at once, before anything is queued.
  auto integers = rt.alloc<std::int32_t>(100, Placement::automatic, "integers");
  const std::vector<std::int32_t> offsets = {0};
  const DeviceVector<std::int32_t> device_offsets(offsets);
  DeviceVector<std::int32_t> out(1);
  EXPECT_THROW(ops::embedding_bag(rt, ops::table(integers), ops::Indices::of(device_ids.get(), ids.size()),
                                  ops::Indices::of(device_offsets.get(), 1), false, ops::BagMode::sum, nullptr, out.get()),
               Error);
}

// ---- index_add ---------------------------------------------------------------------------------

template <class T>
void check_index_add() {
  SCOPED_TRACE(ops::to_string(dtype_of<T>()));
  std::mt19937_64 rng(31);
  for (const Case& c : cases) {
    for (const std::uint64_t dim : dims) {
      SCOPED_TRACE(describe(c, dim));
      const std::uint64_t rows = (2ull << 20) / (dim * sizeof(T)) + 5;
      Runtime rt(cache_for(rows * dim * sizeof(T), c.oversubscribed));
      auto object = rt.alloc<T>(rows * dim, c.placement, "accumulators");
      for (auto& v : object.host()) v = random_small<T>(rng, 8);
      std::vector<T> expected(object.host().begin(), object.host().end());
      // Each id drawn 4 times on average, some 10 times or more.
      const std::size_t count = std::min<std::uint64_t>(rows, 40000);
      const auto ids = random_ids<std::int64_t>(rng, count, std::max<std::uint64_t>(1, count / 4));
      std::vector<T> values(ids.size() * dim);
      for (auto& v : values) v = random_small<T>(rng, 2);
      for (std::size_t k = 0; k < ids.size(); ++k)
        for (std::uint64_t j = 0; j < dim; ++j) {
          T& slot = expected[static_cast<std::uint64_t>(ids[k]) * dim + j];
          slot = from_double<T>(to_double(slot) + to_double(values[k * dim + j]));
        }
      const DeviceVector<std::int64_t> device_ids(ids);
      const DeviceVector<T> device_values(values);
      ops::index_add(rt, ops::table(object, dim, dtype_of<T>()), ops::Indices::of(device_ids.get(), ids.size()),
                     device_values.get());
      rt.flush();  // the dirty pages land in host memory
      EXPECT_TRUE(bitwise_equal(expected, object.host().data()));
    }
  }
}

TEST_F(Ops, IndexAddAddsDuplicatesAndFlushLandsThem) {
  check_index_add<__half>();
  check_index_add<__nv_bfloat16>();
  check_index_add<float>();
  check_index_add<double>();
  check_index_add<std::int32_t>();
  check_index_add<std::int64_t>();
}

TEST_F(Ops, IndexAddRefusesAnOutOfRangeIdAndTouchesNothing) {
  for (const bool oversubscribed : {false, true}) {
    const std::uint64_t rows = 20000, dim = 100;
    Runtime rt(cache_for(rows * dim * sizeof(float), oversubscribed));
    auto object = rt.alloc<float>(rows * dim, Placement::automatic, "accumulators");
    std::mt19937_64 rng(37);
    for (auto& v : object.host()) v = static_cast<float>(rng() % 100);
    const std::vector<float> before(object.host().begin(), object.host().end());
    auto ids = random_ids<std::int32_t>(rng, 5000, rows);
    ids[4321] = static_cast<std::int32_t>(rows);  // one bad id, late: the rows before it must not be added either
    const DeviceVector<std::int32_t> device_ids(ids);
    const DeviceVector<float> values(std::vector<float>(ids.size() * dim, 1.0f));
    ops::index_add(rt, ops::table(object, dim), ops::Indices::of(device_ids.get(), ids.size()), values.get());
    try {
      rt.flush();
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::index_out_of_range);
      EXPECT_NE(std::string(e.what()).find("index_add: ids holds 20000"), std::string::npos) << e.what();
    }
    rt.flush();
    EXPECT_EQ(std::memcmp(before.data(), object.host().data(), before.size() * sizeof(float)), 0);
  }
  Runtime rt(cache_for(0, false));
  auto bytes = rt.alloc<std::uint8_t>(64, Placement::automatic, "bytes");
  EXPECT_THROW(ops::index_add(rt, ops::table(bytes), ops::Indices{}, nullptr), Error);  // uint8: no atomic add
}

// ---- sample_neighbors --------------------------------------------------------------------------

struct Graph {
  std::vector<std::int64_t> indptr;
  std::vector<std::int64_t> indices;
};

/// Nodes of degree 0 to 60, each with distinct neighbours.
Graph random_graph(std::mt19937_64& rng, std::uint64_t nodes) {
  Graph g;
  g.indptr.push_back(0);
  for (std::uint64_t v = 0; v < nodes; ++v) {
    const std::uint64_t degree = rng() % 61;
    const std::uint64_t start = rng() % nodes;
    for (std::uint64_t k = 0; k < degree; ++k) g.indices.push_back(static_cast<std::int64_t>((start + k * 7919) % nodes));
    g.indptr.push_back(static_cast<std::int64_t>(g.indices.size()));
  }
  return g;
}

template <class P, class N>
void check_sampling(bool oversubscribed) {
  SCOPED_TRACE(std::string(ops::to_string(dtype_of<P>())) + " indptr, " + ops::to_string(dtype_of<N>()) +
               " indices, " + (oversubscribed ? "oversubscribed" : "in core"));
  std::mt19937_64 rng(41);
  const std::uint64_t nodes = 60000;
  const Graph g = random_graph(rng, nodes);
  Runtime rt(cache_for((g.indptr.size() * sizeof(P) + g.indices.size() * sizeof(N)), oversubscribed));
  auto indptr = rt.alloc<P>(g.indptr.size(), Placement::automatic, "indptr");
  auto indices = rt.alloc<N>(g.indices.size(), Placement::automatic, "indices");
  std::ranges::transform(g.indptr, indptr.host().begin(), [](std::int64_t v) { return static_cast<P>(v); });
  std::ranges::transform(g.indices, indices.host().begin(), [](std::int64_t v) { return static_cast<N>(v); });
  const auto seeds = random_ids<std::int64_t>(rng, 4096, nodes);
  const DeviceVector<std::int64_t> device_seeds(seeds);
  constexpr std::uint32_t fanout = 10;
  const std::uint64_t seed = 2024;
  DeviceVector<std::int64_t> out_indptr(seeds.size() + 1);
  const std::uint64_t total = ops::count_sampled_neighbors(rt, ops::table(indptr), ops::table(indices),
                                                           ops::Indices::of(device_seeds.get(), seeds.size()), fanout,
                                                           out_indptr.get());
  DeviceVector<std::int64_t> out_indices(std::max<std::uint64_t>(total, 1));
  ops::sample_neighbors(rt, ops::table(indptr), ops::table(indices), ops::Indices::of(device_seeds.get(), seeds.size()),
                        fanout, seed, out_indptr.get(), out_indices.get());
  rt.synchronize();
  // The reference: the same algorithm on the host, so the samples match exactly.
  std::vector<std::int64_t> expected_indptr = {0};
  std::vector<std::int64_t> expected;
  for (const std::int64_t s : seeds) {
    const auto begin = static_cast<std::uint64_t>(g.indptr[s]);
    const std::uint64_t degree = static_cast<std::uint64_t>(g.indptr[s + 1]) - begin;
    std::vector<std::int64_t> positions(detail::sample_size(degree, fanout));
    detail::sample_positions(degree, fanout, seed, static_cast<std::uint64_t>(s), positions.data());
    for (const std::int64_t p : positions) expected.push_back(g.indices[begin + static_cast<std::uint64_t>(p)]);
    expected_indptr.push_back(static_cast<std::int64_t>(expected.size()));
  }
  EXPECT_EQ(out_indptr.to_host(), expected_indptr);
  ASSERT_EQ(total, expected.size());
  auto got = out_indices.to_host();
  got.resize(total);
  EXPECT_EQ(got, expected);
}

TEST_F(Ops, SampleNeighborsMatchesTheHostAlgorithm) {
  for (const bool oversubscribed : {false, true}) {
    check_sampling<std::int64_t, std::int64_t>(oversubscribed);
    check_sampling<std::int32_t, std::int32_t>(oversubscribed);
    check_sampling<std::int64_t, std::int32_t>(oversubscribed);
  }
}

TEST_F(Ops, SampleNeighborsRefusesABadSeedAtOnce) {
  Runtime rt(cache_for(0, false));
  auto indptr = rt.alloc<std::int64_t>(4, Placement::automatic, "indptr");  // 3 nodes
  auto indices = rt.alloc<std::int64_t>(5, Placement::automatic, "indices");
  const std::vector<std::int64_t> csr = {0, 2, 2, 5};
  std::ranges::copy(csr, indptr.host().begin());
  std::ranges::fill(indices.host(), 1);
  const std::vector<std::int64_t> seeds = {0, 3};
  const DeviceVector<std::int64_t> device_seeds(seeds);
  DeviceVector<std::int64_t> out_indptr(seeds.size() + 1);
  try {
    (void)ops::count_sampled_neighbors(rt, ops::table(indptr), ops::table(indices),
                                       ops::Indices::of(device_seeds.get(), seeds.size()), 2, out_indptr.get());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::index_out_of_range);
    EXPECT_NE(std::string(e.what()).find("sample_neighbors: seeds holds 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3 nodes"), std::string::npos) << e.what();
  }
  // An indptr that decreases is no CSR.
  indptr.host()[2] = 1;
  rt.drop_cached();
  const std::vector<std::int64_t> good_seeds = {1};
  const DeviceVector<std::int64_t> device_good(good_seeds);
  EXPECT_THROW((void)ops::count_sampled_neighbors(rt, ops::table(indptr), ops::table(indices),
                                                  ops::Indices::of(device_good.get(), 1), 2, out_indptr.get()),
               Error);
}

}  // namespace
}  // namespace warpvm::testing

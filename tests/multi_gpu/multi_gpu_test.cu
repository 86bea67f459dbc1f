// MultiGpuSpace on real GPUs (issue #6): every placement policy on a transpose and a
// read-shared/write-private workload with fresh random data checked against a host reference;
// replicas collapsing on write; access-counter migration at the threshold; OASIS relearning
// across phases under many concurrent shared faults on one object; spans (with_span) under every
// policy; atomics (fetch_add, fetch_min/max/or, compare_exchange) from every GPU on shared pages
// under every policy, exact against the host; a space over one GPU; pools of a quarter of the
// footprint (eviction, write-back) under every policy on two GPUs and on one; pages placed on the
// GPUs before a run (place_on_gpus) in blocks and interleaved: taken as first touches by other
// GPUs' writes, shared only once used; flat addresses (flat_view, the shadow map) chased across
// objects under every policy, and bad ones reported. The multi-GPU tests run over
// every visible GPU (up to 8) when all pairs have peer access, else over GPUs 0 and 1, and skip
// (saying why) without two peer-connected GPUs.

#include "gpu_test_support.cuh"

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

constexpr PlacementPolicy all_policies[] = {PlacementPolicy::oasis, PlacementPolicy::on_touch,
                                            PlacementPolicy::access_counter, PlacementPolicy::duplication};

bool peers(const std::vector<int>& devices) {
  for (const int a : devices)
    for (const int b : devices) {
      int can = 0;
      if (a != b && (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || can == 0)) return false;
    }
  return true;
}

/// Every visible GPU (at most 8) if all pairs are peers, else GPUs 0 and 1 if they are, else none.
std::vector<int> peer_gpus() {
  std::vector<int> all;
  for (int d = 0; d < std::min(device_count(), 8); ++d) all.push_back(d);
  if (all.size() >= 2 && peers(all)) return all;
  if (all.size() > 2 && peers({0, 1})) return {0, 1};
  return {};
}

class MultiGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    devices = peer_gpus();
    if (devices.empty()) GTEST_SKIP() << "needs two CUDA devices with peer access: multi-GPU test skipped";
    RecordProperty("gpus", static_cast<int>(devices.size()));
  }
  std::vector<int> devices;
  [[nodiscard]] std::uint64_t gpus() const { return devices.size(); }
};

std::uint64_t fresh_seed() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) | rd();
}

std::vector<std::uint32_t> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> v(n);
  for (auto& x : v) x = static_cast<std::uint32_t>(rng());
  return v;
}

__device__ std::uint64_t thread_index() { return blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; }
__device__ std::uint64_t thread_count() { return std::uint64_t{gridDim.x} * blockDim.x; }

/// out = in^T (n x n); rows of 32-row bands of `out` dealt to the GPUs round-robin, so every GPU
/// reads every page of `in` (shared) and writes its own bands of `out` (private).
__global__ void transpose(shared_array<std::uint32_t> in, shared_array<std::uint32_t> out, std::uint64_t n) {
  for (std::uint64_t i = thread_index(); i < n * n; i += thread_count()) {
    const std::uint64_t r = i / n, c = i % n;
    if ((r / 32) % out.gpus() != out.gpu()) continue;
    out.store(r * n + c, in.load(c * n + r));
  }
}

/// Each GPU writes its contiguous part of `out` with gathers from `table` (read by all GPUs).
__global__ void gather(shared_array<std::uint32_t> table, shared_array<std::uint32_t> out) {
  const std::uint64_t m = out.size(), begin = m * out.gpu() / out.gpus(), end = m * (out.gpu() + 1) / out.gpus();
  for (std::uint64_t i = begin + thread_index(); i < end; i += thread_count())
    out.store(i, table.load(mix(i) % table.size()) + static_cast<std::uint32_t>(i));
}

std::vector<std::uint32_t> transposed(const std::vector<std::uint32_t>& in, std::uint64_t n) {
  std::vector<std::uint32_t> out(n * n);
  for (std::uint64_t r = 0; r < n; ++r)
    for (std::uint64_t c = 0; c < n; ++c) out[r * n + c] = in[c * n + r];
  return out;
}

std::uint64_t mismatches(std::span<const std::uint32_t> got, const std::vector<std::uint32_t>& want) {
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
  return wrong;
}

/// What write_all writes (and write_interleaved, over all GPUs): element i is mix(i + salt).
std::vector<std::uint32_t> salted_values(std::uint64_t n, std::uint32_t salt) {
  std::vector<std::uint32_t> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>(mix(i + salt));
  return v;
}

/// After every GPU's read_all of `a` holding `values` (phase 1), writes leaving `want`, GPU 0's
/// read_all and flush(): GPU 0's slots of `seen` and a's host copy hold `want`, every other
/// GPU's slots of `seen` `values`.
void expect_written_and_seen(std::span<const std::uint32_t> a, std::span<const std::uint32_t> seen,
                             const std::vector<std::uint32_t>& values, const std::vector<std::uint32_t>& want,
                             std::uint64_t gpus) {
  const std::uint64_t n = values.size();
  EXPECT_EQ(mismatches(seen.subspan(0, n), want), 0u) << "GPU 0 sees the last writers' values";
  EXPECT_EQ(mismatches(a, want), 0u) << "flush writes every page's last writers back";
  for (std::uint64_t g = 1; g < gpus; ++g)
    EXPECT_EQ(mismatches(seen.subspan(g * n, n), values), 0u) << "GPU " << g << " read the original in phase 1";
}

/// One phase of `transpose` over every GPU of `space` on fresh random values from `seed`, then
/// flush(): the host copy of the result must be exact.
void expect_exact_transpose(MultiGpuSpace& space, std::uint64_t n, std::uint64_t seed, dim3 grid) {
  auto in = space.alloc<std::uint32_t>(n * n, std::nullopt, "in");
  auto out = space.alloc<std::uint32_t>(n * n, std::nullopt, "out");
  const auto values = random_values(n * n, seed);
  std::copy(values.begin(), values.end(), in.host().begin());
  space.launch(transpose, grid, dim3(256), 0, in.on(0), out.on(0), n);
  space.flush();
  EXPECT_EQ(mismatches(out.host(), transposed(values, n)), 0u);
}

TEST_F(MultiGpu, TransposeIsExactUnderEveryPolicy) {
  constexpr std::uint64_t n = 1024;  // 4 KB rows: every column read touches 32 pages
  for (const PlacementPolicy policy : all_policies) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(to_string(policy)) + ", seed " + std::to_string(seed));
    MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 64ull << 20, .default_policy = policy});
    expect_exact_transpose(space, n, seed, dim3(264));
    const GpuPlacementStats total = space.stats().total();
    EXPECT_GT(total.first_touches, 0u);
    EXPECT_GT(total.shared_faults, 0u) << "every GPU reads every page of in";
    EXPECT_EQ(total.aborted_transitions, 0u);
    if (policy == PlacementPolicy::duplication || policy == PlacementPolicy::oasis) {
      EXPECT_GT(total.replications, 0u);
    }
    if (policy == PlacementPolicy::access_counter) EXPECT_GT(total.remote_accesses, 0u);
    if (policy == PlacementPolicy::on_touch) EXPECT_GT(total.migrations, 0u);
  }
}

TEST_F(MultiGpu, ReadSharedWritePrivateIsExactUnderEveryPolicy) {
  constexpr std::uint64_t table_n = 1 << 20, out_n = 3 << 20;
  for (const PlacementPolicy policy : all_policies) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(to_string(policy)) + ", seed " + std::to_string(seed));
    MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 64ull << 20});
    auto table = space.alloc<std::uint32_t>(table_n, policy, "table");
    auto out = space.alloc<std::uint32_t>(out_n, policy, "out");
    EXPECT_EQ(table.policy(), policy);
    const auto values = random_values(table_n, seed);
    std::copy(values.begin(), values.end(), table.host().begin());
    space.launch(gather, dim3(264), dim3(256), 0, table.on(0), out.on(0));
    space.flush();
    std::vector<std::uint32_t> want(out_n);
    for (std::uint64_t i = 0; i < out_n; ++i) want[i] = values[mix(i) % table_n] + static_cast<std::uint32_t>(i);
    EXPECT_EQ(mismatches(out.host(), want), 0u);
    const MultiGpuStats stats = space.stats();
    ASSERT_EQ(stats.per_gpu.size(), gpus());
    for (const GpuPlacementStats& gpu : stats.per_gpu) EXPECT_GT(gpu.local_accesses + gpu.remote_accesses, 0u);
    EXPECT_GT(stats.total().pcie_bytes, 0u);
  }
}

/// Every GPU reads every element into `seen` (one slot per GPU and element).
__global__ void read_all(shared_array<std::uint32_t> a, shared_array<std::uint32_t> seen) {
  for (std::uint64_t i = thread_index(); i < a.size(); i += thread_count()) seen.store(a.gpu() * a.size() + i, a.load(i));
}

__global__ void write_all(shared_array<std::uint32_t> a, std::uint32_t salt) {
  for (std::uint64_t i = thread_index(); i < a.size(); i += thread_count())
    a.store(i, static_cast<std::uint32_t>(mix(i + salt)));
}

TEST_F(MultiGpu, ReplicasCollapseOnWriteAndTheOtherGpuSeesTheLastWriter) {
  constexpr std::uint64_t n = 1 << 18;
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 32ull << 20});
  auto a = space.alloc<std::uint32_t>(n, PlacementPolicy::duplication, "a");
  auto seen = space.alloc<std::uint32_t>(gpus() * n, PlacementPolicy::on_touch, "seen");
  const auto values = random_values(n, seed);
  std::copy(values.begin(), values.end(), a.host().begin());
  space.launch(read_all, dim3(132), dim3(256), 0, a.on(0), seen.on(0));  // phase 1: all read: replicas
  space.synchronize();
  const GpuPlacementStats after_reads = space.stats().total();
  EXPECT_GT(after_reads.replications, 0u);
  const auto salt = static_cast<std::uint32_t>(seed);
  space.launch_on(1, write_all, dim3(132), dim3(256), 0, a.on(1), salt);  // phase 2: GPU 1 writes
  space.launch_on(0, read_all, dim3(132), dim3(256), 0, a.on(0), seen.on(0));  // phase 3: GPU 0 reads
  space.flush();
  EXPECT_GT(space.stats().total().collapses, after_reads.collapses);
  expect_written_and_seen(a.host(), seen.host(), values, salted_values(n, salt), gpus());
}

__global__ void read_repeatedly(shared_array<std::uint32_t> a, shared_array<std::uint32_t> sums, int rounds) {
  for (std::uint64_t i = thread_index(); i < a.size(); i += thread_count()) {
    std::uint32_t s = 0;
    for (int r = 0; r < rounds; ++r) s += a.load(i);
    sums.store(i, s);
  }
}

TEST_F(MultiGpu, AccessCounterMigratesAfterTheThreshold) {
  constexpr std::uint64_t n = 1 << 16;  // 256 KiB: 4 counter groups of 64 KiB
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 16ull << 20, .counter_threshold = 64});
  auto a = space.alloc<std::uint32_t>(n, PlacementPolicy::access_counter, "a");
  auto sums = space.alloc<std::uint32_t>(n, PlacementPolicy::on_touch, "sums");
  const auto values = random_values(n, seed);
  std::copy(values.begin(), values.end(), a.host().begin());
  space.launch_on(0, write_all, dim3(64), dim3(256), 0, a.on(0), 7u);  // GPU 0 owns every page
  space.launch_on(1, read_repeatedly, dim3(8), dim3(256), 0, a.on(1), sums.on(1), 8);
  space.flush();
  const MultiGpuStats stats = space.stats();
  EXPECT_GT(stats.per_gpu[1].remote_maps, 0u);
  EXPECT_GT(stats.per_gpu[1].remote_accesses, 0u);
  EXPECT_GT(stats.per_gpu[1].counter_migrations, 0u) << "64 remote lines per group move the group to GPU 1";
  std::vector<std::uint32_t> want(n);
  for (std::uint64_t i = 0; i < n; ++i) want[i] = static_cast<std::uint32_t>(mix(i + 7)) * 8u;
  EXPECT_EQ(mismatches(sums.host(), want), 0u);
}

/// Each GPU writes the elements of its 128 B lines (line index mod gpus), so that every page is
/// written by every GPU.
__global__ void write_interleaved(shared_array<std::uint32_t> a, std::uint32_t salt) {
  for (std::uint64_t i = thread_index(); i < a.size(); i += thread_count())
    if ((i / 32) % a.gpus() == a.gpu()) a.store(i, static_cast<std::uint32_t>(mix(i + salt)));
}

// Many shared faults on one OASIS object from every GPU at once (the O-Table word is consulted
// concurrently by every faulting warp of every GPU), across explicit phases that change the
// object's pattern: shared reads (learned: duplication), then shared writes (relearned at the
// phase: access-counter), then a read of the last writers' values.
TEST_F(MultiGpu, OasisRelearnsAcrossPhasesUnderManyConcurrentSharedFaults) {
  constexpr std::uint64_t n = 4 << 20;  // 16 MiB: 4096 pages, each read and then written by every GPU
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 96ull << 20});
  auto a = space.alloc<std::uint32_t>(n, PlacementPolicy::oasis, "a");
  auto seen = space.alloc<std::uint32_t>(gpus() * n, PlacementPolicy::on_touch, "seen");
  const auto values = random_values(n, seed);
  std::copy(values.begin(), values.end(), a.host().begin());
  const std::uint64_t pages = n * sizeof(std::uint32_t) / space.page_bytes();

  space.launch(read_all, dim3(264), dim3(256), 0, a.on(0), seen.on(0));  // phase 1: every GPU reads all of a
  space.synchronize();
  const GpuPlacementStats reads = space.stats().total();
  // Every page: one first touch, then one shared read fault by each other GPU, served by
  // duplication (the learned policy; a read is never served otherwise).
  EXPECT_EQ(reads.shared_faults, (gpus() - 1) * pages) << "one shared fault per page of a and other GPU (seen is private)";
  EXPECT_EQ(reads.replications, (gpus() - 1) * pages);
  EXPECT_EQ(reads.migrations, 0u);
  EXPECT_EQ(reads.remote_maps, 0u);

  const auto salt = static_cast<std::uint32_t>(seed >> 7);
  space.launch(write_interleaved, dim3(264), dim3(256), 0, a.on(0), salt);  // phase 2: all write every page
  space.synchronize();
  const GpuPlacementStats writes = space.stats().total();
  EXPECT_GT(writes.collapses, reads.collapses) << "the first write to each replicated page collapses it";
  EXPECT_GT(writes.remote_maps, 0u) << "the phase relearned access-counter from a shared write";

  space.launch_on(0, read_all, dim3(264), dim3(256), 0, a.on(0), seen.on(0));  // phase 3: GPU 0 reads it back
  space.flush();
  expect_written_and_seen(a.host(), seen.host(), values, salted_values(n, salt), gpus());
  EXPECT_EQ(space.stats().total().aborted_transitions, 0u);
}

/// body(r, row, lane) for each row r of 64 elements that this GPU owns (r mod gpus), a warp per
/// row, through one read_write span of it (`row` points at its first element).
template <class Body>
__device__ void for_each_own_row(const shared_array<std::uint32_t>& a, Body&& body) {
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t rows = a.size() / 64;
  for (std::uint64_t r = thread_index() / 32; r < rows; r += thread_count() / 32) {
    if (r % a.gpus() != a.gpu()) continue;
    a.with_span<access::read_write>(r * 64, 64, [&](std::uint32_t* row) { body(r, row, lane); });
  }
}

/// Rows of 64 elements: each GPU writes its rows (row mod gpus) through one span each.
__global__ void fill_rows(shared_array<std::uint32_t> a, std::uint32_t salt) {
  for_each_own_row(a, [&](std::uint64_t r, std::uint32_t* row, unsigned lane) {
    row[lane] = static_cast<std::uint32_t>(mix(r * 64 + lane + salt));
    row[lane + 32] = static_cast<std::uint32_t>(mix(r * 64 + lane + 32 + salt));
  });
}

/// Each GPU sums the rows another GPU wrote (one span per row), a warp reduction per row.
__global__ void sum_other_rows(shared_array<std::uint32_t> a, shared_array<std::uint32_t> sums) {
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t rows = a.size() / 64;
  for (std::uint64_t r = thread_index() / 32; r < rows; r += thread_count() / 32) {
    if ((r + 1) % a.gpus() != a.gpu()) continue;
    std::uint32_t s = 0;
    a.with_span<access::read>(r * 64, 64, [&](const std::uint32_t* row) { s = row[lane] + row[lane + 32]; });
    for (unsigned offset = 16; offset != 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
    if (lane == 0) sums.store(r, s);
  }
}

TEST_F(MultiGpu, SpansWriteAndReadWholeRowsUnderEveryPolicy) {
  constexpr std::uint64_t rows = 1 << 14, n = rows * 64;  // 4 MiB
  for (const PlacementPolicy policy : all_policies) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(to_string(policy)) + ", seed " + std::to_string(seed));
    MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 32ull << 20, .default_policy = policy});
    auto a = space.alloc<std::uint32_t>(n, std::nullopt, "a");
    auto sums = space.alloc<std::uint32_t>(rows, std::nullopt, "sums");
    const auto salt = static_cast<std::uint32_t>(seed);
    space.launch(fill_rows, dim3(132), dim3(256), 0, a.on(0), salt);
    space.launch(sum_other_rows, dim3(132), dim3(256), 0, a.on(0), sums.on(0));
    space.flush();
    const std::vector<std::uint32_t> want_a = salted_values(n, salt);
    std::vector<std::uint32_t> want_sums(rows, 0);
    for (std::uint64_t i = 0; i < n; ++i) want_sums[i / 64] += want_a[i];
    EXPECT_EQ(mismatches(a.host(), want_a), 0u);
    EXPECT_EQ(mismatches(sums.host(), want_sums), 0u);
    EXPECT_GT(space.stats().total().shared_faults, 0u) << "rows share pages across GPUs";
  }
}

/// What GPU `gpu` adds to counter[i % m] for its i-th update: a fresh random 32-bit value.
__host__ __device__ std::uint64_t addend(std::uint64_t i, std::uint64_t gpu, std::uint64_t salt) {
  return mix(i * 8 + gpu + salt) >> 32;
}

/// Every GPU adds addend(i, gpu) to counters[i % counters.size()] for every i < updates, so every
/// counter page is written by every GPU at once.
__global__ void add_everywhere(shared_array<std::uint64_t> counters, std::uint64_t updates, std::uint64_t salt) {
  for (std::uint64_t i = thread_index(); i < updates; i += thread_count())
    counters.fetch_add(i % counters.size(), addend(i, counters.gpu(), salt));
}

TEST_F(MultiGpu, FetchAddTotalsAreExactUnderEveryPolicy) {
  // 8 pages of 8-byte counters, each hit 64 times per GPU, all GPUs at once.
  constexpr std::uint64_t counters_n = 4096, updates = counters_n * 64;
  for (const PlacementPolicy policy : all_policies) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(to_string(policy)) + ", seed " + std::to_string(seed));
    MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 16ull << 20, .default_policy = policy});
    auto counters = space.alloc<std::uint64_t>(counters_n, std::nullopt, "counters");
    std::vector<std::uint64_t> want(counters_n);
    std::mt19937_64 rng(seed);
    for (std::uint64_t c = 0; c < counters_n; ++c) counters.host()[c] = want[c] = rng() >> 8;  // fresh starting values
    space.launch(add_everywhere, dim3(132), dim3(256), 0, counters.on(0), updates, seed);
    space.flush();
    for (std::uint64_t g = 0; g < gpus(); ++g)
      for (std::uint64_t i = 0; i < updates; ++i) want[i % counters_n] += addend(i, g, seed);
    std::uint64_t wrong = 0;
    for (std::uint64_t c = 0; c < counters_n; ++c) wrong += counters.host()[c] != want[c];
    EXPECT_EQ(wrong, 0u) << "no update lost or counted twice";
    const GpuPlacementStats total = space.stats().total();
    EXPECT_GT(total.shared_faults, 0u) << "every GPU writes every counter page";
    if (policy == PlacementPolicy::access_counter) EXPECT_GT(total.remote_accesses, 0u) << "atomics over NVLink";
    if (policy == PlacementPolicy::on_touch || policy == PlacementPolicy::duplication) EXPECT_GT(total.migrations, 0u);
  }
}

/// Every GPU proposes a value for every element of `low`, `high` and `bits` (uint32) from
/// proposal(i, gpu): the lowest wins `low`, the highest `high`, and `bits` ors in one bit per GPU.
__host__ __device__ std::uint32_t proposal(std::uint64_t i, std::uint64_t gpu, std::uint64_t salt) {
  return static_cast<std::uint32_t>(mix(i * 16 + gpu + salt));
}

__global__ void propose(shared_array<std::uint32_t> low, shared_array<std::uint32_t> high, shared_array<std::uint32_t> bits,
                        std::uint64_t salt) {
  for (std::uint64_t i = thread_index(); i < low.size(); i += thread_count()) {
    const std::uint32_t p = proposal(i, low.gpu(), salt);
    low.fetch_min(i, p);
    high.fetch_max(i, p);
    bits.fetch_or(i, 1u << (low.gpu() % 32));
  }
}

TEST_F(MultiGpu, FetchMinMaxOrAgreeWithTheHostUnderEveryPolicy) {
  constexpr std::uint64_t n = 1 << 16;  // 64 pages per object, each written by every GPU
  for (const PlacementPolicy policy : all_policies) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(to_string(policy)) + ", seed " + std::to_string(seed));
    MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 16ull << 20, .default_policy = policy});
    auto low = space.alloc<std::uint32_t>(n, std::nullopt, "low");
    auto high = space.alloc<std::uint32_t>(n, std::nullopt, "high");
    auto bits = space.alloc<std::uint32_t>(n, std::nullopt, "bits");
    const auto start = random_values(n, seed);  // the elements' values before the phase take part too
    std::copy(start.begin(), start.end(), low.host().begin());
    std::copy(start.begin(), start.end(), high.host().begin());
    std::copy(start.begin(), start.end(), bits.host().begin());
    space.launch(propose, dim3(132), dim3(256), 0, low.on(0), high.on(0), bits.on(0), seed);
    space.flush();
    std::vector<std::uint32_t> want_low(start), want_high(start), want_bits(start);
    for (std::uint64_t i = 0; i < n; ++i)
      for (std::uint64_t g = 0; g < gpus(); ++g) {
        want_low[i] = std::min(want_low[i], proposal(i, g, seed));
        want_high[i] = std::max(want_high[i], proposal(i, g, seed));
        want_bits[i] |= 1u << (g % 32);
      }
    EXPECT_EQ(mismatches(low.host(), want_low), 0u) << "fetch_min";
    EXPECT_EQ(mismatches(high.host(), want_high), 0u) << "fetch_max";
    EXPECT_EQ(mismatches(bits.host(), want_bits), 0u) << "fetch_or";
  }
}

constexpr std::uint32_t unclaimed = 0xffffffffu;

/// GPU `gpu`'s claim of element i: a fresh random value that names the GPU ((claim - 1) % gpus).
__host__ __device__ std::uint32_t claim(std::uint64_t i, std::uint64_t gpu, std::uint64_t gpus, std::uint64_t salt) {
  return static_cast<std::uint32_t>(gpu + 1 + gpus * (mix(i + salt) & 0xffffffu));
}

/// Every GPU tries to claim every element (unclaimed -> its claim); `wins` counts each GPU's
/// successes and `bad_failures` the failures that did not return another GPU's claim.
__global__ void claim_all(shared_array<std::uint32_t> owner, shared_array<std::uint32_t> wins,
                          shared_array<std::uint32_t> bad_failures, std::uint64_t salt) {
  const unsigned me = owner.gpu(), gpus = owner.gpus();
  std::uint32_t won = 0, bad = 0;
  for (std::uint64_t i = thread_index(); i < owner.size(); i += thread_count()) {
    std::uint32_t expected = unclaimed;
    if (owner.compare_exchange(i, expected, claim(i, me, gpus, salt))) {
      ++won;
    } else {
      const std::uint32_t winner = expected == unclaimed || expected == 0 ? me : (expected - 1) % gpus;
      bad += winner == me || expected != claim(i, winner, gpus, salt);
    }
  }
  wins.fetch_add(me, won);
  bad_failures.fetch_add(0, bad);
}

TEST_F(MultiGpu, CompareExchangeClaimsEachElementOnceUnderEveryPolicy) {
  constexpr std::uint64_t n = 1 << 18;  // 256 pages, each contended by every GPU
  for (const PlacementPolicy policy : all_policies) {
    const std::uint64_t seed = fresh_seed();
    SCOPED_TRACE(std::string(to_string(policy)) + ", seed " + std::to_string(seed));
    MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 16ull << 20, .default_policy = policy});
    auto owner = space.alloc<std::uint32_t>(n, std::nullopt, "owner");
    auto wins = space.alloc<std::uint32_t>(gpus(), std::nullopt, "wins");
    auto bad_failures = space.alloc<std::uint32_t>(1, std::nullopt, "bad_failures");
    std::fill(owner.host().begin(), owner.host().end(), unclaimed);
    space.launch(claim_all, dim3(132), dim3(256), 0, owner.on(0), wins.on(0), bad_failures.on(0), seed);
    space.flush();
    std::uint64_t total_wins = 0;
    for (const std::uint32_t w : wins.host()) total_wins += w;
    EXPECT_EQ(total_wins, n) << "every element claimed exactly once";
    EXPECT_EQ(bad_failures.host()[0], 0u) << "a failed claim returns another GPU's claim";
    std::vector<std::uint64_t> owned(gpus(), 0);
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint32_t o = owner.host()[i];
      const std::uint64_t winner = o == unclaimed || o == 0 ? 0 : (o - 1) % gpus();
      if (o == unclaimed || o == 0 || o != claim(i, winner, gpus(), seed)) ++wrong;
      else ++owned[winner];
    }
    EXPECT_EQ(wrong, 0u) << "every element holds its winner's claim";
    for (std::uint64_t g = 0; g < gpus(); ++g) EXPECT_EQ(owned[g], wins.host()[g]) << "GPU " << g << "'s wins are its elements";
    EXPECT_GT(space.stats().total().shared_faults, 0u) << "every GPU writes every page";
  }
}

/// Each GPU rewrites its rows (row mod gpus) in place through one span each: element i becomes
/// 3 a[i] + mix(i + salt), so every page is read and written by every GPU.
__global__ void rewrite_rows(shared_array<std::uint32_t> a, std::uint32_t salt) {
  for_each_own_row(a, [&](std::uint64_t r, std::uint32_t* row, unsigned lane) {
    for (unsigned j = lane; j < 64; j += 32) row[j] = row[j] * 3u + static_cast<std::uint32_t>(mix(r * 64 + j + salt));
  });
}

/// Two phases over `devices` with each GPU's pool a quarter of the footprint (32.5 MiB: 8320
/// pages, 2080 frames per GPU): fresh random values rewritten in place (each page read and
/// written by every GPU), then every row summed by another GPU than its writer. Both results
/// must be exact after flush(), and the GPUs must have evicted pages and written dirty ones back
/// (the counters are read before flush(), whose own write-backs they would include).
void expect_exact_with_quarter_pools(const std::vector<int>& devices, PlacementPolicy policy) {
  constexpr std::uint64_t rows = 1 << 17, n = rows * 64;
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(to_string(policy)) + ", seed " + std::to_string(seed));
  const std::uint64_t footprint = (n + rows) * sizeof(std::uint32_t);
  MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = footprint / 4, .default_policy = policy});
  ASSERT_LT(std::uint64_t{space.frames_per_gpu()} * space.page_bytes(), footprint / 3);
  auto a = space.alloc<std::uint32_t>(n, std::nullopt, "a");
  auto sums = space.alloc<std::uint32_t>(rows, std::nullopt, "sums");
  const auto values = random_values(n, seed);
  std::copy(values.begin(), values.end(), a.host().begin());
  const auto salt = static_cast<std::uint32_t>(seed >> 11);
  space.launch(rewrite_rows, dim3(132), dim3(256), 0, a.on(0), salt);
  space.launch(sum_other_rows, dim3(132), dim3(256), 0, a.on(0), sums.on(0));
  space.synchronize();
  const GpuPlacementStats kernels = space.stats().total();
  space.flush();
  std::vector<std::uint32_t> want_a(n), want_sums(rows, 0);
  for (std::uint64_t i = 0; i < n; ++i) {
    want_a[i] = values[i] * 3u + static_cast<std::uint32_t>(mix(i + salt));
    want_sums[i / 64] += want_a[i];
  }
  EXPECT_EQ(mismatches(a.host(), want_a), 0u) << "every rewritten element is on the host after flush";
  EXPECT_EQ(mismatches(sums.host(), want_sums), 0u) << "every row sum read the rewritten values";
  EXPECT_GT(kernels.evictions, 0u);
  EXPECT_GT(kernels.writebacks, 0u) << "dirty pages that went to the host were written back";
}

/// Each warp sums the words of the pages of `a` that `spread` gives its GPU into sums[page]
/// (mapped host memory, one slot per page), and with `increment` adds one to each word after.
__global__ void sum_pages(shared_array<std::uint32_t> a, std::uint32_t* sums, Spread spread, bool increment) {
  const std::uint64_t per_page = a.elements_per_page(), pages = (a.size() + per_page - 1) / per_page;
  const std::uint64_t warps = thread_count() / 32;
  const unsigned lane = threadIdx.x % 32;
  for (std::uint64_t p = thread_index() / 32; p < pages; p += warps) {
    if (detail::mg::spread_gpu(spread, p, pages, a.gpus()) != a.gpu()) continue;
    std::uint32_t sum = 0;
    if (increment) {
      a.with_page<access::read_write>(p * per_page, [&](std::uint32_t* data, std::uint64_t, std::uint32_t count) {
        for (std::uint32_t j = lane; j < count; j += 32) sum += data[j]++;
      });
    } else {
      a.with_page<access::read>(p * per_page, [&](const std::uint32_t* data, std::uint64_t, std::uint32_t count) {
        for (std::uint32_t j = lane; j < count; j += 32) sum += data[j];
      });
    }
    for (unsigned offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) sums[p] = sum;
  }
}

/// Pages of `a` (words `values`), each summed by the GPU `spread` names (and its words
/// incremented, with `increment`): every sum exact.
void expect_sums_by(MultiGpuSpace& space, const shared_object<std::uint32_t>& a, const std::vector<std::uint32_t>& values,
                    Spread spread, bool increment) {
  const std::uint64_t per_page = space.page_bytes() / sizeof(std::uint32_t), pages = (values.size() + per_page - 1) / per_page;
  MappedBuffer sums(pages * sizeof(std::uint32_t));
  space.launch(sum_pages, dim3(132), dim3(256), 0, a.on(0), sums.device<std::uint32_t>(), spread, increment);
  space.synchronize();
  for (std::uint64_t p = 0; p < pages; ++p) {
    std::uint32_t want = 0;
    for (std::uint64_t i = p * per_page; i < std::min<std::uint64_t>(values.size(), (p + 1) * per_page); ++i) want += values[i];
    ASSERT_EQ(sums.host<std::uint32_t>()[p], want) << "page " << p;
  }
}

/// place_on_gpus(`placed`) on fresh random data (a partial last page, a page count no spread
/// divides evenly), then two phases in which one warp accesses each page: first it reads and
/// writes it on the GPU the other spread names, then reads it on the GPU `placed` names.
/// Placement is not use: in the first phase a page written where it was placed stays there (a
/// write upgrade), one written elsewhere is a first touch that moves it, and no fault is shared;
/// in the second, exactly the pages that moved are shared faults. Then use is use: on a second
/// object, placed and written by its owners first, the other spread's writes are all shared
/// faults. Every sum exact.
void expect_placement_is_not_use(const std::vector<int>& devices, Spread placed, PlacementPolicy policy) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string("placed ") + to_string(placed) + ", " + to_string(policy) + ", seed " + std::to_string(seed));
  MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 64ull << 20, .default_policy = policy});
  const unsigned gpus = space.gpus();
  const std::uint64_t per_page = space.page_bytes() / sizeof(std::uint32_t), pages = 64 * gpus + 3;
  const std::uint64_t n = pages * per_page - 100;
  const Spread other = placed == Spread::blocks ? Spread::interleaved : Spread::blocks;
  auto a = space.alloc<std::uint32_t>(n, std::nullopt, "a");
  const auto values = random_values(n, seed);
  std::copy(values.begin(), values.end(), a.host().begin());
  space.place_on_gpus(a, placed);
  // Per GPU: pages placed on it; of the pages `other` gives it, those placed elsewhere.
  std::vector<std::uint64_t> placed_on(gpus, 0), taken(gpus, 0);
  std::uint64_t moved = 0;
  for (std::uint64_t p = 0; p < pages; ++p) {
    const unsigned home = detail::mg::spread_gpu(placed, p, pages, gpus), reader = detail::mg::spread_gpu(other, p, pages, gpus);
    placed_on[home] += 1;
    taken[reader] += home != reader;
    moved += home != reader;
  }
  const MultiGpuStats placement = space.stats();
  for (unsigned g = 0; g < gpus; ++g) {
    EXPECT_EQ(placement.per_gpu[g].first_touches, placed_on[g]) << "GPU " << g;
    EXPECT_EQ(placement.per_gpu[g].shared_faults, 0u) << "GPU " << g;
  }
  space.reset_stats();
  space.place_on_gpus(a, other);
  const GpuPlacementStats again = space.stats().total();
  EXPECT_EQ(again.first_touches + again.shared_faults + again.nvlink_bytes, 0u) << "placing placed pages again moves none";

  space.reset_stats();
  expect_sums_by(space, a, values, other, true);
  const MultiGpuStats first = space.stats();
  for (unsigned g = 0; g < gpus; ++g) {
    EXPECT_EQ(first.per_gpu[g].first_touches, taken[g]) << "GPU " << g;
    EXPECT_EQ(first.per_gpu[g].shared_faults + first.per_gpu[g].remote_accesses, 0u) << "GPU " << g;
  }
  const GpuPlacementStats first_total = first.total();
  EXPECT_EQ(first_total.local_accesses, pages) << "one warp access per page";
  EXPECT_EQ(first_total.write_upgrades, pages - moved) << "a page written where it was placed stays there";
  EXPECT_EQ(first_total.migrations + first_total.replications + first_total.collapses + first_total.remote_maps, 0u);

  std::vector<std::uint32_t> incremented = values;
  for (auto& v : incremented) v += 1;
  space.reset_stats();
  expect_sums_by(space, a, incremented, placed, false);
  const GpuPlacementStats second = space.stats().total();
  EXPECT_EQ(second.shared_faults, moved) << "a taken page is in use: the next GPU's fault is shared";
  EXPECT_EQ(second.first_touches, 0u);
  space.flush();
  EXPECT_EQ(mismatches(a.host(), incremented), 0u) << "every page's writes are on the host after flush";

  auto used = space.alloc<std::uint32_t>(n, std::nullopt, "used");
  std::copy(values.begin(), values.end(), used.host().begin());
  space.place_on_gpus(used, placed);
  space.reset_stats();
  expect_sums_by(space, used, values, placed, true);
  const GpuPlacementStats owners = space.stats().total();
  EXPECT_EQ(owners.write_upgrades, pages) << "every owner writes its own pages";
  EXPECT_EQ(owners.first_touches + owners.shared_faults, 0u);
  space.reset_stats();
  expect_sums_by(space, used, incremented, other, true);
  const GpuPlacementStats used_writes = space.stats().total();
  EXPECT_EQ(used_writes.shared_faults, moved) << "a page its owner wrote is no longer placed: another GPU's write is shared";
  EXPECT_EQ(used_writes.first_touches, 0u);
}

TEST_F(MultiGpu, PlacementIsNotUseUnderEveryPolicy) {
  for (const Spread placed : {Spread::blocks, Spread::interleaved})
    for (const PlacementPolicy policy : all_policies) expect_placement_is_not_use(devices, placed, policy);
}

TEST(MultiGpuSingle, PagesPlacedOnTheOnlyGpuAreHits) {
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  expect_placement_is_not_use({0}, Spread::blocks, PlacementPolicy::oasis);
  MultiGpuSpace space({.devices = {0}, .frame_bytes_per_gpu = 8ull << 20});
  shared_object<std::uint32_t> moved_from;
  EXPECT_THROW(space.place_on_gpus(moved_from, Spread::blocks), Error) << "an object of no space";
  MultiGpuSpace other({.devices = {0}, .frame_bytes_per_gpu = 8ull << 20});
  const auto elsewhere = other.alloc<std::uint32_t>(1024, std::nullopt, "elsewhere");
  EXPECT_THROW(space.place_on_gpus(elsewhere, Spread::blocks), Error) << "another space's object";
}

/// Thread t (threads dealt to the GPUs in turn) reads the flat address at element t of `links`
/// (one of an element of either value object, so a warp's lanes reach both in one call), reads
/// the value there (odd t through the handle handle_at gives), stores it plus 1 at element t of
/// `out`, and counts itself with a fetch_add through handle_at on `visits`: no handle passed in.
__global__ void chase_flat_links(flat_view flat, flat_address links, flat_address out, flat_address visits,
                                 std::uint64_t n) {
  for (std::uint64_t t = thread_index(); t < n; t += thread_count()) {
    if (t % flat.gpus() != flat.gpu()) continue;
    const auto target = flat.load<flat_address>(links + t * sizeof(flat_address));
    std::uint32_t value = 0;
    std::uint64_t i = 0;
    if (t % 2 == 0) {
      value = flat.load<std::uint32_t>(target);
    } else {
      value = flat.handle_at<std::uint32_t>(target, i).load(i);
    }
    flat.store<std::uint32_t>(out + t * sizeof(std::uint32_t), value + 1);
    (void)flat.handle_at<std::uint32_t>(visits, i).fetch_add(i, 1u);
  }
}

/// On fresh random data, links of n threads into a random permutation of two value objects
/// (each link to either, at random), chased by flat address under `policy`: every result and
/// the visit count exact after flush, each access served through its object's pages (first
/// touches of every object; with several GPUs, values read by each are shared).
void expect_flat_links_exact(const std::vector<int>& devices, PlacementPolicy policy) {
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(to_string(policy)) + ", seed " + std::to_string(seed));
  MultiGpuSpace space({.devices = devices, .frame_bytes_per_gpu = 64ull << 20, .default_policy = policy});
  constexpr std::uint64_t n = 300'000;  // not a multiple of a page's elements
  const std::vector<std::uint32_t> values[] = {random_values(n, seed), random_values(n, seed + 2)};
  std::vector<std::uint64_t> order(n);
  for (std::uint64_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed + 1);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<unsigned> which(n);
  for (auto& w : which) w = static_cast<unsigned>(rng() % 2);
  const shared_object<std::uint32_t> value_objects[] = {space.alloc<std::uint32_t>(n, std::nullopt, "values 0"),
                                                       space.alloc<std::uint32_t>(n, std::nullopt, "values 1")};
  auto links = space.alloc<flat_address>(n, std::nullopt, "links");
  auto out = space.alloc<std::uint32_t>(n, std::nullopt, "out");
  auto visits = space.alloc<std::uint32_t>(1, std::nullopt, "visits");
  for (unsigned v = 0; v < 2; ++v) std::copy(values[v].begin(), values[v].end(), value_objects[v].host().begin());
  for (std::uint64_t t = 0; t < n; ++t)
    links.host()[t] = value_objects[which[t]].address() + order[t] * sizeof(std::uint32_t);
  EXPECT_NE(value_objects[0].address(), 0u);
  EXPECT_GE(value_objects[1].address(), value_objects[0].address() + n * sizeof(std::uint32_t))
      << "objects' addresses do not overlap";
  space.launch(chase_flat_links, dim3(132), dim3(256), 0, space.flat(), links.address(), out.address(), visits.address(),
               n);
  space.flush();
  std::vector<std::uint32_t> want(n);
  for (std::uint64_t t = 0; t < n; ++t) want[t] = values[which[t]][order[t]] + 1;
  EXPECT_EQ(mismatches(out.host(), want), 0u) << "lanes reaching two objects in one call each get their own";
  EXPECT_EQ(visits.host()[0], n) << "every thread's fetch_add through handle_at";
  const std::uint64_t pages_of_all = (n * 4 + space.page_bytes() - 1) / space.page_bytes() * 3 +
                                     (n * 8 + space.page_bytes() - 1) / space.page_bytes() + 1;
  const GpuPlacementStats total = space.stats().total();
  EXPECT_GE(total.first_touches, pages_of_all) << "every page of the three objects was reached by flat address";
  if (space.gpus() > 1) EXPECT_GT(total.shared_faults, 0u) << "values' pages are read by every GPU";
}

TEST_F(MultiGpu, FlatAddressesReachObjectsThroughTheirPolicies) {
  for (const PlacementPolicy policy : all_policies) expect_flat_links_exact(devices, policy);
}

/// result[0]: the value at `address`; result[1]: 1 if handle_at found no object's T there; then
/// 5 is stored at `address`.
__global__ void flat_access_at(flat_view flat, flat_address address, shared_array<std::uint32_t> result) {
  if (thread_index() != 0) return;
  result.store(0, flat.load<std::uint32_t>(address));
  std::uint64_t i = 0;
  result.store(1, flat.handle_at<std::uint32_t>(address, i).size() == 0 ? 1u : 0u);
  flat.store<std::uint32_t>(address, 5u);
}

TEST(MultiGpuSingle, BadFlatAddressesAreClearErrorsAndTheSpaceGoesOn) {
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  MultiGpuSpace space({.devices = {0}, .frame_bytes_per_gpu = 8ull << 20});
  auto data = space.alloc<std::uint32_t>(1000, std::nullopt, "data");
  auto result = space.alloc<std::uint32_t>(2, std::nullopt, "result");
  std::uint64_t gone_address = 0;
  {
    const auto gone = space.alloc<std::uint32_t>(10, std::nullopt, "gone");
    gone_address = gone.address();
  }
  for (std::uint32_t i = 0; i < 1000; ++i) data.host()[i] = 3 * i + 7;
  const struct {
    flat_address address;
    const char* what;
  } bad[] = {{0, "no object's"},
             {data.address() + 2, "in object 'data', but misaligned"},
             {data.address() + 1000 * 4, "in object 'data', but misaligned or past its end"},
             {gone_address, "no object's"}};
  for (const auto& b : bad) {
    SCOPED_TRACE(b.what);
    space.launch(flat_access_at, dim3(1), dim3(32), 0, space.flat(), b.address, result.on(0));
    try {
      space.synchronize();
      ADD_FAILURE() << "expected an index_out_of_range error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::index_out_of_range);
      EXPECT_NE(std::string(e.what()).find(b.what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(b.address)), std::string::npos) << e.what();
    }
    space.flush();
    EXPECT_EQ(result.host()[0], 0u) << "a bad load gives T{}";
    EXPECT_EQ(result.host()[1], 1u) << "handle_at gives an empty handle";
    for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(data.host()[i], 3 * i + 7) << "a bad store writes nothing";
  }
  space.launch(flat_access_at, dim3(1), dim3(32), 0, space.flat(), data.address() + 999 * 4, result.on(0));
  space.flush();
  EXPECT_EQ(result.host()[0], 3u * 999 + 7) << "the space goes on after the errors";
  EXPECT_EQ(result.host()[1], 0u);
  EXPECT_EQ(data.host()[999], 5u) << "a good store by flat address";
}

TEST_F(MultiGpu, EvictionKeepsResultsExactUnderEveryPolicy) {
  for (const PlacementPolicy policy : all_policies) expect_exact_with_quarter_pools(devices, policy);
}

TEST(MultiGpuSingle, EvictionKeepsAOneGpuSpaceExact) {
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  expect_exact_with_quarter_pools({0}, PlacementPolicy::oasis);
}

TEST(MultiGpuSingle, OneGpuSpaceTransposes) {
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  constexpr std::uint64_t n = 512;
  const std::uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  MultiGpuSpace space({.devices = {0}, .frame_bytes_per_gpu = 8ull << 20});
  ASSERT_EQ(space.gpus(), 1u);
  expect_exact_transpose(space, n, seed, dim3(132));
  const GpuPlacementStats s = space.stats().total();
  EXPECT_EQ(space.stats_now().total().first_touches, s.first_touches) << "with nothing running, the live counts are the counts";
  EXPECT_EQ(s.remote_accesses, 0u);
  EXPECT_EQ(s.shared_faults, 0u);
  EXPECT_EQ(s.first_touches, 2 * n * n * 4 / space.page_bytes());
}

TEST(MultiGpuConfigCheck, RejectsBadConfigurations) {
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  EXPECT_THROW(MultiGpuSpace({.devices = {0, 0}}), Error);
  EXPECT_THROW(MultiGpuSpace({.devices = {0}, .page_bytes = 2048}), Error);
  EXPECT_THROW(MultiGpuSpace({.devices = {0}, .frame_bytes_per_gpu = (detail::mg::min_pool_frames - 1) * 4096ull}), Error)
      << "a pool smaller than one warp's pages";
  EXPECT_THROW(MultiGpuSpace({.devices = {device_count()}}), Error);
}

}  // namespace
}  // namespace warpvm::testing

// Randomized reads, writes and atomics through every access API, checked element by element
// against a host replay, at cache sizes from 100% of the data down to the minimum legal cache.

#include "gpu_test_support.cuh"

#include <algorithm>
#include <string>
#include <vector>

namespace warpvm::testing {
namespace {

enum class Api { element, span, cursor };
const char* to_string(Api api) { return api == Api::element ? "element" : api == Api::span ? "span" : "cursor"; }
/// Pages one thread holds at once in each variant (cursor: three cursors + one element atomic).
std::uint32_t holds_of(Api api) { return api == Api::cursor ? 4 : 1; }

constexpr std::uint32_t steps_per_thread = 192;
constexpr std::uint32_t salt_reads = 11, salt_writes = 22, salt_counts = 33;

struct Op {
  enum Kind { read, write, add } kind;
  std::uint64_t index;
};

/// The operation thread t performs at step s (same on host and device). Writes go to indices the
/// thread owns (index % threads == t), so the final content is deterministic.
__host__ __device__ inline Op op_at(std::uint64_t t, std::uint32_t s, std::uint64_t threads, std::uint64_t n) {
  const std::uint64_t r = mix((t << 20) ^ s);
  const std::uint64_t pick = r >> 8;
  switch (r % 4) {
    case 0:
    case 1: return {Op::read, pick % n};
    case 2: return {Op::write, (pick % (n / threads)) * threads + t};
    default: return {Op::add, pick % n};
  }
}
__host__ __device__ inline std::uint32_t written_value(std::uint64_t t, std::uint32_t s) {
  return static_cast<std::uint32_t>(mix(t * 7919 + s)) | 2u;
}

template <Api A>
__global__ void random_workload(array<std::uint32_t> reads, array<std::uint32_t> writes, array<std::uint32_t> counts,
                                std::uint64_t threads, std::uint64_t* checksums) {
  const std::uint64_t t = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= threads) return;
  const std::uint64_t n = reads.size();
  std::uint64_t sum = 0;
  if constexpr (A == Api::cursor) {
    cursor<std::uint32_t> read_cursor(reads);
    cursor<std::uint32_t, access::read_write> write_cursor(writes);
    for (std::uint32_t s = 0; s < steps_per_thread; ++s) {
      const Op op = op_at(t, s, threads, n);
      if (op.kind == Op::read) sum += read_cursor[op.index];
      else if (op.kind == Op::write) write_cursor[op.index] = written_value(t, s);
      else counts.fetch_add(op.index, 1u);
    }
  } else {
    for (std::uint32_t s = 0; s < steps_per_thread; ++s) {
      const Op op = op_at(t, s, threads, n);
      if constexpr (A == Api::element) {
        if (op.kind == Op::read) sum += reads[op.index];
        else if (op.kind == Op::write) writes.store(op.index, written_value(t, s));
        else counts.fetch_add(op.index, 1u);
      } else {
        if (op.kind == Op::read) {
          const auto page = reads.span(op.index);
          sum += page[static_cast<std::uint32_t>(op.index - page.first())];
        } else if (op.kind == Op::write) {
          const auto page = writes.span<access::read_write>(op.index);
          page[static_cast<std::uint32_t>(op.index - page.first())] = written_value(t, s);
        } else {
          counts.fetch_add(op.index, 1u);
        }
      }
    }
  }
  checksums[t] = sum;
}

struct Case {
  Api api;
  EvictionPolicy policy;
  double cache_fraction;  ///< of the three objects' bytes; 0 means the minimum legal cache
  Transport transport = Transport::gpu_initiated;
};

class RandomWorkload : public GpuTest, public ::testing::WithParamInterface<Case> {};

template <Api A>
void launch_workload(Runtime& rt, const object<std::uint32_t>& r, const object<std::uint32_t>& w,
                     const object<std::uint32_t>& c, std::uint64_t threads, std::uint64_t* sums) {
  constexpr unsigned block = 32;
  rt.launch(random_workload<A>, dim3(static_cast<unsigned>((threads + block - 1) / block)), dim3(block), 0,
            r.device(), w.device(), c.device(), threads, sums);
}

TEST_P(RandomWorkload, MatchesHostReplay) {
  const Case param = GetParam();
  constexpr std::uint64_t n = 8u << 20;  // 32 MiB per object, 96 MiB in all
  constexpr std::size_t page = 4096;
  const std::uint32_t holds = holds_of(param.api);
  const std::uint64_t data_bytes = 3 * n * sizeof(std::uint32_t);

  std::uint64_t frames = 0;
  std::uint64_t threads = 0;
  if (param.cache_fraction == 0.0) {
    threads = 64;
    frames = threads * holds;  // exactly the bound check_launch enforces
  } else {
    frames = static_cast<std::uint64_t>(data_bytes * param.cache_fraction) / page;
    threads = std::min<std::uint64_t>(8192, frames / holds) / 32 * 32;
  }
  ASSERT_GE(threads, 32u);
  Config config{.cache_bytes = frames * page, .page_bytes = page, .eviction = param.policy,
                .max_pages_held_per_thread = holds};
  if (param.transport == Transport::host_batched) {
    config.transport = Transport::host_batched;  // UVM's policy; the objects are whole 2 MB blocks
    threads = 8192;
  }
  Runtime rt(config);
  auto reads = rt.alloc<std::uint32_t>(n, Placement::migrate, "reads");
  auto writes = rt.alloc<std::uint32_t>(n, Placement::migrate, "writes");
  auto counts = rt.alloc<std::uint32_t>(n, Placement::migrate, "counts");
  fill_initial(reads, salt_reads);
  fill_initial(writes, salt_writes);
  fill_initial(counts, salt_counts);
  DeviceVector<std::uint64_t> sums(threads);

  switch (param.api) {
    case Api::element: launch_workload<Api::element>(rt, reads, writes, counts, threads, sums.get()); break;
    case Api::span: launch_workload<Api::span>(rt, reads, writes, counts, threads, sums.get()); break;
    case Api::cursor: launch_workload<Api::cursor>(rt, reads, writes, counts, threads, sums.get()); break;
  }
  rt.synchronize();
  rt.flush();

  std::vector<std::uint32_t> expect_writes(n), expect_counts(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    expect_writes[i] = initial_value(i, salt_writes);
    expect_counts[i] = initial_value(i, salt_counts);
  }
  const auto got_sums = sums.to_host();
  std::uint64_t wrong_sums = 0;
  for (std::uint64_t t = 0; t < threads; ++t) {
    std::uint64_t sum = 0;
    for (std::uint32_t s = 0; s < steps_per_thread; ++s) {
      const Op op = op_at(t, s, threads, n);
      if (op.kind == Op::read) sum += initial_value(op.index, salt_reads);
      else if (op.kind == Op::write) expect_writes[op.index] = written_value(t, s);
      else ++expect_counts[op.index];
    }
    wrong_sums += sum != got_sums[t];
  }
  EXPECT_EQ(wrong_sums, 0u);
  std::uint64_t wrong_reads = 0, wrong_writes = 0, wrong_counts = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    wrong_reads += reads.host()[i] != initial_value(i, salt_reads);
    wrong_writes += writes.host()[i] != expect_writes[i];
    wrong_counts += counts.host()[i] != expect_counts[i];
  }
  EXPECT_EQ(wrong_reads, 0u);
  EXPECT_EQ(wrong_writes, 0u);
  EXPECT_EQ(wrong_counts, 0u);

  const Stats stats = rt.stats();
  EXPECT_GT(stats.misses, 0u);
  EXPECT_EQ(stats.bytes_in, stats.misses * page);
  if (param.cache_fraction >= 1.0) EXPECT_EQ(stats.evictions, 0u);
  if (param.cache_fraction > 0.0 && param.cache_fraction < 0.5) EXPECT_GT(stats.evictions, 0u);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Api api : {Api::element, Api::span, Api::cursor})
    for (EvictionPolicy policy : {EvictionPolicy::clock, EvictionPolicy::fifo})
      for (double fraction : {1.0, 0.5, 0.125, 0.015, 0.0}) cases.push_back({api, policy, fraction});
  for (Api api : {Api::element, Api::span, Api::cursor})
    cases.push_back({api, EvictionPolicy::clock, 1.0, Transport::host_batched});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllApis, RandomWorkload, ::testing::ValuesIn(all_cases()), [](const ::testing::TestParamInfo<Case>& test) {
  const Case& c = test.param;
  const std::string cache = c.cache_fraction == 0.0 ? std::string("min_legal")
                                                    : "cache" + std::to_string(static_cast<int>(c.cache_fraction * 1000)) + "pm";
  if (c.transport == Transport::host_batched) return std::string(to_string(c.api)) + "_host_batched_" + cache;
  return std::string(to_string(c.api)) + "_" + warpvm::to_string(c.policy) + "_" + cache;
});

}  // namespace
}  // namespace warpvm::testing

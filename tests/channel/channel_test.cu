// warpvm::channel, CPU to GPU: exact data for many tags and warps, out-of-order publishing,
// staging recycled under more requests than pages, the watchdog on a tag never published, bad
// arguments, reuse after reset(), 1 to 1M consumer threads (the benchmark's CPU-to-GPU workloads
// at small sizes: tests/workloads/channel_workloads_test.cu). Kernel producers:
// one on the consumers' GPU (buffer in host or device memory, across a reset), one on a peer
// GPU (skipped without two peer GPUs with native peer atomics), and the producer handle's refusals.
// Direct mode (consumers poll the device map and read the buffer in place): a producer on the
// consumers' GPU and on a peer, across a reset, its watchdog, and its refusals. Monitor-warp
// mode (a monitor warp wakes parked consumers) the same ways, and its refusals. A warp whose
// lanes acquire apart (two requests of one warp at once) is refused, not served stale data.

#include "gpu_test_support.cuh"

#include "warpvm/workloads/channel/peer_exchange.cuh"

#include "warpvm/channel.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>

namespace warpvm::testing {
namespace {

/// Word i of tile t of run `salt`: random, never zero.
__host__ __device__ std::uint32_t tile_word(std::uint32_t tile, std::uint32_t i, std::uint32_t salt) {
  return initial_value(std::uint64_t{tile} * 1000003u + i, salt);
}

/// Word `word` of the producers' buffer, whose groups are `group_words` words long.
__host__ __device__ std::uint32_t buffer_word(std::uint32_t word, std::uint32_t group_words, std::uint32_t salt) {
  return tile_word(word / group_words, word % group_words, salt);
}

/// A checksum that notices misplaced words, not only wrong ones.
__host__ __device__ inline std::uint64_t word_term(std::uint32_t word, std::uint32_t i) {
  return std::uint64_t{word} * (2u * i + 1u);
}

std::uint64_t host_checksum(const std::uint32_t* words, std::uint32_t n) {
  std::uint64_t s = 0;
  for (std::uint32_t i = 0; i < n; ++i) s += word_term(words[i], i);
  return s;
}

__device__ std::uint64_t warp_sum(std::uint64_t v) {
  for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
  return v;
}

/// Each warp w takes groups g = w, w + warps, ...; group g is tags [g * tags_per_group, +tags_per_group),
/// `group_words` words at g * group_words * 4 in the buffer. The warp checksums its group
/// twice, a pause in between (a run reused under a reader would change), into sums[g]. Each warp
/// adds one to `*finished` at its end, when given (a monitor warp waits for all of them).
__global__ void consume_groups(channel_handle ch, std::uint32_t groups, std::uint32_t tags_per_group,
                               std::uint32_t group_words, std::uint32_t reread_pause_ns, unsigned long long* sums,
                               unsigned long long* mismatches, unsigned* finished = nullptr) {
  const std::uint32_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const std::uint32_t warps = gridDim.x * blockDim.x / 32;
  const std::uint32_t lane = threadIdx.x % 32;
  for (std::uint32_t g = warp; g < groups; g += warps) {
    const std::uint32_t bytes = group_words * 4;
    const channel_data data = ch.acquire(g * tags_per_group, tags_per_group, bytes, std::uint64_t{g} * bytes);
    const std::uint32_t* words = data.as<std::uint32_t>();
    std::uint64_t s = 0;
    for (std::uint32_t i = lane; i < group_words; i += 32) s += word_term(words[i], i);
    s = warp_sum(s);
    {  // the same words through L2 (after a pause): a stale L1 line or a run reused too early shows
      if (reread_pause_ns != 0) __nanosleep(reread_pause_ns);
      std::uint64_t again = 0;
      for (std::uint32_t i = lane; i < group_words; i += 32) again += word_term(__ldcg(words + i), i);
      again = warp_sum(again);
      if (lane == 0 && again != s) atomicAdd(mismatches, 1ull);
    }
    data.release();
    if (lane == 0) sums[g] = s;
  }
  if (finished != nullptr && lane == 0) atomicAdd(finished, 1u);
}

/// Loads the monitor kernel now: under lazy module loading a kernel's first launch can wait for
/// the running kernels to end, here consumers waiting for it.
void load_monitor_kernel() {
  cudaFuncAttributes loaded{};
  WARPVM_CUDA_TRY(cudaFuncGetAttributes(&loaded, workloads::pair_monitor_kernel));
}

/// Launches a monitor warp for `ch` on `stream` (the bench's monitor kernel: one warp, until
/// `consumers` have counted themselves finished), after the consumers' kernel, whose first launch
/// it must not stand in front of (docs/channels.md, "The monitor warp"). Load it first
/// (load_monitor_kernel): it is launched while the consumers run.
void launch_monitor(const channel& ch, const unsigned* finished, unsigned consumers, bool lists_in_shared,
                    cudaStream_t stream) {
  const std::size_t scratch = lists_in_shared ? ch.monitor_scratch_bytes() : 0;
  workloads::pair_monitor_kernel<<<1, 32, scratch, stream>>>(ch.device(), finished, consumers, lists_in_shared);
  WARPVM_CUDA_TRY(cudaGetLastError());
}

/// One lane per warp active (the rest exit at once): acquire works for partial warps.
__global__ void consume_one_per_thread(channel_handle ch, std::uint32_t threads, std::uint32_t words_per_tag,
                                       unsigned long long* sums) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= threads) return;
  const std::uint32_t tag = t / 32;  // the warp's tag: every active lane asks for the same
  const std::uint32_t bytes = words_per_tag * 4;
  const channel_data data = ch.acquire(tag, 1, bytes, std::uint64_t{tag} * bytes);
  const std::uint32_t* words = data.as<std::uint32_t>();
  std::uint64_t s = 0;
  for (std::uint32_t i = t % 32; i < words_per_tag; i += 32) s += word_term(words[i], i);
  data.release();
  atomicAdd(sums + tag, static_cast<unsigned long long>(s));
}

struct Workload {
  std::uint32_t groups;
  std::uint32_t tags_per_group;
  std::uint32_t group_words;
};

/// Writes every tag's words into the buffer and publishes the tags in `order`, pausing
/// `pause_us` every `pause_every` tags.
void produce(channel& ch, const Workload& w, std::uint32_t salt, const std::vector<std::uint32_t>& order,
             std::uint32_t pause_every, std::uint32_t pause_us) {
  const std::uint32_t words_per_tag = w.group_words / w.tags_per_group;
  auto* buffer = reinterpret_cast<std::uint32_t*>(ch.buffer().data());
  std::uint32_t n = 0;
  for (const std::uint32_t tag : order) {
    for (std::uint32_t i = 0; i < words_per_tag; ++i) {
      const std::uint32_t word = tag * words_per_tag + i;  // words of a group are its tags' words in order
      buffer[word] = buffer_word(word, w.group_words, salt);
    }
    ch.publish(tag, 1);
    if (pause_every != 0 && ++n % pause_every == 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
}

std::vector<std::uint64_t> expected_sums(const Workload& w, std::uint32_t salt) {
  std::vector<std::uint64_t> sums(w.groups);
  std::vector<std::uint32_t> words(w.group_words);
  for (std::uint32_t g = 0; g < w.groups; ++g) {
    for (std::uint32_t i = 0; i < w.group_words; ++i) words[i] = tile_word(g, i, salt);
    sums[g] = host_checksum(words.data(), w.group_words);
  }
  return sums;
}

std::vector<std::uint32_t> in_order(std::uint32_t n) {
  std::vector<std::uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
}

/// Every group's checksum against the host's, and no data changed under a reader.
void check_sums(const Workload& w, std::uint32_t salt, const DeviceVector<unsigned long long>& sums,
                const DeviceVector<unsigned long long>& mismatches) {
  const std::vector<unsigned long long> got = sums.to_host();
  const std::vector<std::uint64_t> want = expected_sums(w, salt);
  std::uint32_t wrong = 0;
  for (std::uint32_t g = 0; g < w.groups; ++g) wrong += got[g] != want[g] ? 1u : 0u;
  EXPECT_EQ(wrong, 0u) << "groups with a wrong checksum, of " << w.groups;
  EXPECT_EQ(mismatches.to_host()[0], 0ull) << "staging data changed under a reader";
}

/// Launches the consumers, produces from a host thread while they run, checks every checksum.
void run_and_check(channel& ch, const Workload& w, std::uint32_t salt, dim3 grid, dim3 block,
                   const std::vector<std::uint32_t>& order, std::uint32_t pause_every, std::uint32_t pause_us,
                   std::uint32_t reread_pause_ns = 0) {
  DeviceVector<unsigned long long> sums(w.groups);
  DeviceVector<unsigned long long> mismatches(1);
  consume_groups<<<grid, block>>>(ch.device(), w.groups, w.tags_per_group, w.group_words, reread_pause_ns, sums.get(),
                                  mismatches.get());
  WARPVM_CUDA_TRY(cudaGetLastError());
  std::thread producer([&] { produce(ch, w, salt, order, pause_every, pause_us); });
  producer.join();
  ch.synchronize();
  check_sums(w, salt, sums, mismatches);
}

class Channel : public GpuTest {};

TEST_F(Channel, DataIsExactForManyTagsAndWarps) {
  const Workload w{8192, 1, 256};  // 8192 tiles of 1 KiB
  channel ch({.buffer_bytes = std::uint64_t{w.groups} * w.group_words * 4, .tag_count = w.groups});
  run_and_check(ch, w, 11, dim3(64), dim3(256), in_order(w.groups), 64, 5);
  const ChannelStats stats = ch.stats();
  EXPECT_EQ(stats.requests, w.groups);
  EXPECT_EQ(stats.bytes, std::uint64_t{w.groups} * w.group_words * 4);
  EXPECT_LE(stats.largest_batch, 16u);
  EXPECT_GE(stats.batches, w.groups / 16);
  EXPECT_LE(stats.copies, w.groups);
  EXPECT_EQ(stats.map_polls, 0u);  // host producers only: the monitor polls no device map
}

TEST_F(Channel, OutOfOrderPublishingOfMultiTagRequests) {
  const Workload w{1024, 4, 1024};  // each warp asks for 4 tags at once (4 KiB)
  channel ch({.buffer_bytes = std::uint64_t{w.groups} * w.group_words * 4, .tag_count = w.groups * w.tags_per_group});
  std::vector<std::uint32_t> order = in_order(w.groups * w.tags_per_group);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  run_and_check(ch, w, 12, dim3(32), dim3(128), order, 16, 10);
  EXPECT_EQ(ch.stats().requests, w.groups);
}

TEST_F(Channel, StagingIsRecycledUnderMoreRequestsThanPages) {
  const Workload w{4096, 1, 1024};  // 4096 requests of 4 KiB through 8 staging pages of 4 KiB
  channel ch({.buffer_bytes = std::uint64_t{w.groups} * w.group_words * 4,
              .tag_count = w.groups,
              .staging_page_bytes = 4096,
              .staging_pages = 8});
  std::vector<std::uint32_t> order = in_order(w.groups);
  std::shuffle(order.begin(), order.end(), std::mt19937(8));
  run_and_check(ch, w, 13, dim3(32), dim3(256), order, 0, 0, /*reread_pause_ns=*/2000);
  const ChannelStats stats = ch.stats();
  EXPECT_EQ(stats.requests, w.groups);
  EXPECT_GE(stats.batches, w.groups / 8);  // a run holds at most 8 of these requests
}

TEST_F(Channel, DataPublishedBeforeTheKernelIsServedToo) {
  const Workload w{2048, 1, 64};
  channel ch({.buffer_bytes = std::uint64_t{w.groups} * w.group_words * 4, .tag_count = w.groups});
  produce(ch, w, 14, in_order(w.groups), 0, 0);
  DeviceVector<unsigned long long> sums(w.groups), mismatches(1);
  consume_groups<<<16, 256>>>(ch.device(), w.groups, 1, w.group_words, 0, sums.get(), mismatches.get());
  WARPVM_CUDA_TRY(cudaGetLastError());
  ch.synchronize();
  const auto got = sums.to_host();
  const auto want = expected_sums(w, 14);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
}

TEST_F(Channel, ResetLetsTheChannelServeASecondRun) {
  const Workload w{2048, 1, 256};
  channel ch({.buffer_bytes = std::uint64_t{w.groups} * w.group_words * 4, .tag_count = w.groups});
  run_and_check(ch, w, 21, dim3(16), dim3(256), in_order(w.groups), 32, 5);
  ch.reset();
  std::vector<std::uint32_t> order = in_order(w.groups);
  std::reverse(order.begin(), order.end());
  run_and_check(ch, w, 22, dim3(16), dim3(256), order, 32, 5);  // the waiter words carry on counting
  EXPECT_EQ(ch.stats().requests, 2u * w.groups);
}

class ChannelScale : public GpuTest, public ::testing::WithParamInterface<std::uint32_t> {};

TEST_P(ChannelScale, OneToOneMillionConsumerThreads) {
  const std::uint32_t threads = GetParam();
  const std::uint32_t warps = (threads + 31) / 32;
  constexpr std::uint32_t words_per_tag = 64;  // 256 B per warp
  channel ch({.buffer_bytes = std::uint64_t{warps} * words_per_tag * 4, .tag_count = warps, .max_warps = warps});
  DeviceVector<unsigned long long> sums(warps);
  const std::uint32_t block = std::min(threads, 256u);
  consume_one_per_thread<<<(threads + block - 1) / block, block>>>(ch.device(), threads, words_per_tag, sums.get());
  WARPVM_CUDA_TRY(cudaGetLastError());
  const Workload w{warps, 1, words_per_tag};
  std::thread producer([&] { produce(ch, w, 31, in_order(warps), 256, 2); });
  producer.join();
  ch.synchronize();
  // Each active lane adds its share of its warp's checksum: the warp total is the checksum.
  const auto got = sums.to_host();
  const auto want = expected_sums(w, 31);
  std::uint32_t wrong = 0;
  for (std::uint32_t g = 0; g < warps; ++g) {
    const std::uint32_t lanes = std::min(32u, threads - g * 32);
    std::uint64_t expect = 0;
    for (std::uint32_t i = 0; i < words_per_tag; ++i)
      if (i % 32 < lanes) expect += word_term(tile_word(g, i, 31), i);
    if (lanes == 32) EXPECT_EQ(expect, want[g]);
    wrong += got[g] != expect ? 1u : 0u;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(ch.stats().requests, warps);
}

INSTANTIATE_TEST_SUITE_P(ChannelThreads, ChannelScale, ::testing::Values(1u, 32u, 1000u, 65536u, 1u << 20));

// ---- failures become warpvm::Error (in a child process: a trapped kernel ends the context) ----

__global__ void acquire_tag(channel_handle ch, std::uint32_t tag, std::uint32_t bytes) {
  const channel_data data = ch.acquire(tag, 1, bytes, 0);
  data.release();
}

__global__ void acquire_per_lane_tag(channel_handle ch) {
  const channel_data data = ch.acquire(threadIdx.x % 32, 1, 64, 0);
  data.release();
}

/// Lane 0 and the other lanes of each warp acquire at two call sites, so as two groups, each
/// posting a request of the warp with the same number (kmeans2gpu's failure: thread 0 published,
/// then acquired apart from its warp). Different stores around each call keep the compiler from
/// merging the two branches into one converged acquire.
__device__ unsigned two_group_marks[4];
__global__ void acquire_as_two_groups(channel_handle ch, std::uint32_t tag) {
  if (threadIdx.x % 32 == 0) {
    two_group_marks[0] = 1;
    ch.acquire(tag, 1, 64, 0).release();
    two_group_marks[2] = 1;
  } else {
    two_group_marks[1] = 1;
    ch.acquire(tag, 1, 64, 0).release();
    two_group_marks[3] = 1;
  }
}

constexpr ChannelConfig failing_channel{.buffer_bytes = 1 << 20, .tag_count = 64, .max_warps = 64, .watchdog_seconds = 0.5};

[[noreturn]] void expect_error(void (*launch)(channel&), ErrorKind kind, const ChannelConfig& config = failing_channel) {
  try {
    channel ch(config);
    if (!config.direct && !config.monitor_warp) ch.publish(0, 1);  // else only kernels publish
    launch(ch);
    ch.synchronize();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(e.kind() == kind ? 0 : 1);
  }
  std::exit(2);
}

TEST_F(Channel, NeverPublishedTagTurnsIntoAnError) {
  EXPECT_EXIT(expect_error([](channel& ch) { acquire_tag<<<1, 32>>>(ch.device(), 5, 64); }, ErrorKind::no_progress),
              ::testing::ExitedWithCode(0), "waited for tags \\[5, 6\\), never all published");
}

TEST_F(Channel, DirectModeWatchdogTurnsANeverPublishedTagIntoAnError) {
  EXPECT_EXIT(expect_error([](channel& ch) { acquire_tag<<<1, 32>>>(ch.device(), 5, 64); }, ErrorKind::no_progress,
                           ChannelConfig{.buffer_bytes = 1 << 20,
                                         .tag_count = 64,
                                         .watchdog_seconds = 0.5,
                                         .device = 0,
                                         .device_producers = true,
                                         .buffer_device = 0,
                                         .direct = true}),
              ::testing::ExitedWithCode(0), "waited for tags \\[5, 6\\), never all published");
}

TEST_F(Channel, LanesAskingForDifferentTagsAreRefused) {
  EXPECT_EXIT(expect_error([](channel& ch) { acquire_per_lane_tag<<<1, 32>>>(ch.device()); },
                           ErrorKind::invalid_argument),
              ::testing::ExitedWithCode(0), "different arguments");
}

/// A non-blocking stream, left to the process's end (these run in a child that exits).
cudaStream_t side_stream() {
  cudaStream_t stream = nullptr;
  WARPVM_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

/// A monitor warp that serves `ch` until the kernel traps (no consumer counts itself finished),
/// on a stream of its own, beside the consumers'.
__device__ unsigned consumers_never_finished;
void launch_endless_monitor(channel& ch) {
  unsigned* never = nullptr;
  WARPVM_CUDA_TRY(cudaGetSymbolAddress(reinterpret_cast<void**>(&never), consumers_never_finished));
  launch_monitor(ch, never, 1, true, side_stream());
}

constexpr ChannelConfig failing_monitor_warp_channel{.buffer_bytes = 1 << 20,
                                                     .tag_count = 64,
                                                     .max_warps = 64,
                                                     .watchdog_seconds = 0.5,
                                                     .device = 0,
                                                     .device_producers = true,
                                                     .buffer_device = 0,
                                                     .monitor_warp = true};

TEST_F(Channel, MonitorWarpWatchdogTurnsANeverPublishedTagIntoAnError) {
  EXPECT_EXIT(expect_error(
                  [](channel& ch) {
                    load_monitor_kernel();
                    acquire_tag<<<1, 32, 0, side_stream()>>>(ch.device(), 5, 64);
                    launch_endless_monitor(ch);
                  },
                  ErrorKind::no_progress, failing_monitor_warp_channel),
              ::testing::ExitedWithCode(0), "waited for tags \\[5, 6\\), never all published");
}

TEST_F(Channel, MonitorWarpRefusesAWarpAcquiringAsTwoGroups) {
  EXPECT_EXIT(expect_error(
                  [](channel& ch) {
                    load_monitor_kernel();
                    acquire_as_two_groups<<<1, 32, 0, side_stream()>>>(ch.device(), 5);
                    launch_endless_monitor(ch);
                  },
                  ErrorKind::invalid_argument, failing_monitor_warp_channel),
              ::testing::ExitedWithCode(0), "two acquisitions of one warp at once");
}

/// A monitor warp that stops at once, on `ch`.
__global__ void monitor_once(channel_handle ch) {
  ch.monitor([] { return true; });
}

TEST_F(Channel, MonitorOnAChannelWithoutMonitorWarpIsAClearError) {
  EXPECT_EXIT(expect_error([](channel& ch) { monitor_once<<<1, 32>>>(ch.device()); }, ErrorKind::invalid_argument,
                           ChannelConfig{.buffer_bytes = 1 << 20,
                                         .tag_count = 64,
                                         .device = 0,
                                         .device_producers = true,
                                         .buffer_device = 0,
                                         .direct = true}),
              ::testing::ExitedWithCode(0), "without ChannelConfig::monitor_warp");
}

TEST_F(Channel, MoreWarpsThanConfiguredAreRefused) {
  EXPECT_EXIT(expect_error([](channel& ch) { acquire_tag<<<3, 1024>>>(ch.device(), 0, 64); },
                           ErrorKind::invalid_argument),
              ::testing::ExitedWithCode(0), "max_warps = 64");
}

TEST_F(Channel, RequestsPastTheBufferAreRefused) {
  EXPECT_EXIT(expect_error([](channel& ch) { acquire_tag<<<1, 32>>>(ch.device(), 0, 2u << 20); },
                           ErrorKind::invalid_argument),
              ::testing::ExitedWithCode(0), "out of range");
}

TEST_F(Channel, TwoRequestsOfOneWarpAtOnceAreRefused) {
  // Tag 1 is never published: both groups' requests wait, and the monitor refuses the second.
  EXPECT_EXIT(expect_error([](channel& ch) { acquire_as_two_groups<<<1, 32>>>(ch.device(), 1); },
                           ErrorKind::invalid_argument),
              ::testing::ExitedWithCode(0), "warp 0 posted its request number 1 .*two acquisitions of one warp");
}

TEST(ChannelConfigCheck, RefusesImpossibleSizes) {
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  EXPECT_THROW(channel({.tag_count = 0}), Error);
  EXPECT_THROW(channel({.staging_page_bytes = 8}), Error);
  EXPECT_THROW(channel({.watchdog_seconds = 0}), Error);
  EXPECT_THROW(channel({.buffer_device = device_count()}), Error);
  EXPECT_THROW(channel({.buffer_device = -2}), Error);
  EXPECT_THROW(channel({.monitor_cpu = -2}), Error);
  EXPECT_THROW(channel({.monitor_cpu = CPU_SETSIZE}), Error);
}

TEST(ChannelConfigCheck, RefusesAMonitorCpuOutsideTheProcessCpuSet) {
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device visible: GPU test skipped";
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int outside = -1;
  for (int cpu = CPU_SETSIZE - 1; cpu >= 0 && outside < 0; --cpu)
    if (!CPU_ISSET(cpu, &allowed)) outside = cpu;
  ASSERT_GE(outside, 0);
  try {
    channel ch({.monitor_cpu = outside});
    ADD_FAILURE() << "monitor_cpu " << outside << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_config);
    EXPECT_NE(std::string(e.what()).find("monitor_cpu " + std::to_string(outside)), std::string::npos) << e.what();
  }
}

TEST_F(Channel, AMonitorPinnedToACpuServesEveryRequest) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int last = -1;  // the process's highest CPU: away from CPU 0, where the OS often puts the main thread
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) last = cpu;
  ASSERT_GE(last, 0);
  const Workload w{2048, 1, 256};
  channel ch({.buffer_bytes = std::uint64_t{w.groups} * w.group_words * 4, .tag_count = w.groups, .monitor_cpu = last});
  run_and_check(ch, w, 15, dim3(16), dim3(256), in_order(w.groups), 64, 5);
  EXPECT_EQ(ch.stats().requests, w.groups);
}

// ---- kernel producers (the device-side availability map) -------------------------------------

/// Block b writes the words of tags order[b], order[b + gridDim.x], ... into the buffer (the
/// layout `produce` writes from the host) and publishes each once the block has written it,
/// `pause_ns` later. Counts refused publishes.
__global__ void produce_tags(channel_producer producer, const std::uint32_t* order, std::uint32_t tags,
                             std::uint32_t words_per_tag, std::uint32_t group_words, std::uint32_t salt,
                             std::uint32_t pause_ns, unsigned long long* refused) {
  auto* words = reinterpret_cast<std::uint32_t*>(producer.buffer());
  for (std::uint32_t k = blockIdx.x; k < tags; k += gridDim.x) {
    const std::uint32_t tag = order[k];
    for (std::uint32_t i = threadIdx.x; i < words_per_tag; i += blockDim.x) {
      const std::uint32_t word = tag * words_per_tag + i;
      words[word] = buffer_word(word, group_words, salt);
    }
    __syncthreads();  // the block's writes happen before thread 0's release OR (cumulativity)
    if (threadIdx.x == 0) {
      __nanosleep(pause_ns);
      if (!producer.publish(tag, 1)) atomicAdd(refused, 1ull);
    }
  }
}

/// Makes `device` current for a scope.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    WARPVM_CUDA_TRY(cudaGetDevice(&previous_));
    WARPVM_CUDA_TRY(cudaSetDevice(device));
  }
  ~CurrentDevice() { cudaSetDevice(previous_); }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
};

/// A non-blocking stream of the current device: kernels on two of them run at once.
class TestStream {
 public:
  TestStream() { WARPVM_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~TestStream() { cudaStreamDestroy(stream_); }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// Consumers on the channel's GPU and a producer kernel on `producer_device` run at once; the
/// producer publishes every tag in a random order. Checks every checksum and that each tag
/// reached the monitor through the device map exactly once.
void run_with_kernel_producer(channel& ch, int producer_device, const Workload& w, bool lists_in_shared = true) {
  std::random_device fresh;
  const std::uint32_t salt = fresh();
  const std::uint32_t order_seed = fresh();
  SCOPED_TRACE("salt " + std::to_string(salt) + ", order seed " + std::to_string(order_seed));
  const std::uint32_t tags = w.groups * w.tags_per_group;
  std::vector<std::uint32_t> order = in_order(tags);
  std::shuffle(order.begin(), order.end(), std::mt19937(order_seed));
  const ChannelStats before = ch.stats();

  // Everything allocated before the consumers start: a cudaFree could wait for them.
  const channel_producer producer = ch.producer(producer_device);
  DeviceVector<unsigned long long> sums(w.groups);
  DeviceVector<unsigned long long> mismatches(1);
  DeviceVector<unsigned> finished(1);
  TestStream consumer_stream;
  TestStream monitor_stream;
  CurrentDevice on_producer_device(producer_device);
  const DeviceVector device_order(order);
  DeviceVector<unsigned long long> refused(1);
  TestStream producer_stream;
  // Load the producer now: under CUDA's lazy module loading (the default) a kernel's first launch
  // can wait for the running kernels to end, here the consumers waiting for it (a deadlock).
  cudaFuncAttributes loaded{};
  WARPVM_CUDA_TRY(cudaFuncGetAttributes(&loaded, produce_tags));
  {
    const CurrentDevice on_consumer_device(ch.config().device);
    constexpr unsigned consumer_blocks = 32, consumer_warps = consumer_blocks * 256 / 32;
    if (ch.config().monitor_warp) load_monitor_kernel();
    consume_groups<<<consumer_blocks, 256, 0, consumer_stream.get()>>>(
        ch.device(), w.groups, w.tags_per_group, w.group_words, 0, sums.get(), mismatches.get(), finished.get());
    WARPVM_CUDA_TRY(cudaGetLastError());
    if (ch.config().monitor_warp)
      launch_monitor(ch, finished.get(), consumer_warps, lists_in_shared, monitor_stream.get());
  }
  produce_tags<<<16, 256, 0, producer_stream.get()>>>(producer, device_order.get(), tags, w.group_words / w.tags_per_group,
                                                       w.group_words, salt, 1000, refused.get());
  WARPVM_CUDA_TRY(cudaGetLastError());
  WARPVM_CUDA_TRY(cudaStreamSynchronize(producer_stream.get()));
  EXPECT_EQ(refused.to_host()[0], 0ull);
  ch.synchronize();
  check_sums(w, salt, sums, mismatches);
  const ChannelStats after = ch.stats();
  if (ch.config().direct) {  // no monitor: every acquire was served in place
    EXPECT_EQ(after.direct_acquires - before.direct_acquires, w.groups);
    EXPECT_LE(after.direct_parked - before.direct_parked, w.groups);
    EXPECT_EQ(after.requests, before.requests);
    EXPECT_EQ(after.map_polls, before.map_polls);
  } else if (ch.config().monitor_warp) {  // every request through the monitor warp, each tag seen once
    EXPECT_EQ(after.requests - before.requests, w.groups);
    EXPECT_LE(after.map_tags - before.map_tags, tags);
    EXPECT_GE(after.passes - before.passes, 1u);
  } else {
    EXPECT_EQ(after.map_tags - before.map_tags, tags);  // each tag learnt once
  }
}

/// Where the producers' buffer is (ChannelConfig::buffer_device): -1 pinned host memory, else a
/// GPU index.
std::string buffer_place(const ::testing::TestParamInfo<int>& placement) {
  return placement.param < 0 ? std::string("PinnedHost") : "Gpu" + std::to_string(placement.param);
}

class ChannelKernelProducer : public GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(ChannelKernelProducer, OnTheConsumersGpuIsExactAcrossAReset) {
  const Workload w{2048, 4, 1024};  // 8192 tags of 1 KiB, four per request
  channel ch({.buffer_bytes = std::uint64_t{w.groups} * w.group_words * 4,
              .tag_count = w.groups * w.tags_per_group,
              .device = 0,
              .device_producers = true,
              .buffer_device = GetParam()});
  run_with_kernel_producer(ch, 0, w);
  ch.reset();  // clears the device map: the second run's tags must be published again
  run_with_kernel_producer(ch, 0, w);
  const ChannelStats stats = ch.stats();
  EXPECT_EQ(stats.requests, 2u * w.groups);
  EXPECT_GE(stats.map_polls, 1u);
}

INSTANTIATE_TEST_SUITE_P(BufferIn, ChannelKernelProducer, ::testing::Values(-1, 0), buffer_place);

/// Both GPUs 0 and 1 with peer access both ways and native peer atomics (a kernel on GPU 1
/// publishes into GPU 0's map).
bool peer_pair_ready() {
  int peer_access = 0, back = 0, atomics = 0;
  if (device_count() >= 2) {
    WARPVM_CUDA_TRY(cudaDeviceCanAccessPeer(&peer_access, 1, 0));
    WARPVM_CUDA_TRY(cudaDeviceCanAccessPeer(&back, 0, 1));
    WARPVM_CUDA_TRY(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, 1, 0));
  }
  return peer_access != 0 && back != 0 && atomics != 0;
}

class ChannelPeerProducer : public GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(ChannelPeerProducer, OnGpu1ForConsumersOnGpu0IsExact) {
  if (!peer_pair_ready()) GTEST_SKIP() << "needs GPUs 0 and 1 with peer access both ways and native peer atomics";
  const Workload w{2048, 4, 1024};
  channel ch({.buffer_bytes = std::uint64_t{w.groups} * w.group_words * 4,
              .tag_count = w.groups * w.tags_per_group,
              .device = 0,
              .device_producers = true,
              .buffer_device = GetParam()});
  run_with_kernel_producer(ch, 1, w);  // GPU 1 publishes into GPU 0's map over NVLink
  EXPECT_EQ(ch.stats().requests, w.groups);
}

INSTANTIATE_TEST_SUITE_P(BufferIn, ChannelPeerProducer, ::testing::Values(-1, 0, 1), buffer_place);

/// How the consumers of an in-place channel (data read in the producers' buffer) wait.
enum class InPlace { direct, monitor_warp };

/// A channel for run_with_kernel_producer's consumers on GPU 0 (its 256 warps) whose data they
/// read in place, in a buffer on `buffer_device`: direct mode or a monitor warp.
channel in_place_channel(const Workload& w, int buffer_device, InPlace waiting) {
  return channel({.buffer_bytes = std::uint64_t{w.groups} * w.group_words * 4,
                  .tag_count = w.groups * w.tags_per_group,
                  .max_warps = 32 * 256 / 32,
                  .device = 0,
                  .device_producers = true,
                  .buffer_device = buffer_device,
                  .direct = waiting == InPlace::direct,
                  .monitor_warp = waiting == InPlace::monitor_warp});
}

TEST_F(Channel, DirectModeWithAProducerOnTheConsumersGpuIsExactAcrossAReset) {
  const Workload w{2048, 4, 1024};  // 8192 tags of 1 KiB, four per acquire
  channel ch = in_place_channel(w, 0, InPlace::direct);
  run_with_kernel_producer(ch, 0, w);
  ch.reset();  // clears the map; the second run's fresh data lands where the first run's was
  run_with_kernel_producer(ch, 0, w);
  EXPECT_EQ(ch.stats().direct_acquires, 2u * w.groups);
}

class ChannelDirectPeer : public GpuTest, public ::testing::WithParamInterface<int> {};

// Buffer on GPU 1: the producer writes locally and the consumers read it over NVLink (as in
// stencil2gpu); on GPU 0: the producer writes over NVLink and the consumers read locally.
TEST_P(ChannelDirectPeer, ProducerOnGpu1ConsumersOnGpu0IsExactAcrossAReset) {
  if (!peer_pair_ready()) GTEST_SKIP() << "needs GPUs 0 and 1 with peer access both ways and native peer atomics";
  const Workload w{2048, 4, 1024};
  channel ch = in_place_channel(w, GetParam(), InPlace::direct);
  run_with_kernel_producer(ch, 1, w);
  ch.reset();
  run_with_kernel_producer(ch, 1, w);
  EXPECT_EQ(ch.stats().direct_acquires, 2u * w.groups);
}

INSTANTIATE_TEST_SUITE_P(BufferIn, ChannelDirectPeer, ::testing::Values(0, 1), buffer_place);

TEST_F(Channel, DirectModeRefusesOtherBuffersAndHostPublishing) {
  EXPECT_THROW(channel({.buffer_bytes = 4096, .tag_count = 100, .direct = true}), Error);  // no device map
  EXPECT_THROW(channel({.buffer_bytes = 4096, .tag_count = 100, .device_producers = true, .direct = true}),
               Error);  // the buffer in pinned host memory
  channel ch({.buffer_bytes = 4096, .tag_count = 100, .device_producers = true, .buffer_device = 0, .direct = true});
  const std::uint32_t word = 7;
  EXPECT_THROW(ch.publish(0, 1), Error);
  EXPECT_THROW(ch.publish(0, 1, 0, &word, sizeof(word)), Error);
  const ChannelStats stats = ch.stats();
  EXPECT_EQ(stats.direct_acquires, 0u);
  EXPECT_EQ(stats.requests, 0u);
}

TEST_F(Channel, MonitorWarpWithAProducerOnTheConsumersGpuIsExactAcrossAReset) {
  const Workload w{2048, 4, 1024};  // 8192 tags of 1 KiB, four per acquire: requests wait across tags
  channel ch = in_place_channel(w, 0, InPlace::monitor_warp);
  // The lists in device memory both times: the first run leaves its copy of the map there, which
  // reset() must clear (the second run's data lands where the first's was, under fresh tags).
  // The peer tests keep them in shared memory.
  run_with_kernel_producer(ch, 0, w, false);
  ch.reset();
  run_with_kernel_producer(ch, 0, w, false);
  const ChannelStats stats = ch.stats();
  EXPECT_EQ(stats.requests, 2u * w.groups);
  EXPECT_EQ(stats.direct_acquires, 0u);
}

class ChannelMonitorWarpPeer : public GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(ChannelMonitorWarpPeer, ProducerOnGpu1ConsumersOnGpu0IsExactAcrossAReset) {
  if (!peer_pair_ready()) GTEST_SKIP() << "needs GPUs 0 and 1 with peer access both ways and native peer atomics";
  const Workload w{2048, 4, 1024};
  channel ch = in_place_channel(w, GetParam(), InPlace::monitor_warp);
  run_with_kernel_producer(ch, 1, w);
  ch.reset();
  run_with_kernel_producer(ch, 1, w);
  EXPECT_EQ(ch.stats().requests, 2u * w.groups);
}

INSTANTIATE_TEST_SUITE_P(BufferIn, ChannelMonitorWarpPeer, ::testing::Values(0, 1), buffer_place);

TEST_F(Channel, MonitorWarpRefusesOtherBuffersDirectModeAndHostPublishing) {
  EXPECT_THROW(channel({.buffer_bytes = 4096, .tag_count = 100, .monitor_warp = true}), Error);  // no device map
  EXPECT_THROW(channel({.buffer_bytes = 4096, .tag_count = 100, .device_producers = true, .monitor_warp = true}),
               Error);  // the buffer in pinned host memory
  EXPECT_THROW(channel({.buffer_bytes = 4096,
                        .tag_count = 100,
                        .device_producers = true,
                        .buffer_device = 0,
                        .direct = true,
                        .monitor_warp = true}),
               Error);
  channel ch({.buffer_bytes = 4096, .tag_count = 100, .device_producers = true, .buffer_device = 0, .monitor_warp = true});
  const std::uint32_t word = 7;
  EXPECT_THROW(ch.publish(0, 1), Error);
  EXPECT_THROW(ch.publish(0, 1, 0, &word, sizeof(word)), Error);
  EXPECT_EQ(ch.stats().requests, 0u);
}

/// Publishes `first_tag`, `count` tags from one thread; whether it was accepted goes to *accepted.
__global__ void publish_once(channel_producer producer, std::uint32_t first_tag, std::uint32_t count, int* accepted) {
  *accepted = producer.publish(first_tag, count) ? 1 : 0;
}

TEST_F(Channel, ProducerHandleRefusesBadUse) {
  channel host_only({.buffer_bytes = 4096, .tag_count = 100});
  EXPECT_THROW((void)host_only.producer(), Error);  // made without device_producers
  channel ch({.buffer_bytes = 4096, .tag_count = 100, .device_producers = true});
  EXPECT_THROW((void)ch.producer(device_count()), Error);
  DeviceVector<int> accepted(1);
  auto publish = [&](std::uint32_t first_tag, std::uint32_t count) {
    publish_once<<<1, 1>>>(ch.producer(), first_tag, count, accepted.get());
    WARPVM_CUDA_TRY(cudaGetLastError());
    WARPVM_CUDA_TRY(cudaDeviceSynchronize());
    return accepted.to_host()[0] == 1;
  };
  EXPECT_FALSE(publish(99, 2));  // past the last tag
  EXPECT_FALSE(publish(100, 1));
  EXPECT_TRUE(publish(99, 1));
  EXPECT_TRUE(publish(0, 99));
}

}  // namespace
}  // namespace warpvm::testing

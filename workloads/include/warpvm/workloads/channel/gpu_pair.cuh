#pragma once
// The host side of warpvm-channel-bench's GPU-to-GPU workloads on GPUs 0 and 1: whether the pair
// and each mode can run there, GpuPair (what every workload's run needs on both GPUs: blocks,
// streams, events, stamps, the baselines' flags and the channels), and PairRunner, the base of
// each workload's runner (pair_runners.cuh). The records are the bench's.

#include "warpvm/workloads/channel/peer_exchange.cuh"
#include "warpvm/workloads/channel/run_support.cuh"
#include "warpvm/channel.hpp"
#include "warpvm/detail/core/cuda_buffers.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace warpvm::workloads {

inline constexpr int pair_gpus = 2;
/// The host gives up on a run after this long: past the kernels' own watchdogs (10 s for the
/// spins, the channel's), which only atomic_wait's libcu++ wait does not have.
inline constexpr double pair_host_deadline_s = 60;

/// Why GPUs 0 and 1 cannot run a GPU-to-GPU workload at all (empty: they can).
inline std::string pair_gpus_missing() {
  int visible = 0;
  expect_cuda(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  if (visible < pair_gpus) return "needs two GPUs, " + std::to_string(visible) + " visible";
  int there = 0, back = 0;
  expect_cuda(cudaDeviceCanAccessPeer(&there, 0, 1), "cudaDeviceCanAccessPeer");
  expect_cuda(cudaDeviceCanAccessPeer(&back, 1, 0), "cudaDeviceCanAccessPeer");
  if (there == 0 || back == 0) return "GPUs 0 and 1 have no peer access both ways";
  return {};
}

/// Why `mode` cannot run on GPUs 0 and 1 (empty: it can).
inline std::string pair_mode_missing(WaitMode mode) {
  for (int g = 0; g < pair_gpus; ++g) {
    int supported = 0;
    if (uses_channel(mode)) {  // kernels OR their tags into the other GPU's map
      expect_cuda(cudaDeviceGetP2PAttribute(&supported, cudaDevP2PAttrNativeAtomicSupported, g, 1 - g),
                  "cudaDeviceGetP2PAttribute");
      if (supported == 0) return "no native peer atomics from GPU " + std::to_string(g);
    } else if (mode == WaitMode::naive) {  // both GPUs use the managed flags while kernels run
      expect_cuda(cudaDeviceGetAttribute(&supported, cudaDevAttrConcurrentManagedAccess, g), "cudaDeviceGetAttribute");
      if (supported == 0) return "GPU " + std::to_string(g) + " has no concurrent managed access";
    }
  }
  return {};
}

/// Fills `bytes` of GPU `device`'s memory with 0xff: data left by the previous run would hold the
/// same values, so one read before its producer wrote it shows as a wrong result in every run.
inline void poison(int device, void* data, std::uint64_t bytes) {
  const detail::DeviceGuard on(device);
  expect_cuda(cudaMemset(data, 0xff, bytes), "cudaMemset poison");
}

/// What the GPU-to-GPU workloads share on GPUs 0 and 1, kept across modes and repeats: per GPU
/// the block count of its persistent kernel (all resident at once), a stream and events, stamps,
/// the baselines' flags and, for the channel modes that run, the channels whose consumers are
/// on it, one with the host monitor (`channel`) and one in direct mode (`channel_direct`). GPU
/// g's channels have their buffer on the other GPU (channel_direct with the buffer on the
/// consumer: on g), whose kernel writes it and publishes into g's device map.
class GpuPair {
 public:
  /// What a workload's kernel needs.
  struct Shape {
    const char* workload;
    const void* kernel;                 ///< launched with block_threads per block
    std::uint32_t shared_bytes;         ///< its dynamic shared memory per block
    std::uint32_t max_blocks;           ///< per GPU; fewer when fewer fit at once
    std::uint32_t iterations;           ///< one tag per iteration and direction; waits per warp at most
    std::uint64_t bytes_per_iteration;  ///< what one GPU sends the other per iteration: 8 warps' windows
    bool every_warp_waits;              ///< stamps: wait rows for every warp, or for one block's 8
    bool direct_buffer_on_consumer;     ///< channel_direct's buffers: the consumers' GPU, or the producers'
    /// `channel`'s staging, in windows (bytes_per_iteration / 8): 0 for four iterations' worth
    /// (an exchange block's 8 warps); more where many blocks acquire at once
    std::uint32_t staging_windows = 0;
  };

  GpuPair(const Shape& shape, const std::vector<WaitMode>& modes) : shape_(shape) {
    const bool monitor_warp = std::find(modes.begin(), modes.end(), WaitMode::channel_warp) != modes.end();
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      gpu.device = g;
      const detail::DeviceGuard on(g);
      detail::enable_peer_access(g, 1 - g, "warpvm-channel-bench");  // stores into the other GPU's memory
      int sms = 0, per_sm = 0;
      expect_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g), "cudaDeviceGetAttribute");
      // also loads the kernel on this GPU before the other GPU's waits on it (docs/channels.md)
      expect_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, shape.kernel, static_cast<int>(block_threads),
                                                                shape.shared_bytes),
                  "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      // Blocks wait for each other and for the other GPU: all must be resident at once.
      gpu.blocks = std::min(shape.max_blocks, static_cast<std::uint32_t>(per_sm * sms));
      // channel_warp's monitor warp runs beside the persistent kernel: where that fills every
      // SM, one block fewer leaves it room (in every mode of the run, to compare like with like).
      if (monitor_warp && gpu.blocks == static_cast<std::uint32_t>(per_sm * sms)) --gpu.blocks;
      gpu.monitor_shared_max = monitor_shared_room(g, shape, per_sm);
      cudaFuncAttributes loaded{};  // loads the monitor kernel before any kernel waits (lazy loading)
      expect_cuda(cudaFuncGetAttributes(&loaded, pair_monitor_kernel), "cudaFuncGetAttributes");
      if (gpu.blocks == 0)
        throw std::runtime_error(std::string(shape.workload) + ": the kernel does not fit on GPU " + std::to_string(g));
      expect_cuda(cudaMalloc(&gpu.published, 4), "cudaMalloc peer flag");
      expect_cuda(cudaMalloc(&gpu.blocks_done, sizeof(unsigned)), "cudaMalloc blocks done");
      expect_cuda(cudaStreamCreateWithFlags(&gpu.monitor_stream, cudaStreamNonBlocking), "cudaStreamCreate");
      const std::uint64_t warps = std::uint64_t{gpu.blocks} * block_warps;
      gpu.stamps = std::make_unique<DeviceStamps>(warps, shape.every_warp_waits ? warps : block_warps, shape.iterations);
      expect_cuda(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      expect_cuda(cudaEventCreate(&gpu.begin), "cudaEventCreate");
      expect_cuda(cudaEventCreate(&gpu.end), "cudaEventCreate");
      void* managed = nullptr;  // naive: one allocation each
      expect_cuda(cudaMallocManaged(&managed, sizeof(std::uint32_t)), "cudaMallocManaged");
      gpu.managed_published.reset(static_cast<std::uint32_t*>(managed));
    }
    const std::uint64_t window_bytes = shape.bytes_per_iteration / block_warps;
    for (const WaitMode mode : modes) {
      if (!uses_channel(mode)) continue;
      const int kind = channel_kind(mode);
      for (int g = 0; g < pair_gpus; ++g)
        gpus_[g].ch[kind] = std::make_unique<channel>(ChannelConfig{
            .buffer_bytes = std::uint64_t{shape.iterations} * shape.bytes_per_iteration,  // a row per iteration
            .tag_count = shape.iterations,
            .staging_page_bytes = 4096,
            .staging_pages = static_cast<std::uint32_t>((shape.staging_windows != 0 ? shape.staging_windows : 4 * block_warps) *
                                                        ((window_bytes + 4095) / 4096)),
            .max_warps = gpus_[g].blocks * block_warps,
            .watchdog_seconds = static_cast<double>(peer_watchdog_ns) / 1e9,
            .device = g,
            .device_producers = true,
            .buffer_device = reads_in_place(mode) && shape.direct_buffer_on_consumer ? g : 1 - g,
            .direct = mode == WaitMode::channel_direct,
            .monitor_warp = mode == WaitMode::channel_warp});
      for (int g = 0; g < pair_gpus; ++g) gpus_[g].to_neighbour[kind] = gpus_[1 - g].ch[kind]->producer(g);
    }
  }
  ~GpuPair() {
    for (Gpu& gpu : gpus_) {
      for (auto& ch : gpu.ch) ch.reset();  // the monitors first: they copy from the other GPU's memory
      const detail::DeviceGuard on(gpu.device);
      cudaFree(gpu.published);
      cudaFree(gpu.blocks_done);
      cudaStreamDestroy(gpu.monitor_stream);
      gpu.stamps.reset();
      cudaEventDestroy(gpu.begin);
      cudaEventDestroy(gpu.end);
      cudaStreamDestroy(gpu.stream);
    }
  }
  GpuPair(const GpuPair&) = delete;
  GpuPair& operator=(const GpuPair&) = delete;

  [[nodiscard]] const Shape& shape() const { return shape_; }
  [[nodiscard]] std::uint32_t blocks(int g) const { return gpus_[g].blocks; }
  [[nodiscard]] Stamps stamps(int g) const { return gpus_[g].stamps->view(); }

  /// Before a run in `mode`, both GPUs idle (the previous run ended on both): the mode's channels
  /// reset and their buffers poisoned, the flags cleared, the stamps cleared.
  void prepare(WaitMode mode) {
    mode_ = mode;
    for (Gpu& gpu : gpus_) {
      if (uses_channel(mode)) {
        channel& ch = *gpu.ch[channel_kind(mode)];
        ch.reset();
        poison(ch.config().buffer_device, ch.buffer().data(), ch.buffer().size());
      }
      const detail::DeviceGuard on(gpu.device);
      expect_cuda(cudaMemset(gpu.published, 0, 4), "cudaMemset peer flag");
      expect_cuda(cudaMemset(gpu.blocks_done, 0, sizeof(unsigned)), "cudaMemset blocks done");
      gpu.stamps->clear();
      *gpu.managed_published = 0;
    }
  }

  /// Until both GPUs finished all they were given (a run's inputs, before its kernels).
  void wait_idle() const {
    for (const Gpu& gpu : gpus_) {
      const detail::DeviceGuard on(gpu.device);
      expect_cuda(cudaDeviceSynchronize(), "sync");
    }
  }

  /// GPU g's side of the exchange in `mode`.
  [[nodiscard]] PeerExchange exchange(int g, WaitMode mode) const {
    const Gpu& gpu = gpus_[g];
    const Gpu& other = gpus_[1 - g];
    const bool channel_mode = uses_channel(mode), naive = mode == WaitMode::naive;
    const int kind = channel_kind(mode);
    return {mode, channel_mode ? gpu.ch[kind]->device() : channel_handle{},
            channel_mode ? gpu.to_neighbour[kind] : channel_producer{},
            naive ? gpu.managed_published.get() : gpu.published, naive ? other.managed_published.get() : other.published,
            gpu.blocks_done};
  }

  /// Launches GPU g's kernel (`launch` on the stream it is given) between its events.
  void launch(int g, const std::function<void(cudaStream_t)>& launch) {
    Gpu& gpu = gpus_[g];
    const detail::DeviceGuard on(gpu.device);
    // channel_warp: the monitor warp on its own stream, until the kernel's blocks all ended;
    // first, so that it takes its SM's room (its lists in shared memory, up to ~100 KiB) before
    // a persistent kernel fills every SM. The workload's kernels have run before (the bench's measure_gpu_pair).
    if (mode_ == WaitMode::channel_warp) launch_monitor(gpu);
    expect_cuda(cudaEventRecord(gpu.begin, gpu.stream), "cudaEventRecord");
    launch(gpu.stream);
    expect_cuda(cudaGetLastError(), (std::string(shape_.workload) + " launch").c_str());
    expect_cuda(cudaEventRecord(gpu.end, gpu.stream), "cudaEventRecord");
  }

  /// Once both kernels ended: the longer of their event times, in seconds. Raises a kernel's or
  /// (channel modes) a channel's device failure, with its message.
  double finish(WaitMode mode) {
    wait_for_kernels();
    if (uses_channel(mode))
      for (Gpu& gpu : gpus_) gpu.ch[channel_kind(mode)]->synchronize();
    double seconds = 0;
    for (Gpu& gpu : gpus_) {
      const detail::DeviceGuard on(gpu.device);
      expect_cuda(cudaEventSynchronize(gpu.end), (std::string(shape_.workload) + " kernel").c_str());
      float ms = 0;
      expect_cuda(cudaEventElapsedTime(&ms, gpu.begin, gpu.end), "cudaEventElapsedTime");
      seconds = std::max(seconds, ms / 1e3);
    }
    return seconds;
  }

  /// The last run's warp timelines, GPU 0's then GPU 1's; `row_of(g, warp)`: the stamps' wait
  /// row of GPU g's global warp (none past the rows it has).
  [[nodiscard]] std::vector<WarpTimeline> timelines(const std::function<std::uint64_t(int, std::uint64_t)>& row_of) const {
    std::vector<WarpTimeline> timelines;
    for (const Gpu& gpu : gpus_)
      for (WarpTimeline& t : gpu.stamps->read(std::uint64_t{gpu.blocks} * block_warps,
                                              [&](std::uint64_t w) { return row_of(gpu.device, w); })) {
        t.sm += static_cast<std::uint32_t>(gpu.device) << 16;  // set apart from the other GPU's (wait_metrics groups by SM)
        timelines.push_back(std::move(t));
      }
    return timelines;
  }

  /// finish(), then the run's timelines (`row_of` as for timelines()) and their waiting metrics.
  RunTiming finish_timed(WaitMode mode, const std::function<std::uint64_t(int, std::uint64_t)>& row_of) {
    RunTiming t;
    t.seconds = finish(mode);
    t.timelines = timelines(row_of);
    t.waits = wait_metrics(t.timelines);
    return t;
  }

  /// Every channel's counters, summed (one mode runs at a time, so a difference is that mode's).
  [[nodiscard]] ChannelStats channel_stats() const {
    ChannelStats sum{};
    for (const Gpu& gpu : gpus_)
      for (const auto& ch : gpu.ch)
        if (ch) add_served(sum, ChannelStats{}, ch->stats());
    return sum;
  }

 private:
  struct Gpu {
    int device = 0;
    std::uint32_t blocks = 0;
    std::uint32_t* published = nullptr;  ///< peer_flag, atomic_wait
    unsigned* blocks_done = nullptr;     ///< channel_warp: the kernel's blocks that ended
    cudaStream_t monitor_stream = nullptr;  ///< channel_warp: the monitor warp's kernel
    std::size_t monitor_shared_max = 0;  ///< channel_warp: the monitor's lists in shared memory if they fit in this
    detail::device_ptr<std::uint32_t> managed_published;  ///< naive: the flag this GPU polls (managed memory)
    std::unique_ptr<DeviceStamps> stamps;
    cudaStream_t stream = nullptr;
    cudaEvent_t begin = nullptr, end = nullptr;
    /// Consumers on this GPU (buffer: see the class); by channel_kind: host monitor, direct
    /// mode, monitor warp.
    std::unique_ptr<channel> ch[3];
    channel_producer to_neighbour[3];  ///< the other GPU's channels, for this GPU's kernel
  };

  /// channel_warp: the shared memory the monitor's block may take on GPU g so that its SM still
  /// holds `per_sm` - 1 of the workload's blocks (the grid leaves one block's room when it fills
  /// every SM): more would leave a persistent block without a place, and the grid would wait for
  /// it forever.
  static std::size_t monitor_shared_room(int g, const Shape& shape, int per_sm) {
    int per_sm_bytes = 0, reserved = 0, optin = 0;
    expect_cuda(cudaDeviceGetAttribute(&per_sm_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, g), "cudaDeviceGetAttribute");
    expect_cuda(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, g), "cudaDeviceGetAttribute");
    expect_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, g), "cudaDeviceGetAttribute");
    cudaFuncAttributes kernel{};
    expect_cuda(cudaFuncGetAttributes(&kernel, shape.kernel), "cudaFuncGetAttributes");
    const std::int64_t workload = std::int64_t{std::max(per_sm - 1, 0)} *
                                  (static_cast<std::int64_t>(kernel.sharedSizeBytes) + shape.shared_bytes + reserved);
    const std::int64_t room = std::int64_t{per_sm_bytes} - workload - reserved;
    return static_cast<std::size_t>(std::clamp<std::int64_t>(room, 0, optin));
  }

  /// channel_warp: GPU `gpu`'s monitor warp, on its own stream, until the workload kernel's blocks
  /// have all ended; its lists in shared memory when they fit.
  void launch_monitor(const Gpu& gpu) const {
    const channel& ch = *gpu.ch[channel_kind(WaitMode::channel_warp)];
    const bool in_shared = ch.monitor_scratch_bytes() <= gpu.monitor_shared_max;
    const std::size_t scratch = in_shared ? ch.monitor_scratch_bytes() : 0;
    expect_cuda(cudaFuncSetAttribute(pair_monitor_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(scratch)),
                "cudaFuncSetAttribute");
    pair_monitor_kernel<<<1, 32, scratch, gpu.monitor_stream>>>(ch.device(), gpu.blocks_done, gpu.blocks, in_shared);
    expect_cuda(cudaGetLastError(), "monitor warp launch");
  }

  /// Index into Gpu::ch of a channel mode.
  static int channel_kind(WaitMode mode) {
    return mode == WaitMode::channel_direct ? 1 : mode == WaitMode::channel_warp ? 2 : 0;
  }
  /// Whether the mode's consumers read the channel's buffer in place (its place: Shape).
  static bool reads_in_place(WaitMode mode) {
    return mode == WaitMode::channel_direct || mode == WaitMode::channel_warp;
  }
  WaitMode mode_ = WaitMode::channel;  ///< the mode prepared last

  /// Until both kernels ended, failed or not (the caller's checks report a failure): when one
  /// fails, the other stops at its watchdog. Past the deadline a kernel may spin forever, and
  /// freeing memory would wait for it, so the process ends at once.
  void wait_for_kernels() const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(pair_host_deadline_s);
    for (const Gpu& gpu : gpus_) {
      while (cudaEventQuery(gpu.end) == cudaErrorNotReady) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::fprintf(stderr, "warpvm-channel-bench: %s: GPU %d's kernel still runs after %.0f s; giving up\n",
                       shape_.workload, gpu.device, pair_host_deadline_s);
          std::_Exit(1);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }

  Shape shape_;
  Gpu gpus_[pair_gpus];
};

/// Drops each GPU's buffers (device_ptr members of `Gpu`) with that GPU current.
template <class Gpu>
void free_on_their_gpus(Gpu (&gpus)[pair_gpus]) {
  for (int g = 0; g < pair_gpus; ++g) {
    const detail::DeviceGuard on(g);
    gpus[g] = {};
  }
}

/// What a GPU-to-GPU workload's record says of it besides the timings.
struct PairDescription {
  std::uint64_t dataset_bytes = 0;  ///< the workload's data
  std::uint64_t useful_bytes = 0;   ///< what the GPUs exchange in a run (also the bytes moved)
  Fields fields;
};

/// A GPU-to-GPU workload on a GpuPair.
class PairWorkload {
 public:
  virtual ~PairWorkload() = default;
  /// One run in `mode` on both GPUs, checked; `seconds` is the longer of the two kernels' event times.
  virtual RunTiming run(WaitMode mode) = 0;
  [[nodiscard]] virtual const GpuPair& gpus() const = 0;
  /// The record's sizes and workload-specific fields.
  [[nodiscard]] virtual PairDescription describe() const = 0;
  /// Exchanges (tags per direction) the last run made: `us_per_iteration` is per exchange.
  [[nodiscard]] virtual std::uint32_t exchanges_run() const { return gpus().shape().iterations; }
};

/// What a workload with per-GPU buffers `Buffers` (device_ptr members) keeps: its GpuPair and the
/// buffers, dropped in that order (the channels and their monitor threads first, while nothing
/// they might touch is gone), each GPU's buffers with that GPU current.
template <class Buffers>
class PairRunner : public PairWorkload {
 public:
  ~PairRunner() override {
    pair_.reset();
    free_on_their_gpus(gpus_);
  }
  PairRunner(const PairRunner&) = delete;
  PairRunner& operator=(const PairRunner&) = delete;
  [[nodiscard]] const GpuPair& gpus() const override { return *pair_; }

 protected:
  using Gpu = Buffers;
  PairRunner() = default;
  std::unique_ptr<GpuPair> pair_;
  Buffers gpus_[pair_gpus];
};

}  // namespace warpvm::workloads

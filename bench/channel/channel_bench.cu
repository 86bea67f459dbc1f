// warpvm-channel-bench: producer/consumer workloads of issue #7, CPU to GPU and GPU to GPU, each
// checked against a host reference with fresh random inputs (--seed to repeat one):
//
//   tiles  a host thread publishes N image tiles, one every `interval` microseconds; consumer
//          warps blur each tile (3x3 box sum) into device memory
//   cg     conjugate gradient, CPU and GPU alternating every iteration (channel_workloads.cuh)
//   halo   a 3D cube whose six face halos the host produces every iteration (channel_workloads.cuh)
//   stencil2gpu  GPU to GPU: a 2D stencil on a grid split between GPUs 0 and 1, each GPU producing
//          its boundary row for the other every iteration (stencil2gpu.cuh; its own runner
//          below, with the modes channel, channel_direct, channel_warp, peer_flag, naive and atomic_wait)
//   kmeans2gpu  GPU to GPU: k-means (integer points, 4 dimensions) over points split between GPUs 0
//          and 1, each GPU producing its per-centroid partial sums for the other every iteration
//          (kmeans2gpu.cuh; a runner on the same GpuPair as stencil2gpu, the same modes)
//   gemm2gpu  GPU to GPU: C = (A B) D, each GPU producing its rows of T = A B panel by panel and
//          streaming each panel to the other, both consuming all of T (gemm2gpu.cuh; same modes)
//   bfs2gpu  GPU to GPU: BFS over an R-MAT graph whose vertices are split between the GPUs, each
//          sending the other a bitmap of the other's vertices it reached every level (bfs2gpu.cuh)
//   bitonic2gpu  GPU to GPU: the last merge of a bitonic sort across the GPUs, each streaming its
//          sorted half to the other in chunks, then merging its bitonic result (bitonic2gpu.cuh)
//   pingpong2gpu  GPU to GPU: one block per GPU handing a 128-byte message back and forth: the
//          round trip of each mode, with nothing to hide it (pingpong2gpu.cuh)
//
// In every CPU-to-GPU kernel, compute blocks run independent work (an integer hash chain) next to the
// consumer blocks, so there is something to hide waiting behind. Four ways to meet the data:
//
//   channel       warpvm::channel: the warp posts a request and parks on a device word; the
//                 monitor thread copies the data into staging and wakes it
//   pinned_flag   lane 0 of each consumer warp spins on per-tag flags in pinned host memory
//                 (an acquire load over PCIe per poll), then the warp copies the data from pinned
//                 memory into device memory
//   naive         the paper's Algorithm 1: per block, __syncthreads, thread 0 spins on the flags
//                 in pinned host memory, __syncthreads, then the data is copied from pinned
//                 memory. The paper polls with atomicAdd(&flag, 0) on managed memory; on the lent
//                 H200 (no host-native atomics) a device atomicAdd on pinned host memory never saw
//                 the host's store (the kernel hung), so thread 0 polls with a system-scope
//                 acquire load instead: the same spin, one PCIe read each
//   atomic_wait   lane 0 calls cuda::atomic_ref<uint32_t, thread_scope_system>::wait(0) on each
//                 flag (libcu++'s device wait: loads with an exponential nanosleep backoff)
//
// GPU to GPU, peer_flag replaces pinned_flag: the producing kernel stores its row into the other
// GPU's memory over NVLink, then a flag there, on which lane 0 of each consumer warp spins; and
// channel_direct is the channel in direct mode: consumer warps poll the device availability map
// in their own GPU's memory and read the row in place (by default their own GPU's memory, which
// the producer's stores fill over NVLink), no host monitor involved; channel_warp is the channel
// with a monitor warp: consumer warps post requests and park, and a one-warp kernel beside the
// workload's polls the map and wakes them (data in place, as channel_direct).
//
// JSON Lines (bench/micro's Recorder), one record per workload, mode and consumer count; the
// metrics (overlap_efficiency, wait_share, monitor shares) are defined in docs/channels.md.

#include "harness.cuh"
#include "warpvm/workloads/channel/bfs2gpu.cuh"
#include "warpvm/workloads/channel/bitonic2gpu.cuh"
#include "warpvm/workloads/channel/channel_workloads.cuh"
#include "warpvm/workloads/channel/gemm2gpu.cuh"
#include "warpvm/workloads/channel/kmeans2gpu.cuh"
#include "warpvm/workloads/channel/pingpong2gpu.cuh"
#include "warpvm/workloads/channel/stencil2gpu.cuh"
#include "cli.hpp"
#include "warpvm/workloads/channel/overlap_metric.hpp"
#include "warpvm/workloads/channel/timeline_csv.hpp"

#include "warpvm/channel.hpp"
#include "warpvm/detail/core/cuda_buffers.hpp"
#include "warpvm/workloads/graph/rmat.hpp"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>

namespace warpvm::bench {
namespace {

using workloads::WarpTimeline;
using workloads::WaitMetrics;
using workloads::wait_metrics;
using workloads::timeline_csv_header;
using workloads::write_timeline_csv;

using workloads::block_threads;
using workloads::block_warps;
using workloads::WaitMode;

constexpr WaitMode all_modes[] = {WaitMode::channel, WaitMode::pinned_flag, WaitMode::naive, WaitMode::atomic_wait};

const char* mode_name(WaitMode m) {
  switch (m) {
    case WaitMode::channel: return "channel";
    case WaitMode::pinned_flag: return "pinned_flag";
    case WaitMode::naive: return "naive";
    case WaitMode::atomic_wait: return "atomic_wait";
    case WaitMode::peer_flag: return "peer_flag";
    case WaitMode::channel_direct: return "channel_direct";
    case WaitMode::channel_warp: return "channel_warp";
  }
  return "?";
}

struct Setup {
  std::uint64_t seed = 0;
  std::uint32_t compute_blocks = 0;      ///< 0: two per SM
  std::uint32_t compute_iters = 500000;  ///< near the tile stream's own time at the defaults
  // tiles
  std::uint32_t tiles = 4096;
  std::uint32_t side = 64;               ///< a tile is side x side uint32 pixels
  double interval_us = 2.0;              ///< the producer publishes a tile every this many microseconds
  std::uint32_t consumer_threads = 0;    ///< 0: one block of 256 per SM
  // cg
  std::uint32_t cg_rows = 1u << 17;
  std::uint32_t cg_rows_per_warp = 256;
  std::uint32_t cg_iterations = 50;
  // halo
  std::uint32_t halo_side = 64;
  std::uint32_t halo_iterations = 100;
  // stencil2gpu
  std::uint32_t stencil_side = 4096;
  std::uint32_t stencil_iterations = 300;
  /// channel_direct: the buffers on the consuming GPU (the producer's row stores cross NVLink,
  /// the consumers read locally, peer_flag's traffic; measured faster, docs/channels.md) instead
  /// of the producing one (as `channel`)
  bool stencil_direct_buffer_on_consumer = true;
  // kmeans2gpu
  std::uint32_t kmeans_points = 1u << 22;  ///< both GPUs' together, half each
  std::uint32_t kmeans_k = 64;
  std::uint32_t kmeans_iterations = 30;
  bool kmeans_direct_buffer_on_consumer = true;  ///< channel_direct, as stencil_direct_buffer_on_consumer
  // gemm2gpu
  std::uint32_t gemm_side = 2048;
  bool gemm_direct_buffer_on_consumer = true;
  // bfs2gpu
  std::uint32_t bfs_scale = 21;
  std::uint32_t bfs_edge_factor = 16;
  std::uint32_t bfs_max_levels = 64;
  bool bfs_direct_buffer_on_consumer = true;
  // bitonic2gpu
  std::uint32_t bitonic_keys = 1u << 24;  ///< both GPUs' together, half each
  bool bitonic_direct_buffer_on_consumer = true;
  // pingpong2gpu
  std::uint32_t pingpong_iterations = 4096;
  /// Non-empty: every mode's last measured run's warp timelines are appended to this CSV
  /// (write_timeline_csv, docs/channels.md "Metrics").
  std::string timeline_csv;
  int monitor_cpu = -1;   ///< ChannelConfig::monitor_cpu of the CPU-to-GPU workloads' channel
  int producer_cpu = -1;  ///< the host producer's CPU while it produces (-1: left to the OS)
};

/// --producer-cpu: pins the calling thread to `cpu` (-1: nothing) until destroyed, then gives it
/// back the CPUs it had. Around the producer only: threads created meanwhile (a channel's
/// monitor) would inherit the pin.
class PinnedToCpu {
 public:
  explicit PinnedToCpu(int cpu) {
    if (cpu < 0) return;
    check_affinity(pthread_getaffinity_np(pthread_self(), sizeof(before_), &before_), "pthread_getaffinity_np");
    cpu_set_t only;
    CPU_ZERO(&only);
    CPU_SET(cpu, &only);
    check_affinity(pthread_setaffinity_np(pthread_self(), sizeof(only), &only), "--producer-cpu");
    pinned_ = true;
  }
  ~PinnedToCpu() {
    if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof(before_), &before_);
  }
  PinnedToCpu(const PinnedToCpu&) = delete;
  PinnedToCpu& operator=(const PinnedToCpu&) = delete;

 private:
  static void check_affinity(int failed, const char* what) {
    if (failed != 0) throw std::runtime_error(std::string(what) + ": " + std::strerror(failed));
  }
  bool pinned_ = false;
  cpu_set_t before_{};
};

/// What a workload adds to the shared harness: its consumer kernel, its producer, its check.
class Workload {
 public:
  virtual ~Workload() = default;
  [[nodiscard]] virtual const char* name() const = 0;
  [[nodiscard]] virtual std::uint32_t consumer_blocks(WaitMode mode) const = 0;
  [[nodiscard]] virtual std::uint32_t consumer_warps(WaitMode mode) const = 0;  ///< that consume
  [[nodiscard]] virtual std::uint32_t waits_per_warp(WaitMode mode) const = 0;
  [[nodiscard]] virtual std::uint32_t window_bytes() const = 0;  ///< the most one warp meets at once
  [[nodiscard]] virtual std::uint64_t buffer_bytes() const = 0;
  [[nodiscard]] virtual std::uint32_t tags() const = 0;
  /// Consumers of every block must be resident at once (they wait for each other).
  virtual void check_resident(std::uint32_t consumer_blocks, int sms) const = 0;
  virtual void prepare() = 0;  ///< before each run: outputs and device-side state reset
  virtual void launch(const workloads::Launch& l, std::uint32_t blocks, cudaStream_t stream) = 0;
  /// The host side of a run: writes `buffer` and calls publish(first_tag, count). `kernel_done`
  /// says whether the kernel has ended (a producer waiting for the GPU gives up then).
  virtual void produce(std::byte* buffer, const std::function<void(std::uint32_t, std::uint32_t)>& publish,
                       const std::function<bool()>& kernel_done) = 0;
  virtual bool verify() = 0;
  virtual void describe(Record& r) const = 0;
};

void check_coresident(const void* kernel, std::uint32_t consumer_blocks, int sms, const char* what) {
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(block_threads), 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (std::uint64_t{consumer_blocks} > std::uint64_t(per_sm) * static_cast<std::uint64_t>(sms))
    throw std::runtime_error(std::string(what) + ": " + std::to_string(consumer_blocks) +
                             " consumer blocks wait for each other but only " + std::to_string(per_sm * sms) +
                             " fit on the GPU at once; use a smaller problem");
}

// ---- tiles ----------------------------------------------------------------------------------

struct TilesKernel {
  std::uint32_t* out;  ///< blurred tiles
  std::uint32_t tiles, side, consumer_warps;
};

/// 3x3 box sum with clamped borders, threads first, first + stride, ... over the pixels.
__device__ void blur(const std::uint32_t* tile, std::uint32_t* out, std::uint32_t side, std::uint32_t first,
                     std::uint32_t stride) {
  for (std::uint32_t p = first; p < side * side; p += stride) {
    const int y = static_cast<int>(p / side), x = static_cast<int>(p % side), s = static_cast<int>(side);
    std::uint32_t sum = 0;
    for (int dy = -1; dy <= 1; ++dy)
      for (int dx = -1; dx <= 1; ++dx) {
        const int yy = min(max(y + dy, 0), s - 1), xx = min(max(x + dx, 0), s - 1);
        sum += tile[yy * s + xx];
      }
    out[p] = sum;
  }
}

__global__ void __launch_bounds__(block_threads) tiles_kernel(workloads::Launch l, TilesKernel t) {
  const std::uint32_t warp = blockIdx.x * block_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t started = detail::global_timer_ns();
  const bool consumer = blockIdx.x < l.consumer_blocks;
  const std::uint32_t pixels = t.side * t.side, bytes = pixels * 4;
  const workloads::Source& s = l.source;
  if (consumer && !l.compute_only) {
    if (s.mode == WaitMode::naive) {  // Algorithm 1: the block is the consumer of a tile
      // the block's warps' scratch, of which it uses the first tile
      auto* scratch = reinterpret_cast<std::uint32_t*>(s.scratch + std::uint64_t{blockIdx.x} * block_warps * s.scratch_bytes);
      for (std::uint32_t tile = blockIdx.x; tile < t.tiles; tile += l.consumer_blocks) {
        const std::uint64_t t0 = detail::global_timer_ns();
        // Its leading barrier also keeps the block's blur of the previous tile before this copy
        // into the same scratch.
        s.stamps.wait(warp, t0, workloads::block_waits_for_thread0([&] { workloads::spin_on_flags(s, tile, 1); }));
        const auto* from = reinterpret_cast<const uint4*>(s.pinned + std::uint64_t{tile} * bytes);
        for (std::uint32_t i = threadIdx.x; i < pixels / 4; i += block_threads) reinterpret_cast<uint4*>(scratch)[i] = from[i];
        __syncthreads();
        blur(scratch, t.out + std::uint64_t{tile} * pixels, t.side, threadIdx.x, block_threads);
      }
    } else {
      for (std::uint32_t tile = warp; warp < t.consumer_warps && tile < t.tiles; tile += t.consumer_warps) {
        workloads::Held held = workloads::meet(s, warp, tile, 1, tile, 1, bytes, std::uint64_t{tile} * bytes);
        blur(reinterpret_cast<const std::uint32_t*>(held.data), t.out + std::uint64_t{tile} * pixels, t.side, lane, 32);
        workloads::finish(held);
      }
    }
  } else if (!consumer && !l.consumers_only) {
    workloads::independent_work(l.compute_iterations, l.compute_out);
  }
  s.stamps.life(warp, started, consumer);
}

class Tiles final : public Workload {
 public:
  Tiles(const Setup& s, int sms) : s_(s) {
    // 64 threads to 1M: warps below consumer_threads / 32 consume (the naive mode's unit is the
    // block, so it runs whole blocks of 256).
    consumer_warps_ = s.consumer_threads != 0 ? std::max(1u, s.consumer_threads / 32) : static_cast<std::uint32_t>(sms) * block_warps;
    tiles_.resize(std::uint64_t{s.tiles} * pixels());
    fill_random(tiles_.data(), tiles_.size(), s.seed);
    reference_.resize(tiles_.size());
    const int side = static_cast<int>(s.side);
    for (std::uint64_t t = 0; t < s.tiles; ++t) {
      const std::uint32_t* in = tiles_.data() + t * pixels();
      for (int y = 0; y < side; ++y)
        for (int x = 0; x < side; ++x) {
          std::uint32_t sum = 0;
          for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx)
              sum += in[std::clamp(y + dy, 0, side - 1) * side + std::clamp(x + dx, 0, side - 1)];
          reference_[t * pixels() + y * side + x] = sum;
        }
    }
    check(cudaMalloc(&out_, buffer_bytes()), "cudaMalloc tiles out");
  }
  ~Tiles() override { cudaFree(out_); }
  Tiles(const Tiles&) = delete;
  Tiles& operator=(const Tiles&) = delete;

  [[nodiscard]] const char* name() const override { return "tiles"; }
  [[nodiscard]] std::uint32_t consumer_blocks(WaitMode) const override {
    return (consumer_warps_ + block_warps - 1) / block_warps;
  }
  [[nodiscard]] std::uint32_t consumer_warps(WaitMode mode) const override {
    return mode == WaitMode::naive ? consumer_blocks(mode) * block_warps : consumer_warps_;
  }
  [[nodiscard]] std::uint32_t waits_per_warp(WaitMode mode) const override {
    const std::uint32_t units = mode == WaitMode::naive ? consumer_blocks(mode) : consumer_warps_;
    return (s_.tiles + units - 1) / units;
  }
  [[nodiscard]] std::uint32_t window_bytes() const override { return static_cast<std::uint32_t>(tile_bytes()); }
  [[nodiscard]] std::uint64_t buffer_bytes() const override { return std::uint64_t{s_.tiles} * tile_bytes(); }
  [[nodiscard]] std::uint32_t tags() const override { return s_.tiles; }
  void check_resident(std::uint32_t, int) const override {}  // consumers never wait for each other
  void prepare() override { check(cudaMemset(out_, 0, buffer_bytes()), "cudaMemset tiles out"); }
  void launch(const workloads::Launch& l, std::uint32_t blocks, cudaStream_t stream) override {
    tiles_kernel<<<blocks, block_threads, 0, stream>>>(l, TilesKernel{out_, s_.tiles, s_.side, consumer_warps_});
  }
  /// Tile t is written and published at start + t * interval.
  void produce(std::byte* buffer, const std::function<void(std::uint32_t, std::uint32_t)>& publish,
               const std::function<bool()>&) override {
    const auto started = std::chrono::steady_clock::now();
    const auto interval = std::chrono::duration<double, std::micro>(s_.interval_us);
    for (std::uint32_t t = 0; t < s_.tiles; ++t) {
      const auto due = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval * t);
      while (std::chrono::steady_clock::now() < due) {
      }
      std::memcpy(buffer + t * tile_bytes(), tiles_.data() + std::uint64_t{t} * pixels(), tile_bytes());
      publish(t, 1);
    }
  }
  bool verify() override {
    std::vector<std::uint32_t> out(reference_.size());
    check(cudaMemcpy(out.data(), out_, out.size() * 4, cudaMemcpyDeviceToHost), "tiles out");
    return out == reference_;
  }
  void describe(Record& r) const override {
    r.extra["tiles"] = s_.tiles;
    r.extra["tile_bytes"] = static_cast<double>(tile_bytes());
    r.extra["interval_us"] = s_.interval_us;
  }

 private:
  [[nodiscard]] std::uint32_t pixels() const { return s_.side * s_.side; }
  [[nodiscard]] std::uint64_t tile_bytes() const { return std::uint64_t{pixels()} * 4; }
  Setup s_;
  std::uint32_t consumer_warps_ = 0;
  std::vector<std::uint32_t> tiles_, reference_;
  std::uint32_t* out_ = nullptr;
};

// ---- cg -------------------------------------------------------------------------------------

class Cg final : public Workload {
 public:
  explicit Cg(const Setup& s) : s_(s), matrix_(workloads::cg_random_matrix(s.cg_rows, s.seed)), b_(s.cg_rows) {
    std::mt19937_64 rng(s.seed ^ 0x5bd1e995u);
    std::uniform_real_distribution<double> value(0.5, 1.5);
    for (double& v : b_) v = value(rng);
    reference_ = workloads::cg_reference(matrix_, b_, s.cg_iterations);
    const std::uint64_t n = s.cg_rows;
    check(cudaMalloc(&diagonal_, n * 8), "cudaMalloc cg diagonal");
    check(cudaMalloc(&band_, n * 8 * workloads::cg_band), "cudaMalloc cg band");
    check(cudaMemcpy(diagonal_, matrix_.diagonal.data(), n * 8, cudaMemcpyHostToDevice), "cg diagonal");
    check(cudaMemcpy(band_, matrix_.band.data(), n * 8 * workloads::cg_band, cudaMemcpyHostToDevice), "cg band");
    check(cudaMalloc(&arrived_, std::uint64_t{s.cg_iterations} * 4), "cudaMalloc cg arrived");
    q_ = std::make_unique<PinnedArray>(n * 8);
    done_ = std::make_unique<PinnedArray>(std::uint64_t{s.cg_iterations} * 4);
  }
  ~Cg() override {
    cudaFree(diagonal_);
    cudaFree(band_);
    cudaFree(arrived_);
  }
  Cg(const Cg&) = delete;
  Cg& operator=(const Cg&) = delete;

  [[nodiscard]] const char* name() const override { return "cg"; }
  [[nodiscard]] std::uint32_t consumer_blocks(WaitMode) const override {
    return s_.cg_rows / s_.cg_rows_per_warp / block_warps;
  }
  [[nodiscard]] std::uint32_t consumer_warps(WaitMode mode) const override { return consumer_blocks(mode) * block_warps; }
  [[nodiscard]] std::uint32_t waits_per_warp(WaitMode) const override { return s_.cg_iterations; }
  [[nodiscard]] std::uint32_t window_bytes() const override { return (s_.cg_rows_per_warp + 2 * workloads::cg_band) * 8; }
  [[nodiscard]] std::uint64_t buffer_bytes() const override {
    return std::uint64_t{s_.cg_iterations} * s_.cg_rows * 8;
  }
  [[nodiscard]] std::uint32_t tags() const override { return s_.cg_iterations; }
  void check_resident(std::uint32_t consumer_blocks, int sms) const override {
    check_coresident(reinterpret_cast<const void*>(&workloads::cg_kernel), consumer_blocks, sms, "cg");
  }
  void prepare() override {
    check(cudaMemset(arrived_, 0, std::uint64_t{s_.cg_iterations} * 4), "cudaMemset cg arrived");
    std::memset(done_->as<void>(), 0, done_->bytes());
    x_.clear();
  }
  void launch(const workloads::Launch& l, std::uint32_t blocks, cudaStream_t stream) override {
    void* q = nullptr;
    void* done = nullptr;
    check(cudaHostGetDevicePointer(&q, q_->as<void>(), 0), "cudaHostGetDevicePointer");
    check(cudaHostGetDevicePointer(&done, done_->as<void>(), 0), "cudaHostGetDevicePointer");
    const workloads::CgKernel c{workloads::CgMatrix{s_.cg_rows, diagonal_, band_}, s_.cg_rows_per_warp, s_.cg_iterations,
                         static_cast<double*>(q), arrived_, static_cast<std::uint32_t*>(done)};
    workloads::cg_kernel<<<blocks, block_threads, 0, stream>>>(l, c);
  }
  /// The CPU's half: publish p, wait for q = A p, update; s_.cg_iterations times.
  void produce(std::byte* buffer, const std::function<void(std::uint32_t, std::uint32_t)>& publish,
               const std::function<bool()>& kernel_done) override {
    const std::uint64_t n = s_.cg_rows;
    workloads::CgState state = workloads::cg_start(b_);
    for (std::uint32_t k = 0; k < s_.cg_iterations; ++k) {
      std::memcpy(buffer + k * n * 8, state.p.data(), n * 8);
      publish(k, 1);
      const std::atomic_ref<std::uint32_t> done(done_->as<std::uint32_t>()[k]);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      for (std::uint32_t polls = 0; done.load(std::memory_order_acquire) != 1u; ++polls) {
        if (polls % 4096 != 0) continue;
        if (kernel_done()) return;  // it failed: synchronize() says why
        if (std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error("cg: the GPU never finished iteration " + std::to_string(k));
      }
      workloads::cg_update(state, q_->as<double>());
    }
    x_ = std::move(state.x);
  }
  bool verify() override {
    error_ = x_.empty() ? 1.0 : workloads::relative_error(x_, reference_);
    return !x_.empty() && error_ <= 1e-9;  // same bits expected; the slack only forgives the host compiler
  }
  void describe(Record& r) const override {
    r.extra["cg_rows"] = s_.cg_rows;
    r.extra["cg_rows_per_warp"] = s_.cg_rows_per_warp;
    r.extra["cg_iterations"] = s_.cg_iterations;
    r.extra["cg_relative_error"] = error_;
  }

 private:
  Setup s_;
  workloads::CgHostMatrix matrix_;
  std::vector<double> b_, reference_, x_;
  double error_ = 0;
  double* diagonal_ = nullptr;
  double* band_ = nullptr;
  std::uint32_t* arrived_ = nullptr;
  std::unique_ptr<PinnedArray> q_, done_;
};

// ---- halo -----------------------------------------------------------------------------------

class Halo final : public Workload {
 public:
  explicit Halo(const Setup& s) : s_(s), salt_(static_cast<std::uint32_t>(s.seed * 0x9e3779b9u)) {
    const std::uint64_t cube = std::uint64_t{s.halo_side} * s.halo_side * s.halo_side;
    initial_.resize(cube);
    fill_random(initial_.data(), cube, s.seed + 1);
    reference_ = workloads::halo_reference(initial_, s.halo_side, s.halo_iterations, salt_);
    check(cudaMalloc(&cells_, 2 * cube * 4), "cudaMalloc halo cells");
    check(cudaMalloc(&progress_, std::uint64_t{s.halo_side} * 4), "cudaMalloc halo progress");
  }
  ~Halo() override {
    cudaFree(cells_);
    cudaFree(progress_);
  }
  Halo(const Halo&) = delete;
  Halo& operator=(const Halo&) = delete;

  [[nodiscard]] const char* name() const override { return "halo"; }
  [[nodiscard]] std::uint32_t consumer_blocks(WaitMode) const override { return s_.halo_side / block_warps; }
  [[nodiscard]] std::uint32_t consumer_warps(WaitMode) const override { return s_.halo_side; }
  [[nodiscard]] std::uint32_t waits_per_warp(WaitMode) const override { return s_.halo_iterations; }
  [[nodiscard]] std::uint32_t window_bytes() const override {
    return (4 * s_.halo_side + s_.halo_side * s_.halo_side) * 4;
  }
  [[nodiscard]] std::uint64_t buffer_bytes() const override {
    return std::uint64_t{s_.halo_iterations} * workloads::HaloLayout{s_.halo_side}.words_per_iteration() * 4;
  }
  [[nodiscard]] std::uint32_t tags() const override { return s_.halo_iterations * workloads::halo_faces; }
  void check_resident(std::uint32_t consumer_blocks, int sms) const override {
    check_coresident(reinterpret_cast<const void*>(&workloads::halo_kernel), consumer_blocks, sms, "halo");
  }
  void prepare() override {
    check(cudaMemcpy(cells_, initial_.data(), initial_.size() * 4, cudaMemcpyHostToDevice), "halo cells");
    check(cudaMemset(progress_, 0, std::uint64_t{s_.halo_side} * 4), "cudaMemset halo progress");
  }
  void launch(const workloads::Launch& l, std::uint32_t blocks, cudaStream_t stream) override {
    workloads::halo_kernel<<<blocks, block_threads, 0, stream>>>(l, workloads::HaloKernel{s_.halo_side, s_.halo_iterations, cells_, progress_});
  }
  /// Every iteration, the six faces one after another, each published on its own.
  void produce(std::byte* buffer, const std::function<void(std::uint32_t, std::uint32_t)>& publish,
               const std::function<bool()>&) override {
    auto* words = reinterpret_cast<std::uint32_t*>(buffer);
    for (std::uint32_t k = 0; k < s_.halo_iterations; ++k)
      for (std::uint32_t face = 0; face < workloads::halo_faces; ++face) {
        workloads::halo_write_face(words, s_.halo_side, k, face, salt_);
        publish(workloads::halo_faces * k + face, 1);
      }
  }
  bool verify() override {
    std::vector<std::uint32_t> cells(initial_.size());
    check(cudaMemcpy(cells.data(), cells_ + (s_.halo_iterations % 2) * cells.size(), cells.size() * 4,
                     cudaMemcpyDeviceToHost),
          "halo cells");
    return cells == reference_;
  }
  void describe(Record& r) const override {
    r.extra["halo_side"] = s_.halo_side;
    r.extra["halo_iterations"] = s_.halo_iterations;
  }

 private:
  Setup s_;
  std::uint32_t salt_;
  std::vector<std::uint32_t> initial_, reference_;
  std::uint32_t* cells_ = nullptr;
  std::uint32_t* progress_ = nullptr;
};

// ---- the harness ----------------------------------------------------------------------------

struct Timing {
  double seconds = 0;         ///< event time of the kernel
  double span_s = 0;          ///< from stamps: first start to last end
  double compute_warp_s = 0;  ///< from stamps: the mean life of the warps that are not consumers (0: none ran)
  double producer_s = 0;      ///< host producers: from the launch to the last publish returning
  double publish_us = 0;      ///< host producers: the mean time of one publish call (the channel's, or a flag store)
  WaitMetrics waits;
  std::vector<WarpTimeline> timelines;  ///< what `waits` was computed from
  bool verified = true;
};

/// Device memory for workloads::Stamps on the current GPU: the lives of `warps` warps and up to
/// `capacity` waits of each of `waiting` warps (the stamps' wait rows).
class DeviceStamps {
 public:
  DeviceStamps(std::uint64_t warps, std::uint64_t waiting, std::uint32_t capacity)
      : lives_(warps * 3), waits_(waiting * capacity * 2), counts_(waiting), waiting_(waiting), capacity_(capacity) {}

  [[nodiscard]] workloads::Stamps view() const { return {lives_.data, waits_.data, counts_.data, capacity_}; }
  /// Before a run: no waits recorded yet.
  void clear() const { check(cudaMemset(counts_.data, 0, waiting_ * 4), "cudaMemset stamps"); }

  /// Warps [0, warps) of the last run, as timelines; warp w's waits are those of wait row
  /// `row_of(w)` (none when it is past the rows the run has, min(warps, waiting)).
  template <class RowOf>
  [[nodiscard]] std::vector<WarpTimeline> read(std::uint64_t warps, RowOf row_of) const {
    const std::uint64_t rows = std::min(warps, waiting_);
    std::vector<unsigned long long> lives(warps * 3), waits(rows * capacity_ * 2);
    std::vector<std::uint32_t> counts(rows);
    check(cudaMemcpy(lives.data(), lives_.data, lives.size() * 8, cudaMemcpyDeviceToHost), "stamps");
    check(cudaMemcpy(waits.data(), waits_.data, waits.size() * 8, cudaMemcpyDeviceToHost), "stamps");
    check(cudaMemcpy(counts.data(), counts_.data, counts.size() * 4, cudaMemcpyDeviceToHost), "stamps");
    std::vector<WarpTimeline> timelines;
    timelines.reserve(warps);
    for (std::uint64_t w = 0; w < warps; ++w) {
      const unsigned long long* life = lives.data() + w * 3;
      WarpTimeline t{{life[0], life[1]}, static_cast<std::uint32_t>(life[2]), (life[2] >> 32) != 0, {}};
      if (const std::uint64_t row = row_of(w); row < rows)
        for (std::uint32_t j = 0; j < std::min(counts[row], capacity_); ++j)
          t.waits.push_back({waits[(row * capacity_ + j) * 2], waits[(row * capacity_ + j) * 2 + 1]});
      timelines.push_back(std::move(t));
    }
    return timelines;
  }

 private:
  DeviceBuffer<unsigned long long> lives_;  ///< [warps][3]
  DeviceBuffer<unsigned long long> waits_;  ///< [waiting][capacity][2]
  DeviceBuffer<std::uint32_t> counts_;      ///< [waiting]
  std::uint64_t waiting_;
  std::uint32_t capacity_;
};

/// Runs one workload in every mode with the same buffers, channel and stamps.
class Harness {
 public:
  Harness(Workload& w, const Setup& s, int sms) : w_(w), s_(s) {
    compute_blocks_ = s.compute_blocks != 0 ? s.compute_blocks : 2u * static_cast<std::uint32_t>(sms);
    std::uint32_t consumer_blocks = 0;
    for (const WaitMode m : all_modes) {
      consumer_blocks = std::max(consumer_blocks, w.consumer_blocks(m));
      wait_capacity_ = std::max(wait_capacity_, w.waits_per_warp(m));
    }
    w.check_resident(consumer_blocks, sms);
    max_warps_ = (consumer_blocks + compute_blocks_) * block_warps;
    scratch_bytes_ = (w.window_bytes() + 15) / 16 * 16;  // 16-byte copies into it
    ch_ = std::make_unique<channel>(ChannelConfig{.buffer_bytes = w.buffer_bytes(),
                                                  .tag_count = w.tags(),
                                                  .staging_page_bytes = 4096,
                                                  .staging_pages = 8192,
                                                  .max_warps = max_warps_,
                                                  .monitor_cpu = s.monitor_cpu});
    pinned_ = std::make_unique<PinnedArray>(w.buffer_bytes());
    flags_ = std::make_unique<PinnedArray>(std::uint64_t{w.tags()} * 4);
    check(cudaMalloc(&scratch_, std::uint64_t{consumer_blocks} * block_warps * scratch_bytes_), "cudaMalloc scratch");
    check(cudaMalloc(&compute_out_, std::uint64_t{max_warps_} * 32 * 4), "cudaMalloc compute_out");
    stamps_ = std::make_unique<DeviceStamps>(max_warps_, max_warps_, wait_capacity_);
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&begin_), "cudaEventCreate");
    check(cudaEventCreate(&end_), "cudaEventCreate");
  }
  ~Harness() {
    cudaFree(scratch_);
    cudaFree(compute_out_);
    cudaEventDestroy(begin_);
    cudaEventDestroy(end_);
    cudaStreamDestroy(stream_);
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  Timing run(WaitMode mode, bool consumers_only, bool compute_only) {
    const std::uint32_t consumer_blocks = w_.consumer_blocks(mode);
    const std::uint32_t blocks = consumer_blocks + compute_blocks_;
    const std::uint32_t warps = blocks * block_warps;
    if (mode == WaitMode::channel) ch_->reset();
    std::memset(flags_->as<void>(), 0, flags_->bytes());
    w_.prepare();
    stamps_->clear();
    check(cudaDeviceSynchronize(), "sync");
    void* pinned_dev = nullptr;
    void* flags_dev = nullptr;
    check(cudaHostGetDevicePointer(&pinned_dev, pinned_->as<void>(), 0), "cudaHostGetDevicePointer");
    check(cudaHostGetDevicePointer(&flags_dev, flags_->as<void>(), 0), "cudaHostGetDevicePointer");
    const workloads::Launch l{workloads::Source{mode, ch_->device(), static_cast<const std::byte*>(pinned_dev),
                                  static_cast<std::uint32_t*>(flags_dev), scratch_, scratch_bytes_,
                                  stamps_->view()},
                       consumer_blocks, s_.compute_iters, compute_out_, consumers_only, compute_only};
    check(cudaEventRecord(begin_, stream_), "cudaEventRecord");
    w_.launch(l, blocks, stream_);
    check(cudaGetLastError(), "launch");
    check(cudaEventRecord(end_, stream_), "cudaEventRecord");
    const auto launched = std::chrono::steady_clock::now();
    double producer_s = 0, publish_s = 0;
    std::uint64_t publishes = 0;
    if (!compute_only) {
      const PinnedToCpu producer_cpu(s_.producer_cpu);
      std::byte* buffer = mode == WaitMode::channel ? ch_->buffer().data() : pinned_->as<std::byte>();
      auto* flags = flags_->as<std::uint32_t>();
      w_.produce(
          buffer,
          [&](std::uint32_t first, std::uint32_t count) {
            const auto called = std::chrono::steady_clock::now();
            if (mode == WaitMode::channel) ch_->publish(first, count);
            else
              for (std::uint32_t t = first; t < first + count; ++t)
                std::atomic_ref<std::uint32_t>(flags[t]).store(1, std::memory_order_release);
            publish_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - called).count();
            ++publishes;
          },
          [&] { return cudaEventQuery(end_) != cudaErrorNotReady; });
      producer_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
    }
    check(cudaEventSynchronize(end_), "kernel");
    ch_->synchronize();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime");

    std::vector<WarpTimeline> timelines = stamps_->read(warps, [](std::uint64_t w) { return w; });
    std::erase_if(timelines, [&](const WarpTimeline& t) { return t.consumer ? compute_only : consumers_only; });
    unsigned long long first = ~0ull, last = 0;
    double compute_lives = 0;
    std::uint64_t compute_warps = 0;
    for (const WarpTimeline& t : timelines) {
      first = std::min<unsigned long long>(first, t.life.begin);
      last = std::max<unsigned long long>(last, t.life.end);
      if (!t.consumer) {
        compute_lives += static_cast<double>(t.life.end - t.life.begin) / 1e9;
        ++compute_warps;
      }
    }
    Timing t;
    t.compute_warp_s = compute_warps != 0 ? compute_lives / static_cast<double>(compute_warps) : 0;
    t.seconds = ms / 1e3;
    t.span_s = last > first ? static_cast<double>(last - first) / 1e9 : 0;
    t.producer_s = producer_s;
    t.publish_us = publishes != 0 ? publish_s * 1e6 / static_cast<double>(publishes) : 0;
    t.waits = wait_metrics(timelines);
    t.timelines = std::move(timelines);
    t.verified = compute_only || w_.verify();
    return t;
  }

  [[nodiscard]] ChannelStats channel_stats() const { return ch_->stats(); }
  [[nodiscard]] std::uint32_t compute_blocks() const { return compute_blocks_; }

 private:
  Workload& w_;
  Setup s_;
  std::uint32_t compute_blocks_ = 0, max_warps_ = 0, wait_capacity_ = 1, scratch_bytes_ = 0;
  std::unique_ptr<channel> ch_;
  std::unique_ptr<PinnedArray> pinned_, flags_;
  std::unique_ptr<DeviceStamps> stamps_;
  std::byte* scratch_ = nullptr;
  std::uint32_t* compute_out_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
};

/// What a monitor did between two snapshots of its counters, added to `into`.
void add_served(ChannelStats& into, const ChannelStats& before, const ChannelStats& after) {
  into.requests += after.requests - before.requests;
  into.batches += after.batches - before.batches;
  into.copies += after.copies - before.copies;
  into.passes += after.passes - before.passes;
  into.answer_stalls += after.answer_stalls - before.answer_stalls;
  into.serving_seconds += after.serving_seconds - before.serving_seconds;
  into.copy_call_seconds += after.copy_call_seconds - before.copy_call_seconds;
  into.answer_stall_seconds += after.answer_stall_seconds - before.answer_stall_seconds;
  into.map_polls += after.map_polls - before.map_polls;
  into.map_tags += after.map_tags - before.map_tags;
  into.direct_acquires += after.direct_acquires - before.direct_acquires;
  into.direct_parked += after.direct_parked - before.direct_parked;
  into.largest_batch = std::max(into.largest_batch, after.largest_batch);
}

/// The channel-only fields of a record (docs/channels.md, "Metrics"), from the monitors' work
/// during the measured runs; `monitor_seconds`: the kernels' time times the number of monitors.
void describe_monitor(Record& r, const ChannelStats& served, double monitor_seconds) {
  const double requests = static_cast<double>(std::max<std::uint64_t>(served.requests, 1));
  const double passes = static_cast<double>(std::max<std::uint64_t>(served.passes, 1));
  r.extra["monitor_passes_per_request"] = static_cast<double>(served.passes) / requests;
  r.extra["batches_per_request"] = static_cast<double>(served.batches) / requests;
  r.extra["copies_per_request"] = static_cast<double>(served.copies) / requests;
  r.extra["answer_stalls_per_pass"] = static_cast<double>(served.answer_stalls) / passes;
  r.extra["largest_batch"] = served.largest_batch;
  r.extra["serving_us_per_pass"] = served.serving_seconds * 1e6 / passes;
  r.extra["copy_call_us_per_pass"] = served.copy_call_seconds * 1e6 / passes;
  r.extra["answer_stall_us_per_pass"] = served.answer_stall_seconds * 1e6 / passes;
  // The monitor thread's busy time against the kernels' time (docs/channels.md: overhead).
  r.extra["monitor_busy_share"] = served.serving_seconds / monitor_seconds;
  r.extra["monitor_copy_call_share"] = served.copy_call_seconds / monitor_seconds;
}

/// --timeline: appends `t`'s warp timelines to `setup.timeline_csv` as run `run` (the header
/// first into an empty file).
void append_timeline(const Setup& setup, const std::string& run, const Timing& t) {
  if (setup.timeline_csv.empty()) return;
  std::ofstream out(setup.timeline_csv, std::ios::app | std::ios::ate);  // ate: tellp() is the file's size
  if (out.tellp() == 0) out << timeline_csv_header;
  write_timeline_csv(out, run, t.timelines);
  if (!out) throw std::runtime_error("cannot write the timeline to " + setup.timeline_csv);
}

/// Speedups over naive polling and against the best baseline (every mode but the channel ones),
/// where those modes ran.
void add_speedups(std::vector<Record>& records) {
  double naive = 0, best_baseline = 0;
  for (const Record& r : records) {
    const double sec = median(r.seconds);
    if (r.mode == "naive") naive = sec;
    const bool channel_mode = r.mode == "channel" || r.mode == "channel_direct" || r.mode == "channel_warp";
    if (!channel_mode) best_baseline = best_baseline == 0 ? sec : std::min(best_baseline, sec);
  }
  for (Record& r : records) {
    const double sec = median(r.seconds);
    if (naive > 0) r.extra["speedup_vs_naive"] = naive / sec;
    if (best_baseline > 0) r.extra["time_vs_best_baseline"] = sec / best_baseline;
  }
}

/// One record per mode of one workload; the speedups are filled in once every mode ran.
std::vector<Record> measure(Workload& w, const Setup& setup, int sms, const std::vector<WaitMode>& modes, int repeats,
                            bool& all_verified) {
  Harness harness(w, setup, sms);
  std::vector<Record> records;
  for (const WaitMode mode : modes) {
    bool verified = harness.run(mode, false, false).verified;  // warm-up, checked too
    Record r;
    r.workload = w.name();
    r.mode = mode_name(mode);
    r.cache_fraction = 1;
    r.dataset_bytes = r.useful_bytes = w.buffer_bytes();
    r.bytes_moved = static_cast<std::int64_t>(r.dataset_bytes);
    std::vector<double> spans, shares, overlaps, waited, streams, computes, producers, publishes;
    std::vector<double> compute_warps_beside, compute_warps_alone;
    ChannelStats served{};  // the monitor's work during the measured runs with both sides
    for (int rep = 0; rep < repeats; ++rep) {
      const ChannelStats before = harness.channel_stats();
      const Timing both = harness.run(mode, false, false);
      if (rep == repeats - 1)
        append_timeline(setup, std::string(w.name()) + "-" + std::to_string(w.consumer_warps(mode) * 32) + "-" +
                                   mode_name(mode),
                        both);
      producers.push_back(both.producer_s);
      publishes.push_back(both.publish_us);
      add_served(served, before, harness.channel_stats());
      verified = verified && both.verified;
      r.seconds.push_back(both.seconds);
      spans.push_back(both.span_s);
      compute_warps_beside.push_back(both.compute_warp_s);
      shares.push_back(both.waits.wait_share);
      overlaps.push_back(both.waits.overlap_efficiency);
      waited.push_back(both.waits.wait_seconds);
      const Timing stream = harness.run(mode, true, false);
      verified = verified && stream.verified;
      streams.push_back(stream.span_s);
      const Timing compute_alone = harness.run(mode, false, true);
      computes.push_back(compute_alone.span_s);
      compute_warps_alone.push_back(compute_alone.compute_warp_s);
    }
    if (!verified) std::fprintf(stderr, "warpvm-channel-bench: %s/%s: WRONG RESULTS (seed %llu)\n", w.name(),
                                r.mode.c_str(), static_cast<unsigned long long>(setup.seed));
    all_verified = all_verified && verified;
    r.verified = verified;
    w.describe(r);
    const double total = median(spans), stream = median(streams), compute = median(computes);
    double kernel_seconds = 0;
    for (const double sec : r.seconds) kernel_seconds += sec;
    r.extra["seed"] = static_cast<double>(setup.seed);
    r.extra["consumer_blocks"] = w.consumer_blocks(mode);
    r.extra["consumer_threads"] = w.consumer_warps(mode) * 32.0;
    r.extra["compute_blocks"] = harness.compute_blocks();
    r.extra["compute_iters"] = setup.compute_iters;
    r.extra["span_s"] = total;
    r.extra["t_stream_s"] = stream;
    r.extra["t_compute_s"] = compute;
    // What the consumers cost the warps that compute beside them (the paper's consumer-side
    // overhead, seen from the other warps): their mean life beside the consumers over alone.
    if (median(compute_warps_alone) > 0)
      r.extra["compute_slowdown"] = median(compute_warps_beside) / median(compute_warps_alone);
    r.extra["producer_s"] = median(producers);
    r.extra["producer_cpu"] = setup.producer_cpu;
    if (mode == WaitMode::channel) r.extra["monitor_cpu"] = setup.monitor_cpu;
    r.extra["publish_us"] = median(publishes);
    // The first slice's whole-run measure: how much of the shorter side disappears when both run.
    r.extra["span_overlap_efficiency"] = std::clamp((stream + compute - total) / std::min(stream, compute), 0.0, 1.0);
    r.extra["overlap_efficiency"] = median(overlaps);
    r.extra["wait_share"] = median(shares);
    r.extra["wait_s"] = median(waited);
    if (mode == WaitMode::channel) describe_monitor(r, served, kernel_seconds);
    records.push_back(std::move(r));
  }
  add_speedups(records);
  return records;
}

// ---- GPU to GPU: stencil2gpu, kmeans2gpu (their own runners: the harness above is one GPU's) ---

constexpr WaitMode gpu_pair_modes[] = {WaitMode::channel, WaitMode::channel_direct, WaitMode::channel_warp, WaitMode::peer_flag,
                                       WaitMode::naive, WaitMode::atomic_wait};
constexpr int pair_gpus = 2;
/// The host gives up on a run after this long: past the kernels' own watchdogs (10 s for the
/// spins, the channel's), which only atomic_wait's libcu++ wait does not have.
constexpr double pair_host_deadline_s = 60;

/// Why GPUs 0 and 1 cannot run a GPU-to-GPU workload at all (empty: they can).
std::string pair_gpus_missing() {
  int visible = 0;
  check(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  if (visible < pair_gpus) return "needs two GPUs, " + std::to_string(visible) + " visible";
  int there = 0, back = 0;
  check(cudaDeviceCanAccessPeer(&there, 0, 1), "cudaDeviceCanAccessPeer");
  check(cudaDeviceCanAccessPeer(&back, 1, 0), "cudaDeviceCanAccessPeer");
  if (there == 0 || back == 0) return "GPUs 0 and 1 have no peer access both ways";
  return {};
}

/// Why `mode` cannot run on GPUs 0 and 1 (empty: it can).
std::string pair_mode_missing(WaitMode mode) {
  for (int g = 0; g < pair_gpus; ++g) {
    int supported = 0;
    if (workloads::uses_channel(mode)) {  // kernels OR their tags into the other GPU's map
      check(cudaDeviceGetP2PAttribute(&supported, cudaDevP2PAttrNativeAtomicSupported, g, 1 - g),
            "cudaDeviceGetP2PAttribute");
      if (supported == 0) return "no native peer atomics from GPU " + std::to_string(g);
    } else if (mode == WaitMode::naive) {  // both GPUs use the managed flags while kernels run
      check(cudaDeviceGetAttribute(&supported, cudaDevAttrConcurrentManagedAccess, g), "cudaDeviceGetAttribute");
      if (supported == 0) return "GPU " + std::to_string(g) + " has no concurrent managed access";
    }
  }
  return {};
}

/// Fills `bytes` of GPU `device`'s memory with 0xff: data left by the previous run would hold the
/// same values, so one read before its producer wrote it shows as a wrong result in every run.
void poison(int device, void* data, std::uint64_t bytes) {
  const OnDevice on(device);
  check(cudaMemset(data, 0xff, bytes), "cudaMemset poison");
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
      const OnDevice on(g);
      detail::enable_peer_access(g, 1 - g, "warpvm-channel-bench");  // stores into the other GPU's memory
      int sms = 0, per_sm = 0;
      check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g), "cudaDeviceGetAttribute");
      // also loads the kernel on this GPU before the other GPU's waits on it (docs/channels.md)
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, shape.kernel, static_cast<int>(block_threads),
                                                          shape.shared_bytes),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      // Blocks wait for each other and for the other GPU: all must be resident at once.
      gpu.blocks = std::min(shape.max_blocks, static_cast<std::uint32_t>(per_sm * sms));
      // channel_warp's monitor warp runs beside the persistent kernel: where that fills every
      // SM, one block fewer leaves it room (in every mode of the run, to compare like with like).
      if (monitor_warp && gpu.blocks == static_cast<std::uint32_t>(per_sm * sms)) --gpu.blocks;
      gpu.monitor_shared_max = monitor_shared_room(g, shape, per_sm);
      cudaFuncAttributes loaded{};  // loads the monitor kernel before any kernel waits (lazy loading)
      check(cudaFuncGetAttributes(&loaded, workloads::pair_monitor_kernel), "cudaFuncGetAttributes");
      if (gpu.blocks == 0)
        throw std::runtime_error(std::string(shape.workload) + ": the kernel does not fit on GPU " + std::to_string(g));
      check(cudaMalloc(&gpu.published, 4), "cudaMalloc peer flag");
      check(cudaMalloc(&gpu.blocks_done, sizeof(unsigned)), "cudaMalloc blocks done");
      check(cudaStreamCreateWithFlags(&gpu.monitor_stream, cudaStreamNonBlocking), "cudaStreamCreate");
      const std::uint64_t warps = std::uint64_t{gpu.blocks} * block_warps;
      gpu.stamps = std::make_unique<DeviceStamps>(warps, shape.every_warp_waits ? warps : block_warps, shape.iterations);
      check(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreate(&gpu.begin), "cudaEventCreate");
      check(cudaEventCreate(&gpu.end), "cudaEventCreate");
      gpu.managed_published = std::make_unique<Managed>(sizeof(std::uint32_t));  // naive: one allocation each
    }
    const std::uint64_t window_bytes = shape.bytes_per_iteration / block_warps;
    for (const WaitMode mode : modes) {
      if (!workloads::uses_channel(mode)) continue;
      const int kind = channel_kind(mode);
      for (int g = 0; g < pair_gpus; ++g)
        gpus_[g].ch[kind] = std::make_unique<channel>(ChannelConfig{
            .buffer_bytes = std::uint64_t{shape.iterations} * shape.bytes_per_iteration,  // a row per iteration
            .tag_count = shape.iterations,
            .staging_page_bytes = 4096,
            .staging_pages = static_cast<std::uint32_t>((shape.staging_windows != 0 ? shape.staging_windows : 4 * block_warps) *
                                                        ((window_bytes + 4095) / 4096)),
            .max_warps = gpus_[g].blocks * block_warps,
            .watchdog_seconds = static_cast<double>(workloads::peer_watchdog_ns) / 1e9,
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
      const OnDevice on(gpu.device);
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
  [[nodiscard]] workloads::Stamps stamps(int g) const { return gpus_[g].stamps->view(); }

  /// Before a run in `mode`, both GPUs idle (the previous run ended on both): the mode's channels
  /// reset and their buffers poisoned, the flags cleared, the stamps cleared.
  void prepare(WaitMode mode) {
    mode_ = mode;
    for (Gpu& gpu : gpus_) {
      if (workloads::uses_channel(mode)) {
        channel& ch = *gpu.ch[channel_kind(mode)];
        ch.reset();
        poison(ch.config().buffer_device, ch.buffer().data(), ch.buffer().size());
      }
      const OnDevice on(gpu.device);
      check(cudaMemset(gpu.published, 0, 4), "cudaMemset peer flag");
      check(cudaMemset(gpu.blocks_done, 0, sizeof(unsigned)), "cudaMemset blocks done");
      gpu.stamps->clear();
      *gpu.managed_published->as<std::uint32_t>() = 0;
    }
  }

  /// Until both GPUs finished all they were given (a run's inputs, before its kernels).
  void wait_idle() const {
    for (const Gpu& gpu : gpus_) {
      const OnDevice on(gpu.device);
      check(cudaDeviceSynchronize(), "sync");
    }
  }

  /// GPU g's side of the exchange in `mode`.
  [[nodiscard]] workloads::PeerExchange exchange(int g, WaitMode mode) const {
    const Gpu& gpu = gpus_[g];
    const Gpu& other = gpus_[1 - g];
    const bool channel_mode = workloads::uses_channel(mode), naive = mode == WaitMode::naive;
    const int kind = channel_kind(mode);
    return {mode, channel_mode ? gpu.ch[kind]->device() : channel_handle{},
            channel_mode ? gpu.to_neighbour[kind] : channel_producer{},
            naive ? gpu.managed_published->as<std::uint32_t>() : gpu.published,
            naive ? other.managed_published->as<std::uint32_t>() : other.published, gpu.blocks_done};
  }

  /// Launches GPU g's kernel (`launch` on the stream it is given) between its events.
  void launch(int g, const std::function<void(cudaStream_t)>& launch) {
    Gpu& gpu = gpus_[g];
    const OnDevice on(gpu.device);
    // channel_warp: the monitor warp on its own stream, until the kernel's blocks all ended;
    // first, so that it takes its SM's room (its lists in shared memory, up to ~100 KiB) before
    // a persistent kernel fills every SM. The workload's kernels have run before (measure_gpu_pair).
    if (mode_ == WaitMode::channel_warp) launch_monitor(gpu);
    check(cudaEventRecord(gpu.begin, gpu.stream), "cudaEventRecord");
    launch(gpu.stream);
    check(cudaGetLastError(), (std::string(shape_.workload) + " launch").c_str());
    check(cudaEventRecord(gpu.end, gpu.stream), "cudaEventRecord");
  }

  /// Once both kernels ended: the longer of their event times, in seconds. Raises a kernel's or
  /// (channel modes) a channel's device failure, with its message.
  double finish(WaitMode mode) {
    wait_for_kernels();
    if (workloads::uses_channel(mode))
      for (Gpu& gpu : gpus_) gpu.ch[channel_kind(mode)]->synchronize();
    double seconds = 0;
    for (Gpu& gpu : gpus_) {
      const OnDevice on(gpu.device);
      check(cudaEventSynchronize(gpu.end), (std::string(shape_.workload) + " kernel").c_str());
      float ms = 0;
      check(cudaEventElapsedTime(&ms, gpu.begin, gpu.end), "cudaEventElapsedTime");
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
  Timing finish_timed(WaitMode mode, const std::function<std::uint64_t(int, std::uint64_t)>& row_of) {
    Timing t;
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
    std::unique_ptr<Managed> managed_published;  ///< naive: the flag this GPU polls
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
    check(cudaDeviceGetAttribute(&per_sm_bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, g), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, g), "cudaDeviceGetAttribute");
    check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, g), "cudaDeviceGetAttribute");
    cudaFuncAttributes kernel{};
    check(cudaFuncGetAttributes(&kernel, shape.kernel), "cudaFuncGetAttributes");
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
    check(cudaFuncSetAttribute(workloads::pair_monitor_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(scratch)),
          "cudaFuncSetAttribute");
    workloads::pair_monitor_kernel<<<1, 32, scratch, gpu.monitor_stream>>>(ch.device(), gpu.blocks_done, gpu.blocks, in_shared);
    check(cudaGetLastError(), "monitor warp launch");
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
    const OnDevice on(g);
    gpus[g] = {};
  }
}

/// A GPU-to-GPU workload on a GpuPair.
class PairWorkload {
 public:
  virtual ~PairWorkload() = default;
  /// One run in `mode` on both GPUs, checked; `seconds` is the longer of the two kernels' event times.
  virtual Timing run(WaitMode mode) = 0;
  [[nodiscard]] virtual const GpuPair& gpus() const = 0;
  /// The record's sizes (dataset and useful bytes) and workload-specific fields.
  virtual void describe(Record& r) const = 0;
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

/// A GPU-to-GPU workload's records, one per mode that GPUs 0 and 1 can run (none, saying why,
/// without two peer GPUs). `make` builds the workload for the modes that run.
std::vector<Record> measure_gpu_pair(const char* workload, const Setup& setup, const std::vector<WaitMode>& wanted,
                                     int repeats, bool& all_verified,
                                     const std::function<std::unique_ptr<PairWorkload>(const std::vector<WaitMode>&)>& make) {
  if (const std::string missing = pair_gpus_missing(); !missing.empty()) {
    std::fprintf(stderr, "warpvm-channel-bench: %s skipped: %s\n", workload, missing.c_str());
    return {};
  }
  std::vector<WaitMode> modes;
  for (const WaitMode mode : wanted) {
    if (const std::string missing = pair_mode_missing(mode); !missing.empty())
      std::fprintf(stderr, "warpvm-channel-bench: %s/%s skipped: %s\n", workload, mode_name(mode), missing.c_str());
    else
      modes.push_back(mode);
  }
  if (modes.empty()) return {};
  const std::unique_ptr<PairWorkload> runner = make(modes);
  const GpuPair& gpus = runner->gpus();
  // A kernel launched for the first time behind a running monitor kernel never started on 2 x
  // H200 (with EAGER module loading too); once launched before, it starts (docs/channels.md, "The
  // monitor warp"). So the workload's kernels run once, untimed and unchecked, before any monitor.
  if (std::find(modes.begin(), modes.end(), WaitMode::channel_warp) != modes.end())
    (void)runner->run(WaitMode::peer_flag);
  std::vector<Record> records;
  for (const WaitMode mode : modes) {
    std::fprintf(stderr, "%s: %s\n", workload, mode_name(mode));
    bool verified = runner->run(mode).verified;  // warm-up, checked too
    Record r;
    r.workload = workload;
    r.mode = mode_name(mode);
    r.cache_fraction = 1;
    runner->describe(r);
    std::vector<double> shares, overlaps, waited;
    ChannelStats served{};
    for (int rep = 0; rep < repeats; ++rep) {
      const ChannelStats before = gpus.channel_stats();
      const Timing t = runner->run(mode);
      if (rep == repeats - 1) append_timeline(setup, std::string(workload) + "-" + mode_name(mode), t);
      add_served(served, before, gpus.channel_stats());
      verified = verified && t.verified;
      r.seconds.push_back(t.seconds);
      shares.push_back(t.waits.wait_share);
      overlaps.push_back(t.waits.overlap_efficiency);
      waited.push_back(t.waits.wait_seconds);
    }
    if (!verified)
      std::fprintf(stderr, "warpvm-channel-bench: %s/%s: WRONG RESULTS (seed %llu)\n", workload, r.mode.c_str(),
                   static_cast<unsigned long long>(setup.seed));
    all_verified = all_verified && verified;
    r.verified = verified;
    double kernel_seconds = 0;
    for (const double sec : r.seconds) kernel_seconds += sec;
    r.extra["seed"] = static_cast<double>(setup.seed);
    r.extra["gpus"] = pair_gpus;
    r.extra["blocks_per_gpu"] = gpus.blocks(0);
    r.extra["us_per_iteration"] = median(r.seconds) * 1e6 / runner->exchanges_run();
    r.extra["wait_share"] = median(shares);
    r.extra["overlap_efficiency"] = median(overlaps);
    r.extra["wait_s"] = median(waited);
    if (mode == WaitMode::channel) {
      describe_monitor(r, served, kernel_seconds * pair_gpus);
      r.extra["map_polls_per_request"] =
          static_cast<double>(served.map_polls) / static_cast<double>(std::max<std::uint64_t>(served.requests, 1));
    } else if (mode == WaitMode::channel_warp) {  // the monitor warps' counters
      r.extra["requests"] = static_cast<double>(served.requests);
      r.extra["monitor_wake_words"] = static_cast<double>(served.passes);  // see ChannelStats
      r.extra["map_polls_per_request"] =
          static_cast<double>(served.map_polls) / static_cast<double>(std::max<std::uint64_t>(served.requests, 1));
      r.extra["direct_buffer_on_consumer"] = gpus.shape().direct_buffer_on_consumer ? 1 : 0;
    } else if (mode == WaitMode::channel_direct) {  // no monitor: the warps' own counters
      r.extra["direct_acquires"] = static_cast<double>(served.direct_acquires);
      r.extra["direct_buffer_on_consumer"] = gpus.shape().direct_buffer_on_consumer ? 1 : 0;
      r.extra["direct_parked_share"] = static_cast<double>(served.direct_parked) /
                                       static_cast<double>(std::max<std::uint64_t>(served.direct_acquires, 1));
    }
    records.push_back(std::move(r));
  }
  add_speedups(records);
  return records;
}

// ---- stencil2gpu ----------------------------------------------------------------------------

/// stencil2gpu's buffers on one GPU.
struct StencilBuffers {
  detail::device_ptr<std::uint32_t> cells;     ///< [2][rows][side]
  detail::device_ptr<std::uint32_t> progress;  ///< [blocks]
  detail::device_ptr<std::uint32_t> halo;      ///< [2][side]
};

/// stencil2gpu on GPUs 0 and 1: each GPU's half of the grid and its halo, kept across modes and
/// repeats, on a GpuPair whose channels carry one cut row per iteration (buffer on the consumer
/// for channel_direct unless --stencil-direct-buffer producer).
class Stencil2GpuRunner final : public PairRunner<StencilBuffers> {
 public:
  Stencil2GpuRunner(const Setup& s, const std::vector<WaitMode>& modes)
      : s_(s), rows_(s.stencil_side / 2), half_(std::uint64_t{rows_} * s.stencil_side) {
    initial_.resize(std::uint64_t{s.stencil_side} * s.stencil_side);
    fill_random(initial_.data(), initial_.size(), s.seed + 2);
    std::fprintf(stderr, "stencil2gpu: host reference (%u x %u, %u iterations)\n", s.stencil_side, s.stencil_side,
                 s.stencil_iterations);
    reference_ = workloads::stencil_reference(initial_, s.stencil_side, s.stencil_iterations, parallel_for);
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"stencil2gpu", reinterpret_cast<const void*>(&workloads::stencil2gpu_kernel), 0,
                       workloads::stencil_max_blocks(s.stencil_side), s.stencil_iterations, std::uint64_t{s.stencil_side} * 4,
                       false, s.stencil_direct_buffer_on_consumer},
        modes);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const OnDevice on(g);
      gpu.cells = detail::make_device<std::uint32_t>(2 * half_, "stencil cells");
      gpu.progress = detail::make_device<std::uint32_t>(pair_->blocks(g), "stencil progress");
      gpu.halo = detail::make_device<std::uint32_t>(2ull * s.stencil_side, "stencil halo");
    }
  }
  Timing run(WaitMode mode) override {
    const std::uint32_t side = s_.stencil_side;
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      const OnDevice on(g);
      check(cudaMemcpy(gpus_[g].cells.get(), initial_.data() + g * half_, half_ * 4, cudaMemcpyHostToDevice),
            "stencil cells");
      check(cudaMemset(gpus_[g].progress.get(), 0, std::uint64_t{pair_->blocks(g)} * 4), "cudaMemset stencil progress");
      check(cudaMemset(gpus_[g].halo.get(), 0, 2ull * side * 4), "cudaMemset stencil halo");
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      const workloads::Stencil2Gpu k{
          {side, s_.stencil_iterations, g == 0, gpus_[g].cells.get(), gpus_[g].progress.get(), pair_->stamps(g)},
          pair_->exchange(g, mode), gpus_[g].halo.get(), gpus_[1 - g].halo.get()};
      pair_->launch(g, [&](cudaStream_t stream) {
        workloads::stencil2gpu_kernel<<<pair_->blocks(g), block_threads, 0, stream>>>(k);
      });
    }
    // only the cut block's warps wait: wait rows 0 to 7
    Timing t = pair_->finish_timed(mode, [&](int g, std::uint64_t w) {
      const std::uint64_t cut_block = g == 0 ? pair_->blocks(g) - 1 : 0;
      return w / block_warps == cut_block ? w % block_warps : ~std::uint64_t{0};
    });
    std::vector<std::uint32_t> cells(initial_.size());
    for (int g = 0; g < pair_gpus; ++g) {
      const OnDevice on(g);
      check(cudaMemcpy(cells.data() + g * half_, gpus_[g].cells.get() + (s_.stencil_iterations % 2) * half_, half_ * 4,
                       cudaMemcpyDeviceToHost),
            "stencil cells");
    }
    t.verified = verify(cells);
    return t;
  }
  void describe(Record& r) const override {
    r.dataset_bytes = std::uint64_t{s_.stencil_side} * s_.stencil_side * 4;
    // the rows the GPUs exchange: each sends its cut row of states 0 to iterations - 1
    r.useful_bytes = std::uint64_t{pair_gpus} * s_.stencil_iterations * s_.stencil_side * 4;
    r.bytes_moved = static_cast<std::int64_t>(r.useful_bytes);
    r.extra["stencil_side"] = s_.stencil_side;
    r.extra["stencil_iterations"] = s_.stencil_iterations;
  }

 private:
  /// Against the host reference; says where the first difference is.
  bool verify(const std::vector<std::uint32_t>& cells) const {
    const auto [got, want] = std::mismatch(cells.begin(), cells.end(), reference_.begin());
    if (got == cells.end()) return true;
    const auto at = static_cast<std::uint64_t>(got - cells.begin());
    std::fprintf(stderr, "stencil2gpu: first difference at row %llu, column %llu: %u, expected %u\n",
                 static_cast<unsigned long long>(at / s_.stencil_side),
                 static_cast<unsigned long long>(at % s_.stencil_side), *got, *want);
    return false;
  }

  Setup s_;
  std::uint32_t rows_;  ///< per GPU
  std::uint64_t half_;  ///< cells per GPU
  std::vector<std::uint32_t> initial_, reference_;
};

// ---- kmeans2gpu -----------------------------------------------------------------------------

/// What k-means ends with: the centroids of the last state ([k][4]) and how many points chose
/// each in the last iteration.
struct KmeansResult {
  std::vector<std::uint32_t> centroids;
  std::vector<unsigned long long> counts;
};

/// `iterations` of k-means over all points on the host, without the split in two; state 0 is the
/// first k points. The same integer arithmetic as kmeans2gpu_kernel (workloads::kmeans_nearest,
/// workloads::kmeans_mean), so the GPUs must match it exactly.
KmeansResult kmeans_reference(const std::vector<uint4>& points, std::uint32_t k, std::uint32_t iterations) {
  constexpr std::uint32_t per = workloads::kmeans_words_per_centroid;
  std::vector<uint4> centroids(points.begin(), points.begin() + k);
  std::vector<unsigned long long> totals(std::uint64_t{k} * per);
  std::mutex totals_lock;
  for (std::uint32_t i = 0; i < iterations; ++i) {
    std::fill(totals.begin(), totals.end(), 0ull);
    parallel_for(points.size(), [&](std::uint64_t first, std::uint64_t end) {
      std::vector<unsigned long long> sums(totals.size(), 0);
      for (std::uint64_t p = first; p < end; ++p) {
        const uint4 point = points[p];
        unsigned long long* to = sums.data() + std::uint64_t{workloads::kmeans_nearest(point, centroids.data(), k)} * per;
        to[0] += point.x;
        to[1] += point.y;
        to[2] += point.z;
        to[3] += point.w;
        to[4] += 1;
      }
      const std::lock_guard<std::mutex> hold(totals_lock);
      for (std::size_t w = 0; w < sums.size(); ++w) totals[w] += sums[w];
    });
    for (std::uint32_t c = 0; c < k; ++c) {
      const unsigned long long* sums = totals.data() + std::uint64_t{c} * per;
      uint4& centroid = centroids[c];
      centroid = make_uint4(workloads::kmeans_mean(sums[0], sums[4], centroid.x), workloads::kmeans_mean(sums[1], sums[4], centroid.y),
                            workloads::kmeans_mean(sums[2], sums[4], centroid.z), workloads::kmeans_mean(sums[3], sums[4], centroid.w));
    }
  }
  KmeansResult result;
  for (const uint4& c : centroids) result.centroids.insert(result.centroids.end(), {c.x, c.y, c.z, c.w});
  for (std::uint32_t c = 0; c < k; ++c) result.counts.push_back(totals[std::uint64_t{c} * per + workloads::kmeans_dims]);
  return result;
}

/// kmeans2gpu's buffers on one GPU.
struct KmeansBuffers {
  detail::device_ptr<uint4> points;
  detail::device_ptr<unsigned long long> partial;  ///< [iterations][k][5]
  detail::device_ptr<unsigned long long> totals;   ///< [iterations][k][5]
  detail::device_ptr<unsigned long long> mailbox;  ///< [iterations][k][5]
  detail::device_ptr<std::uint32_t> centroids;     ///< [iterations + 1][k][4]
  detail::device_ptr<std::uint32_t> counters;      ///< arrived, ready
};

/// kmeans2gpu on GPUs 0 and 1: each GPU's half of the points and its per-iteration sums,
/// centroids and mailbox, kept across modes and repeats, on a GpuPair whose channels carry one
/// GPU's partial sums (k x 5 uint64) per iteration (buffer on the consumer for channel_direct
/// unless --kmeans-direct-buffer producer).
class Kmeans2GpuRunner final : public PairRunner<KmeansBuffers> {
 public:
  Kmeans2GpuRunner(const Setup& s, const std::vector<WaitMode>& modes)
      : s_(s), half_(s.kmeans_points / 2), words_(std::uint64_t{s.kmeans_k} * workloads::kmeans_words_per_centroid) {
    points_.resize(s.kmeans_points);
    auto* coordinates = reinterpret_cast<std::uint32_t*>(points_.data());
    fill_random(coordinates, points_.size() * workloads::kmeans_dims, s.seed + 3);
    static_assert(workloads::kmeans_coordinate_limit == 1024, "the top 10 bits of a random word");
    for (std::uint64_t i = 0; i < points_.size() * workloads::kmeans_dims; ++i) coordinates[i] >>= 22;
    std::fprintf(stderr, "kmeans2gpu: host reference (%u points, k = %u, %u iterations)\n", s.kmeans_points, s.kmeans_k,
                 s.kmeans_iterations);
    reference_ = kmeans_reference(points_, s.kmeans_k, s.kmeans_iterations);
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"kmeans2gpu", reinterpret_cast<const void*>(&workloads::kmeans2gpu_kernel), shared_bytes(),
                       static_cast<std::uint32_t>((half_ + block_threads - 1) / block_threads), s.kmeans_iterations,
                       words_ * 8, true, s.kmeans_direct_buffer_on_consumer},
        modes);
    for (int g = 0; g < pair_gpus; ++g) {
      // a block's shared sums are uint32: its points' coordinates must add up below 2^32
      const std::uint64_t stride = std::uint64_t{pair_->blocks(g)} * block_threads;
      const std::uint64_t per_block = (half_ + stride - 1) / stride * block_threads;
      if (per_block * (workloads::kmeans_coordinate_limit - 1) > 0xffffffffull)
        throw std::runtime_error("kmeans2gpu: " + std::to_string(per_block) + " points per block overflow its 32-bit sums; use fewer points");
      Gpu& gpu = gpus_[g];
      const OnDevice on(g);
      const std::uint64_t rows_words = std::uint64_t{s.kmeans_iterations} * words_;
      gpu.points = detail::make_device<uint4>(half_, "kmeans points");
      check(cudaMemcpy(gpu.points.get(), points_.data() + g * half_, half_ * sizeof(uint4), cudaMemcpyHostToDevice),
            "kmeans points");
      gpu.partial = detail::make_device<unsigned long long>(rows_words, "kmeans partial");
      gpu.totals = detail::make_device<unsigned long long>(rows_words, "kmeans totals");
      gpu.mailbox = detail::make_device<unsigned long long>(rows_words, "kmeans mailbox");
      gpu.centroids =
          detail::make_device<std::uint32_t>(centroid_bytes() / 4 * (s.kmeans_iterations + 1), "kmeans centroids");
      gpu.counters = detail::make_device<std::uint32_t>(2, "kmeans counters");
    }
  }
  Timing run(WaitMode mode) override {
    const std::uint64_t rows_bytes = std::uint64_t{s_.kmeans_iterations} * words_ * 8;
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      const Gpu& gpu = gpus_[g];
      const OnDevice on(g);
      check(cudaMemset(gpu.partial.get(), 0, rows_bytes), "cudaMemset kmeans partial");  // added into
      check(cudaMemset(gpu.counters.get(), 0, 2 * 4), "cudaMemset kmeans counters");
      // what the kernel writes before it reads it, as the channels' buffers
      poison(g, gpu.mailbox.get(), rows_bytes);
      poison(g, gpu.totals.get(), rows_bytes);
      poison(g, gpu.centroids.get(), centroid_bytes() * (s_.kmeans_iterations + 1));
      check(cudaMemcpy(gpu.centroids.get(), points_.data(), centroid_bytes(), cudaMemcpyHostToDevice),
            "kmeans centroids");
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      const Gpu& gpu = gpus_[g];
      const workloads::Kmeans2Gpu k{pair_->exchange(g, mode), s_.kmeans_k, s_.kmeans_iterations, half_, gpu.points.get(),
                             gpu.partial.get(), gpu.totals.get(), gpu.centroids.get(), gpu.counters.get(),
                             gpu.counters.get() + 1, gpu.mailbox.get(), gpus_[1 - g].mailbox.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) {
        workloads::kmeans2gpu_kernel<<<pair_->blocks(g), block_threads, shared_bytes(), stream>>>(k);
      });
    }
    // Every warp has wait rows; the exchange block's are the consumers' (waits for the other
    // GPU), the other blocks' only keep their waits for the next state out of the SMs' busy time.
    Timing t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    t.verified = true;
    for (int g = 0; g < pair_gpus; ++g) t.verified = verify(g) && t.verified;
    return t;
  }
  void describe(Record& r) const override {
    r.dataset_bytes = std::uint64_t{s_.kmeans_points} * sizeof(uint4);
    // what the GPUs exchange: each sends its partial sums of every iteration
    r.useful_bytes = std::uint64_t{pair_gpus} * s_.kmeans_iterations * words_ * 8;
    r.bytes_moved = static_cast<std::int64_t>(r.useful_bytes);
    r.extra["kmeans_points"] = s_.kmeans_points;
    r.extra["kmeans_k"] = s_.kmeans_k;
    r.extra["kmeans_dims"] = workloads::kmeans_dims;
    r.extra["kmeans_iterations"] = s_.kmeans_iterations;
  }

 private:
  [[nodiscard]] std::uint64_t centroid_bytes() const { return std::uint64_t{s_.kmeans_k} * sizeof(uint4); }
  /// The kernel's dynamic shared memory: the centroids, then the block's uint32 sums.
  [[nodiscard]] std::uint32_t shared_bytes() const {
    return static_cast<std::uint32_t>(centroid_bytes() + words_ * 4);
  }

  /// GPU g's last centroids and counts against the host reference; says where the first
  /// difference is.
  bool verify(int g) const {
    const OnDevice on(g);
    KmeansResult got{std::vector<std::uint32_t>(reference_.centroids.size()), {}};
    std::vector<unsigned long long> totals(words_);
    check(cudaMemcpy(got.centroids.data(), gpus_[g].centroids.get() + s_.kmeans_iterations * (centroid_bytes() / 4),
                     centroid_bytes(), cudaMemcpyDeviceToHost),
          "kmeans centroids");
    check(cudaMemcpy(totals.data(), gpus_[g].totals.get() + (s_.kmeans_iterations - 1) * words_, words_ * 8,
                     cudaMemcpyDeviceToHost),
          "kmeans totals");
    for (std::uint32_t c = 0; c < s_.kmeans_k; ++c)
      got.counts.push_back(totals[std::uint64_t{c} * workloads::kmeans_words_per_centroid + workloads::kmeans_dims]);
    for (std::uint32_t c = 0; c < s_.kmeans_k; ++c) {
      for (std::uint32_t d = 0; d < workloads::kmeans_dims; ++d) {
        const std::uint32_t at = c * workloads::kmeans_dims + d;
        if (got.centroids[at] == reference_.centroids[at]) continue;
        std::fprintf(stderr, "kmeans2gpu: GPU %d: centroid %u, coordinate %u: %u, expected %u\n", g, c, d,
                     got.centroids[at], reference_.centroids[at]);
        return false;
      }
      if (got.counts[c] != reference_.counts[c]) {
        std::fprintf(stderr, "kmeans2gpu: GPU %d: centroid %u has %llu points, expected %llu\n", g, c, got.counts[c],
                     reference_.counts[c]);
        return false;
      }
    }
    return true;
  }

  Setup s_;
  std::uint64_t half_;   ///< points per GPU
  std::uint64_t words_;  ///< k x 5: the words one GPU sends per iteration
  std::vector<uint4> points_;
  KmeansResult reference_;
};

// ---- gemm2gpu ---------------------------------------------------------------------------------

/// out = left x right, n x n uint32 row-major (mod 2^32), on all host cores: gemm2gpu's reference.
std::vector<std::uint32_t> host_product(const std::vector<std::uint32_t>& left, const std::vector<std::uint32_t>& right,
                                        std::uint32_t n) {
  std::vector<std::uint32_t> out(std::uint64_t{n} * n, 0);
  parallel_for(n, [&](std::uint64_t first, std::uint64_t end) {
    for (std::uint64_t i = first; i < end; ++i) {
      std::uint32_t* row = out.data() + i * n;
      for (std::uint64_t k = 0; k < n; ++k) {  // i-k-j: the inner loop vectorises
        const std::uint32_t l = left[i * n + k];
        const std::uint32_t* r = right.data() + k * n;
        for (std::uint64_t j = 0; j < n; ++j) row[j] += l * r[j];
      }
    }
  });
  return out;
}

/// Gemm2Gpu's buffers on one GPU.
struct GemmBuffers {
  detail::device_ptr<std::uint32_t> a, b, d, t, c;
  detail::device_ptr<std::uint32_t> counters;  ///< next tile, produced[panels], ready[panels]
};

/// gemm2gpu on GPUs 0 and 1 (gemm2gpu.cuh): each GPU's operands, T, C and counters, kept across
/// modes and repeats, on a GpuPair whose channels carry one panel of T (64 rows) per tag.
class Gemm2GpuRunner final : public PairRunner<GemmBuffers> {
 public:
  Gemm2GpuRunner(const Setup& s, const std::vector<WaitMode>& modes) : s_(s), n_(s.gemm_side), half_(s.gemm_side / 2) {
    const std::uint64_t words = std::uint64_t{n_} * n_;
    a_.resize(words);
    b_.resize(words);
    d_.resize(words);
    fill_random(a_.data(), words, s.seed + 4);
    fill_random(b_.data(), words, s.seed + 5);
    fill_random(d_.data(), words, s.seed + 6);
    std::fprintf(stderr, "gemm2gpu: host reference ((A B) D, n = %u)\n", n_);
    reference_ = host_product(host_product(a_, b_, n_), d_, n_);
    const workloads::GemmGeometry shape_of{n_};
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"gemm2gpu", reinterpret_cast<const void*>(&workloads::gemm2gpu_kernel), 0, shape_of.total_tiles() + 1,
                       shape_of.panels(), shape_of.panel_words() * 4, true, s.gemm_direct_buffer_on_consumer},
        modes);
    if (pair_->blocks(0) < 2 || pair_->blocks(1) < 2) throw std::runtime_error("gemm2gpu: needs two resident blocks per GPU");
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const OnDevice on(g);
      const std::uint64_t half_words = std::uint64_t{half_} * n_;
      gpu.a = detail::make_device<std::uint32_t>(half_words, "gemm2gpu A");
      gpu.b = detail::make_device<std::uint32_t>(words, "gemm2gpu B");
      gpu.d = detail::make_device<std::uint32_t>(half_words, "gemm2gpu D");
      gpu.t = detail::make_device<std::uint32_t>(words, "gemm2gpu T");
      gpu.c = detail::make_device<std::uint32_t>(half_words, "gemm2gpu C");
      gpu.counters = detail::make_device<std::uint32_t>(1 + 2 * shape_of.panels(), "gemm2gpu counters");
      check(cudaMemcpy(gpu.a.get(), a_.data() + g * half_words, half_words * 4, cudaMemcpyHostToDevice), "gemm2gpu A");
      check(cudaMemcpy(gpu.b.get(), b_.data(), words * 4, cudaMemcpyHostToDevice), "gemm2gpu B");
      // D's columns [g h, (g + 1) h): a strided copy
      check(cudaMemcpy2D(gpu.d.get(), std::uint64_t{half_} * 4, d_.data() + static_cast<std::uint64_t>(g) * half_, std::uint64_t{n_} * 4,
                         std::uint64_t{half_} * 4, n_, cudaMemcpyHostToDevice),
            "gemm2gpu D");
    }
  }

  Timing run(WaitMode mode) override {
    const std::uint64_t words = std::uint64_t{n_} * n_, half_words = std::uint64_t{half_} * n_;
    const std::uint32_t panels = workloads::GemmGeometry{n_}.panels();
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const OnDevice on(g);
      check(cudaMemset(gpu.counters.get(), 0, (1 + 2 * panels) * 4), "cudaMemset gemm2gpu counters");
      poison(g, gpu.t.get(), words * 4);  // a panel read before it arrived shows as a wrong C
      poison(g, gpu.c.get(), half_words * 4);
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const workloads::Gemm2Gpu k{pair_->exchange(g, mode), {n_}, g == 0, gpu.a.get(), gpu.b.get(), gpu.d.get(), gpu.t.get(),
                           gpu.c.get(), gpu.counters.get(), gpu.counters.get() + 1, gpu.counters.get() + 1 + panels,
                           gpus_[1 - g].t.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) { workloads::gemm2gpu_kernel<<<pair_->blocks(g), block_threads, 0, stream>>>(k); });
    }
    Timing t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    t.verified = true;
    for (int g = 0; g < pair_gpus; ++g) t.verified = verify(g) && t.verified;
    return t;
  }
  void describe(Record& r) const override {
    r.dataset_bytes = 3ull * n_ * n_ * 4;  // A, B, D
    r.useful_bytes = std::uint64_t{pair_gpus} * half_ * n_ * 4;  // each GPU's rows of T, to the other
    r.bytes_moved = static_cast<std::int64_t>(r.useful_bytes);
    r.extra["gemm_side"] = n_;
    r.extra["gemm_panels"] = half_ / workloads::gemm_tile;
  }

 private:
  /// GPU g's columns of C against the reference; says where the first difference is.
  bool verify(int g) const {
    const OnDevice on(g);
    std::vector<std::uint32_t> c(std::uint64_t{n_} * half_);
    check(cudaMemcpy(c.data(), gpus_[g].c.get(), c.size() * 4, cudaMemcpyDeviceToHost), "gemm2gpu C");
    for (std::uint64_t i = 0; i < n_; ++i)
      for (std::uint64_t j = 0; j < half_; ++j) {
        const std::uint32_t want = reference_[i * n_ + g * half_ + j], got = c[i * half_ + j];
        if (got == want) continue;
        std::fprintf(stderr, "gemm2gpu: GPU %d: C[%llu][%llu] = %u, expected %u\n", g, static_cast<unsigned long long>(i),
                     static_cast<unsigned long long>(g * half_ + j), got, want);
        return false;
      }
    return true;
  }

  Setup s_;
  std::uint32_t n_, half_;
  std::vector<std::uint32_t> a_, b_, d_, reference_;
};

// ---- bfs2gpu ----------------------------------------------------------------------------------

/// Bfs2Gpu's buffers on one GPU.
struct BfsBuffers {
  detail::device_ptr<std::uint64_t> offsets;
  detail::device_ptr<std::uint32_t> columns, depth, outgoing, counters, mailbox;
};

/// bfs2gpu on GPUs 0 and 1 (bfs2gpu.cuh): an R-MAT graph whose halves' CSR rows and depths live
/// on the two GPUs, kept across modes and repeats, on a GpuPair whose channels carry one level's
/// message (a bitmap of the other half, then counts) per tag.
class Bfs2GpuRunner final : public PairRunner<BfsBuffers> {
 public:
  Bfs2GpuRunner(const Setup& s, const std::vector<WaitMode>& modes) : s_(s) {
    const workloads::RmatParams p{.scale = s.bfs_scale, .edge_factor = s.bfs_edge_factor, .seed = s.seed + 7};
    p.validate();
    vertices_ = static_cast<std::uint32_t>(p.vertices());
    half_ = vertices_ / 2;
    std::fprintf(stderr, "bfs2gpu: R-MAT scale %u, edge factor %u\n", s.bfs_scale, s.bfs_edge_factor);
    std::vector<std::uint64_t> offsets(p.vertices() + 1);
    std::vector<std::uint32_t> columns(p.directed_edges());
    workloads::build_rmat_csr(p, offsets, columns, parallel_for);
    root_ = pick_root(offsets, s.seed);
    reference_ = workloads::reference_bfs(offsets, columns, root_, parallel_for);
    const workloads::BfsGeometry shape_of{half_, s.bfs_max_levels};
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"bfs2gpu", reinterpret_cast<const void*>(&workloads::bfs2gpu_kernel), 0, 1u << 20, s.bfs_max_levels,
                       std::uint64_t{shape_of.message_words()} * 4, true, s.bfs_direct_buffer_on_consumer},
        modes);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const OnDevice on(g);
      const auto gpu_index = static_cast<std::uint64_t>(g);
      const std::uint64_t first_edge = offsets[gpu_index * half_], end_edge = offsets[(gpu_index + 1) * half_];
      std::vector<std::uint64_t> rows(offsets.begin() + gpu_index * half_, offsets.begin() + (gpu_index + 1) * half_ + 1);
      for (std::uint64_t& o : rows) o -= first_edge;
      gpu.offsets = detail::make_device<std::uint64_t>(rows.size(), "bfs2gpu offsets");
      gpu.columns = detail::make_device<std::uint32_t>(std::max<std::uint64_t>(end_edge - first_edge, 1), "bfs2gpu columns");
      gpu.depth = detail::make_device<std::uint32_t>(half_, "bfs2gpu depths");
      gpu.outgoing = detail::make_device<std::uint32_t>(std::uint64_t{s.bfs_max_levels} * shape_of.bitmap_words(), "bfs2gpu bitmaps");
      gpu.counters = detail::make_device<std::uint32_t>(shape_of.counter_words(), "bfs2gpu counters");
      gpu.mailbox = detail::make_device<std::uint32_t>(std::uint64_t{s.bfs_max_levels} * shape_of.message_words(), "bfs2gpu mailbox");
      check(cudaMemcpy(gpu.offsets.get(), rows.data(), rows.size() * 8, cudaMemcpyHostToDevice), "bfs2gpu offsets");
      check(cudaMemcpy(gpu.columns.get(), columns.data() + first_edge, (end_edge - first_edge) * 4, cudaMemcpyHostToDevice),
            "bfs2gpu columns");
      edges_ += end_edge - first_edge;
    }
    levels_ = 0;
    for (const std::uint32_t d : reference_)
      if (d != workloads::bfs_unreached) levels_ = std::max(levels_, d + 1);
  }

  Timing run(WaitMode mode) override {
    const workloads::BfsGeometry shape_of{half_, s_.bfs_max_levels};
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const OnDevice on(g);
      check(cudaMemset(gpu.depth.get(), 0xff, std::uint64_t{half_} * 4), "cudaMemset bfs2gpu depths");  // unreached
      if (root_ / half_ == static_cast<std::uint32_t>(g))
        check(cudaMemset(gpu.depth.get() + root_ % half_, 0, 4), "cudaMemset bfs2gpu root");
      check(cudaMemset(gpu.outgoing.get(), 0, std::uint64_t{s_.bfs_max_levels} * shape_of.bitmap_words() * 4),
            "cudaMemset bfs2gpu bitmaps");
      check(cudaMemset(gpu.counters.get(), 0, shape_of.counter_words() * 4), "cudaMemset bfs2gpu counters");
      poison(g, gpu.mailbox.get(), std::uint64_t{s_.bfs_max_levels} * shape_of.message_words() * 4);
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const workloads::Bfs2Gpu k{pair_->exchange(g, mode), {half_, s_.bfs_max_levels}, g == 0, gpu.offsets.get(), gpu.columns.get(),
                          gpu.depth.get(), gpu.outgoing.get(), gpu.counters.get(), gpu.mailbox.get(),
                          gpus_[1 - g].mailbox.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) { workloads::bfs2gpu_kernel<<<pair_->blocks(g), block_threads, 0, stream>>>(k); });
    }
    Timing t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    t.verified = verify();
    const OnDevice on(0);  // both GPUs exchange alike
    check(cudaMemcpy(&exchanges_, gpus_[0].counters.get() + shape_of.ready_word(), 4, cudaMemcpyDeviceToHost),
          "bfs2gpu counters");
    return t;
  }
  void describe(Record& r) const override {
    const workloads::BfsGeometry shape_of{half_, s_.bfs_max_levels};
    r.dataset_bytes = (std::uint64_t{vertices_} + pair_gpus) * 8 + edges_ * 4;  // both GPUs' CSR
    r.useful_bytes = std::uint64_t{pair_gpus} * exchanges_ * shape_of.message_words() * 4;  // a message per level and GPU
    r.bytes_moved = static_cast<std::int64_t>(r.useful_bytes);
    r.extra["bfs_scale"] = s_.bfs_scale;
    r.extra["bfs_edge_factor"] = s_.bfs_edge_factor;
    r.extra["bfs_root"] = root_;
    r.extra["bfs_levels"] = levels_;
    r.extra["bfs_exchanges"] = exchanges_;
  }
  [[nodiscard]] std::uint32_t exchanges_run() const override { return exchanges_; }

 private:
  /// A vertex with a neighbour, drawn from the seed (the first with one from a random start).
  static std::uint32_t pick_root(const std::vector<std::uint64_t>& offsets, std::uint64_t seed) {
    const std::uint64_t n = offsets.size() - 1;
    for (std::uint64_t i = 0, v = workloads::mix64(seed) % n; i < n; ++i, v = (v + 1) % n)
      if (offsets[v + 1] > offsets[v]) return static_cast<std::uint32_t>(v);
    throw std::runtime_error("bfs2gpu: the graph has no edge");
  }

  /// Both GPUs' depths against the reference, and the level limit; says what differs first.
  bool verify() const {
    std::vector<std::uint32_t> depth(vertices_);
    for (int g = 0; g < pair_gpus; ++g) {
      const OnDevice on(g);
      std::uint32_t overflow = 0;
      check(cudaMemcpy(&overflow, gpus_[g].counters.get() + workloads::BfsGeometry{half_, s_.bfs_max_levels}.overflow_word(), 4, cudaMemcpyDeviceToHost),
            "bfs2gpu counters");
      if (overflow != 0) {
        std::fprintf(stderr, "bfs2gpu: the search needs more than %u levels (--bfs-max-levels)\n", s_.bfs_max_levels);
        return false;
      }
      check(cudaMemcpy(depth.data() + static_cast<std::uint64_t>(g) * half_, gpus_[g].depth.get(), std::uint64_t{half_} * 4,
                       cudaMemcpyDeviceToHost),
            "bfs2gpu depths");
    }
    const auto [got, want] = std::mismatch(depth.begin(), depth.end(), reference_.begin());
    if (got == depth.end()) return true;
    std::fprintf(stderr, "bfs2gpu: vertex %llu (root %u): depth %u, expected %u\n",
                 static_cast<unsigned long long>(got - depth.begin()), root_, *got, *want);
    return false;
  }

  Setup s_;
  std::uint32_t vertices_ = 0, half_ = 0, root_ = 0, levels_ = 0;
  std::uint32_t exchanges_ = 0;  ///< levels the last run exchanged (levels_ + 1: see BfsGeometry)
  std::uint64_t edges_ = 0;
  std::vector<std::uint32_t> reference_;
};

// ---- bitonic2gpu ------------------------------------------------------------------------------

/// Bitonic2Gpu's buffers on one GPU.
struct BitonicBuffers {
  detail::device_ptr<std::uint32_t> keys, sorted, paired, out, mailbox, counters;
  detail::device_ptr<std::byte> sort_scratch;
  std::size_t sort_bytes = 0;
};

/// bitonic2gpu on GPUs 0 and 1 (bitonic2gpu.cuh): each GPU's half of the keys, CUB's sort of it
/// (before the kernel, on the kernel's stream: inside the timed run), the pairs and the result,
/// kept across modes and repeats, on a GpuPair whose channels carry one 256 KiB chunk per tag.
class Bitonic2GpuRunner final : public PairRunner<BitonicBuffers> {
  /// `channel`'s staging: 64 pair-ups' windows (16 MiB), where an exchange block's four
  /// iterations' worth (1 MiB) would serve 4 of the hundreds of blocks that acquire at once.
  static constexpr std::uint32_t bitonic_staging_windows = 64 * block_warps;

 public:
  Bitonic2GpuRunner(const Setup& s, const std::vector<WaitMode>& modes) : s_(s), size_{s.bitonic_keys / 2} {
    keys_.resize(s.bitonic_keys);
    fill_random(keys_.data(), keys_.size(), s.seed + 8);
    std::fprintf(stderr, "bitonic2gpu: host reference (%u keys)\n", s.bitonic_keys);
    reference_ = keys_;
    std::sort(reference_.begin(), reference_.end());
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"bitonic2gpu", reinterpret_cast<const void*>(&workloads::bitonic2gpu_kernel), 0, size_.tasks() + 1,
                       size_.chunks(), std::uint64_t{workloads::bitonic_chunk} * 4, true, s.bitonic_direct_buffer_on_consumer,
                       bitonic_staging_windows},
        modes);
    if (pair_->blocks(0) < 2 || pair_->blocks(1) < 2) throw std::runtime_error("bitonic2gpu: needs two resident blocks per GPU");
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const OnDevice on(g);
      gpu.keys = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu keys");
      gpu.sorted = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu sorted keys");
      gpu.paired = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu pairs");
      gpu.out = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu result");
      gpu.mailbox = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu mailbox");
      gpu.counters = detail::make_device<std::uint32_t>(size_.counter_words(), "bitonic2gpu counters");
      check(cub::DeviceRadixSort::SortKeys(nullptr, gpu.sort_bytes, gpu.keys.get(), gpu.sorted.get(), size_.half),
            "cub::DeviceRadixSort::SortKeys (size)");
      gpu.sort_scratch = detail::make_device<std::byte>(gpu.sort_bytes, "bitonic2gpu sort scratch");
    }
  }

  Timing run(WaitMode mode) override {
    const std::uint64_t bytes = std::uint64_t{size_.half} * 4;
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const OnDevice on(g);
      check(cudaMemcpy(gpu.keys.get(), keys_.data() + static_cast<std::uint64_t>(g) * size_.half, bytes,
                       cudaMemcpyHostToDevice),
            "bitonic2gpu keys");
      check(cudaMemset(gpu.counters.get(), 0, size_.counter_words() * 4), "cudaMemset bitonic2gpu counters");
      // what the run writes before it reads it
      poison(g, gpu.sorted.get(), bytes);
      poison(g, gpu.paired.get(), bytes);
      poison(g, gpu.out.get(), bytes);
      poison(g, gpu.mailbox.get(), bytes);
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const workloads::Bitonic2Gpu k{pair_->exchange(g, mode), size_, g == 0, gpu.sorted.get(), gpu.paired.get(), gpu.out.get(),
                              gpu.counters.get(), gpu.mailbox.get(), gpus_[1 - g].mailbox.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) {
        std::size_t scratch_bytes = gpu.sort_bytes;
        check(cub::DeviceRadixSort::SortKeys(gpu.sort_scratch.get(), scratch_bytes, gpu.keys.get(), gpu.sorted.get(),
                                             size_.half, 0, 32, stream),
              "cub::DeviceRadixSort::SortKeys");
        workloads::bitonic2gpu_kernel<<<pair_->blocks(g), block_threads, 0, stream>>>(k);
      });
    }
    Timing t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    t.verified = true;
    for (int g = 0; g < pair_gpus; ++g) t.verified = verify(g) && t.verified;
    return t;
  }
  void describe(Record& r) const override {
    r.dataset_bytes = std::uint64_t{s_.bitonic_keys} * 4;
    r.useful_bytes = std::uint64_t{s_.bitonic_keys} * 4;  // every key crosses to the other GPU
    r.bytes_moved = static_cast<std::int64_t>(r.useful_bytes);
    r.extra["bitonic_keys"] = s_.bitonic_keys;
    r.extra["bitonic_chunks"] = size_.chunks();
  }

 private:
  /// GPU g's result against its half of the sorted keys; says where the first difference is.
  bool verify(int g) const {
    const OnDevice on(g);
    std::vector<std::uint32_t> got(size_.half);
    check(cudaMemcpy(got.data(), gpus_[g].out.get(), got.size() * 4, cudaMemcpyDeviceToHost), "bitonic2gpu result");
    const auto want = reference_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::uint64_t>(g) * size_.half);
    const auto [at, expected] = std::mismatch(got.begin(), got.end(), want);
    if (at == got.end()) return true;
    std::fprintf(stderr, "bitonic2gpu: GPU %d: key %lld of its half is %u, expected %u\n", g,
                 static_cast<long long>(at - got.begin()), *at, *expected);
    return false;
  }

  Setup s_;
  workloads::BitonicGeometry size_;
  std::vector<std::uint32_t> keys_, reference_;
};

// ---- pingpong2gpu -----------------------------------------------------------------------------

/// Pingpong2Gpu's buffers on one GPU.
struct PingpongBuffers {
  detail::device_ptr<std::uint32_t> mailbox, wrong;
};

/// pingpong2gpu on GPUs 0 and 1 (pingpong2gpu.cuh): one block per GPU, a 128-byte message per
/// tag and direction; `us_per_iteration` is the round trip.
class Pingpong2GpuRunner final : public PairRunner<PingpongBuffers> {
 public:
  Pingpong2GpuRunner(const Setup& s, const std::vector<WaitMode>& modes) : s_(s) {
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"pingpong2gpu", reinterpret_cast<const void*>(&workloads::pingpong2gpu_kernel), 0, 1,
                       s.pingpong_iterations, workloads::pingpong_words * 4, false, true},
        modes);
    for (int g = 0; g < pair_gpus; ++g) {
      const OnDevice on(g);
      gpus_[g].mailbox = detail::make_device<std::uint32_t>(message_words(), "pingpong2gpu mailbox");
      gpus_[g].wrong = detail::make_device<std::uint32_t>(1, "pingpong2gpu check");
    }
  }

  Timing run(WaitMode mode) override {
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      const OnDevice on(g);
      poison(g, gpus_[g].mailbox.get(), message_words() * 4);
      check(cudaMemset(gpus_[g].wrong.get(), 0, 4), "cudaMemset pingpong2gpu check");
    }
    pair_->wait_idle();
    for (int g = 0; g < pair_gpus; ++g) {
      const workloads::Pingpong2Gpu k{pair_->exchange(g, mode), static_cast<std::uint32_t>(g), s_.pingpong_iterations,
                               gpus_[g].mailbox.get(), gpus_[1 - g].mailbox.get(), gpus_[g].wrong.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) { workloads::pingpong2gpu_kernel<<<1, block_threads, 0, stream>>>(k); });
    }
    Timing t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    for (int g = 0; g < pair_gpus; ++g) {
      const OnDevice on(g);
      std::uint32_t wrong = 0;
      check(cudaMemcpy(&wrong, gpus_[g].wrong.get(), 4, cudaMemcpyDeviceToHost), "pingpong2gpu check");
      if (wrong != 0) std::fprintf(stderr, "pingpong2gpu: GPU %d received %u wrong words\n", g, wrong);
      t.verified = t.verified && wrong == 0;
    }
    return t;
  }
  void describe(Record& r) const override {
    r.dataset_bytes = message_words() * 4 * pair_gpus;
    r.useful_bytes = r.dataset_bytes;  // every message crosses once
    r.bytes_moved = static_cast<std::int64_t>(r.useful_bytes);
    r.extra["pingpong_iterations"] = s_.pingpong_iterations;
  }

 private:
  [[nodiscard]] std::uint64_t message_words() const { return std::uint64_t{s_.pingpong_iterations} * workloads::pingpong_words; }

  Setup s_;
};

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  using namespace warpvm::bench;
  Options options;
  options.suite = "channel";
  options.repeats = 5;
  options.modes = {"channel", "channel_direct", "channel_warp", "pinned_flag", "peer_flag", "naive", "atomic_wait"};
  Setup setup;
  setup.seed = std::random_device{}();
  std::vector<std::string> workloads{"tiles", "cg", "halo"};
  std::vector<std::uint32_t> thread_sweep;
  CLI::App app{"warpvm-channel-bench: CPU-to-GPU and GPU-to-GPU producer/consumer workloads, JSON Lines out.\n"
               "CPU to GPU: tiles, cg, halo (the default). GPU to GPU, on GPUs 0 and 1: stencil2gpu, kmeans2gpu, gemm2gpu,\n"
               "bfs2gpu, bitonic2gpu, pingpong2gpu. Modes: channel, channel_direct, channel_warp, pinned_flag, peer_flag,\n"
               "naive, atomic_wait (each workload runs those it has).",
               "warpvm-channel-bench"};
  add_shared_options(app, options);
  warpvm::cli::add_list(app, "--workloads", workloads, "workloads to run");
  app.add_option("--seed", setup.seed, "seed of the inputs (default: random)");
  app.add_option("--tiles", setup.tiles, "tiles: tiles produced");
  app.add_option("--side", setup.side, "tiles: a tile's side (even)");
  app.add_option("--consumer-threads", setup.consumer_threads, "tiles: consumer threads (0: 256 per SM)");
  app.add_option("--compute-blocks", setup.compute_blocks, "blocks of the compute kernel (0: two per SM)");
  app.add_option("--compute-iters", setup.compute_iters, "the compute kernel's iterations");
  app.add_option("--cg-rows", setup.cg_rows, "cg: rows");
  app.add_option("--cg-rows-per-warp", setup.cg_rows_per_warp, "cg: rows per warp");
  app.add_option("--cg-iterations", setup.cg_iterations, "cg: iterations");
  app.add_option("--halo-side", setup.halo_side, "halo: the cube's side (a multiple of 8)");
  app.add_option("--halo-iterations", setup.halo_iterations, "halo: iterations");
  app.add_option("--stencil-side", setup.stencil_side, "stencil2gpu: side (a multiple of 64)");
  app.add_option("--stencil-iterations", setup.stencil_iterations, "stencil2gpu: iterations");
  app.add_option("--kmeans-points", setup.kmeans_points, "kmeans2gpu: points (even, at least 2 k, at most 2^26; half per GPU)");
  app.add_option("--kmeans-k", setup.kmeans_k, "kmeans2gpu: centroids (a multiple of 8 up to 1024)");
  app.add_option("--kmeans-iterations", setup.kmeans_iterations, "kmeans2gpu: iterations (1 to 1000)");
  app.add_option("--gemm-side", setup.gemm_side, "gemm2gpu: side (a multiple of 128 up to 8192)");
  app.add_option("--bfs-scale", setup.bfs_scale, "bfs2gpu: 2^scale vertices (11 to 30)");
  app.add_option("--bfs-edge-factor", setup.bfs_edge_factor, "bfs2gpu: edge factor");
  app.add_option("--bfs-max-levels", setup.bfs_max_levels, "bfs2gpu: levels (1 to 4096; a search whose deepest vertex is at depth D needs D + 2)");
  app.add_option("--bitonic-keys", setup.bitonic_keys, "bitonic2gpu: keys (a multiple of 2^17 up to 2^30)");
  app.add_option("--pingpong-iterations", setup.pingpong_iterations, "pingpong2gpu: round trips (1 to 65536)");
  app.add_option("--interval-us", setup.interval_us, "tiles: the host producer's interval between tiles");
  warpvm::cli::add_list(app, "--consumer-threads-sweep", thread_sweep, "tiles: consumer thread counts to sweep (each >= 32)");
  for (const auto& [flag, on_consumer] :
       {std::pair{"--stencil-direct-buffer", &setup.stencil_direct_buffer_on_consumer},
        std::pair{"--kmeans-direct-buffer", &setup.kmeans_direct_buffer_on_consumer},
        std::pair{"--gemm-direct-buffer", &setup.gemm_direct_buffer_on_consumer},
        std::pair{"--bfs-direct-buffer", &setup.bfs_direct_buffer_on_consumer},
        std::pair{"--bitonic-direct-buffer", &setup.bitonic_direct_buffer_on_consumer}})
    app.add_option_function<std::string>(
           flag, [on_consumer](const std::string& value) { *on_consumer = value == "consumer"; },
           "channel_direct, channel_warp: the buffer in the consuming GPU's memory (consumer) or the producing GPU's, "
           "as channel (producer)")
        ->check(CLI::IsMember({"producer", "consumer"}));
  app.add_option("--timeline", setup.timeline_csv, "append each mode's last run's warp stamps to this CSV");
  app.add_option("--monitor-cpu", setup.monitor_cpu,
                 "CPU to GPU: the host CPU of the channel's monitor (-1: the OS places it)")
      ->check(CLI::Range(-1, CPU_SETSIZE - 1));
  app.add_option("--producer-cpu", setup.producer_cpu, "CPU to GPU: the host CPU of the host producer (-1: the OS places it)")
      ->check(CLI::Range(-1, CPU_SETSIZE - 1));
  warpvm::cli::parse(app, argc, argv);
  const auto usage = [&app](const std::string& message) { warpvm::cli::refuse(app, message); };
  if (options.repeats < 1) usage("--repeats must be at least 1");
  if (setup.side < 2 || setup.side % 2 != 0 || setup.tiles == 0) usage("tiles: --side must be even and >= 2, --tiles >= 1");
  if (setup.cg_rows_per_warp == 0 || setup.cg_rows % (setup.cg_rows_per_warp * warpvm::workloads::block_warps) != 0 ||
      setup.cg_rows_per_warp < warpvm::workloads::cg_band || setup.cg_iterations == 0)
    usage("cg: --cg-rows must be a multiple of 8 x --cg-rows-per-warp (>= 4), --cg-iterations >= 1");
  if (setup.halo_side < 8 || setup.halo_side % 8 != 0 || setup.halo_iterations == 0)
    usage("halo: --halo-side must be a multiple of 8 (one warp per plane, whole blocks), --halo-iterations >= 1");
  if (!warpvm::workloads::stencil_side_runs(setup.stencil_side) || setup.stencil_iterations == 0)
    usage(std::string("stencil2gpu: ") + warpvm::workloads::stencil_side_rule + ", --stencil-iterations >= 1");
  if (setup.kmeans_k < 8 || setup.kmeans_k % 8 != 0 || setup.kmeans_k > 1024 || setup.kmeans_points % 2 != 0 ||
      setup.kmeans_points < 2 * setup.kmeans_k || setup.kmeans_points > (1u << 26) || setup.kmeans_iterations == 0 ||
      setup.kmeans_iterations > 1000)
    usage("kmeans2gpu: --kmeans-k must be a multiple of 8 up to 1024 (eight warps of whole centroids), "
          "--kmeans-points even, at least 2 x k and at most 2^26, --kmeans-iterations 1 to 1000 (stamps per warp)");
  if (setup.gemm_side < 128 || setup.gemm_side % 128 != 0 || setup.gemm_side > 8192)
    usage("gemm2gpu: --gemm-side must be a multiple of 128 (two halves of 64-row panels) up to 8192");
  if (setup.bfs_scale < 11 || setup.bfs_scale > 30 || setup.bfs_edge_factor == 0 || setup.bfs_max_levels == 0 ||
      setup.bfs_max_levels > 4096)
    usage("bfs2gpu: --bfs-scale must be 11 to 30 (halves of whole 1024-vertex groups), --bfs-edge-factor >= 1, "
          "--bfs-max-levels 1 to 4096");
  if (setup.bitonic_keys == 0 || setup.bitonic_keys % (2 * warpvm::workloads::bitonic_chunk) != 0 ||
      setup.bitonic_keys > (1u << 30))
    usage("bitonic2gpu: --bitonic-keys must be a positive multiple of 2^17 (two halves of 64K-key chunks) up to 2^30");
  if (setup.pingpong_iterations == 0 || setup.pingpong_iterations > 65536)
    usage("pingpong2gpu: --pingpong-iterations must be 1 to 65536");
  for (const std::uint32_t t : thread_sweep)
    if (t < 32) usage("--consumer-threads-sweep: at least 32 threads (one warp)");
  // Each workload runs the listed modes it has: CPU to GPU all_modes, GPU to GPU gpu_pair_modes.
  std::vector<warpvm::workloads::WaitMode> modes, gpu_to_gpu_modes;
  for (const std::string& m : options.modes) {
    auto named = [&](warpvm::workloads::WaitMode x) { return m == mode_name(x); };
    const auto* cpu_mode = std::find_if(std::begin(all_modes), std::end(all_modes), named);
    const auto* gpu_mode = std::find_if(std::begin(gpu_pair_modes), std::end(gpu_pair_modes), named);
    if (cpu_mode == std::end(all_modes) && gpu_mode == std::end(gpu_pair_modes)) usage("unknown mode " + m);
    if (cpu_mode != std::end(all_modes)) modes.push_back(*cpu_mode);
    if (gpu_mode != std::end(gpu_pair_modes)) gpu_to_gpu_modes.push_back(*gpu_mode);
  }
  for (const std::string& w : workloads) {
    const bool gpu_to_gpu = w == "stencil2gpu" || w == "kmeans2gpu" || w == "gemm2gpu" || w == "bfs2gpu" ||
                            w == "bitonic2gpu" || w == "pingpong2gpu";
    if (w != "tiles" && w != "cg" && w != "halo" && !gpu_to_gpu) usage("unknown workload " + w);
    if ((gpu_to_gpu ? gpu_to_gpu_modes : modes).empty())
      usage("none of --modes applies to " + w);
  }
  if (warpvm::device_count() == 0) {
    std::fprintf(stderr, "warpvm-channel-bench: no CUDA device visible; nothing measured\n");
    return 0;
  }
  try {
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
    Recorder recorder(options);
    bool all_verified = true;
    auto run = [&](Workload& w) {
      for (const Record& r : measure(w, setup, sms, modes, options.repeats, all_verified)) recorder.write(r);
    };
    for (const std::string& name : workloads) {
      if (name == "tiles") {
        if (thread_sweep.empty()) thread_sweep.push_back(setup.consumer_threads);
        for (const std::uint32_t threads : thread_sweep) {
          Setup point = setup;
          point.consumer_threads = threads;
          Tiles tiles(point, sms);
          run(tiles);
        }
      } else if (name == "cg") {
        Cg cg(setup);
        run(cg);
      } else if (name == "stencil2gpu" || name == "kmeans2gpu" || name == "gemm2gpu" || name == "bfs2gpu" ||
                 name == "bitonic2gpu" || name == "pingpong2gpu") {
        const auto make = [&](const std::vector<warpvm::workloads::WaitMode>& runnable) -> std::unique_ptr<PairWorkload> {
          if (name == "stencil2gpu") return std::make_unique<Stencil2GpuRunner>(setup, runnable);
          if (name == "gemm2gpu") return std::make_unique<Gemm2GpuRunner>(setup, runnable);
          if (name == "bfs2gpu") return std::make_unique<Bfs2GpuRunner>(setup, runnable);
          if (name == "bitonic2gpu") return std::make_unique<Bitonic2GpuRunner>(setup, runnable);
          if (name == "pingpong2gpu") return std::make_unique<Pingpong2GpuRunner>(setup, runnable);
          return std::make_unique<Kmeans2GpuRunner>(setup, runnable);
        };
        for (const Record& r : measure_gpu_pair(name.c_str(), setup, gpu_to_gpu_modes, options.repeats, all_verified, make))
          recorder.write(r);
      } else {
        Halo halo(setup);
        run(halo);
      }
    }
    return all_verified ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpvm-channel-bench: %s\n", e.what());
    return 1;
  }
}

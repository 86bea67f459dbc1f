// warpvm-channel-bench: producer/consumer workloads of issue #7, CPU to GPU and GPU to GPU, each
// checked against a host reference with fresh random inputs (--seed to repeat one):
//
//   tiles  a host thread publishes N image tiles, one every `interval` microseconds; consumer
//          warps blur each tile (3x3 box sum) into device memory
//   cg     conjugate gradient, CPU and GPU alternating every iteration (channel_workloads.cuh)
//   halo   a 3D cube whose six face halos the host produces every iteration (channel_workloads.cuh)
//   stencil2gpu  GPU to GPU: a 2D stencil on a grid split between GPUs 0 and 1, each GPU producing
//          its boundary row for the other every iteration (channel_workloads.cuh; its own runner
//          below, with the modes channel, channel_direct, peer_flag, naive and atomic_wait)
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
// the producer's stores fill over NVLink), no host monitor involved.
//
// JSON Lines (bench/micro's Recorder), one record per workload, mode and consumer count; the
// metrics (overlap_efficiency, wait_share, monitor shares) are defined in docs/channels.md.

#include "../micro/bench_support.cuh"
#include "channel_workloads.cuh"
#include "cli_args.hpp"
#include "overlap_metric.hpp"

#include "warpvm/channel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace warpvm::bench {
namespace {

namespace cw = channel_workloads;
using cw::block_threads;
using cw::block_warps;
using cw::WaitMode;

constexpr WaitMode all_modes[] = {WaitMode::channel, WaitMode::pinned_flag, WaitMode::naive, WaitMode::atomic_wait};

const char* mode_name(WaitMode m) {
  switch (m) {
    case WaitMode::channel: return "channel";
    case WaitMode::pinned_flag: return "pinned_flag";
    case WaitMode::naive: return "naive";
    case WaitMode::atomic_wait: return "atomic_wait";
    case WaitMode::peer_flag: return "peer_flag";
    case WaitMode::channel_direct: return "channel_direct";
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
  virtual void launch(const cw::Launch& l, std::uint32_t blocks, cudaStream_t stream) = 0;
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

__global__ void __launch_bounds__(block_threads) tiles_kernel(cw::Launch l, TilesKernel t) {
  const std::uint32_t warp = blockIdx.x * block_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::uint64_t started = detail::global_timer_ns();
  const bool consumer = blockIdx.x < l.consumer_blocks;
  const std::uint32_t pixels = t.side * t.side, bytes = pixels * 4;
  const cw::Source& s = l.source;
  if (consumer && !l.compute_only) {
    if (s.mode == WaitMode::naive) {  // Algorithm 1: the block is the consumer of a tile
      // the block's warps' scratch, of which it uses the first tile
      auto* scratch = reinterpret_cast<std::uint32_t*>(s.scratch + std::uint64_t{blockIdx.x} * block_warps * s.scratch_bytes);
      for (std::uint32_t tile = blockIdx.x; tile < t.tiles; tile += l.consumer_blocks) {
        const std::uint64_t t0 = detail::global_timer_ns();
        __syncthreads();
        if (threadIdx.x == 0) cw::spin_on_flags(s, tile, 1);
        __syncthreads();
        s.stamps.wait(warp, t0, detail::global_timer_ns());
        const auto* from = reinterpret_cast<const uint4*>(s.pinned + std::uint64_t{tile} * bytes);
        for (std::uint32_t i = threadIdx.x; i < pixels / 4; i += block_threads) reinterpret_cast<uint4*>(scratch)[i] = from[i];
        __syncthreads();
        blur(scratch, t.out + std::uint64_t{tile} * pixels, t.side, threadIdx.x, block_threads);
      }
    } else {
      for (std::uint32_t tile = warp; warp < t.consumer_warps && tile < t.tiles; tile += t.consumer_warps) {
        cw::Held held = cw::meet(s, warp, tile, 1, tile, 1, bytes, std::uint64_t{tile} * bytes);
        blur(reinterpret_cast<const std::uint32_t*>(held.data), t.out + std::uint64_t{tile} * pixels, t.side, lane, 32);
        cw::finish(held);
      }
    }
  } else if (!consumer && !l.consumers_only) {
    cw::independent_work(l.compute_iterations, l.compute_out);
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
  void launch(const cw::Launch& l, std::uint32_t blocks, cudaStream_t stream) override {
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
  explicit Cg(const Setup& s) : s_(s), matrix_(cw::cg_random_matrix(s.cg_rows, s.seed)), b_(s.cg_rows) {
    std::mt19937_64 rng(s.seed ^ 0x5bd1e995u);
    std::uniform_real_distribution<double> value(0.5, 1.5);
    for (double& v : b_) v = value(rng);
    reference_ = cw::cg_reference(matrix_, b_, s.cg_iterations);
    const std::uint64_t n = s.cg_rows;
    check(cudaMalloc(&diagonal_, n * 8), "cudaMalloc cg diagonal");
    check(cudaMalloc(&band_, n * 8 * cw::cg_band), "cudaMalloc cg band");
    check(cudaMemcpy(diagonal_, matrix_.diagonal.data(), n * 8, cudaMemcpyHostToDevice), "cg diagonal");
    check(cudaMemcpy(band_, matrix_.band.data(), n * 8 * cw::cg_band, cudaMemcpyHostToDevice), "cg band");
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
  [[nodiscard]] std::uint32_t window_bytes() const override { return (s_.cg_rows_per_warp + 2 * cw::cg_band) * 8; }
  [[nodiscard]] std::uint64_t buffer_bytes() const override {
    return std::uint64_t{s_.cg_iterations} * s_.cg_rows * 8;
  }
  [[nodiscard]] std::uint32_t tags() const override { return s_.cg_iterations; }
  void check_resident(std::uint32_t consumer_blocks, int sms) const override {
    check_coresident(reinterpret_cast<const void*>(&cw::cg_kernel), consumer_blocks, sms, "cg");
  }
  void prepare() override {
    check(cudaMemset(arrived_, 0, std::uint64_t{s_.cg_iterations} * 4), "cudaMemset cg arrived");
    std::memset(done_->as<void>(), 0, done_->bytes());
    x_.clear();
  }
  void launch(const cw::Launch& l, std::uint32_t blocks, cudaStream_t stream) override {
    void* q = nullptr;
    void* done = nullptr;
    check(cudaHostGetDevicePointer(&q, q_->as<void>(), 0), "cudaHostGetDevicePointer");
    check(cudaHostGetDevicePointer(&done, done_->as<void>(), 0), "cudaHostGetDevicePointer");
    const cw::CgKernel c{cw::CgMatrix{s_.cg_rows, diagonal_, band_}, s_.cg_rows_per_warp, s_.cg_iterations,
                         static_cast<double*>(q), arrived_, static_cast<std::uint32_t*>(done)};
    cw::cg_kernel<<<blocks, block_threads, 0, stream>>>(l, c);
  }
  /// The CPU's half: publish p, wait for q = A p, update; s_.cg_iterations times.
  void produce(std::byte* buffer, const std::function<void(std::uint32_t, std::uint32_t)>& publish,
               const std::function<bool()>& kernel_done) override {
    const std::uint64_t n = s_.cg_rows;
    cw::CgState state = cw::cg_start(b_);
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
      cw::cg_update(state, q_->as<double>());
    }
    x_ = std::move(state.x);
  }
  bool verify() override {
    error_ = x_.empty() ? 1.0 : cw::relative_error(x_, reference_);
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
  cw::CgHostMatrix matrix_;
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
    reference_ = cw::halo_reference(initial_, s.halo_side, s.halo_iterations, salt_);
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
    return std::uint64_t{s_.halo_iterations} * cw::HaloLayout{s_.halo_side}.words_per_iteration() * 4;
  }
  [[nodiscard]] std::uint32_t tags() const override { return s_.halo_iterations * cw::halo_faces; }
  void check_resident(std::uint32_t consumer_blocks, int sms) const override {
    check_coresident(reinterpret_cast<const void*>(&cw::halo_kernel), consumer_blocks, sms, "halo");
  }
  void prepare() override {
    check(cudaMemcpy(cells_, initial_.data(), initial_.size() * 4, cudaMemcpyHostToDevice), "halo cells");
    check(cudaMemset(progress_, 0, std::uint64_t{s_.halo_side} * 4), "cudaMemset halo progress");
  }
  void launch(const cw::Launch& l, std::uint32_t blocks, cudaStream_t stream) override {
    cw::halo_kernel<<<blocks, block_threads, 0, stream>>>(l, cw::HaloKernel{s_.halo_side, s_.halo_iterations, cells_, progress_});
  }
  /// Every iteration, the six faces one after another, each published on its own.
  void produce(std::byte* buffer, const std::function<void(std::uint32_t, std::uint32_t)>& publish,
               const std::function<bool()>&) override {
    auto* words = reinterpret_cast<std::uint32_t*>(buffer);
    for (std::uint32_t k = 0; k < s_.halo_iterations; ++k)
      for (std::uint32_t face = 0; face < cw::halo_faces; ++face) {
        cw::halo_write_face(words, s_.halo_side, k, face, salt_);
        publish(cw::halo_faces * k + face, 1);
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
  double seconds = 0;  ///< event time of the kernel
  double span_s = 0;   ///< from stamps: first start to last end
  WaitMetrics waits;
  bool verified = true;
};

/// Device memory for cw::Stamps on the current GPU: the lives of `warps` warps and up to
/// `capacity` waits of each of `waiting` warps (the stamps' wait rows).
class DeviceStamps {
 public:
  DeviceStamps(std::uint64_t warps, std::uint64_t waiting, std::uint32_t capacity)
      : lives_(warps * 3), waits_(waiting * capacity * 2), counts_(waiting), waiting_(waiting), capacity_(capacity) {}

  [[nodiscard]] cw::Stamps view() const { return {lives_.data, waits_.data, counts_.data, capacity_}; }
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
                                                  .max_warps = max_warps_});
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
    const cw::Launch l{cw::Source{mode, ch_->device(), static_cast<const std::byte*>(pinned_dev),
                                  static_cast<std::uint32_t*>(flags_dev), scratch_, scratch_bytes_,
                                  stamps_->view()},
                       consumer_blocks, s_.compute_iters, compute_out_, consumers_only, compute_only};
    check(cudaEventRecord(begin_, stream_), "cudaEventRecord");
    w_.launch(l, blocks, stream_);
    check(cudaGetLastError(), "launch");
    check(cudaEventRecord(end_, stream_), "cudaEventRecord");
    if (!compute_only) {
      std::byte* buffer = mode == WaitMode::channel ? ch_->buffer().data() : pinned_->as<std::byte>();
      auto* flags = flags_->as<std::uint32_t>();
      w_.produce(
          buffer,
          [&](std::uint32_t first, std::uint32_t count) {
            if (mode == WaitMode::channel) ch_->publish(first, count);
            else
              for (std::uint32_t t = first; t < first + count; ++t)
                std::atomic_ref<std::uint32_t>(flags[t]).store(1, std::memory_order_release);
          },
          [&] { return cudaEventQuery(end_) != cudaErrorNotReady; });
    }
    check(cudaEventSynchronize(end_), "kernel");
    ch_->synchronize();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime");

    std::vector<WarpTimeline> timelines = stamps_->read(warps, [](std::uint64_t w) { return w; });
    std::erase_if(timelines, [&](const WarpTimeline& t) { return t.consumer ? compute_only : consumers_only; });
    unsigned long long first = ~0ull, last = 0;
    for (const WarpTimeline& t : timelines) {
      first = std::min<unsigned long long>(first, t.life.begin);
      last = std::max<unsigned long long>(last, t.life.end);
    }
    Timing t;
    t.seconds = ms / 1e3;
    t.span_s = last > first ? static_cast<double>(last - first) / 1e9 : 0;
    t.waits = wait_metrics(timelines);
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

/// Speedups over naive polling and against the best baseline (every mode but the channel ones),
/// where those modes ran.
void add_speedups(std::vector<Record>& records) {
  double naive = 0, best_baseline = 0;
  for (const Record& r : records) {
    const double sec = median(r.seconds);
    if (r.mode == "naive") naive = sec;
    const bool channel_mode = r.mode == "channel" || r.mode == "channel_direct";
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
    std::vector<double> spans, shares, overlaps, waited, streams, computes;
    ChannelStats served{};  // the monitor's work during the measured runs with both sides
    for (int rep = 0; rep < repeats; ++rep) {
      const ChannelStats before = harness.channel_stats();
      const Timing both = harness.run(mode, false, false);
      add_served(served, before, harness.channel_stats());
      verified = verified && both.verified;
      r.seconds.push_back(both.seconds);
      spans.push_back(both.span_s);
      shares.push_back(both.waits.wait_share);
      overlaps.push_back(both.waits.overlap_efficiency);
      waited.push_back(both.waits.wait_seconds);
      const Timing stream = harness.run(mode, true, false);
      verified = verified && stream.verified;
      streams.push_back(stream.span_s);
      computes.push_back(harness.run(mode, false, true).span_s);
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

// ---- stencil2gpu: GPU to GPU (its own runner: the harness above is one GPU's) ---------------

constexpr WaitMode stencil_modes[] = {WaitMode::channel, WaitMode::channel_direct, WaitMode::peer_flag, WaitMode::naive,
                                      WaitMode::atomic_wait};
constexpr int stencil_gpus = 2;
/// The host gives up on a run after this long: past the kernels' own watchdogs (10 s for the
/// spins, the channel's), which only atomic_wait's libcu++ wait does not have.
constexpr double stencil_host_deadline_s = 60;

/// Why GPUs 0 and 1 cannot run stencil2gpu at all (empty: they can).
std::string stencil_gpus_missing() {
  int visible = 0;
  check(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
  if (visible < stencil_gpus) return "needs two GPUs, " + std::to_string(visible) + " visible";
  int there = 0, back = 0;
  check(cudaDeviceCanAccessPeer(&there, 0, 1), "cudaDeviceCanAccessPeer");
  check(cudaDeviceCanAccessPeer(&back, 1, 0), "cudaDeviceCanAccessPeer");
  if (there == 0 || back == 0) return "GPUs 0 and 1 have no peer access both ways";
  return {};
}

/// Why `mode` cannot run on GPUs 0 and 1 (empty: it can).
std::string stencil_mode_missing(WaitMode mode) {
  for (int g = 0; g < stencil_gpus; ++g) {
    int supported = 0;
    if (cw::uses_channel(mode)) {  // kernels OR their tags into the other GPU's map
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

/// `iterations` updates of the whole side x side grid on the host, from `grid`: the reference,
/// computed without the split in two.
std::vector<std::uint32_t> stencil_reference(std::vector<std::uint32_t> grid, std::uint32_t side,
                                             std::uint32_t iterations) {
  const std::uint64_t n = side;
  const std::vector<std::uint32_t> outside(n, 0);  // the rows above and below the grid
  std::vector<std::uint32_t> next(grid.size());
  for (std::uint32_t k = 0; k < iterations; ++k) {
    parallel_for(n, [&](std::uint64_t first, std::uint64_t end) {
      for (std::uint64_t y = first; y < end; ++y) {
        const std::uint32_t* row = grid.data() + y * n;
        const std::uint32_t* north = y > 0 ? row - n : outside.data();
        const std::uint32_t* south = y + 1 < n ? row + n : outside.data();
        std::uint32_t* out = next.data() + y * n;
        for (std::uint64_t x = 0; x < n; ++x)
          out[x] = cw::stencil_update(row[x], north[x], south[x], x > 0 ? row[x - 1] : 0u, x + 1 < n ? row[x + 1] : 0u);
      }
    });
    grid.swap(next);
  }
  return grid;
}

/// stencil2gpu on GPUs 0 and 1: each GPU's half of the grid, halo, flags, stamps and (channel
/// modes) its channels, kept across modes and repeats. GPU g's channels have their consumers on
/// g and their buffer on the other GPU (channel_direct, unless --stencil-direct-buffer producer:
/// on g), whose kernel writes it and publishes into g's device map; one with the host monitor
/// (`channel`), one in direct mode (`channel_direct`), each made only when its mode runs.
class Stencil2GpuRunner {
 public:
  Stencil2GpuRunner(const Setup& s, const std::vector<WaitMode>& modes)
      : s_(s), rows_(s.stencil_side / 2), half_(std::uint64_t{rows_} * s.stencil_side) {
    initial_.resize(std::uint64_t{s.stencil_side} * s.stencil_side);
    fill_random(initial_.data(), initial_.size(), s.seed + 2);
    std::fprintf(stderr, "stencil2gpu: host reference (%u x %u, %u iterations)\n", s.stencil_side, s.stencil_side,
                 s.stencil_iterations);
    reference_ = stencil_reference(initial_, s.stencil_side, s.stencil_iterations);
    for (int g = 0; g < stencil_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      gpu.device = g;
      const OnDevice on(g);
      enable_peer_access(g, 1 - g);  // stores into the other GPU's halo
      int sms = 0, per_sm = 0;
      check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g), "cudaDeviceGetAttribute");
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(&cw::stencil2gpu_kernel),
                                                          static_cast<int>(block_threads), 0),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      // Blocks wait for their neighbours and the other GPU: all must be resident at once.
      gpu.blocks = std::min(rows_ / cw::stencil_min_rows_per_block, static_cast<std::uint32_t>(per_sm * sms));
      if (gpu.blocks == 0) throw std::runtime_error("stencil2gpu: the kernel does not fit on GPU " + std::to_string(g));
      check(cudaMalloc(&gpu.cells, 2 * half_ * 4), "cudaMalloc stencil cells");
      check(cudaMalloc(&gpu.progress, std::uint64_t{gpu.blocks} * 4), "cudaMalloc stencil progress");
      check(cudaMalloc(&gpu.halo, 2ull * s.stencil_side * 4), "cudaMalloc stencil halo");
      check(cudaMalloc(&gpu.published, 4), "cudaMalloc stencil flag");
      // lives of every warp, waits of the cut block's only
      gpu.stamps = std::make_unique<DeviceStamps>(std::uint64_t{gpu.blocks} * block_warps, block_warps,
                                                  s.stencil_iterations);
      check(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking), "cudaStreamCreate");
      check(cudaEventCreate(&gpu.begin), "cudaEventCreate");
      check(cudaEventCreate(&gpu.end), "cudaEventCreate");
      managed_published_[g] = std::make_unique<Managed>(sizeof(std::uint32_t));  // naive: one allocation each
    }
    const std::uint32_t slice_bytes = s.stencil_side / block_warps * 4;
    for (const WaitMode mode : modes) {
      if (!cw::uses_channel(mode)) continue;
      const int kind = channel_kind(mode);
      for (int g = 0; g < stencil_gpus; ++g)
        gpus_[g].ch[kind] = std::make_unique<channel>(ChannelConfig{
            .buffer_bytes = std::uint64_t{s.stencil_iterations} * s.stencil_side * 4,  // one row per state
            .tag_count = s.stencil_iterations,
            .staging_page_bytes = 4096,
            .staging_pages = 4 * block_warps * ((slice_bytes + 4095) / 4096),  // the cut block's slices, 4 times
            .max_warps = gpus_[g].blocks * block_warps,
            .watchdog_seconds = static_cast<double>(cw::stencil_watchdog_ns) / 1e9,
            .device = g,
            .device_producers = true,
            .buffer_device = mode == WaitMode::channel_direct && s.stencil_direct_buffer_on_consumer ? g : 1 - g,
            .direct = mode == WaitMode::channel_direct});
      for (int g = 0; g < stencil_gpus; ++g) gpus_[g].to_neighbour[kind] = gpus_[1 - g].ch[kind]->producer(g);
    }
  }
  ~Stencil2GpuRunner() {
    for (Gpu& gpu : gpus_) {
      for (auto& ch : gpu.ch) ch.reset();  // the monitors first: they copy from the other GPU's memory
      const OnDevice on(gpu.device);
      cudaFree(gpu.cells);
      cudaFree(gpu.progress);
      cudaFree(gpu.halo);
      cudaFree(gpu.published);
      gpu.stamps.reset();
      cudaEventDestroy(gpu.begin);
      cudaEventDestroy(gpu.end);
      cudaStreamDestroy(gpu.stream);
    }
  }
  Stencil2GpuRunner(const Stencil2GpuRunner&) = delete;
  Stencil2GpuRunner& operator=(const Stencil2GpuRunner&) = delete;

  /// One run in `mode` on both GPUs; `seconds` is the longer of the two kernels' event times.
  Timing run(WaitMode mode) {
    const std::uint32_t side = s_.stencil_side;
    const bool channel_mode = cw::uses_channel(mode);
    const int kind = channel_kind(mode);
    for (Gpu& gpu : gpus_) {  // both GPUs are idle: the previous run ended on both
      if (channel_mode) {
        channel& ch = *gpu.ch[kind];
        ch.reset();
        // Rows left by the previous run would hold the same values: poison them, so that a row
        // read before its producer wrote it shows as a wrong result in every run.
        const OnDevice on_buffer(ch.config().buffer_device);
        check(cudaMemset(ch.buffer().data(), 0xff, ch.buffer().size()), "cudaMemset channel buffer");
      }
      const OnDevice on(gpu.device);
      check(cudaMemcpy(gpu.cells, initial_.data() + gpu.device * half_, half_ * 4, cudaMemcpyHostToDevice),
            "stencil cells");
      check(cudaMemset(gpu.progress, 0, std::uint64_t{gpu.blocks} * 4), "cudaMemset stencil progress");
      check(cudaMemset(gpu.halo, 0, 2ull * side * 4), "cudaMemset stencil halo");
      check(cudaMemset(gpu.published, 0, 4), "cudaMemset stencil flag");
      gpu.stamps->clear();
      *managed_published_[gpu.device]->as<std::uint32_t>() = 0;
    }
    for (Gpu& gpu : gpus_) {
      const OnDevice on(gpu.device);
      check(cudaDeviceSynchronize(), "sync");
    }
    for (Gpu& gpu : gpus_) {
      Gpu& other = gpus_[1 - gpu.device];
      const bool naive = mode == WaitMode::naive;
      const cw::Stencil2Gpu k{mode,
                              side,
                              s_.stencil_iterations,
                              gpu.device == 0,
                              gpu.cells,
                              gpu.progress,
                              channel_mode ? gpu.ch[kind]->device() : channel_handle{},
                              channel_mode ? gpu.to_neighbour[kind] : channel_producer{},
                              gpu.halo,
                              other.halo,
                              naive ? managed_published_[gpu.device]->as<std::uint32_t>() : gpu.published,
                              naive ? managed_published_[other.device]->as<std::uint32_t>() : other.published,
                              gpu.stamps->view()};
      const OnDevice on(gpu.device);
      check(cudaEventRecord(gpu.begin, gpu.stream), "cudaEventRecord");
      cw::stencil2gpu_kernel<<<gpu.blocks, block_threads, 0, gpu.stream>>>(k);
      check(cudaGetLastError(), "stencil2gpu launch");
      check(cudaEventRecord(gpu.end, gpu.stream), "cudaEventRecord");
    }
    wait_for_kernels();
    if (channel_mode)
      for (Gpu& gpu : gpus_) gpu.ch[kind]->synchronize();  // a channel's device failure, with its message

    Timing t;
    std::vector<WarpTimeline> timelines;
    std::vector<std::uint32_t> cells(initial_.size());
    for (Gpu& gpu : gpus_) {
      const OnDevice on(gpu.device);
      check(cudaEventSynchronize(gpu.end), "stencil2gpu kernel");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, gpu.begin, gpu.end), "cudaEventElapsedTime");
      t.seconds = std::max(t.seconds, ms / 1e3);
      check(cudaMemcpy(cells.data() + gpu.device * half_, gpu.cells + (s_.stencil_iterations % 2) * half_, half_ * 4,
                       cudaMemcpyDeviceToHost),
            "stencil cells");
      add_timelines(gpu, timelines);
    }
    t.waits = wait_metrics(timelines);
    t.verified = verify(cells);
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
  [[nodiscard]] std::uint32_t blocks(int gpu) const { return gpus_[gpu].blocks; }

 private:
  struct Gpu {
    int device = 0;
    std::uint32_t blocks = 0;
    std::uint32_t* cells = nullptr;      ///< [2][rows][side]
    std::uint32_t* progress = nullptr;   ///< [blocks]
    std::uint32_t* halo = nullptr;       ///< [2][side]
    std::uint32_t* published = nullptr;  ///< peer_flag, atomic_wait
    std::unique_ptr<DeviceStamps> stamps;
    cudaStream_t stream = nullptr;
    cudaEvent_t begin = nullptr, end = nullptr;
    /// Consumers on this GPU (buffer: see the class); by channel_kind: host monitor, direct mode.
    std::unique_ptr<channel> ch[2];
    channel_producer to_neighbour[2];  ///< the other GPU's channels, for this GPU's kernel
  };

  /// Index into Gpu::ch of a channel mode.
  static int channel_kind(WaitMode mode) { return mode == WaitMode::channel_direct ? 1 : 0; }

  /// Until both kernels ended, failed or not (the caller's checks report a failure): when one
  /// fails, the other stops at its watchdog. Past the deadline a kernel may spin forever, and
  /// freeing memory would wait for it, so the process ends at once.
  void wait_for_kernels() const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(stencil_host_deadline_s);
    for (const Gpu& gpu : gpus_) {
      while (cudaEventQuery(gpu.end) == cudaErrorNotReady) {
        if (std::chrono::steady_clock::now() > deadline) {
          std::fprintf(stderr, "warpvm-channel-bench: stencil2gpu: GPU %d's kernel still runs after %.0f s; giving up\n",
                       gpu.device, stencil_host_deadline_s);
          std::_Exit(1);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
  }

  /// GPU `gpu`'s warps, their SM ids set apart from the other GPU's (wait_metrics groups by SM).
  void add_timelines(const Gpu& gpu, std::vector<WarpTimeline>& timelines) const {
    const std::uint64_t cut_block = gpu.device == 0 ? gpu.blocks - 1 : 0;
    // only the cut block's warps wait: wait rows 0 to 7
    auto row_of = [&](std::uint64_t w) { return w / block_warps == cut_block ? w % block_warps : ~std::uint64_t{0}; };
    for (WarpTimeline& t : gpu.stamps->read(std::uint64_t{gpu.blocks} * block_warps, row_of)) {
      t.sm += static_cast<std::uint32_t>(gpu.device) << 16;
      timelines.push_back(std::move(t));
    }
  }

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
  Gpu gpus_[stencil_gpus];
  std::unique_ptr<Managed> managed_published_[stencil_gpus];  ///< naive: the flag each GPU polls
};

/// stencil2gpu's records, one per mode that GPUs 0 and 1 can run (none, saying why, without two
/// peer GPUs).
std::vector<Record> measure_stencil2gpu(const Setup& setup, const std::vector<WaitMode>& wanted, int repeats,
                                        bool& all_verified) {
  if (const std::string missing = stencil_gpus_missing(); !missing.empty()) {
    std::fprintf(stderr, "warpvm-channel-bench: stencil2gpu skipped: %s\n", missing.c_str());
    return {};
  }
  std::vector<WaitMode> modes;
  for (const WaitMode mode : wanted) {
    if (const std::string missing = stencil_mode_missing(mode); !missing.empty())
      std::fprintf(stderr, "warpvm-channel-bench: stencil2gpu/%s skipped: %s\n", mode_name(mode), missing.c_str());
    else
      modes.push_back(mode);
  }
  if (modes.empty()) return {};
  Stencil2GpuRunner runner(setup, modes);
  std::vector<Record> records;
  for (const WaitMode mode : modes) {
    std::fprintf(stderr, "stencil2gpu: %s\n", mode_name(mode));
    bool verified = runner.run(mode).verified;  // warm-up, checked too
    Record r;
    r.workload = "stencil2gpu";
    r.mode = mode_name(mode);
    r.cache_fraction = 1;
    r.dataset_bytes = std::uint64_t{setup.stencil_side} * setup.stencil_side * 4;
    // the rows the GPUs exchange: each sends its cut row of states 0 to iterations - 1
    r.useful_bytes = std::uint64_t{stencil_gpus} * setup.stencil_iterations * setup.stencil_side * 4;
    r.bytes_moved = static_cast<std::int64_t>(r.useful_bytes);
    std::vector<double> shares, overlaps, waited;
    ChannelStats served{};
    for (int rep = 0; rep < repeats; ++rep) {
      const ChannelStats before = runner.channel_stats();
      const Timing t = runner.run(mode);
      add_served(served, before, runner.channel_stats());
      verified = verified && t.verified;
      r.seconds.push_back(t.seconds);
      shares.push_back(t.waits.wait_share);
      overlaps.push_back(t.waits.overlap_efficiency);
      waited.push_back(t.waits.wait_seconds);
    }
    if (!verified)
      std::fprintf(stderr, "warpvm-channel-bench: stencil2gpu/%s: WRONG RESULTS (seed %llu)\n", r.mode.c_str(),
                   static_cast<unsigned long long>(setup.seed));
    all_verified = all_verified && verified;
    r.verified = verified;
    double kernel_seconds = 0;
    for (const double sec : r.seconds) kernel_seconds += sec;
    r.extra["seed"] = static_cast<double>(setup.seed);
    r.extra["gpus"] = stencil_gpus;
    r.extra["stencil_side"] = setup.stencil_side;
    r.extra["stencil_iterations"] = setup.stencil_iterations;
    r.extra["blocks_per_gpu"] = runner.blocks(0);
    r.extra["us_per_iteration"] = median(r.seconds) * 1e6 / setup.stencil_iterations;
    r.extra["wait_share"] = median(shares);
    r.extra["overlap_efficiency"] = median(overlaps);
    r.extra["wait_s"] = median(waited);
    if (mode == WaitMode::channel) {
      describe_monitor(r, served, kernel_seconds * stencil_gpus);
      r.extra["map_polls_per_request"] =
          static_cast<double>(served.map_polls) / static_cast<double>(std::max<std::uint64_t>(served.requests, 1));
    } else if (mode == WaitMode::channel_direct) {  // no monitor: the warps' own counters
      r.extra["direct_acquires"] = static_cast<double>(served.direct_acquires);
      r.extra["direct_buffer_on_consumer"] = setup.stencil_direct_buffer_on_consumer ? 1 : 0;
      r.extra["direct_parked_share"] = static_cast<double>(served.direct_parked) /
                                       static_cast<double>(std::max<std::uint64_t>(served.direct_acquires, 1));
    }
    records.push_back(std::move(r));
  }
  add_speedups(records);
  return records;
}

[[noreturn]] void usage(const char* message) {
  std::fprintf(stderr,
               "%s\nusage: warpvm-channel-bench [--workloads tiles,cg,halo (or any of tiles,cg,halo,stencil2gpu)]\n"
               "  [--modes channel,channel_direct,pinned_flag,peer_flag,naive,atomic_wait (each workload runs those it "
               "has)]\n"
               "  [--seed N (default: random)]\n"
               "  [--compute-blocks 0 (two per SM)] [--compute-iters 500000] [--repeats 5] [--out file.jsonl]\n"
               "  [--commit SHA] [--driver VER]\n"
               "  tiles: [--tiles 4096] [--side 64] [--interval-us 2] [--consumer-threads 0 (256 per SM)]\n"
               "         [--consumer-threads-sweep 64,1024,16384,262144,1048576]\n"
               "  cg:    [--cg-rows 131072] [--cg-rows-per-warp 256] [--cg-iterations 50]\n"
               "  halo:  [--halo-side 64] [--halo-iterations 100]\n"
               "  stencil2gpu (GPU to GPU, GPUs 0 and 1; modes channel, channel_direct, peer_flag, naive, atomic_wait):\n"
               "         [--stencil-side 4096 (a multiple of 64)] [--stencil-iterations 300]\n"
               "         [--stencil-direct-buffer consumer (channel_direct: the rows in the consuming GPU's memory) | "
               "producer (in the producing GPU's, as channel)]\n",
               message);
  std::exit(2);
}

std::uint32_t to_u32(const std::string& flag, const std::string& value) {
  const unsigned long long v = std::stoull(value);
  if (v > 0xffffffffull) usage((flag + " " + value + " is too large").c_str());
  return static_cast<std::uint32_t>(v);
}

}  // namespace
}  // namespace warpvm::bench

int main(int argc, char** argv) {
  using namespace warpvm::bench;
  Options options;
  options.suite = "channel";
  options.repeats = 5;
  options.modes = {"channel", "channel_direct", "pinned_flag", "peer_flag", "naive", "atomic_wait"};
  Setup setup;
  setup.seed = std::random_device{}();
  std::vector<std::string> workloads{"tiles", "cg", "halo"};
  std::vector<std::uint32_t> thread_sweep;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--help" || flag == "-h") usage("warpvm-channel-bench: CPU-to-GPU and GPU-to-GPU producer/consumer workloads, JSON Lines out");
      if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
      const std::string value = argv[++i];
      if (parse_shared_option(options, flag, value)) continue;  // --modes, --repeats, --out, --commit, --driver
      if (flag == "--workloads") workloads = warpvm::tools::split_list(value);
      else if (flag == "--seed") setup.seed = std::stoull(value);
      else if (flag == "--tiles") setup.tiles = to_u32(flag, value);
      else if (flag == "--side") setup.side = to_u32(flag, value);
      else if (flag == "--interval-us") setup.interval_us = std::stod(value);
      else if (flag == "--consumer-threads") setup.consumer_threads = to_u32(flag, value);
      else if (flag == "--consumer-threads-sweep")
        for (const std::string& t : warpvm::tools::split_list(value)) thread_sweep.push_back(to_u32(flag, t));
      else if (flag == "--compute-blocks") setup.compute_blocks = to_u32(flag, value);
      else if (flag == "--compute-iters") setup.compute_iters = to_u32(flag, value);
      else if (flag == "--cg-rows") setup.cg_rows = to_u32(flag, value);
      else if (flag == "--cg-rows-per-warp") setup.cg_rows_per_warp = to_u32(flag, value);
      else if (flag == "--cg-iterations") setup.cg_iterations = to_u32(flag, value);
      else if (flag == "--halo-side") setup.halo_side = to_u32(flag, value);
      else if (flag == "--halo-iterations") setup.halo_iterations = to_u32(flag, value);
      else if (flag == "--stencil-side") setup.stencil_side = to_u32(flag, value);
      else if (flag == "--stencil-iterations") setup.stencil_iterations = to_u32(flag, value);
      else if (flag == "--stencil-direct-buffer") {
        if (value != "producer" && value != "consumer") usage("--stencil-direct-buffer is producer or consumer");
        setup.stencil_direct_buffer_on_consumer = value == "consumer";
      }
      else usage(("unknown option " + flag).c_str());
    }
  } catch (const std::logic_error&) {  // std::stoul and friends
    usage("an option's value is not a number");
  }
  if (options.repeats < 1) usage("--repeats must be at least 1");
  if (setup.side < 2 || setup.side % 2 != 0 || setup.tiles == 0) usage("tiles: --side must be even and >= 2, --tiles >= 1");
  if (setup.cg_rows_per_warp == 0 || setup.cg_rows % (setup.cg_rows_per_warp * warpvm::channel_workloads::block_warps) != 0 ||
      setup.cg_rows_per_warp < warpvm::channel_workloads::cg_band || setup.cg_iterations == 0)
    usage("cg: --cg-rows must be a multiple of 8 x --cg-rows-per-warp (>= 4), --cg-iterations >= 1");
  if (setup.halo_side < 8 || setup.halo_side % 8 != 0 || setup.halo_iterations == 0)
    usage("halo: --halo-side must be a multiple of 8 (one warp per plane, whole blocks), --halo-iterations >= 1");
  if (setup.stencil_side < 64 || setup.stencil_side % 64 != 0 || setup.stencil_side > 32768 ||
      setup.stencil_iterations == 0)
    usage("stencil2gpu: --stencil-side must be a multiple of 64 up to 32768 (eight warps' column slices of whole "
          "16-byte granules), --stencil-iterations >= 1");
  for (const std::uint32_t t : thread_sweep)
    if (t < 32) usage("--consumer-threads-sweep: at least 32 threads (one warp)");
  // Each workload runs the listed modes it has: CPU to GPU all_modes, GPU to GPU stencil_modes.
  std::vector<warpvm::channel_workloads::WaitMode> modes, gpu_to_gpu_modes;
  for (const std::string& m : options.modes) {
    auto named = [&](warpvm::channel_workloads::WaitMode x) { return m == mode_name(x); };
    const auto* cpu_mode = std::find_if(std::begin(all_modes), std::end(all_modes), named);
    const auto* gpu_mode = std::find_if(std::begin(stencil_modes), std::end(stencil_modes), named);
    if (cpu_mode == std::end(all_modes) && gpu_mode == std::end(stencil_modes)) usage(("unknown mode " + m).c_str());
    if (cpu_mode != std::end(all_modes)) modes.push_back(*cpu_mode);
    if (gpu_mode != std::end(stencil_modes)) gpu_to_gpu_modes.push_back(*gpu_mode);
  }
  for (const std::string& w : workloads) {
    if (w != "tiles" && w != "cg" && w != "halo" && w != "stencil2gpu") usage(("unknown workload " + w).c_str());
    if ((w == "stencil2gpu" ? gpu_to_gpu_modes : modes).empty())
      usage(("none of --modes applies to " + w).c_str());
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
      } else if (name == "stencil2gpu") {
        for (const Record& r : measure_stencil2gpu(setup, gpu_to_gpu_modes, options.repeats, all_verified))
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

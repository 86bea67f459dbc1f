#pragma once
// The CPU-to-GPU workloads of warpvm-channel-bench as the shared harness runs them
// (CpuToGpuHarness, cpu_harness.cuh): tiles, cg and halo (their kernels and references in
// channel_workloads.cuh), each with its inputs, its host producer and its check.

#include "warpvm/workloads/channel/channel_workloads.cuh"
#include "warpvm/workloads/channel/run_support.cuh"
#include "warpvm/workloads/patterns.hpp"
#include "warpvm/detail/core/cuda_buffers.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::workloads {

/// What a CPU-to-GPU workload adds to the shared harness (CpuToGpuHarness): its consumer kernel,
/// its producer, its check.
class CpuToGpuWorkload {
 public:
  virtual ~CpuToGpuWorkload() = default;
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
  virtual void launch(const Launch& l, std::uint32_t blocks, cudaStream_t stream) = 0;
  /// The host side of a run: writes `buffer` and calls publish(first_tag, count). `kernel_done`
  /// says whether the kernel has ended (a producer waiting for the GPU gives up then).
  virtual void produce(std::byte* buffer, const std::function<void(std::uint32_t, std::uint32_t)>& publish,
                       const std::function<bool()>& kernel_done) = 0;
  virtual bool verify() = 0;
  /// Its own numbers for the record (the bench adds the sizes, buffer_bytes(), and the timings).
  [[nodiscard]] virtual Fields fields() const = 0;
};

/// Throws unless `consumer_blocks` blocks of `kernel` fit on the GPU's `sms` SMs at once.
inline void check_coresident(const void* kernel, std::uint32_t consumer_blocks, int sms, const char* what) {
  int per_sm = 0;
  expect_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(block_threads), 0),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (std::uint64_t{consumer_blocks} > std::uint64_t(per_sm) * static_cast<std::uint64_t>(sms))
    throw std::runtime_error(std::string(what) + ": " + std::to_string(consumer_blocks) +
                             " consumer blocks wait for each other but only " + std::to_string(per_sm * sms) +
                             " fit on the GPU at once; use a smaller problem");
}

// ---- tiles ----------------------------------------------------------------------------------

/// `tiles` image tiles from a host thread, one every `interval_us`; consumer warps blur them.
class Tiles final : public CpuToGpuWorkload {
 public:
  Tiles(const ChannelSetup& s, int sms, const ParallelLoop& parallel_for) : s_(s) {
    // 64 threads to 1M: warps below consumer_threads / 32 consume (the naive mode's unit is the
    // block, so it runs whole blocks of 256).
    consumer_warps_ = s.consumer_threads != 0 ? std::max(1u, s.consumer_threads / 32) : static_cast<std::uint32_t>(sms) * block_warps;
    tiles_.resize(std::uint64_t{s.tiles} * pixels());
    fill_random(tiles_.data(), tiles_.size(), s.seed, parallel_for);
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
    expect_cuda(cudaMalloc(&out_, buffer_bytes()), "cudaMalloc tiles out");
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
  void prepare() override { expect_cuda(cudaMemset(out_, 0, buffer_bytes()), "cudaMemset tiles out"); }
  void launch(const Launch& l, std::uint32_t blocks, cudaStream_t stream) override {
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
    expect_cuda(cudaMemcpy(out.data(), out_, out.size() * 4, cudaMemcpyDeviceToHost), "tiles out");
    return out == reference_;
  }
  [[nodiscard]] Fields fields() const override {
    return {{"tiles", s_.tiles}, {"tile_bytes", static_cast<double>(tile_bytes())}, {"interval_us", s_.interval_us}};
  }

 private:
  [[nodiscard]] std::uint32_t pixels() const { return s_.side * s_.side; }
  [[nodiscard]] std::uint64_t tile_bytes() const { return std::uint64_t{pixels()} * 4; }
  ChannelSetup s_;
  std::uint32_t consumer_warps_ = 0;
  std::vector<std::uint32_t> tiles_, reference_;
  std::uint32_t* out_ = nullptr;
};

// ---- cg -------------------------------------------------------------------------------------

/// Conjugate gradient: the host's half of every iteration alternates with the GPU's q = A p.
class Cg final : public CpuToGpuWorkload {
 public:
  explicit Cg(const ChannelSetup& s) : s_(s), matrix_(cg_random_matrix(s.cg_rows, s.seed)), b_(s.cg_rows) {
    std::mt19937_64 rng(s.seed ^ 0x5bd1e995u);
    std::uniform_real_distribution<double> value(0.5, 1.5);
    for (double& v : b_) v = value(rng);
    reference_ = cg_reference(matrix_, b_, s.cg_iterations);
    const std::uint64_t n = s.cg_rows;
    expect_cuda(cudaMalloc(&diagonal_, n * 8), "cudaMalloc cg diagonal");
    expect_cuda(cudaMalloc(&band_, n * 8 * cg_band), "cudaMalloc cg band");
    expect_cuda(cudaMemcpy(diagonal_, matrix_.diagonal.data(), n * 8, cudaMemcpyHostToDevice), "cg diagonal");
    expect_cuda(cudaMemcpy(band_, matrix_.band.data(), n * 8 * cg_band, cudaMemcpyHostToDevice), "cg band");
    expect_cuda(cudaMalloc(&arrived_, std::uint64_t{s.cg_iterations} * 4), "cudaMalloc cg arrived");
    q_ = detail::make_pinned_zeroed<double>(n, cudaHostAllocMapped | cudaHostAllocPortable, "cg q");
    done_ = detail::make_pinned_zeroed<std::uint32_t>(s.cg_iterations, cudaHostAllocMapped | cudaHostAllocPortable,
                                                      "cg done");
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
  [[nodiscard]] std::uint32_t window_bytes() const override { return (s_.cg_rows_per_warp + 2 * cg_band) * 8; }
  [[nodiscard]] std::uint64_t buffer_bytes() const override {
    return std::uint64_t{s_.cg_iterations} * s_.cg_rows * 8;
  }
  [[nodiscard]] std::uint32_t tags() const override { return s_.cg_iterations; }
  void check_resident(std::uint32_t consumer_blocks, int sms) const override {
    check_coresident(reinterpret_cast<const void*>(&cg_kernel), consumer_blocks, sms, "cg");
  }
  void prepare() override {
    expect_cuda(cudaMemset(arrived_, 0, std::uint64_t{s_.cg_iterations} * 4), "cudaMemset cg arrived");
    std::memset(done_.get(), 0, std::uint64_t{s_.cg_iterations} * 4);
    x_.clear();
  }
  void launch(const Launch& l, std::uint32_t blocks, cudaStream_t stream) override {
    const CgKernel c{CgMatrix{s_.cg_rows, diagonal_, band_}, s_.cg_rows_per_warp, s_.cg_iterations,
                     detail::on_device(q_.get()), arrived_, detail::on_device(done_.get())};
    cg_kernel<<<blocks, block_threads, 0, stream>>>(l, c);
  }
  /// The CPU's half: publish p, wait for q = A p, update; s_.cg_iterations times.
  void produce(std::byte* buffer, const std::function<void(std::uint32_t, std::uint32_t)>& publish,
               const std::function<bool()>& kernel_done) override {
    const std::uint64_t n = s_.cg_rows;
    CgState state = cg_start(b_);
    for (std::uint32_t k = 0; k < s_.cg_iterations; ++k) {
      std::memcpy(buffer + k * n * 8, state.p.data(), n * 8);
      publish(k, 1);
      const std::atomic_ref<std::uint32_t> done(done_.get()[k]);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      for (std::uint32_t polls = 0; done.load(std::memory_order_acquire) != 1u; ++polls) {
        if (polls % 4096 != 0) continue;
        if (kernel_done()) return;  // it failed: synchronize() says why
        if (std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error("cg: the GPU never finished iteration " + std::to_string(k));
      }
      cg_update(state, q_.get());
    }
    x_ = std::move(state.x);
  }
  bool verify() override {
    error_ = x_.empty() ? 1.0 : relative_error(x_, reference_);
    return !x_.empty() && error_ <= 1e-9;  // same bits expected; the slack only forgives the host compiler
  }
  [[nodiscard]] Fields fields() const override {
    return {{"cg_rows", s_.cg_rows},
            {"cg_rows_per_warp", s_.cg_rows_per_warp},
            {"cg_iterations", s_.cg_iterations},
            {"cg_relative_error", error_}};
  }

 private:
  ChannelSetup s_;
  CgHostMatrix matrix_;
  std::vector<double> b_, reference_, x_;
  double error_ = 0;
  double* diagonal_ = nullptr;
  double* band_ = nullptr;
  std::uint32_t* arrived_ = nullptr;
  detail::pinned_ptr<double> q_;            ///< mapped: A p of the current iteration, from the GPU
  detail::pinned_ptr<std::uint32_t> done_;  ///< mapped, [iterations]: 1 once all of q is written
};

// ---- halo -----------------------------------------------------------------------------------

/// The halo cube: the host produces its six faces every iteration, one publish each.
class Halo final : public CpuToGpuWorkload {
 public:
  Halo(const ChannelSetup& s, const ParallelLoop& parallel_for)
      : s_(s), salt_(static_cast<std::uint32_t>(s.seed * 0x9e3779b9u)) {
    const std::uint64_t cube = std::uint64_t{s.halo_side} * s.halo_side * s.halo_side;
    initial_.resize(cube);
    fill_random(initial_.data(), cube, s.seed + 1, parallel_for);
    reference_ = halo_reference(initial_, s.halo_side, s.halo_iterations, salt_);
    expect_cuda(cudaMalloc(&cells_, 2 * cube * 4), "cudaMalloc halo cells");
    expect_cuda(cudaMalloc(&progress_, std::uint64_t{s.halo_side} * 4), "cudaMalloc halo progress");
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
    return std::uint64_t{s_.halo_iterations} * HaloLayout{s_.halo_side}.words_per_iteration() * 4;
  }
  [[nodiscard]] std::uint32_t tags() const override { return s_.halo_iterations * halo_faces; }
  void check_resident(std::uint32_t consumer_blocks, int sms) const override {
    check_coresident(reinterpret_cast<const void*>(&halo_kernel), consumer_blocks, sms, "halo");
  }
  void prepare() override {
    expect_cuda(cudaMemcpy(cells_, initial_.data(), initial_.size() * 4, cudaMemcpyHostToDevice), "halo cells");
    expect_cuda(cudaMemset(progress_, 0, std::uint64_t{s_.halo_side} * 4), "cudaMemset halo progress");
  }
  void launch(const Launch& l, std::uint32_t blocks, cudaStream_t stream) override {
    halo_kernel<<<blocks, block_threads, 0, stream>>>(l, HaloKernel{s_.halo_side, s_.halo_iterations, cells_, progress_});
  }
  /// Every iteration, the six faces one after another, each published on its own.
  void produce(std::byte* buffer, const std::function<void(std::uint32_t, std::uint32_t)>& publish,
               const std::function<bool()>&) override {
    auto* words = reinterpret_cast<std::uint32_t*>(buffer);
    for (std::uint32_t k = 0; k < s_.halo_iterations; ++k)
      for (std::uint32_t face = 0; face < halo_faces; ++face) {
        halo_write_face(words, s_.halo_side, k, face, salt_);
        publish(halo_faces * k + face, 1);
      }
  }
  bool verify() override {
    std::vector<std::uint32_t> cells(initial_.size());
    expect_cuda(cudaMemcpy(cells.data(), cells_ + (s_.halo_iterations % 2) * cells.size(), cells.size() * 4,
                           cudaMemcpyDeviceToHost),
                "halo cells");
    return cells == reference_;
  }
  [[nodiscard]] Fields fields() const override {
    return {{"halo_side", s_.halo_side}, {"halo_iterations", s_.halo_iterations}};
  }

 private:
  ChannelSetup s_;
  std::uint32_t salt_;
  std::vector<std::uint32_t> initial_, reference_;
  std::uint32_t* cells_ = nullptr;
  std::uint32_t* progress_ = nullptr;
};

}  // namespace warpvm::workloads

#pragma once
// warpvm-channel-bench's GPU-to-GPU workloads as runs on GPUs 0 and 1 (a GpuPair each, gpu_pair.cuh):
// stencil2gpu, kmeans2gpu, gemm2gpu, bfs2gpu, bitonic2gpu and pingpong2gpu. Each runner makes its
// inputs and host reference, keeps its buffers on both GPUs across modes and repeats, runs both
// kernels in a mode and checks what they computed.

#include "warpvm/workloads/channel/bfs2gpu.cuh"
#include "warpvm/workloads/channel/bitonic2gpu.cuh"
#include "warpvm/workloads/channel/gemm2gpu.cuh"
#include "warpvm/workloads/channel/gpu_pair.cuh"
#include "warpvm/workloads/channel/kmeans2gpu.cuh"
#include "warpvm/workloads/channel/pingpong2gpu.cuh"
#include "warpvm/workloads/channel/run_support.cuh"
#include "warpvm/workloads/channel/stencil2gpu.cuh"
#include "warpvm/workloads/graph/rmat.hpp"
#include "warpvm/workloads/patterns.hpp"
#include "warpvm/detail/core/cuda_buffers.hpp"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace warpvm::workloads {

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
  Stencil2GpuRunner(const ChannelSetup& s, const std::vector<WaitMode>& modes, const ParallelLoop& parallel_for)
      : s_(s), rows_(s.stencil_side / 2), half_(std::uint64_t{rows_} * s.stencil_side) {
    initial_.resize(std::uint64_t{s.stencil_side} * s.stencil_side);
    fill_random(initial_.data(), initial_.size(), s.seed + 2, parallel_for);
    std::fprintf(stderr, "stencil2gpu: host reference (%u x %u, %u iterations)\n", s.stencil_side, s.stencil_side,
                 s.stencil_iterations);
    reference_ = stencil_reference(initial_, s.stencil_side, s.stencil_iterations, parallel_for);
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"stencil2gpu", reinterpret_cast<const void*>(&stencil2gpu_kernel), 0,
                       stencil_max_blocks(s.stencil_side), s.stencil_iterations, std::uint64_t{s.stencil_side} * 4,
                       false, s.stencil_direct_buffer_on_consumer},
        modes);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const detail::DeviceGuard on(g);
      gpu.cells = detail::make_device<std::uint32_t>(2 * half_, "stencil cells");
      gpu.progress = detail::make_device<std::uint32_t>(pair_->blocks(g), "stencil progress");
      gpu.halo = detail::make_device<std::uint32_t>(2ull * s.stencil_side, "stencil halo");
    }
  }
  RunTiming run(WaitMode mode) override {
    const std::uint32_t side = s_.stencil_side;
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      const detail::DeviceGuard on(g);
      expect_cuda(cudaMemcpy(gpus_[g].cells.get(), initial_.data() + g * half_, half_ * 4, cudaMemcpyHostToDevice),
                  "stencil cells");
      expect_cuda(cudaMemset(gpus_[g].progress.get(), 0, std::uint64_t{pair_->blocks(g)} * 4), "cudaMemset stencil progress");
      expect_cuda(cudaMemset(gpus_[g].halo.get(), 0, 2ull * side * 4), "cudaMemset stencil halo");
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      const Stencil2Gpu k{
          {side, s_.stencil_iterations, g == 0, gpus_[g].cells.get(), gpus_[g].progress.get(), pair_->stamps(g)},
          pair_->exchange(g, mode), gpus_[g].halo.get(), gpus_[1 - g].halo.get()};
      pair_->launch(g, [&](cudaStream_t stream) {
        stencil2gpu_kernel<<<pair_->blocks(g), block_threads, 0, stream>>>(k);
      });
    }
    // only the cut block's warps wait: wait rows 0 to 7
    RunTiming t = pair_->finish_timed(mode, [&](int g, std::uint64_t w) {
      const std::uint64_t cut_block = g == 0 ? pair_->blocks(g) - 1 : 0;
      return w / block_warps == cut_block ? w % block_warps : ~std::uint64_t{0};
    });
    std::vector<std::uint32_t> cells(initial_.size());
    for (int g = 0; g < pair_gpus; ++g) {
      const detail::DeviceGuard on(g);
      expect_cuda(cudaMemcpy(cells.data() + g * half_, gpus_[g].cells.get() + (s_.stencil_iterations % 2) * half_, half_ * 4,
                             cudaMemcpyDeviceToHost),
                  "stencil cells");
    }
    t.verified = verify(cells);
    return t;
  }
  [[nodiscard]] PairDescription describe() const override {
    return {.dataset_bytes = std::uint64_t{s_.stencil_side} * s_.stencil_side * 4,
            // the rows the GPUs exchange: each sends its cut row of states 0 to iterations - 1
            .useful_bytes = std::uint64_t{pair_gpus} * s_.stencil_iterations * s_.stencil_side * 4,
            .fields = {{"stencil_side", s_.stencil_side}, {"stencil_iterations", s_.stencil_iterations}}};
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

  ChannelSetup s_;
  std::uint32_t rows_;  ///< per GPU
  std::uint64_t half_;  ///< cells per GPU
  std::vector<std::uint32_t> initial_, reference_;
};

// ---- kmeans2gpu -----------------------------------------------------------------------------

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
  Kmeans2GpuRunner(const ChannelSetup& s, const std::vector<WaitMode>& modes, const ParallelLoop& parallel_for)
      : s_(s), half_(s.kmeans_points / 2), words_(std::uint64_t{s.kmeans_k} * kmeans_words_per_centroid) {
    points_.resize(s.kmeans_points);
    auto* coordinates = reinterpret_cast<std::uint32_t*>(points_.data());
    fill_random(coordinates, points_.size() * kmeans_dims, s.seed + 3, parallel_for);
    static_assert(kmeans_coordinate_limit == 1024, "the top 10 bits of a random word");
    for (std::uint64_t i = 0; i < points_.size() * kmeans_dims; ++i) coordinates[i] >>= 22;
    std::fprintf(stderr, "kmeans2gpu: host reference (%u points, k = %u, %u iterations)\n", s.kmeans_points, s.kmeans_k,
                 s.kmeans_iterations);
    reference_ = kmeans_reference(points_, s.kmeans_k, s.kmeans_iterations, parallel_for);
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"kmeans2gpu", reinterpret_cast<const void*>(&kmeans2gpu_kernel), shared_bytes(),
                       static_cast<std::uint32_t>((half_ + block_threads - 1) / block_threads), s.kmeans_iterations,
                       words_ * 8, true, s.kmeans_direct_buffer_on_consumer},
        modes);
    for (int g = 0; g < pair_gpus; ++g) {
      // a block's shared sums are uint32: its points' coordinates must add up below 2^32
      const std::uint64_t stride = std::uint64_t{pair_->blocks(g)} * block_threads;
      const std::uint64_t per_block = (half_ + stride - 1) / stride * block_threads;
      if (per_block * (kmeans_coordinate_limit - 1) > 0xffffffffull)
        throw std::runtime_error("kmeans2gpu: " + std::to_string(per_block) + " points per block overflow its 32-bit sums; use fewer points");
      Gpu& gpu = gpus_[g];
      const detail::DeviceGuard on(g);
      const std::uint64_t rows_words = std::uint64_t{s.kmeans_iterations} * words_;
      gpu.points = detail::make_device<uint4>(half_, "kmeans points");
      expect_cuda(cudaMemcpy(gpu.points.get(), points_.data() + g * half_, half_ * sizeof(uint4), cudaMemcpyHostToDevice),
                  "kmeans points");
      gpu.partial = detail::make_device<unsigned long long>(rows_words, "kmeans partial");
      gpu.totals = detail::make_device<unsigned long long>(rows_words, "kmeans totals");
      gpu.mailbox = detail::make_device<unsigned long long>(rows_words, "kmeans mailbox");
      gpu.centroids =
          detail::make_device<std::uint32_t>(centroid_bytes() / 4 * (s.kmeans_iterations + 1), "kmeans centroids");
      gpu.counters = detail::make_device<std::uint32_t>(2, "kmeans counters");
    }
  }
  RunTiming run(WaitMode mode) override {
    const std::uint64_t rows_bytes = std::uint64_t{s_.kmeans_iterations} * words_ * 8;
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      const Gpu& gpu = gpus_[g];
      const detail::DeviceGuard on(g);
      expect_cuda(cudaMemset(gpu.partial.get(), 0, rows_bytes), "cudaMemset kmeans partial");  // added into
      expect_cuda(cudaMemset(gpu.counters.get(), 0, 2 * 4), "cudaMemset kmeans counters");
      // what the kernel writes before it reads it, as the channels' buffers
      poison(g, gpu.mailbox.get(), rows_bytes);
      poison(g, gpu.totals.get(), rows_bytes);
      poison(g, gpu.centroids.get(), centroid_bytes() * (s_.kmeans_iterations + 1));
      expect_cuda(cudaMemcpy(gpu.centroids.get(), points_.data(), centroid_bytes(), cudaMemcpyHostToDevice),
                  "kmeans centroids");
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      const Gpu& gpu = gpus_[g];
      const Kmeans2Gpu k{pair_->exchange(g, mode), s_.kmeans_k, s_.kmeans_iterations, half_, gpu.points.get(),
                         gpu.partial.get(), gpu.totals.get(), gpu.centroids.get(), gpu.counters.get(),
                         gpu.counters.get() + 1, gpu.mailbox.get(), gpus_[1 - g].mailbox.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) {
        kmeans2gpu_kernel<<<pair_->blocks(g), block_threads, shared_bytes(), stream>>>(k);
      });
    }
    // Every warp has wait rows; the exchange block's are the consumers' (waits for the other
    // GPU), the other blocks' only keep their waits for the next state out of the SMs' busy time.
    RunTiming t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    t.verified = true;
    for (int g = 0; g < pair_gpus; ++g) t.verified = verify(g) && t.verified;
    return t;
  }
  [[nodiscard]] PairDescription describe() const override {
    return {.dataset_bytes = std::uint64_t{s_.kmeans_points} * sizeof(uint4),
            // what the GPUs exchange: each sends its partial sums of every iteration
            .useful_bytes = std::uint64_t{pair_gpus} * s_.kmeans_iterations * words_ * 8,
            .fields = {{"kmeans_points", s_.kmeans_points},
                       {"kmeans_k", s_.kmeans_k},
                       {"kmeans_dims", kmeans_dims},
                       {"kmeans_iterations", s_.kmeans_iterations}}};
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
    const detail::DeviceGuard on(g);
    KmeansResult got{std::vector<std::uint32_t>(reference_.centroids.size()), {}};
    std::vector<unsigned long long> totals(words_);
    expect_cuda(cudaMemcpy(got.centroids.data(), gpus_[g].centroids.get() + s_.kmeans_iterations * (centroid_bytes() / 4),
                           centroid_bytes(), cudaMemcpyDeviceToHost),
                "kmeans centroids");
    expect_cuda(cudaMemcpy(totals.data(), gpus_[g].totals.get() + (s_.kmeans_iterations - 1) * words_, words_ * 8,
                           cudaMemcpyDeviceToHost),
                "kmeans totals");
    for (std::uint32_t c = 0; c < s_.kmeans_k; ++c)
      got.counts.push_back(totals[std::uint64_t{c} * kmeans_words_per_centroid + kmeans_dims]);
    for (std::uint32_t c = 0; c < s_.kmeans_k; ++c) {
      for (std::uint32_t d = 0; d < kmeans_dims; ++d) {
        const std::uint32_t at = c * kmeans_dims + d;
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

  ChannelSetup s_;
  std::uint64_t half_;   ///< points per GPU
  std::uint64_t words_;  ///< k x 5: the words one GPU sends per iteration
  std::vector<uint4> points_;
  KmeansResult reference_;
};

// ---- gemm2gpu ---------------------------------------------------------------------------------

/// Gemm2Gpu's buffers on one GPU.
struct GemmBuffers {
  detail::device_ptr<std::uint32_t> a, b, d, t, c;
  detail::device_ptr<std::uint32_t> counters;  ///< next tile, produced[panels], ready[panels]
};

/// gemm2gpu on GPUs 0 and 1 (gemm2gpu.cuh): each GPU's operands, T, C and counters, kept across
/// modes and repeats, on a GpuPair whose channels carry one panel of T (64 rows) per tag.
class Gemm2GpuRunner final : public PairRunner<GemmBuffers> {
 public:
  Gemm2GpuRunner(const ChannelSetup& s, const std::vector<WaitMode>& modes, const ParallelLoop& parallel_for)
      : s_(s), n_(s.gemm_side), half_(s.gemm_side / 2) {
    const std::uint64_t words = std::uint64_t{n_} * n_;
    a_.resize(words);
    b_.resize(words);
    d_.resize(words);
    fill_random(a_.data(), words, s.seed + 4, parallel_for);
    fill_random(b_.data(), words, s.seed + 5, parallel_for);
    fill_random(d_.data(), words, s.seed + 6, parallel_for);
    std::fprintf(stderr, "gemm2gpu: host reference ((A B) D, n = %u)\n", n_);
    reference_ = gemm_host_product(gemm_host_product(a_, b_, n_, parallel_for), d_, n_, parallel_for);
    const GemmGeometry shape_of{n_};
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"gemm2gpu", reinterpret_cast<const void*>(&gemm2gpu_kernel), 0, shape_of.total_tiles() + 1,
                       shape_of.panels(), shape_of.panel_words() * 4, true, s.gemm_direct_buffer_on_consumer},
        modes);
    if (pair_->blocks(0) < 2 || pair_->blocks(1) < 2) throw std::runtime_error("gemm2gpu: needs two resident blocks per GPU");
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const detail::DeviceGuard on(g);
      const std::uint64_t half_words = std::uint64_t{half_} * n_;
      gpu.a = detail::make_device<std::uint32_t>(half_words, "gemm2gpu A");
      gpu.b = detail::make_device<std::uint32_t>(words, "gemm2gpu B");
      gpu.d = detail::make_device<std::uint32_t>(half_words, "gemm2gpu D");
      gpu.t = detail::make_device<std::uint32_t>(words, "gemm2gpu T");
      gpu.c = detail::make_device<std::uint32_t>(half_words, "gemm2gpu C");
      gpu.counters = detail::make_device<std::uint32_t>(1 + 2 * shape_of.panels(), "gemm2gpu counters");
      expect_cuda(cudaMemcpy(gpu.a.get(), a_.data() + g * half_words, half_words * 4, cudaMemcpyHostToDevice), "gemm2gpu A");
      expect_cuda(cudaMemcpy(gpu.b.get(), b_.data(), words * 4, cudaMemcpyHostToDevice), "gemm2gpu B");
      // D's columns [g h, (g + 1) h): a strided copy
      expect_cuda(cudaMemcpy2D(gpu.d.get(), std::uint64_t{half_} * 4, d_.data() + static_cast<std::uint64_t>(g) * half_, std::uint64_t{n_} * 4,
                               std::uint64_t{half_} * 4, n_, cudaMemcpyHostToDevice),
                  "gemm2gpu D");
    }
  }

  RunTiming run(WaitMode mode) override {
    const std::uint64_t words = std::uint64_t{n_} * n_, half_words = std::uint64_t{half_} * n_;
    const std::uint32_t panels = GemmGeometry{n_}.panels();
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const detail::DeviceGuard on(g);
      expect_cuda(cudaMemset(gpu.counters.get(), 0, (1 + 2 * panels) * 4), "cudaMemset gemm2gpu counters");
      poison(g, gpu.t.get(), words * 4);  // a panel read before it arrived shows as a wrong C
      poison(g, gpu.c.get(), half_words * 4);
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const Gemm2Gpu k{pair_->exchange(g, mode), {n_}, g == 0, gpu.a.get(), gpu.b.get(), gpu.d.get(), gpu.t.get(),
                       gpu.c.get(), gpu.counters.get(), gpu.counters.get() + 1, gpu.counters.get() + 1 + panels,
                       gpus_[1 - g].t.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) { gemm2gpu_kernel<<<pair_->blocks(g), block_threads, 0, stream>>>(k); });
    }
    RunTiming t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    t.verified = true;
    for (int g = 0; g < pair_gpus; ++g) t.verified = verify(g) && t.verified;
    return t;
  }
  [[nodiscard]] PairDescription describe() const override {
    return {.dataset_bytes = 3ull * n_ * n_ * 4,  // A, B, D
            .useful_bytes = std::uint64_t{pair_gpus} * half_ * n_ * 4,  // each GPU's rows of T, to the other
            .fields = {{"gemm_side", n_}, {"gemm_panels", half_ / gemm_tile}}};
  }

 private:
  /// GPU g's columns of C against the reference; says where the first difference is.
  bool verify(int g) const {
    const detail::DeviceGuard on(g);
    std::vector<std::uint32_t> c(std::uint64_t{n_} * half_);
    expect_cuda(cudaMemcpy(c.data(), gpus_[g].c.get(), c.size() * 4, cudaMemcpyDeviceToHost), "gemm2gpu C");
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

  ChannelSetup s_;
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
  Bfs2GpuRunner(const ChannelSetup& s, const std::vector<WaitMode>& modes, const ParallelLoop& parallel_for) : s_(s) {
    const RmatParams p{.scale = s.bfs_scale, .edge_factor = s.bfs_edge_factor, .seed = s.seed + 7};
    p.validate();
    vertices_ = static_cast<std::uint32_t>(p.vertices());
    half_ = vertices_ / 2;
    std::fprintf(stderr, "bfs2gpu: R-MAT scale %u, edge factor %u\n", s.bfs_scale, s.bfs_edge_factor);
    std::vector<std::uint64_t> offsets(p.vertices() + 1);
    std::vector<std::uint32_t> columns(p.directed_edges());
    build_rmat_csr(p, offsets, columns, parallel_for);
    root_ = pick_root(offsets, s.seed);
    reference_ = reference_bfs(offsets, columns, root_, parallel_for);
    const BfsGeometry shape_of{half_, s.bfs_max_levels};
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"bfs2gpu", reinterpret_cast<const void*>(&bfs2gpu_kernel), 0, 1u << 20, s.bfs_max_levels,
                       std::uint64_t{shape_of.message_words()} * 4, true, s.bfs_direct_buffer_on_consumer},
        modes);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const detail::DeviceGuard on(g);
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
      expect_cuda(cudaMemcpy(gpu.offsets.get(), rows.data(), rows.size() * 8, cudaMemcpyHostToDevice), "bfs2gpu offsets");
      expect_cuda(cudaMemcpy(gpu.columns.get(), columns.data() + first_edge, (end_edge - first_edge) * 4, cudaMemcpyHostToDevice),
                  "bfs2gpu columns");
      edges_ += end_edge - first_edge;
    }
    levels_ = 0;
    for (const std::uint32_t d : reference_)
      if (d != bfs_unreached) levels_ = std::max(levels_, d + 1);
  }

  RunTiming run(WaitMode mode) override {
    const BfsGeometry shape_of{half_, s_.bfs_max_levels};
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const detail::DeviceGuard on(g);
      expect_cuda(cudaMemset(gpu.depth.get(), 0xff, std::uint64_t{half_} * 4), "cudaMemset bfs2gpu depths");  // unreached
      if (root_ / half_ == static_cast<std::uint32_t>(g))
        expect_cuda(cudaMemset(gpu.depth.get() + root_ % half_, 0, 4), "cudaMemset bfs2gpu root");
      expect_cuda(cudaMemset(gpu.outgoing.get(), 0, std::uint64_t{s_.bfs_max_levels} * shape_of.bitmap_words() * 4),
                  "cudaMemset bfs2gpu bitmaps");
      expect_cuda(cudaMemset(gpu.counters.get(), 0, shape_of.counter_words() * 4), "cudaMemset bfs2gpu counters");
      poison(g, gpu.mailbox.get(), std::uint64_t{s_.bfs_max_levels} * shape_of.message_words() * 4);
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const Bfs2Gpu k{pair_->exchange(g, mode), {half_, s_.bfs_max_levels}, g == 0, gpu.offsets.get(), gpu.columns.get(),
                      gpu.depth.get(), gpu.outgoing.get(), gpu.counters.get(), gpu.mailbox.get(),
                      gpus_[1 - g].mailbox.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) { bfs2gpu_kernel<<<pair_->blocks(g), block_threads, 0, stream>>>(k); });
    }
    RunTiming t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    t.verified = verify();
    const detail::DeviceGuard on(0);  // both GPUs exchange alike
    expect_cuda(cudaMemcpy(&exchanges_, gpus_[0].counters.get() + shape_of.ready_word(), 4, cudaMemcpyDeviceToHost),
                "bfs2gpu counters");
    return t;
  }
  [[nodiscard]] PairDescription describe() const override {
    const BfsGeometry shape_of{half_, s_.bfs_max_levels};
    return {.dataset_bytes = (std::uint64_t{vertices_} + pair_gpus) * 8 + edges_ * 4,  // both GPUs' CSR
            // a message per level and GPU
            .useful_bytes = std::uint64_t{pair_gpus} * exchanges_ * shape_of.message_words() * 4,
            .fields = {{"bfs_scale", s_.bfs_scale},
                       {"bfs_edge_factor", s_.bfs_edge_factor},
                       {"bfs_root", root_},
                       {"bfs_levels", levels_},
                       {"bfs_exchanges", exchanges_}}};
  }
  [[nodiscard]] std::uint32_t exchanges_run() const override { return exchanges_; }

 private:
  /// A vertex with a neighbour, drawn from the seed (the first with one from a random start).
  static std::uint32_t pick_root(const std::vector<std::uint64_t>& offsets, std::uint64_t seed) {
    const std::uint64_t n = offsets.size() - 1;
    for (std::uint64_t i = 0, v = mix64(seed) % n; i < n; ++i, v = (v + 1) % n)
      if (offsets[v + 1] > offsets[v]) return static_cast<std::uint32_t>(v);
    throw std::runtime_error("bfs2gpu: the graph has no edge");
  }

  /// Both GPUs' depths against the reference, and the level limit; says what differs first.
  bool verify() const {
    std::vector<std::uint32_t> depth(vertices_);
    for (int g = 0; g < pair_gpus; ++g) {
      const detail::DeviceGuard on(g);
      std::uint32_t overflow = 0;
      expect_cuda(cudaMemcpy(&overflow, gpus_[g].counters.get() + BfsGeometry{half_, s_.bfs_max_levels}.overflow_word(), 4, cudaMemcpyDeviceToHost),
                  "bfs2gpu counters");
      if (overflow != 0) {
        std::fprintf(stderr, "bfs2gpu: the search needs more than %u levels (--bfs-max-levels)\n", s_.bfs_max_levels);
        return false;
      }
      expect_cuda(cudaMemcpy(depth.data() + static_cast<std::uint64_t>(g) * half_, gpus_[g].depth.get(), std::uint64_t{half_} * 4,
                             cudaMemcpyDeviceToHost),
                  "bfs2gpu depths");
    }
    const auto [got, want] = std::mismatch(depth.begin(), depth.end(), reference_.begin());
    if (got == depth.end()) return true;
    std::fprintf(stderr, "bfs2gpu: vertex %llu (root %u): depth %u, expected %u\n",
                 static_cast<unsigned long long>(got - depth.begin()), root_, *got, *want);
    return false;
  }

  ChannelSetup s_;
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
  Bitonic2GpuRunner(const ChannelSetup& s, const std::vector<WaitMode>& modes, const ParallelLoop& parallel_for)
      : s_(s), size_{s.bitonic_keys / 2} {
    keys_.resize(s.bitonic_keys);
    fill_random(keys_.data(), keys_.size(), s.seed + 8, parallel_for);
    std::fprintf(stderr, "bitonic2gpu: host reference (%u keys)\n", s.bitonic_keys);
    reference_ = keys_;
    std::sort(reference_.begin(), reference_.end());
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"bitonic2gpu", reinterpret_cast<const void*>(&bitonic2gpu_kernel), 0, size_.tasks() + 1,
                       size_.chunks(), std::uint64_t{bitonic_chunk} * 4, true, s.bitonic_direct_buffer_on_consumer,
                       bitonic_staging_windows},
        modes);
    if (pair_->blocks(0) < 2 || pair_->blocks(1) < 2) throw std::runtime_error("bitonic2gpu: needs two resident blocks per GPU");
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const detail::DeviceGuard on(g);
      gpu.keys = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu keys");
      gpu.sorted = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu sorted keys");
      gpu.paired = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu pairs");
      gpu.out = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu result");
      gpu.mailbox = detail::make_device<std::uint32_t>(size_.half, "bitonic2gpu mailbox");
      gpu.counters = detail::make_device<std::uint32_t>(size_.counter_words(), "bitonic2gpu counters");
      expect_cuda(cub::DeviceRadixSort::SortKeys(nullptr, gpu.sort_bytes, gpu.keys.get(), gpu.sorted.get(), size_.half),
                  "cub::DeviceRadixSort::SortKeys (size)");
      gpu.sort_scratch = detail::make_device<std::byte>(gpu.sort_bytes, "bitonic2gpu sort scratch");
    }
  }

  RunTiming run(WaitMode mode) override {
    const std::uint64_t bytes = std::uint64_t{size_.half} * 4;
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const detail::DeviceGuard on(g);
      expect_cuda(cudaMemcpy(gpu.keys.get(), keys_.data() + static_cast<std::uint64_t>(g) * size_.half, bytes,
                             cudaMemcpyHostToDevice),
                  "bitonic2gpu keys");
      expect_cuda(cudaMemset(gpu.counters.get(), 0, size_.counter_words() * 4), "cudaMemset bitonic2gpu counters");
      // what the run writes before it reads it
      poison(g, gpu.sorted.get(), bytes);
      poison(g, gpu.paired.get(), bytes);
      poison(g, gpu.out.get(), bytes);
      poison(g, gpu.mailbox.get(), bytes);
    }
    pair_->wait_idle();  // the inputs' copies and resets, before either kernel starts
    for (int g = 0; g < pair_gpus; ++g) {
      Gpu& gpu = gpus_[g];
      const Bitonic2Gpu k{pair_->exchange(g, mode), size_, g == 0, gpu.sorted.get(), gpu.paired.get(), gpu.out.get(),
                          gpu.counters.get(), gpu.mailbox.get(), gpus_[1 - g].mailbox.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) {
        std::size_t scratch_bytes = gpu.sort_bytes;
        expect_cuda(cub::DeviceRadixSort::SortKeys(gpu.sort_scratch.get(), scratch_bytes, gpu.keys.get(), gpu.sorted.get(),
                                                   size_.half, 0, 32, stream),
                    "cub::DeviceRadixSort::SortKeys");
        bitonic2gpu_kernel<<<pair_->blocks(g), block_threads, 0, stream>>>(k);
      });
    }
    RunTiming t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    t.verified = true;
    for (int g = 0; g < pair_gpus; ++g) t.verified = verify(g) && t.verified;
    return t;
  }
  [[nodiscard]] PairDescription describe() const override {
    return {.dataset_bytes = std::uint64_t{s_.bitonic_keys} * 4,
            .useful_bytes = std::uint64_t{s_.bitonic_keys} * 4,  // every key crosses to the other GPU
            .fields = {{"bitonic_keys", s_.bitonic_keys}, {"bitonic_chunks", size_.chunks()}}};
  }

 private:
  /// GPU g's result against its half of the sorted keys; says where the first difference is.
  bool verify(int g) const {
    const detail::DeviceGuard on(g);
    std::vector<std::uint32_t> got(size_.half);
    expect_cuda(cudaMemcpy(got.data(), gpus_[g].out.get(), got.size() * 4, cudaMemcpyDeviceToHost), "bitonic2gpu result");
    const auto want = reference_.begin() + static_cast<std::ptrdiff_t>(static_cast<std::uint64_t>(g) * size_.half);
    const auto [at, expected] = std::mismatch(got.begin(), got.end(), want);
    if (at == got.end()) return true;
    std::fprintf(stderr, "bitonic2gpu: GPU %d: key %lld of its half is %u, expected %u\n", g,
                 static_cast<long long>(at - got.begin()), *at, *expected);
    return false;
  }

  ChannelSetup s_;
  BitonicGeometry size_;
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
  Pingpong2GpuRunner(const ChannelSetup& s, const std::vector<WaitMode>& modes) : s_(s) {
    pair_ = std::make_unique<GpuPair>(
        GpuPair::Shape{"pingpong2gpu", reinterpret_cast<const void*>(&pingpong2gpu_kernel), 0, 1,
                       s.pingpong_iterations, pingpong_words * 4, false, true},
        modes);
    for (int g = 0; g < pair_gpus; ++g) {
      const detail::DeviceGuard on(g);
      gpus_[g].mailbox = detail::make_device<std::uint32_t>(message_words(), "pingpong2gpu mailbox");
      gpus_[g].wrong = detail::make_device<std::uint32_t>(1, "pingpong2gpu check");
    }
  }

  RunTiming run(WaitMode mode) override {
    pair_->prepare(mode);
    for (int g = 0; g < pair_gpus; ++g) {
      const detail::DeviceGuard on(g);
      poison(g, gpus_[g].mailbox.get(), message_words() * 4);
      expect_cuda(cudaMemset(gpus_[g].wrong.get(), 0, 4), "cudaMemset pingpong2gpu check");
    }
    pair_->wait_idle();
    for (int g = 0; g < pair_gpus; ++g) {
      const Pingpong2Gpu k{pair_->exchange(g, mode), static_cast<std::uint32_t>(g), s_.pingpong_iterations,
                           gpus_[g].mailbox.get(), gpus_[1 - g].mailbox.get(), gpus_[g].wrong.get(), pair_->stamps(g)};
      pair_->launch(g, [&](cudaStream_t stream) { pingpong2gpu_kernel<<<1, block_threads, 0, stream>>>(k); });
    }
    RunTiming t = pair_->finish_timed(mode, [](int, std::uint64_t w) { return w; });
    for (int g = 0; g < pair_gpus; ++g) {
      const detail::DeviceGuard on(g);
      std::uint32_t wrong = 0;
      expect_cuda(cudaMemcpy(&wrong, gpus_[g].wrong.get(), 4, cudaMemcpyDeviceToHost), "pingpong2gpu check");
      if (wrong != 0) std::fprintf(stderr, "pingpong2gpu: GPU %d received %u wrong words\n", g, wrong);
      t.verified = t.verified && wrong == 0;
    }
    return t;
  }
  [[nodiscard]] PairDescription describe() const override {
    return {.dataset_bytes = message_words() * 4 * pair_gpus,
            .useful_bytes = message_words() * 4 * pair_gpus,  // every message crosses once
            .fields = {{"pingpong_iterations", s_.pingpong_iterations}}};
  }

 private:
  [[nodiscard]] std::uint64_t message_words() const { return std::uint64_t{s_.pingpong_iterations} * pingpong_words; }

  ChannelSetup s_;
};

}  // namespace warpvm::workloads

// The channel bench's CPU-to-GPU workloads (workloads/include/warpvm/workloads/channel/
// channel_workloads.cuh) at small sizes, in every way of waiting: conjugate gradient with the
// host alternating with the GPU, and the halo cube with six faces per iteration, each against
// its host reference.

#include "gpu_test_support.cuh"

#include "warpvm/workloads/channel/channel_workloads.cuh"

#include "warpvm/channel.hpp"

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace warpvm::testing {
namespace {

/// The producers' side in one way of waiting: the channel, or a pinned buffer with a flag per tag.
class WaitRig {
 public:
  WaitRig(workloads::WaitMode mode, std::uint64_t buffer_bytes, std::uint32_t tags, std::uint32_t warps,
          std::uint32_t window_bytes)
      : mode_(mode),
        ch_({.buffer_bytes = buffer_bytes, .tag_count = tags, .max_warps = warps, .watchdog_seconds = 10}),
        pinned_(buffer_bytes),
        flags_(std::size_t{tags} * 4),
        scratch_bytes_((window_bytes + 15) / 16 * 16),
        scratch_(std::size_t{warps} * scratch_bytes_ / 4) {}

  [[nodiscard]] workloads::Source source() const {
    return {mode_, ch_.device(), pinned_.device<const std::byte>(), flags_.device<std::uint32_t>(),
            reinterpret_cast<std::byte*>(scratch_.get()), scratch_bytes_, workloads::Stamps{nullptr, nullptr, nullptr, 0}};
  }
  [[nodiscard]] std::byte* buffer() const {
    return mode_ == workloads::WaitMode::channel ? ch_.buffer().data() : pinned_.host<std::byte>();
  }
  void publish(std::uint32_t first, std::uint32_t count) {
    if (mode_ == workloads::WaitMode::channel) return ch_.publish(first, count);
    for (std::uint32_t t = first; t < first + count; ++t)
      std::atomic_ref<std::uint32_t>(flags_.host<std::uint32_t>()[t]).store(1, std::memory_order_release);
  }
  void synchronize() {
    ch_.synchronize();
    WARPVM_CUDA_TRY(cudaDeviceSynchronize());
  }

 private:
  workloads::WaitMode mode_;
  channel ch_;
  MappedBuffer pinned_, flags_;
  std::uint32_t scratch_bytes_;
  DeviceVector<std::uint32_t> scratch_;
};

class ChannelWorkloads : public GpuTest, public ::testing::WithParamInterface<workloads::WaitMode> {};

TEST_P(ChannelWorkloads, ConjugateGradientAlternatingWithTheHostMatchesTheHostAlone) {
  constexpr std::uint32_t rows_per_warp = 32, blocks = 2, iterations = 20;
  constexpr std::uint32_t warps = blocks * workloads::block_warps, n = warps * rows_per_warp;
  const std::uint64_t seed = std::random_device{}();
  const workloads::CgHostMatrix matrix = workloads::cg_random_matrix(n, seed);
  std::vector<double> b(n);
  std::mt19937_64 rng(seed);
  for (double& v : b) v = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
  const std::vector<double> want = workloads::cg_reference(matrix, b, iterations);

  DeviceVector<double> diagonal(n), band(std::size_t{workloads::cg_band} * n);
  WARPVM_CUDA_TRY(cudaMemcpy(diagonal.get(), matrix.diagonal.data(), n * 8, cudaMemcpyHostToDevice));
  WARPVM_CUDA_TRY(cudaMemcpy(band.get(), matrix.band.data(), matrix.band.size() * 8, cudaMemcpyHostToDevice));
  DeviceVector<std::uint32_t> arrived(iterations);
  MappedBuffer q(std::size_t{n} * 8), done(iterations * 4);
  WaitRig rig(GetParam(), std::uint64_t{iterations} * n * 8, iterations, warps, (rows_per_warp + 2 * workloads::cg_band) * 8);
  const workloads::Launch launch{rig.source(), blocks, 0, nullptr, false, false};
  workloads::cg_kernel<<<blocks, workloads::block_threads>>>(
      launch, workloads::CgKernel{workloads::CgMatrix{n, diagonal.get(), band.get()}, rows_per_warp, iterations,
                           q.device<double>(), arrived.get(), done.device<std::uint32_t>()});
  WARPVM_CUDA_TRY(cudaGetLastError());

  workloads::CgState state = workloads::cg_start(b);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (std::uint32_t k = 0; k < iterations; ++k) {
    std::memcpy(rig.buffer() + std::uint64_t{k} * n * 8, state.p.data(), std::size_t{n} * 8);
    rig.publish(k, 1);
    const std::atomic_ref<std::uint32_t> finished(done.host<std::uint32_t>()[k]);
    while (finished.load(std::memory_order_acquire) != 1u)
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the GPU never finished iteration " << k;
    workloads::cg_update(state, q.host<double>());
  }
  rig.synchronize();
  EXPECT_LE(workloads::relative_error(state.x, want), 1e-9) << "seed " << seed;
  EXPECT_LT(state.rr, workloads::cg_start(b).rr) << "CG did not reduce the residual (seed " << seed << ")";
}

TEST_P(ChannelWorkloads, HaloCubeWithSixFacesPerIterationMatchesTheHost) {
  constexpr std::uint32_t side = 16, iterations = 12;
  constexpr std::uint32_t blocks = side / workloads::block_warps;
  const std::uint64_t cube = std::uint64_t{side} * side * side;
  const auto salt = static_cast<std::uint32_t>(std::random_device{}());
  std::vector<std::uint32_t> initial(cube);
  for (std::uint64_t i = 0; i < cube; ++i) initial[i] = initial_value(i, salt);
  const std::vector<std::uint32_t> want = workloads::halo_reference(initial, side, iterations, salt);

  DeviceVector<std::uint32_t> cells(2 * cube), progress(side);
  WARPVM_CUDA_TRY(cudaMemcpy(cells.get(), initial.data(), cube * 4, cudaMemcpyHostToDevice));
  const workloads::HaloLayout layout{side};
  WaitRig rig(GetParam(), iterations * layout.words_per_iteration() * 4, iterations * workloads::halo_faces, side,
              (4 * side + side * side) * 4);
  const workloads::Launch launch{rig.source(), blocks, 0, nullptr, false, false};
  workloads::halo_kernel<<<blocks, workloads::block_threads>>>(launch, workloads::HaloKernel{side, iterations, cells.get(), progress.get()});
  WARPVM_CUDA_TRY(cudaGetLastError());
  auto* words = reinterpret_cast<std::uint32_t*>(rig.buffer());
  for (std::uint32_t k = 0; k < iterations; ++k)
    for (std::uint32_t face = 0; face < workloads::halo_faces; ++face) {
      workloads::halo_write_face(words, side, k, face, salt);
      rig.publish(workloads::halo_faces * k + face, 1);
      if (face % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(20));  // warps often ask first
    }
  rig.synchronize();
  const std::vector<std::uint32_t> all = cells.to_host();
  const std::vector<std::uint32_t> got(all.begin() + (iterations % 2) * cube, all.begin() + (iterations % 2 + 1) * cube);
  std::uint64_t wrong = 0;
  for (std::uint64_t i = 0; i < cube; ++i) wrong += got[i] != want[i] ? 1u : 0u;
  EXPECT_EQ(wrong, 0u) << "cells differing from the host, of " << cube << " (salt " << salt << ")";
}

INSTANTIATE_TEST_SUITE_P(WaitModes, ChannelWorkloads, ::testing::ValuesIn(workloads::cpu_to_gpu_modes),
                         [](const ::testing::TestParamInfo<workloads::WaitMode>& mode) {
                           return std::string(workloads::mode_name(mode.param));
                         });

}  // namespace
}  // namespace warpvm::testing

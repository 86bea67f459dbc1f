#pragma once
// What the host sides of warpvm-channel-bench's workloads share, CPU to GPU (cpu_harness.cuh)
// and GPU to GPU (gpu_pair.cuh): their sizes (ChannelSetup), the loop that spreads their host work
// (ParallelLoop), CUDA error checks, the device memory of the warps' stamps (DeviceStamps), what
// one run measured (RunTiming) and what the channels' monitors did between two snapshots of their
// counters (add_served). Records are the bench's: a workload gives its numbers as Fields.

#include "warpvm/workloads/channel/overlap_metric.hpp"
#include "warpvm/workloads/channel/wait_modes.cuh"
#include "warpvm/channel.hpp"
#include "warpvm/detail/core/cuda_buffers.hpp"
#include "warpvm/error.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace warpvm::workloads {

/// The sizes and settings of every channel workload (warpvm-channel-bench's flags).
struct ChannelSetup {
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
  /// the consumers read locally, peer_flag's traffic; measured faster, docs/bench/channel.md)
  /// instead of the producing one (as `channel`)
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
  int monitor_cpu = -1;   ///< ChannelConfig::monitor_cpu of the CPU-to-GPU workloads' channel
  int producer_cpu = -1;  ///< the host producer's CPU while it produces (-1: left to the OS)
};

/// Spreads the host's work (inputs, references): parallel_for(n, body) runs body(first, end) over a
/// split of [0, n). The bench passes its own, over all cores.
using ParallelLoop = std::function<void(std::uint64_t, const std::function<void(std::uint64_t, std::uint64_t)>&)>;

/// A workload's own numbers for its record, by field name.
using Fields = std::map<std::string, double>;

/// Throws warpvm::Error (ErrorKind::cuda), "<what> failed: <CUDA's reason>", when `status` is an
/// error.
inline void expect_cuda(cudaError_t status, const std::string& what) {
  detail::expect_success(status, ErrorKind::cuda, what);
}

/// What one run measured.
struct RunTiming {
  double seconds = 0;         ///< event time of the kernel
  double span_s = 0;          ///< from stamps: first start to last end
  double compute_warp_s = 0;  ///< from stamps: the mean life of the warps that are not consumers (0: none ran)
  double producer_s = 0;      ///< host producers: from the launch to the last publish returning
  double publish_us = 0;      ///< host producers: the mean time of one publish call (the channel's, or a flag store)
  WaitMetrics waits;
  std::vector<WarpTimeline> timelines;  ///< what `waits` was computed from
  bool verified = true;
};

/// Device memory for Stamps on the current GPU: the lives of `warps` warps and up to `capacity`
/// waits of each of `waiting` warps (the stamps' wait rows).
class DeviceStamps {
 public:
  DeviceStamps(std::uint64_t warps, std::uint64_t waiting, std::uint32_t capacity)
      : lives_(detail::make_device<unsigned long long>(warps * 3, "stamps")),
        waits_(detail::make_device<unsigned long long>(waiting * capacity * 2, "stamps")),
        counts_(detail::make_device<std::uint32_t>(waiting, "stamps")),
        waiting_(waiting),
        capacity_(capacity) {}

  [[nodiscard]] Stamps view() const { return {lives_.get(), waits_.get(), counts_.get(), capacity_}; }
  /// Before a run: no waits recorded yet.
  void clear() const { expect_cuda(cudaMemset(counts_.get(), 0, waiting_ * 4), "cudaMemset stamps"); }

  /// Warps [0, warps) of the last run, as timelines; warp w's waits are those of wait row
  /// `row_of(w)` (none when it is past the rows the run has, min(warps, waiting)).
  template <class RowOf>
  [[nodiscard]] std::vector<WarpTimeline> read(std::uint64_t warps, RowOf row_of) const {
    const std::uint64_t rows = std::min(warps, waiting_);
    std::vector<unsigned long long> lives(warps * 3), waits(rows * capacity_ * 2);
    std::vector<std::uint32_t> counts(rows);
    expect_cuda(cudaMemcpy(lives.data(), lives_.get(), lives.size() * 8, cudaMemcpyDeviceToHost), "stamps");
    expect_cuda(cudaMemcpy(waits.data(), waits_.get(), waits.size() * 8, cudaMemcpyDeviceToHost), "stamps");
    expect_cuda(cudaMemcpy(counts.data(), counts_.get(), counts.size() * 4, cudaMemcpyDeviceToHost), "stamps");
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
  detail::device_ptr<unsigned long long> lives_;  ///< [warps][3]
  detail::device_ptr<unsigned long long> waits_;  ///< [waiting][capacity][2]
  detail::device_ptr<std::uint32_t> counts_;      ///< [waiting]
  std::uint64_t waiting_;
  std::uint32_t capacity_;
};

/// What a monitor did between two snapshots of its counters, added to `into`.
inline void add_served(ChannelStats& into, const ChannelStats& before, const ChannelStats& after) {
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

}  // namespace warpvm::workloads

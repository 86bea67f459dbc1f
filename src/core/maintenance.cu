// The kernel the runtime runs between user kernels: write-back of dirty frames (flush), and
// dropping frames with or without writing them back (drop_cached, set_placement: with;
// object destruction: without).

#include "runtime_state.hpp"

#include "warpvm/detail/core/acquire.cuh"
#include "warpvm/detail/transport/host_batched.cuh"

#include <algorithm>

namespace warpvm::detail {
namespace {

constexpr unsigned maintenance_block = 256;
constexpr unsigned warps_per_block = maintenance_block / 32;

/// One warp per frame, for the first `frames` (the cache's, the scratch frame and the resident
/// objects'). No user kernel runs meanwhile, so frames need no locking here.
__global__ void write_back_frames(CacheView cache, std::uint32_t frames, std::uint32_t object_filter, bool write_back,
                                  bool drop) {
  const std::uint64_t first_warp = std::uint64_t{blockIdx.x} * warps_per_block + threadIdx.x / 32;
  const std::uint64_t warp_stride = std::uint64_t{gridDim.x} * warps_per_block;
  for (std::uint64_t f = first_warp; f < frames; f += warp_stride) {
    const auto frame = static_cast<std::uint32_t>(f);
    const std::uint64_t key = cache.table.owner_of(frame);
    if (key == empty_page_key) continue;
    if (object_filter != RuntimeState::all_objects && key_object(key) != object_filter) continue;
    if (write_back && cache.table.is_dirty(frame)) {
      write_back_page(cache, 0xffffffffu, lane_id() == 0, frame, key);
      if (lane_id() == 0) cache.table.set_dirty(frame, false);
    }
    if (drop && lane_id() == 0) {
      cache.table.set_owner(frame, empty_page_key);
      cache.table.set_referenced(frame, false);
      cache.table.set_dirty(frame, false);
    }
  }
}

/// One warp per eviction order. No user kernel runs, so no page is held and one pass evicts
/// every page an order still has (orders already complete find nothing to do).
__global__ void finish_evictions(CacheView cache, std::uint64_t first_order, std::uint64_t orders) {
  const std::uint64_t warp = std::uint64_t{blockIdx.x} * warps_per_block + threadIdx.x / 32;
  if (warp < orders) evict_order_pages(cache, 0xffffffffu, first_order + warp);
}

}  // namespace

void launch_finish_evictions(const CacheView& view, std::uint64_t first_order, std::uint64_t orders,
                             cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((orders + warps_per_block - 1) / warps_per_block);
  finish_evictions<<<blocks, maintenance_block, 0, stream>>>(view, first_order, orders);
  WARPVM_CUDA_TRY(cudaGetLastError());
}

void launch_write_back(const CacheView& view, std::uint32_t frames, std::uint32_t object_filter, bool write_back,
                       bool drop, cudaStream_t stream) {
  const std::uint64_t blocks_needed = (std::uint64_t{frames} + warps_per_block - 1) / warps_per_block;
  const auto blocks = static_cast<unsigned>(std::min<std::uint64_t>(blocks_needed, 65535));
  write_back_frames<<<blocks, maintenance_block, 0, stream>>>(view, frames, object_filter, write_back, drop);
  WARPVM_CUDA_TRY(cudaGetLastError());
}

}  // namespace warpvm::detail

#pragma once
/// @file
/// One GPU's frame pool. Frames are handed out first by a bump counter, then from a bitmap of
/// frames given back (a set bit is a free frame). Any GPU may give a frame back to any pool (a
/// migration frees the old owner's frame from the new owner's fault handler), so every atomic is
/// system scope. No ABA: a frame is claimed by clearing its own bit, never through a list.
///
/// `words` (device memory of the pool's GPU): [0] the bump counter, [1] the scan hint, then
/// ceil(frames / 32) bitmap words.

#include "warpvm/detail/host_device.hpp"

#include <cuda/atomic>

#include <cstddef>
#include <cstdint>

namespace warpvm::detail::mg {

inline constexpr std::uint32_t no_frame = ~std::uint32_t{0};

struct FramePoolView {
  std::byte* base;        ///< frame f is base + f * page bytes
  std::uint32_t* words;   ///< bump, hint, bitmap
  std::uint32_t frames;

  [[nodiscard]] WARPVM_HD std::uint32_t bitmap_words() const { return (frames + 31) / 32; }
};

/// 32-bit words a pool of `frames` frames needs.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t frame_pool_words(std::uint32_t frames) {
  return 2 + (std::uint64_t{frames} + 31) / 32;
}

using pool_atomic = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>;

/// A free frame of the pool, or no_frame when every frame is in use.
WARPVM_HD_INLINE std::uint32_t frame_alloc(const FramePoolView& pool) {
  pool_atomic bump(pool.words[0]);
  if (bump.load(cuda::std::memory_order_relaxed) < pool.frames) {
    const std::uint32_t f = bump.fetch_add(1, cuda::std::memory_order_relaxed);
    if (f < pool.frames) return f;
  }
  const std::uint32_t n = pool.bitmap_words();
  const std::uint32_t start = pool_atomic(pool.words[1]).fetch_add(1, cuda::std::memory_order_relaxed) % n;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t w = (start + i) % n;
    pool_atomic bits(pool.words[2 + w]);
    std::uint32_t seen = bits.load(cuda::std::memory_order_relaxed);
    while (seen != 0) {
      const std::uint32_t bit = seen & (~seen + 1);  // lowest set bit
      seen = bits.fetch_and(~bit, cuda::std::memory_order_acquire);
      if ((seen & bit) != 0) {
        unsigned b = 0;
        while ((bit >> b) != 1u) ++b;
        return w * 32 + b;
      }
    }
  }
  return no_frame;
}

/// Gives frame `f` back. Release: whatever the caller did with the frame happens first.
WARPVM_HD_INLINE void frame_free(const FramePoolView& pool, std::uint32_t f) {
  pool_atomic(pool.words[2 + f / 32]).fetch_or(std::uint32_t{1} << (f % 32), cuda::std::memory_order_release);
}

}  // namespace warpvm::detail::mg

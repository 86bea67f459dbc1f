#pragma once
/// @file
/// One GPU's frame pool. Frames are handed out first by a bump counter, then from a bitmap of
/// frames given back (a set bit is a free frame). Any GPU may give a frame back to any pool (a
/// migration frees the old owner's frame from the new owner's fault handler), so every atomic is
/// system scope. No ABA: a frame is claimed by clearing its own bit, never through a list.
///
/// `words` (device memory of the pool's GPU): [0] the bump counter, [1] the scan cursor (a
/// window further per scan), [2] the eviction clock's hand, then ceil(frames / 32) bitmap words.
/// Once the bump counter is spent, a taker scans at most `frame_scan_words` bitmap words, from
/// where the last scan ended: a full pool then says so after 32 loads instead of frames / 32
/// (5,500 per GPU for a 1 GiB footprint at cache 2/3), which every fault that had to evict paid
/// first (oversubscribed duplication 1.4-5x slower, measured at 3bc656d). A pool with a few
/// frames free outside the window may evict instead of taking one; the next scans start
/// elsewhere. A free count beside the bitmap did the same in O(1) but its atomics in every
/// frame_free cost the kernels registers (transpose 80 -> 96) and in-core gemm and transpose 17%.
///
/// Eviction (fault.cuh) needs to get from a frame back to the page it holds: `owners` (device
/// memory of the pool's GPU, one word per frame) is the reverse map, written under the page's
/// directory lock when the frame is installed as the GPU's own copy of a page and cleared when
/// the frame is given back (release_frame). An evicter reads it without the lock, as a hint:
/// it then takes the page's lock and checks that the GPU's page-table word still maps this frame.
///
/// The victim choice is a plain clock without referenced bits: the hand (a fetch_add mod frames)
/// walks the frames round robin. A referenced bit would cost the hit path, which today touches
/// only its page-table word, one more store to another line per warp access (to a peer's memory
/// for a remote hit); the phases of the workloads here sweep their data, where a clock with
/// referenced bits finds every frame referenced and degrades to this order anyway.

#include "warpvm/detail/host_device.hpp"

#include <cuda/atomic>

#include <cstddef>
#include <cstdint>

namespace warpvm::detail::mg {

inline constexpr std::uint32_t no_frame = ~std::uint32_t{0};

/// The smallest pool a space accepts: one warp's 32 lanes may fault on 32 different pages in one
/// access, and the warp serves them all before it retries the access, so with fewer frames a
/// warp alone would evict the pages it has just brought in before it uses them.
inline constexpr std::uint32_t min_pool_frames = 32;

struct FramePoolView {
  std::byte* base;         ///< frame f is base + f * page bytes
  std::uint32_t* words;    ///< bump, hint, clock hand, bitmap
  std::uint64_t* owners;   ///< per frame: frame_owner::make(object, page) of the page it holds, or empty
  std::uint32_t frames;

  [[nodiscard]] WARPVM_HD std::uint32_t bitmap_words() const { return (frames + 31) / 32; }
};

inline constexpr std::uint32_t pool_header_words = 3;

/// 32-bit words a pool of `frames` frames needs.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t frame_pool_words(std::uint32_t frames) {
  return pool_header_words + (std::uint64_t{frames} + 31) / 32;
}

/// The reverse map's word: object id (24 bits) and page + 1 (40 bits); 0 is a frame that holds
/// no installed page (free, or taken by a transition that has not installed it yet).
namespace frame_owner {
inline constexpr std::uint64_t empty = 0;
inline constexpr unsigned id_bits = 24;
inline constexpr std::uint32_t max_objects = std::uint32_t{1} << id_bits;
inline constexpr std::uint64_t max_pages = (std::uint64_t{1} << (64 - id_bits)) - 1;
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t make(std::uint32_t object, std::uint64_t page) {
  return (page + 1) << id_bits | object;
}
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t object(std::uint64_t w) {
  return static_cast<std::uint32_t>(w & (max_objects - 1));
}
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t page(std::uint64_t w) { return (w >> id_bits) - 1; }
}  // namespace frame_owner

[[nodiscard]] WARPVM_HD_INLINE std::uint64_t frame_address(const FramePoolView& pool, std::uint32_t f, unsigned page_shift) {
  return reinterpret_cast<std::uint64_t>(pool.base) + (std::uint64_t{f} << page_shift);
}
/// The frame at `address`, a page-aligned address inside the pool.
[[nodiscard]] WARPVM_HD_INLINE std::uint32_t frame_at(const FramePoolView& pool, std::uint64_t address, unsigned page_shift) {
  return static_cast<std::uint32_t>((address - reinterpret_cast<std::uint64_t>(pool.base)) >> page_shift);
}

using pool_atomic = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_system>;
using owner_atomic = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>;

/// Bitmap words one frame_alloc scans at most once the bump counter is spent (1024 frames).
inline constexpr std::uint32_t frame_scan_words = 32;

/// A free frame of the pool, or no_frame when none was found (every frame in use, or none free
/// within the scan window).
WARPVM_HD_INLINE std::uint32_t frame_alloc(const FramePoolView& pool) {
  pool_atomic bump(pool.words[0]);
  if (bump.load(cuda::std::memory_order_relaxed) < pool.frames) {
    const std::uint32_t f = bump.fetch_add(1, cuda::std::memory_order_relaxed);
    if (f < pool.frames) return f;
  }
  const std::uint32_t n = pool.bitmap_words();
  // Each scan starts a window further on: successive takers cover the bitmap between them.
  const std::uint32_t start = pool_atomic(pool.words[1]).fetch_add(frame_scan_words, cuda::std::memory_order_relaxed) % n;
  const std::uint32_t window = n < frame_scan_words ? n : frame_scan_words;
  for (std::uint32_t i = 0; i < window; ++i) {
    const std::uint32_t w = (start + i) % n;
    pool_atomic bits(pool.words[pool_header_words + w]);
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
  pool_atomic(pool.words[pool_header_words + f / 32])
      .fetch_or(std::uint32_t{1} << (f % 32), cuda::std::memory_order_release);
}

/// Records that frame `f` now holds `page` of `object` as the pool's GPU's own copy (the page's
/// directory lock held).
WARPVM_HD_INLINE void frame_set_owner(const FramePoolView& pool, std::uint32_t f, std::uint32_t object,
                                      std::uint64_t page) {
  owner_atomic(pool.owners[f]).store(frame_owner::make(object, page), cuda::std::memory_order_relaxed);
}

/// Frame `f` holds no page any more (the page's directory lock held, or no kernel running).
WARPVM_HD_INLINE void frame_clear_owner(const FramePoolView& pool, std::uint32_t f) {
  owner_atomic(pool.owners[f]).store(frame_owner::empty, cuda::std::memory_order_relaxed);
}

[[nodiscard]] WARPVM_HD_INLINE std::uint64_t frame_owner_of(const FramePoolView& pool, std::uint32_t f) {
  return owner_atomic(pool.owners[f]).load(cuda::std::memory_order_relaxed);
}

/// Frame `f`, that held a page, goes back to the pool: its reverse-map word is cleared first.
WARPVM_HD_INLINE void release_frame(const FramePoolView& pool, std::uint32_t f) {
  frame_clear_owner(pool, f);
  frame_free(pool, f);
}

/// The eviction clock's next candidate: the frames in round-robin order (a 32-bit hand: at its
/// wrap the order skips at most frames - 1 candidates once, which only shifts the sweep).
WARPVM_HD_INLINE std::uint32_t clock_next(const FramePoolView& pool) {
  return pool_atomic(pool.words[2]).fetch_add(1, cuda::std::memory_order_relaxed) % pool.frames;
}

}  // namespace warpvm::detail::mg

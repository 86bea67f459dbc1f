#pragma once
/// @file
/// warpvm::channel: host threads publish data under tags; warps of a running kernel acquire it
/// by tag without busy polling (the WIC design of issue #7, CPU-to-GPU direction, one GPU).
///
/// A warp that asks for data posts one request and parks on a word in device memory (nanosleep
/// backoff), so its SM runs other warps; a monitor thread per channel watches the availability
/// bitmap, batches ready requests (up to 16), copies their data into contiguous staging pages
/// with the copy engine and wakes the warps; staging pages are recycled once every reader of a
/// batch has released. docs/channels.md has the protocol.
///
/// @code
///   warpvm::channel ch({.buffer_bytes = n * tile_bytes, .tag_count = n});
///   my_kernel<<<grid, block>>>(ch.device(), out);          // warps: ch.acquire(...) / release()
///   for (std::uint32_t t = 0; t < n; ++t)                   // producer thread(s), any order
///     ch.publish(t, 1, t * tile_bytes, tile(t), tile_bytes);
///   ch.synchronize();                                        // device-side failures raised here
/// @endcode
///
/// @code
///   __global__ void my_kernel(warpvm::channel_handle ch, float* out) {
///     const std::uint32_t tile = ...;                       // the same in every lane of the warp
///     auto data = ch.acquire(tile, 1, tile_bytes, std::uint64_t{tile} * tile_bytes);
///     const float* px = data.as<float>();                   // device memory, plain loads
///     ... read px ...
///     data.release();                                       // the staging pages may be reused
///   }
/// @endcode

#include "warpvm/detail/sync/channel_view.hpp"
#include "warpvm/error.hpp"

#if defined(__CUDACC__)
#include "warpvm/detail/sync/channel_device.cuh"
#endif

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace warpvm {

/// Sizes and limits of one channel. Defaults suit up to 2M consumer threads.
struct ChannelConfig {
  std::uint64_t buffer_bytes = 64ull << 20;  ///< the producers' pinned buffer (source offsets index it)
  std::uint32_t tag_count = 1u << 16;        ///< availability tags
  std::uint32_t staging_page_bytes = 4096;   ///< granule of the staging area
  std::uint32_t staging_pages = 4096;        ///< staging area in device memory: pages x page bytes
  std::uint32_t max_warps = 1u << 16;        ///< consumer warps a launch may have (global warp ids)
  double watchdog_seconds = 20.0;            ///< a warp waiting longer records an error and traps
  int device = 0;
};

/// Counters kept by the monitor.
struct ChannelStats {
  std::uint64_t requests = 0;  ///< requests taken from the queue
  std::uint64_t batches = 0;   ///< batches served
  std::uint64_t copies = 0;    ///< cudaMemcpyAsync calls for data (contiguous requests share one)
  std::uint64_t bytes = 0;     ///< bytes copied into staging
  std::uint32_t largest_batch = 0;
  std::uint64_t passes = 0;         ///< monitor passes that woke warps
  std::uint64_t answer_stalls = 0;  ///< passes that waited for an earlier pass's answers to be copied
  double serving_seconds = 0;       ///< wall time of the passes that woke warps
  double copy_call_seconds = 0;     ///< of which issuing copies: cudaMemcpyAsync, answer snapshots, events
  double answer_stall_seconds = 0;  ///< of which waiting for an answer slot (see answer_stalls)
};

/// What one warp acquired: `bytes` of data in device memory, readable with plain loads by every
/// lane until release().
class channel_data {
 public:
  [[nodiscard]] WARPVM_HD const std::byte* data() const { return data_; }
  [[nodiscard]] WARPVM_HD std::uint32_t size() const { return bytes_; }
  template <class T>
  [[nodiscard]] WARPVM_HD const T* as() const {
    return reinterpret_cast<const T*>(data_);
  }
#if defined(__CUDACC__)
  /// Warp-collective (the lanes that acquired): the warp is done reading; the data may be
  /// overwritten afterwards. Call it once per acquire, before the warp acquires again.
  __device__ void release() const { detail::channel_release(released_, seq_); }
#endif

 private:
  friend class channel_handle;
  WARPVM_HD channel_data(const std::byte* data, std::uint32_t* released, std::uint32_t bytes, std::uint32_t seq)
      : data_(data), released_(released), bytes_(bytes), seq_(seq) {}
  const std::byte* data_;
  std::uint32_t* released_;  ///< the warp's release word (mapped pinned host memory)
  std::uint32_t bytes_;
  std::uint32_t seq_;
};

/// The device handle: pass it to kernels by value.
class channel_handle {
 public:
  channel_handle() = default;
  explicit channel_handle(const detail::ChannelView& view) : view_(view) {}

#if defined(__CUDACC__)
  /// Warp-collective: every active lane passes the same arguments. Returns, once tags
  /// [first_tag, first_tag + tag_count) are all published, `bytes` of the producers' buffer from
  /// `source_offset`, copied into device memory. Parks the warp (not spinning) meanwhile. A warp
  /// holds one acquisition at a time: release() it before acquiring again. Past the channel's
  /// watchdog, or on bad arguments, records an error and traps (channel::synchronize raises it).
  __device__ channel_data acquire(std::uint32_t first_tag, std::uint32_t tag_count, std::uint32_t bytes,
                                  std::uint64_t source_offset) const {
    const detail::ChannelGrant grant = detail::channel_acquire(view_, first_tag, tag_count, bytes, source_offset);
    return channel_data(grant.data, view_.released + grant.warp, bytes, grant.seq);
  }
#endif

  [[nodiscard]] WARPVM_HD const detail::ChannelView& view() const { return view_; }

 private:
  detail::ChannelView view_{};
};

namespace detail {
class ChannelState;
}

/// Owns a channel: the producers' pinned buffer, the availability bitmap, the request queue,
/// the staging area and the monitor thread. Move-only. `publish` may be called from any number
/// of host threads at once; the other calls from one thread at a time.
class channel {
 public:
  explicit channel(const ChannelConfig& config = {});
  ~channel();
  channel(channel&&) noexcept;
  channel& operator=(channel&&) noexcept;
  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  /// The handle kernels take by value.
  [[nodiscard]] channel_handle device() const;

  /// The producers' pinned buffer (host addresses). Write a range, then publish its tags.
  [[nodiscard]] std::span<std::byte> buffer() const;

  /// Marks tags [first_tag, first_tag + tag_count) available: the data they name must be in
  /// buffer() already (this call orders those writes before any copy the monitor makes).
  /// Thread-safe. Each tag is published once until reset().
  void publish(std::uint32_t first_tag, std::uint32_t tag_count);

  /// Copies `bytes` from `data` to buffer() at `offset`, then publishes the tags.
  void publish(std::uint32_t first_tag, std::uint32_t tag_count, std::uint64_t offset, const void* data,
               std::size_t bytes);

  /// Waits for the device; raises a device-side failure (watchdog, bad arguments) or a monitor
  /// failure as a warpvm::Error.
  void synchronize();

  /// Between kernels: clears every tag, forgets waiting requests and frees all staging.
  void reset();

  [[nodiscard]] ChannelStats stats() const;
  [[nodiscard]] const ChannelConfig& config() const;

 private:
  std::unique_ptr<detail::ChannelState> state_;
};

}  // namespace warpvm

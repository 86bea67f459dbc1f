#pragma once
/// @file
/// warpvm::channel: host threads publish data under tags; warps of a running kernel acquire it
/// by tag without busy polling (the WIC design of issue #7, CPU-to-GPU direction, one GPU).
///
/// A warp that asks for data posts one request and parks on a word in device memory (nanosleep
/// backoff), so its SM runs other warps; a monitor thread per channel watches the availability
/// tags, batches ready requests (up to 16), copies their data into contiguous staging pages
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
///
/// Kernels publish too, on the consumer's GPU or an NVLink peer, when the channel is made with
/// `device_producers` (docs/channels.md, "Kernel producers"):
/// @code
///   warpvm::channel ch({.buffer_bytes = bytes, .tag_count = n, .device = 0,
///                       .device_producers = true, .buffer_device = 1});   // the buffer on GPU 1
///   produce<<<g, b, 0, stream_on_gpu1>>>(ch.producer(1), ...);
///   __global__ void produce(warpvm::channel_producer p, ...) {
///     ... write p.buffer() ...; __syncthreads();
///     if (threadIdx.x == 0) (void)p.publish(tag, 1);       // after the block's writes
///   }
/// @endcode
/// With `.direct = true` too, consumer warps poll that map themselves and read the buffer in
/// place: no host work on the critical path (docs/channels.md, "Direct mode").
/// With `.monitor_warp = true` instead, one warp of a running kernel is the monitor
/// (channel_handle::monitor): consumer warps post requests and park, and it wakes them once their
/// tags are set; the data is read in place (docs/channels.md, "The monitor warp").

#include "warpvm/detail/channel/availability.hpp"
#include "warpvm/detail/channel/channel_view.hpp"
#include "warpvm/error.hpp"

#if defined(__CUDACC__)
#include "warpvm/detail/channel/channel_device.cuh"
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
  std::uint32_t max_warps = 1u << 16;        ///< consumer warps a launch may have (global warp ids; any in direct mode)
  double watchdog_seconds = 20.0;            ///< a warp waiting longer records an error and traps
  int device = 0;                            ///< the consumers' GPU (staging, waiter words, monitor)
  /// Kernels publish too (channel::producer): a device-side availability map in `device`'s
  /// memory, which the monitor polls while requests wait for tags. Off: host producers only,
  /// nothing polled.
  bool device_producers = false;
  /// Where the producers' buffer lives: -1, pinned host memory (host threads write it; kernels
  /// too, over PCIe); a GPU index, that GPU's memory (kernels there write it; the monitor copies
  /// from it over NVLink, or locally when it is `device`).
  int buffer_device = -1;
  /// Direct mode (docs/channels.md, "Direct mode"): needs `device_producers` and a buffer in GPU
  /// memory. A consumer warp's acquire polls the device availability map itself (in `device`'s
  /// memory: local polls) and returns the producers' buffer in place (read over NVLink when it is
  /// on a peer): no request, no monitor thread, no staging copy, nothing to recycle. Tags are
  /// published by kernels only (host `publish` is refused). Opt-in: reads in place cross NVLink
  /// at every load, where a consumer that reads its data many times may prefer the local copy
  /// the monitor makes; and it leaves the monitor path measurable on the same workload.
  bool direct = false;
  /// Monitor-warp mode (docs/channels.md, "The monitor warp"): needs `device_producers` and a
  /// buffer in GPU memory, as `direct` does, and excludes it. Consumer warps post requests and
  /// park on their waiter words as with the host monitor, but the monitor is one warp of a kernel
  /// running on `device` (channel_handle::monitor): it takes the requests from a queue in device
  /// memory, polls the device map's words that they wait on and wakes their warps. The data is
  /// read in place, as in direct mode. No monitor thread, no staging; host publish is refused.
  /// Experimental: measured slower than direct mode on every GPU-to-GPU workload (docs/channels.md,
  /// "The monitor warp").
  bool monitor_warp = false;
  /// The host CPU the monitor thread runs on: -1 leaves it to the OS. Where the OS put it, the
  /// host producer of a producer-bound run was slower: on the lent H200 host the channel was
  /// 9-22% behind the best polling baseline on `tiles` with both threads placed by the OS, and
  /// between 3% ahead and 6% behind with the producer and the monitor pinned to two different
  /// CPUs (docs/channels.md, "Where the monitor runs"). Pin it away from the producers' CPUs
  /// when they are known, and measure: on another host the same CPUs made `halo` 18% slower
  /// than leaving the monitor to the OS.
  /// Not used in direct mode (no monitor thread).
  int monitor_cpu = -1;
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
  std::uint64_t map_polls = 0;      ///< copies of the device-side availability map (device_producers)
  std::uint64_t map_tags = 0;       ///< tags the monitor learnt from them
  // Monitor-warp mode: `requests`, `passes` (here: map words whose arriving tags woke warps; wakes
  // of requests found ready when taken are not counted), `map_polls` (map words it loaded) and
  // `map_tags` (tags it saw arrive) are kept in device memory and copied like the direct-mode
  // counters below; the rest stay zero.
  // Direct mode: the monitor's counters above stay zero; these are kept by the consumer warps in
  // device memory, and stats() copies them (a snapshot while a kernel runs).
  std::uint64_t direct_acquires = 0;  ///< acquires served in place
  std::uint64_t direct_parked = 0;    ///< of which found a tag missing at their first poll and slept
};

/// What one warp acquired: `bytes` of data in device memory, readable with plain loads by every
/// lane until release() (in direct mode, the producers' buffer itself, possibly a peer GPU's:
/// read it with plain or `__ldcg` loads, not `__ldg`, whose non-coherent path assumes data
/// read-only for the whole kernel).
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
  /// overwritten afterwards. Call it once per acquire, before the warp acquires again. Nothing to
  /// do in direct mode (no staging to recycle).
  __device__ void release() const {
    if (released_ != nullptr) detail::channel_release(released_, seq_);
  }
#endif

 private:
  friend class channel_handle;
  WARPVM_HD channel_data(const std::byte* data, std::uint32_t* released, std::uint32_t bytes, std::uint32_t seq)
      : data_(data), released_(released), bytes_(bytes), seq_(seq) {}
  const std::byte* data_;
  std::uint32_t* released_;  ///< the warp's release word (mapped pinned host memory); null in direct mode
  std::uint32_t bytes_;
  std::uint32_t seq_;
};

/// The device handle: pass it to kernels by value.
class channel_handle {
 public:
  channel_handle() = default;
  explicit channel_handle(const detail::ChannelView& view) : view_(view) {}

#if defined(__CUDACC__)
  /// Warp-collective over the lanes active at the call (`__activemask()`): every one passes the
  /// same arguments. After a branch that only some lanes took, reconverge them (`__syncwarp()`)
  /// before the call: lanes that arrive apart acquire as two groups, two requests of one warp at
  /// once, which the channel refuses (an error naming the warp). Returns, once tags
  /// [first_tag, first_tag + tag_count) are all published, `bytes` of the producers' buffer from
  /// `source_offset`, copied into device memory (direct and monitor-warp modes: in place in the
  /// producers' buffer).
  /// Parks the warp (not spinning) meanwhile. A warp
  /// holds one acquisition at a time: release() it before acquiring again. Past the channel's
  /// watchdog, or on bad arguments, records an error and traps (channel::synchronize raises it).
  /// One warp may acquire for its block: after a `__syncthreads()` the block's other threads may
  /// read the data too (the barrier extends the warp's acquire), and with staging the warp
  /// releases only after a second barrier that follows their reads.
  __device__ channel_data acquire(std::uint32_t first_tag, std::uint32_t tag_count, std::uint32_t bytes,
                                  std::uint64_t source_offset) const {
    const detail::ChannelGrant grant = detail::channel_acquire(view_, first_tag, tag_count, bytes, source_offset);
    return channel_data(grant.data, grant.released, bytes, grant.seq);
  }

  /// Monitor-warp mode (ChannelConfig::monitor_warp): a whole warp (32 lanes, converged) of a
  /// kernel on the consumers' GPU serves the channel's requests until `done()` returns true.
  /// `done` is called by one lane, only when a pass of the monitor found nothing to do; it says
  /// that no consumer will acquire any more (say, a count of finished consumer warps reached
  /// theirs). A request still waiting when it returns is served by no one (its warp's watchdog
  /// ends the kernel), and nothing stops a second monitor on the same channel: both are the
  /// caller's to rule out. One monitor warp per channel at a time, resident while any consumer waits: in the
  /// consumers' own kernel (every block resident, or the monitor in a block that starts first)
  /// or in a kernel of its own on another stream. On another channel, records an error and traps.
  /// A monitor in a kernel of its own waits for kernels that run beside it, which CUDA does not
  /// promise to schedule: load them first (cudaFuncGetAttributes: under lazy module loading a
  /// first launch waits for running kernels) and launch each of them once before it runs beside a
  /// monitor (on 2 x H200 a kernel launched for the first time behind a running monitor never
  /// started, with eager module loading too; docs/channels.md, "The monitor warp").
  /// `scratch`: null, or channel::monitor_scratch_bytes() of the block's shared memory (16-byte
  /// aligned, the block's other warps leave it alone), where the waiting lists are fastest: each
  /// waiter woken is then a few shared-memory accesses instead of L2 round trips.
  template <class Done>
  __device__ void monitor(Done&& done, void* scratch = nullptr) const {
    if (view_.monitor.nodes == nullptr)
      detail::channel_fail(view_, detail::ChannelFault::not_monitor_warp, detail::global_warp_index(), 0, 0, 0);
    detail::channel_monitor(view_, done, scratch);
  }
#endif

  [[nodiscard]] WARPVM_HD const detail::ChannelView& view() const { return view_; }

 private:
  detail::ChannelView view_{};
};

/// What a producer kernel gets (channel::producer): the buffer's address on its GPU and the
/// device-side availability map. Pass it to kernels by value.
class channel_producer {
 public:
  channel_producer() = default;
  WARPVM_HD channel_producer(std::byte* buffer, std::uint64_t buffer_bytes, std::uint64_t* map_words,
                             std::uint32_t tag_count)
      : buffer_(buffer), buffer_bytes_(buffer_bytes), map_words_(map_words), tag_count_(tag_count) {}

  /// The producers' buffer (source offsets of acquire index it), addressable by the kernel.
  [[nodiscard]] WARPVM_HD std::byte* buffer() const { return buffer_; }
  [[nodiscard]] WARPVM_HD std::uint64_t buffer_bytes() const { return buffer_bytes_; }

  /// One thread: marks tags [first_tag, first_tag + tag_count) available, with a system-scope
  /// release OR per word of the device map. The data they name must be written first, by this
  /// thread or by threads it synchronised with (a `__syncthreads()` for the block's writes).
  /// Each tag once until channel::reset(). False, setting nothing, for tags past the last.
  [[nodiscard]] WARPVM_HD bool publish(std::uint32_t first_tag, std::uint32_t tag_count = 1) const {
    return detail::AvailabilityBitmap<>(map_words_, tag_count_).publish(first_tag, tag_count);
  }

 private:
  std::byte* buffer_ = nullptr;
  std::uint64_t buffer_bytes_ = 0;
  std::uint64_t* map_words_ = nullptr;  ///< device memory of the consumers' GPU
  std::uint32_t tag_count_ = 0;
};

namespace detail {
class ChannelState;
}

/// Owns a channel: the producers' pinned buffer, the availability tags, the request queue,
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

  /// The producers' buffer. Pinned host memory (host addresses) by default: write a range, then
  /// publish its tags. With ChannelConfig::buffer_device, device memory of that GPU.
  [[nodiscard]] std::span<std::byte> buffer() const;

  /// The handle producer kernels on GPU `device` (-1: the consumers' GPU) take by value. Needs
  /// ChannelConfig::device_producers. For a peer GPU, enables its peer access to the consumers'
  /// GPU (it publishes into memory there) and to the buffer's; refuses a GPU without peer access
  /// or native peer atomics. The kernels must have ended before reset(), and must be loaded
  /// (cudaFuncGetAttributes) before consumers wait on them: under lazy module loading a first
  /// launch can wait for the running consumers (docs/channels.md, "Kernel producers").
  [[nodiscard]] channel_producer producer(int device = -1) const;

  /// Marks tags [first_tag, first_tag + tag_count) available: the data they name must be in
  /// buffer() already (this call orders those writes before any copy the monitor makes).
  /// Thread-safe. Each tag is published once until reset(). Refused in direct mode (kernels
  /// publish there, through producer()).
  void publish(std::uint32_t first_tag, std::uint32_t tag_count);

  /// Copies `bytes` from `data` to buffer() at `offset` (wherever the buffer lives), then
  /// publishes the tags. Refused in direct mode.
  void publish(std::uint32_t first_tag, std::uint32_t tag_count, std::uint64_t offset, const void* data,
               std::size_t bytes);

  /// Waits for the device; raises a device-side failure (watchdog, bad arguments) or a monitor
  /// failure as a warpvm::Error.
  void synchronize();

  /// Between kernels: clears every tag (the device map's too), forgets waiting requests and
  /// frees all staging. Producer kernels must have ended too (on a peer GPU as well).
  void reset();

  /// Safe while consumers wait: in direct mode it copies the warps' counters on the channel's
  /// own stream, which no kernel uses, so it never waits for a kernel (but raises a CUDA error
  /// once a kernel on the consumers' GPU has failed).
  [[nodiscard]] ChannelStats stats() const;
  [[nodiscard]] const ChannelConfig& config() const;

  /// Monitor-warp mode: the shared memory that channel_handle::monitor can keep its lists in
  /// (grows with tag_count and max_warps: 16 B a warp, 4 B a tag; 64 warps and 64 tags fit in
  /// 1.3 KiB, 4096 warps and 4096 tags in 81 KiB).
  [[nodiscard]] std::size_t monitor_scratch_bytes() const;

 private:
  std::unique_ptr<detail::ChannelState> state_;
};

}  // namespace warpvm

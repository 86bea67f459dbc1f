#pragma once
/// @file
/// What a kernel sees of a warpvm::channel (CPU-to-GPU direction, one GPU): plain pointers into
/// memory the channel owns, copied by value into every channel_handle. docs/channels.md has the
/// protocol; in short, per consumer warp w:
///
///   served[w]    device memory, written only by the monitor's copy engine: the number of
///                requests of warp w served so far. Warp w parks on it (its waiter word).
///   offsets[w]   device memory, written only by the copy engine, before served[w]: where in
///                staging the data of w's last served request starts.
///   released[w]  mapped pinned host memory, written only by warp w (release store): the last
///                request whose staging data w has finished reading. The monitor reads it.
///
/// Requests travel in a RequestQueue (request_queue.hpp): slots in mapped pinned host memory,
/// the producers' tail cursor in device memory (a device atomic among the consumer warps; the
/// monitor keeps its own head), so no atomic ever crosses PCIe.
///
/// Direct mode (ChannelConfig::direct; `direct_map` set): none of the above is used. A warp
/// polls the device availability map in its own GPU's memory for its tags and reads the data in
/// place in the producers' buffer (`direct_buffer`, in GPU memory, local or an NVLink peer's).
///
/// Monitor-warp mode (ChannelConfig::monitor_warp; `monitor.nodes` set): the queue's slots are in
/// the consumers' GPU memory, a warp parks on `served[w]` as above, and a monitor warp of a
/// running kernel (channel_handle::monitor) takes the requests, polls the device map
/// (`monitor_map`) and wakes the warps; the data is read in place (`direct_buffer`), so there is
/// no staging, `offsets` or `released`.

#include "warpvm/detail/host_device.hpp"
#include "warpvm/detail/channel/request_queue.hpp"
#include "warpvm/detail/channel/waiting_lists.hpp"

#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

/// Why a channel kernel stopped.
enum class ChannelFault : std::uint32_t {
  none = 0,
  wait_timeout = 1,  ///< a parked warp was not served within the watchdog (first_tag, value: tag count)
  post_timeout = 2,  ///< the request queue stayed full for the watchdog time
  bad_warp = 3,      ///< the warp's global id is not below ChannelConfig::max_warps (value: the id)
  bad_request = 4,   ///< tags, offset or bytes out of range (first_tag, value: bytes)
  not_uniform = 5,   ///< the lanes of a warp passed different arguments to acquire
  served_ahead = 6,  ///< a woken warp found its served count past the request it posted (value: the count)
  split_request = 7,  ///< the monitor warp took a request that does not follow the warp's last (value: its number)
  not_monitor_warp = 8,  ///< channel_handle::monitor on a channel made without ChannelConfig::monitor_warp
};

/// First device-side failure of a channel, in mapped pinned host memory so that the host reads it
/// even after the kernel trapped. Claimed through a device word; `state` is set last.
struct ChannelErrorRecord {
  std::uint32_t state;  ///< 0, or 1 once every field is written
  std::uint32_t fault;  ///< ChannelFault
  std::uint32_t warp;   ///< global warp id
  std::uint32_t first_tag;
  std::uint64_t value;
  std::uint64_t source_offset;
};

/// Wrap-safe "a is at or after b" for the 32-bit request counts of a waiter word.
WARPVM_HD_INLINE constexpr bool channel_seq_reached(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>(a - b) >= 0;
}

struct ChannelView {
  RequestSlot* slots;                ///< mapped pinned host memory, `queue_capacity` cells
  RequestQueueCursors* cursors;      ///< device memory: the consumers' tail
  std::uint32_t* served;             ///< device memory, [waiters]
  std::uint64_t* offsets;            ///< device memory, [waiters]
  std::uint32_t* released;           ///< mapped pinned host memory, [waiters]
  const std::byte* staging;          ///< device memory, `staging_bytes`
  ChannelErrorRecord* error;         ///< mapped pinned host memory
  std::uint32_t* error_claim;        ///< device word
  std::uint64_t watchdog_ns;
  std::uint64_t buffer_bytes;        ///< the producers' buffer: source offsets index into it
  std::uint64_t staging_bytes;
  std::uint32_t queue_capacity;
  std::uint32_t waiters;             ///< consumer warps a launch may have (global warp ids below this)
  std::uint32_t tag_count;
  // Direct mode only (null otherwise):
  std::uint64_t* direct_map;         ///< device memory of the consumers' GPU: the kernel producers' map
  const std::byte* direct_buffer;    ///< the producers' buffer, addressable from the consumers' GPU
  std::uint64_t* direct_counts;      ///< device memory: [0] acquires, [1] of which found a tag missing
  // Monitor-warp mode only (null otherwise; `direct_buffer` is set too, `direct_map` is not):
  std::uint64_t* monitor_map;        ///< device memory of the consumers' GPU: the kernel producers' map
  WarpMonitorTables monitor;         ///< device memory: the monitor warp's own state
};

/// Indices into ChannelView::direct_counts.
inline constexpr std::uint32_t direct_count_acquires = 0;
inline constexpr std::uint32_t direct_count_parked = 1;
inline constexpr std::uint32_t direct_count_slots = 2;

}  // namespace warpvm::detail

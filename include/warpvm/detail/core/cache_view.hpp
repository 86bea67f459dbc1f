#pragma once
/// @file
/// What device code sees of the runtime: the frames, the object table, the counters and the
/// error record. Plain pointers into memory the Runtime owns; copied by value into every
/// warpvm::array so the hot path reads it from the kernel's parameter space.

#include "warpvm/config.hpp"
#include "warpvm/detail/core/frame_table.hpp"
#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/detail/core/page_table.hpp"
#include "warpvm/detail/host_device.hpp"
#include "warpvm/detail/policy/uvm_prefetch.hpp"
#include "warpvm/trace.hpp"

#include <cstddef>
#include <cstdint>

namespace warpvm::detail {

/// One registered object as the device sees it.
struct ObjectDescriptor {
  std::byte* host;            ///< device-accessible pointer to the pinned backing store
  std::uint64_t bytes;        ///< object size
  PageEntry* pages;           ///< state and frame of each page (page_table.hpp)
  /// Placement::automatic: 32-byte sectors read remotely from each page since it was last loaded
  /// (null for other placements).
  std::uint32_t* remote_sectors;
  std::uint32_t id;
  Placement placement;
  /// Which of the objects that have had slot `id` this is: a handle whose generation differs
  /// from the table's outlived its object (checked mode reports it). 16 bits, in what was
  /// padding, so that the handle keeps its size; never 0 for a live object (an empty slot's
  /// descriptor is zeroed), so a stale handle is missed only after exactly 65535 reuses of its slot.
  std::uint16_t generation;
  /// Placement::resident: page p's frame is resident_first_frame + p, one of the frames past the
  /// cache's that Config::resident_bytes sets aside (no victim is ever taken for it).
  std::uint32_t resident_first_frame;
};

/// Counters, sharded by SM so that a hot counter is never one contended word.
enum class Counter : std::uint32_t { hits, misses, waits, evictions, writebacks, bytes_in, bytes_out, count };
inline constexpr std::uint32_t counter_count = static_cast<std::uint32_t>(Counter::count);
inline constexpr std::uint32_t counter_shards = 256;

/// What a recorded failure was doing, where its kind alone does not say (the host's message
/// depends on it, and on what `index` and `limit` then mean).
enum class FailureCause : std::uint32_t {
  none,
  no_victim,        ///< no_progress: no frame to evict (limit: the cache's frames)
  host_service,     ///< no_progress: a wait for a host service thread (index: the page, or the heap request)
  page_transition,  ///< no_progress: a wait for another warp's load or eviction of page `index`
  stale_placement,  ///< invalid_argument: a handle taken before set_placement() (index: the element)
  destroyed_object, ///< invalid_argument: a handle of an object destroyed since (index: its generation, limit: the slot's)
  overwrite_incomplete,  ///< invalid_argument: an overwrite span left bytes unwritten (index: the page, limit: the first byte)
  // index_out_of_range from the input check of one of warpvm::ops' operations (ops.hpp), whose
  // message names the operation and the input (index: the value, as int64)
  gather_ids,
  embedding_bag_ids,
  embedding_bag_offsets,
  index_add_ids,
  sample_seeds,
  sample_indptr,
};

/// First device-side failure, in mapped pinned host memory so that the host can read it even
/// after a kernel trapped.
struct ErrorRecord {
  std::uint32_t state;  ///< error_state_none, or error_state_set once every field is written
  std::uint32_t kind;   ///< warpvm::ErrorKind
  std::uint32_t object_id;
  FailureCause cause;
  std::uint64_t index;  ///< offending element index (index_out_of_range), or as `cause` says
  std::uint64_t limit;  ///< object size in elements, or as `cause` says
};
inline constexpr std::uint32_t error_state_none = 0;
inline constexpr std::uint32_t error_state_set = 1;

/// What the host_batched service tells waiting warps after every batch (device memory, copied
/// in by the host, so that warps poll L2 rather than the link).
struct ReplayState {
  std::uint64_t consumed;         ///< fault buffer positions below this have been taken
  std::uint64_t orders_posted;    ///< eviction orders below this index are in the order ring
  std::uint64_t orders_complete;  ///< every eviction order below this index is acknowledged
  std::uint32_t epoch;            ///< bumped after every batch (replay)
  std::uint32_t pad;
};

/// host_batched, while the cache can be full: the service's order to evict the pages of one
/// 2 MB block from its chunk. Device memory, written by the host; waiting warps move its pages
/// to BUSY (host_batched.cuh).
struct EvictionOrder {
  std::uint64_t first_key;  ///< page key of the block's first page
  std::uint32_t pages;      ///< pages in `mask`
  std::uint32_t cancel;     ///< set to 1 by the host to withdraw the order (its pages stay held)
  BlockMask mask;           ///< the block's pages to evict: those the service made resident
};

/// How far an order has got (device memory, one per ring slot): the order's index (low 32
/// bits) above its counts of pages taken, marked and given back and its withdrawn flag
/// (host_batched.cuh). The host writes {index, 0} before the order itself, so a warp that read
/// a slot's order before the slot was reused finds the tag changed.
struct EvictionProgress {
  std::uint64_t tagged;
};

/// An order's acknowledgement (mapped pinned memory, one per ring slot): order index + 1,
/// written by the warp that makes its last page BUSY (the host then writes the dirty pages back
/// and marks the pages absent, with copies), or that with eviction_ack_cancelled, written once a
/// withdrawn order has given back every page it took (they are resident again).
struct EvictionAck {
  std::uint64_t sequence;
};
inline constexpr std::uint64_t eviction_ack_cancelled = std::uint64_t{1} << 63;

/// The eviction order ring (the struct itself lives in device memory, so that the handle pays
/// one pointer for it). Order `o` is in slot `o % capacity`.
struct EvictionRing {
  EvictionOrder* orders;      ///< device memory
  EvictionProgress* progress; ///< device memory
  EvictionAck* acks;          ///< mapped pinned host memory (device address)
  std::uint32_t capacity;     ///< a power of two, at least the chunks (an order holds a chunk)
};

/// The host_batched transport's fault buffer: warps post page keys (plus one; 0 marks an empty
/// slot) into mapped pinned memory, at positions taken from a device counter; the host service
/// thread takes them in position order and bumps the replay epoch after every batch, when it
/// also drops (flushes) what is left: warps still waiting then post again.
struct FaultRing {
  std::uint64_t* slots;          ///< mapped pinned host memory, `capacity` entries
  std::uint64_t* next_position;  ///< device word
  const ReplayState* replay;     ///< device memory
  const EvictionRing* evictions; ///< device memory
  std::uint32_t capacity;        ///< a power of two
};

/// Where the device records fault events (off: `events` is null, and the fault path does not
/// read the clock for it). `next` counts every event; those past `capacity` are dropped.
struct FaultRecorder {
  FaultEvent* events;
  std::uint64_t* next;
  std::uint64_t capacity;
};

struct CacheView {
  std::byte* frames;              ///< frame f is frames + (f << page_shift)
  FrameTable table;
  ObjectDescriptor* objects;      ///< indexed by object id
  std::uint64_t* counters;        ///< [counter_shards][counter_count]
  ErrorRecord* error;             ///< mapped host memory
  std::uint32_t* error_claim;     ///< device word: the first failing thread claims the record
  const std::uint32_t* never_evicts;  ///< device word: 1 while every migrate object fits in the cache
  /// Device word: the sectors an absent page of a Placement::automatic object may give remote
  /// reads before it migrates (policy/automatic.hpp). The host sets it with never_evicts, from
  /// Config::automatic_remote_share or, once the cache can evict, ..._evicting.
  const std::uint32_t* automatic_budget;
  std::uint64_t watchdog_ns;
  unsigned page_shift;
  EvictionPolicy eviction;
  Transport transport;
  bool checked;                       ///< Config::checked: pages loaded for overwrite are poisoned
  FaultRing faults;                   ///< host_batched only
  FaultRecorder recorder;

  [[nodiscard]] WARPVM_HD PageGeometry geometry() const { return {page_shift}; }
  [[nodiscard]] WARPVM_HD std::byte* frame_data(std::uint32_t f) const {
    return frames + (static_cast<std::uint64_t>(f) << page_shift);
  }
};

}  // namespace warpvm::detail

#pragma once
/// @file
/// The request side of a WIC channel (paper Sections 5.3-5.5), without driver support:
///
///  1. A consumer warp that needs producer data posts a Request to the channel's RequestQueue
///     (the paper's PFQ) and parks on its waiter word (in its own GPU's memory: the count of its
///     requests served, channel_view.hpp) with nanosleep backoff instead of polling the
///     producer's memory.
///  2. The monitor (one per consumer GPU) drains the queue, keeps the requests whose tags are not
///     all set in its availability tags (AvailabilityBytes), and puts ready ones into batches of at most 16
///     (the paper's Interrupter batches 16 warps); each batch gets one contiguous run of staging
///     pages from the StagingPageTree.
///  3. The activator copies each request's data into the run and wakes its waiter (the copy
///     engine writes the data, then the waiter word). The warp reads its data there, then says
///     so; the monitor counts that down on the batch's StagingLease and gives the run back to the
///     tree once every reader of the batch has finished.
///
/// Step 3's acknowledgement replaces the paper's P / P' page pairing: the paper alternates two
/// pages per slot because its invalidation signal could not be timed after the consumers'
/// reads; here the last reader's release decrement is exactly that moment, so a run is reused
/// only after all of its reads, with one set of pages instead of two.

#include "warpvm/detail/host_device.hpp"

#include <cuda/atomic>

#include <cstdint>

namespace warpvm::detail {

// ---- the queue ------------------------------------------------------------------------------

/// What a consumer warp asks for: the producer data named by tags [first_tag, first_tag +
/// tag_count), `bytes` long at `source_offset` in the producers' buffer. The destination is
/// not the warp's to choose: the monitor assigns it staging space and tells it through waiter
/// number `waiter`.
struct Request {
  std::uint32_t first_tag;
  std::uint32_t tag_count;
  std::uint32_t waiter;
  std::uint32_t bytes;
  std::uint64_t source_offset;
  /// The waiter's count of requests, this one included: the served count its answer writes. The
  /// monitor checks it (request_follows), so that two requests of one warp at once, which would
  /// wake the warp on the wrong answer, are refused instead of served.
  std::uint32_t seq = 0;
};

/// Whether a request numbered `seq` from a warp is the one the monitor can serve next: the warp
/// has no other request pending (`taken`, the number of the warp's last request the monitor
/// took, equals `served`, its requests served) and counts on from there. A warp waits for each
/// answer before it asks again, so only a warp whose lanes acquired apart (two groups, each
/// posting with the same count) fails it.
[[nodiscard]] WARPVM_HD_INLINE constexpr bool request_follows(std::uint32_t seq, std::uint32_t taken,
                                                              std::uint32_t served) {
  return taken == served && seq == served + 1;
}

/// One cell of the ring. `turn` says whose move it is at ring position p = turn (mod capacity):
///   turn == p                     free: the producer that claims position p may write it
///   turn == p + 1                 holds the request posted at position p
///   turn == p + capacity          taken by the monitor: free for position p + capacity
/// 64-bit positions do not wrap in the life of a channel.
struct RequestSlot {
  std::uint64_t turn;
  Request request;
};

/// The ring's two positions, on separate cache lines: producers contend on `tail` only.
struct RequestQueueCursors {
  alignas(64) std::uint64_t tail;  ///< next position a producer claims
  alignas(64) std::uint64_t head;  ///< next position the monitor takes (the monitor's alone)
};

/// A bounded multi-producer, single-consumer FIFO of requests (the PFQ), lock-free for the
/// producers. Non-owning view of a RequestQueueCursors and `capacity` slots kept by the caller;
/// `reset` before first use. `capacity` is a power of two and at least 2: with one cell, "holds
/// the request posted at p" and "free for position p + 1" would be the same turn.
///
/// Memory ordering: a producer claims a position with a CAS on `tail` (relaxed: only its
/// uniqueness matters), after an acquire load of the slot's turn saw the monitor's release of
/// the previous lap, so the monitor's reads of the old request happen before the producer
/// overwrites it. The producer writes the request, then publishes it with a release store of
/// turn = p + 1; the monitor's acquire load of that value makes the request's bytes (and
/// whatever the warp wrote before posting, such as arming its waiter) visible to it.
template <cuda::thread_scope Scope = cuda::thread_scope_system>
class RequestQueue {
 public:
  [[nodiscard]] WARPVM_HD static constexpr bool valid_capacity(std::uint32_t capacity) {
    return capacity >= 2 && (capacity & (capacity - 1)) == 0;
  }

  WARPVM_HD RequestQueue(RequestQueueCursors* cursors, RequestSlot* slots, std::uint32_t capacity)
      : cursors_(cursors), slots_(slots), capacity_(capacity) {}

  /// Empties the ring. Only while nobody else uses it.
  WARPVM_HD void reset() const {
    for (std::uint32_t i = 0; i < capacity_; ++i) turn_of(i).store(i, cuda::std::memory_order_relaxed);
    cuda::atomic_ref<std::uint64_t, Scope>(cursors_->tail).store(0, cuda::std::memory_order_relaxed);
    cursors_->head = 0;
  }

  /// Posts a request; false, posting nothing, when the ring already holds `capacity` requests
  /// that the monitor has not taken (the caller backs off and retries, or does other work).
  WARPVM_HD bool try_post(const Request& request) const {
    cuda::atomic_ref<std::uint64_t, Scope> tail(cursors_->tail);
    std::uint64_t position = tail.load(cuda::std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t turn = turn_of(position).load(cuda::std::memory_order_acquire);
      if (turn == position) {
        if (tail.compare_exchange_weak(position, position + 1, cuda::std::memory_order_relaxed,
                                       cuda::std::memory_order_relaxed)) {
          publish(position, request);
          return true;
        }
        // The CAS failed and reloaded `position`: another producer claimed it first.
      } else if (turn < position) {
        // The cell still holds the request posted one lap ago: `capacity` requests are waiting.
        return false;
      } else {
        position = tail.load(cuda::std::memory_order_relaxed);  // another producer moved on
      }
    }
  }

  /// The contention-free way to post, for callers that never have more than `capacity`
  /// requests outstanding (posted and not yet served, each poster waiting for its own): claim a
  /// position with one fetch_add, then `try_fill` it. Why the claimed cell is then free at once:
  /// the monitor takes in position order, so if position p - capacity were not yet taken, none
  /// of p - capacity .. p would be taken, nor served, and they would be capacity + 1 outstanding
  /// requests. `try_fill` still checks the turn (false: retry), so a caller that breaks the
  /// bound waits instead of overwriting. Unlike `try_post`'s CAS loop, where every lost race
  /// re-reads a turn (a PCIe read when the slots are in pinned memory, and a storm of them when
  /// many warps post at once), this reads each turn once.
  [[nodiscard]] WARPVM_HD std::uint64_t claim() const {
    return cuda::atomic_ref<std::uint64_t, Scope>(cursors_->tail).fetch_add(1, cuda::std::memory_order_relaxed);
  }

  /// Writes `request` into claimed `position` and publishes it; false, writing nothing, while
  /// the cell still holds the request of the previous lap.
  [[nodiscard]] WARPVM_HD bool try_fill(std::uint64_t position, const Request& request) const {
    if (turn_of(position).load(cuda::std::memory_order_acquire) != position) return false;
    publish(position, request);
    return true;
  }

  /// Takes the oldest request into `out`; false when there is none, or when the producer that
  /// claimed the next position has not finished writing it (it will, a few instructions later).
  /// The monitor's alone: one thread (one lane, on the GPU) calls it.
  WARPVM_HD bool try_take(Request& out) const {
    const std::uint64_t position = cursors_->head;
    if (!posted(position)) return false;
    out = take_at(position);
    cursors_->head = position + 1;
    return true;
  }

  // The monitor warp takes up to 32 at once: lane i looks at head() + i, the lanes of the posted
  // prefix take_at their positions, then one lane advances the head past them.

  /// The next position the monitor takes.
  [[nodiscard]] WARPVM_HD std::uint64_t head() const { return cursors_->head; }
  /// Whether the request at `position` (at or after the head, within capacity of it) is posted;
  /// acquire: its bytes are visible once true.
  [[nodiscard]] WARPVM_HD bool posted(std::uint64_t position) const {
    return turn_of(position).load(cuda::std::memory_order_acquire) == position + 1;
  }
  /// The posted request at `position`, its cell handed back to the producers (release: read first).
  [[nodiscard]] WARPVM_HD Request take_at(std::uint64_t position) const {
    const Request request = slots_[position & (capacity_ - 1)].request;
    turn_of(position).store(position + capacity_, cuda::std::memory_order_release);
    return request;
  }
  /// Past `taken` positions, all taken.
  WARPVM_HD void advance_head(std::uint64_t taken) const { cursors_->head += taken; }

  [[nodiscard]] WARPVM_HD std::uint32_t capacity() const { return capacity_; }

 private:
  /// Writes `request` into the cell of claimed, free `position` and hands it to the monitor
  /// (the release store: the request's bytes are visible to its acquire load of the turn).
  WARPVM_HD void publish(std::uint64_t position, const Request& request) const {
    slots_[position & (capacity_ - 1)].request = request;
    turn_of(position).store(position + 1, cuda::std::memory_order_release);
  }
  [[nodiscard]] WARPVM_HD cuda::atomic_ref<std::uint64_t, Scope> turn_of(std::uint64_t position) const {
    return cuda::atomic_ref<std::uint64_t, Scope>(slots_[position & (capacity_ - 1)].turn);
  }

  RequestQueueCursors* cursors_;
  RequestSlot* slots_;
  std::uint32_t capacity_;
};

// ---- batching -------------------------------------------------------------------------------

/// Requests served by one staging run and one copy pass: the paper's Interrupter batches 16 warps.
inline constexpr std::uint32_t batch_max_requests = 16;
/// Each request's data starts on this boundary in its batch's run, so warps copy and read it with
/// 16-byte vector accesses.
inline constexpr std::uint32_t staging_alignment = 16;

/// Pages of `page_bytes` that hold `bytes`: the paper's ceil(totalSize / pageSize).
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint32_t staging_pages_for(std::uint64_t bytes,
                                                                         std::uint32_t page_bytes) {
  return static_cast<std::uint32_t>((bytes + page_bytes - 1) / page_bytes);
}

/// Ready requests that will share one contiguous staging run, each at a 16-byte aligned offset.
struct Batch {
  Request requests[batch_max_requests];
  std::uint64_t offsets[batch_max_requests];  ///< where each request's data starts in the run
  std::uint32_t count = 0;
  std::uint64_t bytes = 0;  ///< the run's used length: the furthest request end

  /// Adds a request at the next aligned offset; false, adding nothing, when the batch has 16
  /// requests or the run would grow past `max_bytes` (say the largest free run the monitor can
  /// get). A request that is refused by an empty batch can never be served at that size.
  ///
  /// A request whose source starts inside the previous request's source range, a multiple of 16
  /// bytes after it, shares those bytes instead: it is placed at the same displacement from its
  /// source as the previous one (still 16-byte aligned), so one copy serves both (overlapping
  /// windows, such as a stencil's or a banded matrix's halo rows read by neighbouring warps).
  WARPVM_HD bool try_add(const Request& request, std::uint64_t max_bytes) {
    if (count == batch_max_requests) return false;
    std::uint64_t offset = (bytes + staging_alignment - 1) / staging_alignment * staging_alignment;
    if (count != 0) {
      const Request& previous = requests[count - 1];
      const std::uint64_t after = request.source_offset - previous.source_offset;
      if (request.source_offset >= previous.source_offset && after < previous.bytes && after % staging_alignment == 0)
        offset = offsets[count - 1] + after;
    }
    const std::uint64_t end = offset + request.bytes > bytes ? offset + request.bytes : bytes;
    if (end > max_bytes) return false;
    requests[count] = request;
    offsets[count] = offset;
    ++count;
    bytes = end;
    return true;
  }

  [[nodiscard]] WARPVM_HD std::uint32_t pages(std::uint32_t page_bytes) const {
    return staging_pages_for(bytes, page_bytes);
  }
};

// ---- recycling staging runs -----------------------------------------------------------------

/// One batch's staging run, lent to its readers until the last one has finished.
/// The monitor opens it (plain stores: the wake stores that follow publish it) and later polls
/// `lease_drained`; each woken warp calls `lease_finish_reading` once, after its last read.
struct StagingLease {
  std::uint32_t first_page;
  std::uint32_t pages;
  std::uint32_t readers_left;
};

/// Fills a lease for a batch of `readers` requests. The lease's previous batch must be drained
/// (the monitor saw `lease_drained`, so those decrements happen before these stores).
WARPVM_HD_INLINE void lease_open(StagingLease& lease, std::uint32_t first_page, std::uint32_t pages,
                                 std::uint32_t readers) {
  lease.first_page = first_page;
  lease.pages = pages;
  lease.readers_left = readers;
}

/// A reader is done with the run. Release: its reads of the run happen before the monitor,
/// seeing zero, reuses the pages. On the GPU the warp's lanes read first, then `__syncwarp()`
/// orders their reads before the one lane that calls this.
template <cuda::thread_scope Scope = cuda::thread_scope_system>
WARPVM_HD void lease_finish_reading(StagingLease& lease) {
  cuda::atomic_ref<std::uint32_t, Scope>(lease.readers_left).fetch_sub(1, cuda::std::memory_order_release);
}

/// Whether every reader has finished; then the run may go back to the StagingPageTree. The
/// decrements are read-modify-writes, one release sequence: the acquire load that reads zero
/// synchronizes with every reader's decrement, not just the last one's.
template <cuda::thread_scope Scope = cuda::thread_scope_system>
[[nodiscard]] WARPVM_HD bool lease_drained(StagingLease& lease) {
  return cuda::atomic_ref<std::uint32_t, Scope>(lease.readers_left).load(cuda::std::memory_order_acquire) == 0;
}

// ---- parking ---------------------------------------------------------------------------------

/// First and longest pause between two polls of a warp that posts a request or waits in direct
/// mode (as the fault path's waiters). On the H200 `__nanosleep(t)` sleeps up to about 2t, in
/// powers of two (measured medians: 256 -> 512 ns, 512 -> 1024, 1000 -> 1024, 2000 -> 2048).
inline constexpr std::uint32_t waiter_backoff_min_ns = 8;
inline constexpr std::uint32_t waiter_backoff_max_ns = 256;
/// The longest pause of a warp parked behind the host monitor (1-2 us of real sleep), whose
/// answer takes a monitor pass and its copies (tens of microseconds): a poll every 0.5 us gains
/// that warp nothing and costs the warps computing beside it issue slots (`compute_slowdown`
/// 1.037 on `tiles` with the 256 ns cap, 1.014 with this one; H200).
inline constexpr std::uint32_t monitor_waiter_backoff_max_ns = 1024;
/// Polls of a direct-mode wait after its first that use acquire loads (TagRangeWait): with the
/// backoff, about the first microsecond of the wait. A short wait then ends at the poll that sees
/// its tags; a longer one goes on with relaxed polls, which spare the SM's L1.
inline constexpr std::uint32_t direct_acquiring_polls = 8;

}  // namespace warpvm::detail

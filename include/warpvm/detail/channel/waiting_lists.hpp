#pragma once
/// @file
/// The bookkeeping of a channel's monitor warp (ChannelConfig::monitor_warp; docs/channels.md,
/// "The monitor warp"): the pending requests (the paper's PFQ once taken from the queue), kept
/// by the first tag each still misses, so that a pass of the monitor does work in proportion to
/// the tags that arrived, not to the warps that wait.
///
///   heads[t]           the first waiter whose first missing tag is t (`no_waiter`: none)
///   nodes[w]           waiter w's place in its list, its request number and remaining tags
///   taken[w]           the number (Request::seq) of w's last request taken (request_follows)
///   seen[word]         the device map's words as the monitor last read them (its own copy)
///   word_waiters[word] waiters whose first missing tag lies in that word; `span` bounds the
///                      words with any, which are the only ones the monitor polls
///
/// One thread owns all of it (lane 0 of the monitor warp, or a host test): plain loads and
/// stores. The caller polls the live map, ORs what it saw into `seen` (`absorb`) and then hands
/// each word's new bits to `tags_arrived`, which wakes the waiters whose tags are all seen.

#include "warpvm/detail/host_device.hpp"
#include "warpvm/detail/channel/availability.hpp"
#include "warpvm/detail/channel/request_queue.hpp"

#include <cuda/atomic>
#include <cuda/std/bit>

#include <cstdint>

namespace warpvm::detail {

inline constexpr std::uint32_t no_waiter = ~0u;

/// Waiter w's entry: the next waiter in the same list, its request number (the served count its
/// wake writes), the first tag it still misses and the end of its tags.
struct WaitingNode {
  std::uint32_t next;
  std::uint32_t seq;
  std::uint32_t next_tag;
  std::uint32_t end_tag;
};

/// Map words [low, high) hold every first missing tag of a waiting request (empty: low >= high).
struct WaitingSpan {
  std::uint32_t low;
  std::uint32_t high;
};

/// Counters of a monitor warp, indices into WarpMonitorTables::counts.
inline constexpr std::uint32_t monitor_count_requests = 0;  ///< requests taken from the queue
inline constexpr std::uint32_t monitor_count_wakes = 1;     ///< passes that woke warps
inline constexpr std::uint32_t monitor_count_polls = 2;     ///< map words loaded
inline constexpr std::uint32_t monitor_count_tags = 3;      ///< tags seen arrive
inline constexpr std::uint32_t monitor_count_slots = 4;

/// Where a monitor warp keeps its state (device memory of the consumers' GPU, or its block's
/// shared memory for all but `taken` and `counts`: monitor_scratch_bytes; host memory in host
/// tests). Sizes: heads [tag_count], nodes and taken [waiters], seen and word_waiters
/// [AvailabilityBitmap<>::words_required(tag_count)].
struct WarpMonitorTables {
  std::uint32_t* heads;
  WaitingNode* nodes;
  std::uint32_t* taken;
  std::uint64_t* seen;
  std::uint32_t* word_waiters;
  WaitingSpan* span;
  std::uint64_t* counts;  ///< [monitor_count_slots]
};

/// Bytes of shared memory that hold a monitor warp's lists, span and copy of the map (all of
/// WarpMonitorTables but `taken` and `counts`, which stay in device memory), each part 16-byte
/// aligned: the walk of a list is then a chain of shared-memory loads, not of L2 round trips.
[[nodiscard]] WARPVM_HD_INLINE constexpr std::uint64_t monitor_scratch_bytes(std::uint32_t tag_count,
                                                                           std::uint32_t waiters) {
  auto aligned = [](std::uint64_t bytes) { return (bytes + 15) / 16 * 16; };
  const std::uint64_t words = AvailabilityBitmap<>::words_required(tag_count);
  return aligned(sizeof(WaitingNode) * std::uint64_t{waiters}) + aligned(sizeof(std::uint64_t) * words) +
         aligned(sizeof(std::uint32_t) * std::uint64_t{tag_count}) + aligned(sizeof(std::uint32_t) * words) +
         aligned(sizeof(WaitingSpan));
}

/// `tables` with its lists, span and copy of the map carved out of `scratch` (at least
/// monitor_scratch_bytes(tag_count, waiters), 16-byte aligned), in the same order as counted there.
/// The caller fills them as cleared: heads no_waiter, the rest zero.
[[nodiscard]] WARPVM_HD_INLINE WarpMonitorTables tables_in_scratch(WarpMonitorTables tables, void* scratch,
                                                                   std::uint32_t tag_count, std::uint32_t waiters) {
  auto aligned = [](std::uint64_t bytes) { return (bytes + 15) / 16 * 16; };
  const std::uint64_t words = AvailabilityBitmap<>::words_required(tag_count);
  auto* at = static_cast<unsigned char*>(scratch);
  tables.nodes = reinterpret_cast<WaitingNode*>(at);
  at += aligned(sizeof(WaitingNode) * std::uint64_t{waiters});
  tables.seen = reinterpret_cast<std::uint64_t*>(at);
  at += aligned(sizeof(std::uint64_t) * words);
  tables.heads = reinterpret_cast<std::uint32_t*>(at);
  at += aligned(sizeof(std::uint32_t) * std::uint64_t{tag_count});
  tables.word_waiters = reinterpret_cast<std::uint32_t*>(at);
  at += aligned(sizeof(std::uint32_t) * words);
  tables.span = reinterpret_cast<WaitingSpan*>(at);
  return tables;
}

/// What `admit` did with a request.
enum class Admission : std::uint32_t {
  refused,  ///< not the warp's next request (request_follows): two requests of one warp at once
  ready,    ///< every tag already seen: wake the warp now
  waiting,  ///< linked under its first missing tag
};

class WaitingLists {
 public:
  WARPVM_HD WaitingLists(const WarpMonitorTables& tables, std::uint32_t tag_count)
      : t_(tables), tag_count_(tag_count) {}

  /// A request taken from the queue, whose waiter's served count is `served`: `follows`, then `place`.
  WARPVM_HD Admission admit(const Request& request, std::uint32_t served) const {
    return follows(request, served) ? place(request) : Admission::refused;
  }

  /// Whether the request is its warp's next (request_follows); if so, records it as taken. The
  /// monitor warp's lanes check the requests of one take at once (distinct warps: it refuses a
  /// take with two of one warp before asking).
  WARPVM_HD bool follows(const Request& request, std::uint32_t served) const {
    const std::uint32_t w = request.waiter;
    if (!request_follows(request.seq, t_.taken[w], served)) return false;
    t_.taken[w] = request.seq;
    return true;
  }

  /// A request that `follows`: ready, or linked under its first tag not yet seen.
  WARPVM_HD Admission place(const Request& request) const {
    const std::uint32_t w = request.waiter;
    const std::uint32_t end = request.first_tag + request.tag_count;
    const std::uint32_t missing = first_unseen(request.first_tag, end);
    if (missing == end) return Admission::ready;
    t_.nodes[w] = WaitingNode{no_waiter, request.seq, missing, end};
    link(w, missing);
    return Admission::waiting;
  }

  /// ORs `live`, a word the caller read from the device map, into `seen`; returns the bits it added.
  WARPVM_HD std::uint64_t absorb(std::uint32_t word, std::uint64_t live) const {
    const std::uint64_t arrived = live & ~t_.seen[word];
    if (arrived != 0) t_.seen[word] |= arrived;
    return arrived;
  }

  /// After `absorb` added `arrived` to word `word` (and every other word the caller polled was
  /// absorbed too): every waiter of those tags moves on to its next unseen tag, or, with none
  /// left, is woken: wake(waiter, seq). Returns how many were woken.
  template <class Wake>
  WARPVM_HD std::uint32_t tags_arrived(std::uint32_t word, std::uint64_t arrived, Wake&& wake) const {
    std::uint32_t woken = 0;
    for (std::uint64_t bits = arrived; bits != 0; bits &= bits - 1) {
      const std::uint32_t tag = word * availability_tags_per_word + static_cast<std::uint32_t>(cuda::std::countr_zero(bits));
      if (tag >= tag_count_) break;  // bits past the last tag
      std::uint32_t w = t_.heads[tag];
      t_.heads[tag] = no_waiter;
      while (w != no_waiter) {
        WaitingNode& node = t_.nodes[w];
        const std::uint32_t next = node.next;
        --t_.word_waiters[word];
        // Tags already seen are skipped, so a waiter never moves onto a tag of `arrived`.
        const std::uint32_t missing = first_unseen(tag + 1, node.end_tag);
        if (missing == node.end_tag) {
          wake(w, node.seq);
          ++woken;
        } else {
          node.next_tag = missing;
          link(w, missing);
        }
        w = next;
      }
    }
    shrink_span();
    return woken;
  }

  [[nodiscard]] WARPVM_HD WaitingSpan span() const { return *t_.span; }

 private:
  /// The first tag of [from, end) not set in `seen` (end when all are).
  [[nodiscard]] WARPVM_HD std::uint32_t first_unseen(std::uint32_t from, std::uint32_t end) const {
    if (from >= end) return end;
    return AvailabilityBitmap<cuda::thread_scope_thread>(t_.seen, tag_count_)
        .first_missing(from, end - from, cuda::std::memory_order_relaxed);
  }

  WARPVM_HD void link(std::uint32_t w, std::uint32_t tag) const {
    t_.nodes[w].next = t_.heads[tag];
    t_.heads[tag] = w;
    const std::uint32_t word = tag / availability_tags_per_word;
    if (t_.word_waiters[word]++ != 0) return;
    WaitingSpan& s = *t_.span;
    if (s.low >= s.high) {
      s = WaitingSpan{word, word + 1};
    } else {
      s.low = word < s.low ? word : s.low;
      s.high = word + 1 > s.high ? word + 1 : s.high;
    }
  }

  WARPVM_HD void shrink_span() const {
    WaitingSpan& s = *t_.span;
    while (s.low < s.high && t_.word_waiters[s.low] == 0) ++s.low;
    while (s.high > s.low && t_.word_waiters[s.high - 1] == 0) --s.high;
  }

  WarpMonitorTables t_;
  std::uint32_t tag_count_;
};

}  // namespace warpvm::detail

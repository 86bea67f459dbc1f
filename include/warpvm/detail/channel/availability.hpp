#pragma once
/// @file
/// The Data Availability Bitmap of a WIC channel (the paper's DAB, Section 5.4): one bit per
/// availability tag, set by the producer that finished the data the tag names. The paper's
/// producers fault on a tag page and the driver sets the bit; here a producer sets it itself,
/// with one atomic OR, and the monitor reads the bits instead of polling each producer.
///
/// Memory ordering: a producer writes its data, then publishes the tag with a release OR; the
/// monitor tests the tag with an acquire load. An OR is a read-modify-write, so later ORs by
/// other producers on the same word continue the release sequence: whichever value the monitor
/// reads, a set bit makes its producer's data writes happen before the monitor's reads. The
/// owner of a cycle retracts served tags with a release AND; a producer that reuses its data
/// buffer first sees the tag clear with an acquire load, so the consumers' reads of the old data
/// happen before its new writes.
///
/// Placement: every agent that publishes or retracts tags in one word must be able to do
/// atomics on its memory with the others (host threads on host memory, one GPU's warps or
/// NVLink peers on device memory; PCIe offers no host-device atomics on some systems). Readers
/// only load: consumer warps polling the map in direct mode, the host monitor through copies of
/// its words. `Scope` is the widest
/// set of agents involved: system by default, device when producers and monitor share a GPU.
///
/// The host side of a channel keeps its tags as bytes instead (AvailabilityBytes, below): host
/// producers publish right after writing their data, and an atomic OR there waits for all of
/// those writes. A channel with kernel producers also keeps a bitmap (docs/channels.md, "Kernel
/// producers"): the device-side availability map in the consumer GPU's memory, which kernels on
/// that GPU and its NVLink peers publish into; the monitor `merge`s copies of its words that
/// cover the tags its pending requests still miss (`TagWords`) into the host's bytes. In direct
/// mode (docs/channels.md, "Direct mode") there are no host bytes: each consumer warp polls the
/// device map itself (`TagRangeWait`).

#include "warpvm/detail/host_device.hpp"

#include <cuda/atomic>
#include <cuda/std/bit>

#include <atomic>
#include <cstdint>
#include <memory>

namespace warpvm::detail {

/// Tags per 64-bit word of an availability bitmap.
inline constexpr std::uint32_t availability_tags_per_word = 64;

/// The words [first, end) of an availability bitmap that hold some tag of the ranges added so
/// far (empty at first): what the monitor copies out of the device map to learn those tags.
struct TagWords {
  std::uint32_t first = 0;
  std::uint32_t end = 0;

  [[nodiscard]] WARPVM_HD bool empty() const { return end <= first; }
  [[nodiscard]] WARPVM_HD std::uint32_t count() const { return empty() ? 0u : end - first; }

  /// Widens the span to the words of tags [first_tag, first_tag + tag_count); an empty range
  /// adds nothing.
  WARPVM_HD void add(std::uint32_t first_tag, std::uint32_t tag_count) {
    if (tag_count == 0) return;
    const std::uint32_t first_word = first_tag / availability_tags_per_word;
    const std::uint32_t end_word =
        static_cast<std::uint32_t>((std::uint64_t{first_tag} + tag_count - 1) / availability_tags_per_word + 1);
    if (empty()) {
      first = first_word;
      end = end_word;
    } else {
      first = first_word < first ? first_word : first;
      end = end_word > end ? end_word : end;
    }
  }
};

/// Non-owning view of `words_required(tag_count)` 64-bit words kept by the caller.
template <cuda::thread_scope Scope = cuda::thread_scope_system>
class AvailabilityBitmap {
 public:
  static constexpr std::uint32_t tags_per_word = availability_tags_per_word;

  [[nodiscard]] WARPVM_HD static constexpr std::uint32_t words_required(std::uint32_t tag_count) {
    return tag_count / tags_per_word + (tag_count % tags_per_word != 0 ? 1u : 0u);
  }

  WARPVM_HD AvailabilityBitmap(std::uint64_t* words, std::uint32_t tag_count)
      : words_(words), tag_count_(tag_count) {}

  /// Clears every tag. Only while nobody else uses the bitmap (before the channel opens).
  WARPVM_HD void clear() const {
    for (std::uint32_t w = 0; w < words_required(tag_count_); ++w) word(w).store(0, cuda::std::memory_order_relaxed);
  }

  /// Marks tags [first, first + count) available: one release OR per word touched. The caller's
  /// writes of the data these tags name happen before any read that sees a tag set. Refuses a
  /// range that reaches past the last tag (setting nothing) and returns false.
  WARPVM_HD bool publish(std::uint32_t first, std::uint32_t count = 1) const {
    if (!in_range(first, count)) return false;
    for_each_word(first, count, [&](std::uint32_t w, std::uint64_t mask) {
      release_or(words_[w], mask);
      return true;
    });
    return true;
  }

  /// Marks tags [first, first + count) unavailable again, once every request naming them has
  /// been served: release, so those reads happen before a producer that sees the tag clear
  /// writes the next cycle's data. Refuses an out-of-range range like `publish`.
  WARPVM_HD bool retract(std::uint32_t first, std::uint32_t count = 1) const {
    if (!in_range(first, count)) return false;
    for_each_word(first, count, [&](std::uint32_t w, std::uint64_t mask) {
      word(w).fetch_and(~mask, cuda::std::memory_order_release);
      return true;
    });
    return true;
  }

  /// The first tag of [first, first + count) that is not available, or first + count when all
  /// are. A pending request keeps this as its new `first`: each recheck resumes where the last
  /// one stopped, so a request's tags are scanned once over its whole wait. The range must lie
  /// within the tags. Acquire loads: the data of every tag before the result is visible (with
  /// `relaxed`, for polling, nothing is: see TagRangeWait).
  [[nodiscard]] WARPVM_HD std::uint32_t first_missing(std::uint32_t first, std::uint32_t count,
                                                      cuda::std::memory_order order = cuda::std::memory_order_acquire) const {
    std::uint32_t missing = first + count;
    for_each_word(first, count, [&](std::uint32_t w, std::uint64_t mask) {
      const std::uint64_t absent = ~word(w).load(order) & mask;
      if (absent == 0) return true;
      missing = w * tags_per_word + static_cast<std::uint32_t>(cuda::std::countr_zero(absent));
      return false;
    });
    return missing;
  }

  /// Whether every tag of [first, first + count) is available (true for an empty range, false
  /// for one that reaches past the last tag).
  [[nodiscard]] WARPVM_HD bool all_available(std::uint32_t first, std::uint32_t count) const {
    return in_range(first, count) && first_missing(first, count) == first + count;
  }

  [[nodiscard]] WARPVM_HD bool is_available(std::uint32_t tag) const { return all_available(tag, 1); }
  [[nodiscard]] WARPVM_HD std::uint32_t tag_count() const { return tag_count_; }

  /// Word w (tags [64 w, 64 w + 64)) whole: for an agent that polls many tags at once (the
  /// monitor warp). Acquire: the data of every set bit is visible.
  [[nodiscard]] WARPVM_HD std::uint64_t load_word(std::uint32_t w,
                                                  cuda::std::memory_order order = cuda::std::memory_order_acquire) const {
    return word(w).load(order);
  }

 private:
  using word_atomic = cuda::atomic_ref<std::uint64_t, Scope>;

  [[nodiscard]] WARPVM_HD word_atomic word(std::uint32_t w) const { return word_atomic(words_[w]); }

  /// `word |= mask`, release at Scope, the old value unused. On the device, for a word in global
  /// memory (a map's always is), a PTX reduction: an atomic that returns the old value kept its
  /// thread waiting for the round trip, about 0.6 us a publish into an NVLink peer's map on the
  /// H200 (docs/channels.md, "Publishing without a round trip"). PTX counts red with atom
  /// as atomic operations, so an acquire that reads the word synchronises with it as before.
  WARPVM_HD static void release_or(std::uint64_t& word, std::uint64_t mask) {
#ifdef __CUDA_ARCH__
    if constexpr (Scope == cuda::thread_scope_system || Scope == cuda::thread_scope_device) {
      if (__isGlobal(&word)) {
        const std::size_t global = __cvta_generic_to_global(&word);
        if constexpr (Scope == cuda::thread_scope_system)
          asm volatile("red.release.sys.global.or.b64 [%0], %1;" ::"l"(global), "l"(mask) : "memory");
        else
          asm volatile("red.release.gpu.global.or.b64 [%0], %1;" ::"l"(global), "l"(mask) : "memory");
        return;
      }
    }
#endif
    word_atomic(word).fetch_or(mask, cuda::std::memory_order_release);
  }

  [[nodiscard]] WARPVM_HD bool in_range(std::uint32_t first, std::uint32_t count) const {
    return first <= tag_count_ && count <= tag_count_ - first;
  }

  /// Calls `visit(word index, mask of the range's bits in that word)` for each word the range
  /// touches, in order, while it returns true.
  template <class Visit>
  WARPVM_HD static void for_each_word(std::uint32_t first, std::uint32_t count, Visit&& visit) {
    const std::uint64_t end = std::uint64_t{first} + count;
    for (std::uint64_t tag = first; tag < end;) {
      const std::uint64_t w = tag / tags_per_word;
      const std::uint64_t word_end = (w + 1) * tags_per_word < end ? (w + 1) * tags_per_word : end;
      const std::uint64_t bits = word_end - tag;
      const std::uint64_t low = bits == tags_per_word ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
      if (!visit(static_cast<std::uint32_t>(w), low << (tag % tags_per_word))) return;
      tag = word_end;
    }
  }

  std::uint64_t* words_;
  std::uint32_t tag_count_;
};

/// The host-side DAB of a channel: one byte per tag, published with plain release stores.
///
/// Why not the bitmap: a host producer publishes right after writing the data, typically a
/// memcpy into pinned memory, and an atomic OR (`lock or` on x86) cannot execute before every
/// one of those stores has reached the cache, where a plain store just queues behind them.
/// Measured on the H200 host with 16 KiB tiles: 0.44 us per OR-publish against 0.04 us for a
/// store (most of it the two clock reads around the call), a quarter of the producer's time per tile (docs/channels.md, "Why the channel trailed
/// pinned-flag polling on tiles"). With a byte per tag, producers of different tags write
/// different objects, so any number of host threads can publish at once without a
/// read-modify-write. Host code: kernels publish into the device map (AvailabilityBitmap) and
/// the monitor merges it in.
///
/// Memory ordering: a producer's release store of a tag's byte after its data writes, and the
/// monitor's acquire load that sees it, make those writes visible to the monitor (and to the
/// copies it issues afterwards). Tags stay set until `clear`, which needs the channel idle. It
/// owns its bytes, so their number is its tag count.
class AvailabilityBytes {
 public:
  /// `tag_count` tags, none available.
  explicit AvailabilityBytes(std::uint32_t tag_count)
      : bytes_(std::make_unique<std::uint8_t[]>(tag_count)), tag_count_(tag_count) {}

  /// Clears every tag. Only while nobody else uses the bytes.
  void clear() {
    for (std::uint32_t t = 0; t < tag_count_; ++t) tag(t).store(0, std::memory_order_relaxed);
  }

  /// Marks tags [first, first + count) available: one release store each. The caller's writes
  /// of the data these tags name happen before any acquire load that sees one set. Refuses a
  /// range that reaches past the last tag (setting nothing) and returns false.
  bool publish(std::uint32_t first, std::uint32_t count = 1) {
    if (!in_range(first, count)) return false;
    for (std::uint32_t t = first; t < first + count; ++t) tag(t).store(1, std::memory_order_release);
    return true;
  }

  /// Sets the tags that `source`, a copy of an AvailabilityBitmap of the same tag count, has
  /// in words [span.first, span.end), and returns how many of them were not set yet. The caller
  /// must already have the data of the copied tags in view (for the monitor: the copy's
  /// completion, then the kernel producers' system-scope release). Refuses a span past the last
  /// word (setting nothing) and returns 0. The monitor's alone: the load-then-store counts each
  /// tag once only while no one else sets the same tags, which each tag's one producer ensures.
  std::uint32_t merge(const std::uint64_t* source, TagWords span) {
    constexpr std::uint32_t per_word = availability_tags_per_word;
    if (span.empty() || span.end > AvailabilityBitmap<>::words_required(tag_count_)) return 0;
    std::uint32_t added = 0;
    for (std::uint32_t w = span.first; w < span.end; ++w)
      for (std::uint64_t bits = source[w]; bits != 0; bits &= bits - 1) {
        const std::uint32_t t = w * per_word + static_cast<std::uint32_t>(cuda::std::countr_zero(bits));
        if (t >= tag_count_) break;  // bits past the last tag
        if (tag(t).load(std::memory_order_relaxed) == 0) {
          tag(t).store(1, std::memory_order_release);
          ++added;
        }
      }
    return added;
  }

  /// The first tag of [first, first + count) that is not available, or first + count when all
  /// are, with acquire loads: the data of every tag before the result is visible. A pending
  /// request keeps the result as its new `first`, so its tags are scanned once over its whole
  /// wait. The range must lie within the tags.
  [[nodiscard]] std::uint32_t first_missing(std::uint32_t first, std::uint32_t count) const {
    for (std::uint32_t t = first; t < first + count; ++t)
      if (tag(t).load(std::memory_order_acquire) == 0) return t;
    return first + count;
  }

  /// Whether every tag of [first, first + count) is available (true for an empty range, false
  /// for one that reaches past the last tag).
  [[nodiscard]] bool all_available(std::uint32_t first, std::uint32_t count) const {
    return in_range(first, count) && first_missing(first, count) == first + count;
  }
  [[nodiscard]] bool is_available(std::uint32_t t) const { return all_available(t, 1); }
  [[nodiscard]] std::uint32_t tag_count() const { return tag_count_; }

 private:
  [[nodiscard]] std::atomic_ref<std::uint8_t> tag(std::uint32_t t) const { return std::atomic_ref<std::uint8_t>(bytes_[t]); }
  [[nodiscard]] bool in_range(std::uint32_t first, std::uint32_t count) const {
    return first <= tag_count_ && count <= tag_count_ - first;
  }

  std::unique_ptr<std::uint8_t[]> bytes_;
  std::uint32_t tag_count_;
};

/// One consumer's wait for tags [first, first + count) of a bitmap it polls itself (direct
/// mode: a warp's lanes on the device map in their GPU's memory). Each poll resumes at the first
/// tag not yet seen set, so a word is loaded until it shows its bits. Two kinds of poll:
/// - acquiring: acquire loads, so the wait is done at the poll that sees the last tag (the
///   quickest wake-up: for the first polls of a wait, which short waits end in);
/// - relaxed: on a GPU an acquire load invalidates the SM's L1, which the warps computing beside
///   a long-parked one would feel at every poll; once a relaxed poll saw the last tag, one
///   acquire load of each word of the range (the bits stay set until the bitmap is cleared,
///   which waits for the consumers).
/// Once `done`, every tag of the range was seen set by an acquire load of this agent, so the data
/// the tags name is visible to its later loads.
class TagRangeWait {
 public:
  /// The range must lie within the bitmap's tags (acquire checks it before waiting).
  WARPVM_HD TagRangeWait(std::uint32_t first, std::uint32_t count)
      : first_(first), next_(first), end_(first + count), done_(count == 0) {}

  /// True once every tag of the range was seen set by an acquire load (no load once done).
  template <cuda::thread_scope Scope>
  WARPVM_HD bool poll(const AvailabilityBitmap<Scope>& map, bool acquiring = false) {
    if (done_) return true;
    const std::uint32_t from = next_;
    next_ = map.first_missing(next_, end_ - next_,
                              acquiring ? cuda::std::memory_order_acquire : cuda::std::memory_order_relaxed);
    relaxed_seen_ = relaxed_seen_ || (!acquiring && next_ != from);
    if (next_ != end_) return false;
    if (relaxed_seen_) {
      // Some tags were seen by relaxed loads only: now the acquire. A tag found clear here (only
      // if the bitmap was cleared under a waiting consumer, which the channel forbids) is waited
      // for again.
      next_ = map.first_missing(first_, end_ - first_);
      relaxed_seen_ = false;
    }
    done_ = next_ == end_;
    return done_;
  }

  [[nodiscard]] WARPVM_HD bool done() const { return done_; }
  /// The first tag not yet seen set (the end of the range once done).
  [[nodiscard]] WARPVM_HD std::uint32_t next() const { return next_; }

 private:
  std::uint32_t first_;
  std::uint32_t next_;
  std::uint32_t end_;
  bool done_;
  bool relaxed_seen_ = false;  ///< a relaxed poll saw tags that no acquire load has seen since
};

}  // namespace warpvm::detail

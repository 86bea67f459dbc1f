#pragma once
/// @file
/// warpvm::array<T>: the handle a kernel uses to read and write an object of the paged space.
///
/// Three ways in, from simplest to fastest:
///  - elements: `a[i]`, `a.load(i)`, `a.store(i, v)`, `a.fetch_add(i, v)`, ... Each call acquires
///    the page for the warp (one atomic per page per warp, whatever the lanes do) and releases it.
///  - `page_span`: `auto s = a.span<access::read>(i);` holds the page of element i until `s`
///    goes out of scope; `s[j]` is then a plain load. The fast path for streaming code.
///  - `cursor`: keeps the current page while a thread walks the object, moving to the next
///    page when an index leaves it.
/// Everything works with divergent lanes and any access pattern.
///
/// Host code (plain C++ compilers) sees the data members and size(); the device functions are
/// compiled by nvcc only.

#include "warpvm/config.hpp"
#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/detail/host_device.hpp"

#if defined(__CUDACC__)
#include "warpvm/detail/core/acquire.cuh"
#include "warpvm/detail/transport/host_batched.cuh"
#include "warpvm/error.hpp"

#include <cuda/atomic>
#endif

#include <cstdint>
#include <type_traits>
#include <utility>

namespace warpvm {

/// What a span or cursor does with its page. Writers mark the page dirty when they acquire it.
/// `overwrite` promises that the lanes holding the page write every element of it (inside the
/// object) before they release it together, and that nobody else accesses it meanwhile: an
/// absent page is then not read from host memory first, and on release the page is written
/// back right away (write-behind) so that outputs stream out while inputs stream in.
/// Reading an overwrite span's elements before writing them gives unspecified values.
enum class access : std::uint8_t { read, read_write, overwrite };

template <class T, access A>
class page_span;
template <class T, access A>
class cursor;

namespace detail {
/// One page held by one lane: what page_span and cursor keep. Move-only, so that a hold cannot
/// be copied and released twice (a second release would carry the holder count below zero,
/// into the page's BUSY bit); array<T>'s hold() and release() are private to page_span and
/// cursor. The move is the plain (trivial) one, which leaves the source as it was: the holds
/// stay trivially copyable underneath, so that cursor's out-of-line page change passes and
/// returns them in registers, and the two owners never keep a moved-from hold.
template <class T>
struct PageHold {
  T* data = nullptr;
  std::uint64_t first = 0;     ///< element index of data[0]
  std::uint32_t count = 0;     ///< elements of the page inside the object
  std::uint32_t* word = nullptr;  ///< page-state word to release; null when not held
  std::uint64_t key = 0;
  std::uint32_t frame = 0;

  PageHold() = default;
  PageHold(const PageHold&) = delete;
  PageHold& operator=(const PageHold&) = delete;
  PageHold(PageHold&&) = default;
  PageHold& operator=(PageHold&&) = default;
  ~PageHold() = default;

  [[nodiscard]] WARPVM_HD bool contains(std::uint64_t i) const { return i - first < count; }
};
}  // namespace detail

template <class T>
class array {
  static_assert(std::is_trivially_copyable_v<T>, "warpvm::array<T> needs a trivially copyable T");
  static_assert(detail::is_power_of_two(sizeof(T)) && sizeof(T) <= detail::min_page_bytes,
                "warpvm::array<T> needs sizeof(T) to be a power of two (elements never straddle pages)");

 public:
  using value_type = T;

  array() = default;
  WARPVM_HD array(const detail::CacheView& cache, const detail::ObjectDescriptor& object, bool checked)
      : cache_(cache),
        object_(object),
        size_(object.bytes / sizeof(T)),
        element_shift_(cache.geometry().element_shift(sizeof(T))),
        checked_(checked) {}

  [[nodiscard]] WARPVM_HD std::uint64_t size() const { return size_; }
  [[nodiscard]] WARPVM_HD std::uint32_t id() const { return object_.id; }
  [[nodiscard]] WARPVM_HD Placement placement() const { return object_.placement; }
  [[nodiscard]] WARPVM_HD std::uint64_t elements_per_page() const { return std::uint64_t{1} << element_shift_; }
  [[nodiscard]] WARPVM_HD std::uint64_t page_of(std::uint64_t i) const { return i >> element_shift_; }
  /// What the handle carries, for device code built on the access paths (warpvm::ops): the
  /// cache, the object's descriptor (its host pointer, for remote reads), and checked mode.
  [[nodiscard]] WARPVM_HD const detail::CacheView& cache_view() const { return cache_; }
  [[nodiscard]] WARPVM_HD const detail::ObjectDescriptor& descriptor() const { return object_; }
  [[nodiscard]] WARPVM_HD bool checked() const { return checked_; }

#if defined(__CUDACC__)
  [[nodiscard]] __device__ T load(std::uint64_t i) const {
    if (!valid_access(i)) return T{};
    if (object_.placement == Placement::remote) return *remote_slot(i);
    const std::uint64_t page = page_of(i);
    std::uint32_t frame = 0;
    const bool unheld = detail::peek_resident_unheld(cache_, object_, page, frame);
    // Read before the answer is known (`frame` is the scratch frame on a miss): with no branch
    // between the entry's load and this one, the compiler overlaps it with the caller's next access.
    const T seen = *frame_slot(frame, i);
    if (unheld) return seen;
    if (object_.placement == Placement::automatic && cache_.transport == Transport::gpu_initiated &&
        detail::read_absent_page_remotely(cache_, object_, page, byte_in_page(i), sizeof(T)))
      return detail::load_through_l2(remote_slot(i));
    return on_pinned(i, detail::Intent::read, [](const T* slot) { return *slot; });
  }
  [[nodiscard]] __device__ T operator[](std::uint64_t i) const { return load(i); }
  __device__ void store(std::uint64_t i, T value) const {
    with_element(i, true, [&](T* slot) {
      *slot = value;
      return 0;
    });
  }
  // Atomics take libcu++'s names (as shared_array's do): fetch_add, fetch_sub, fetch_min,
  // fetch_max, exchange, compare_exchange. Relaxed, each under a write hold of its page.
  __device__ T fetch_add(std::uint64_t i, T v) const {
    return atomic(i, [&](auto ref) { return ref.fetch_add(v, cuda::std::memory_order_relaxed); });
  }
  __device__ T fetch_sub(std::uint64_t i, T v) const {
    return atomic(i, [&](auto ref) { return ref.fetch_sub(v, cuda::std::memory_order_relaxed); });
  }
  __device__ T fetch_min(std::uint64_t i, T v) const {
    return atomic(i, [&](auto ref) { return ref.fetch_min(v, cuda::std::memory_order_relaxed); });
  }
  __device__ T fetch_max(std::uint64_t i, T v) const {
    return atomic(i, [&](auto ref) { return ref.fetch_max(v, cuda::std::memory_order_relaxed); });
  }
  __device__ T exchange(std::uint64_t i, T v) const {
    return atomic(i, [&](auto ref) { return ref.exchange(v, cuda::std::memory_order_relaxed); });
  }
  /// Compare-and-swap: true when element i held `expected` and now holds `desired`; otherwise
  /// `expected` becomes the value seen.
  __device__ bool compare_exchange(std::uint64_t i, T& expected, T desired) const {
    return atomic(i, [&](auto ref) { return ref.compare_exchange_strong(expected, desired, cuda::std::memory_order_relaxed); });
  }

  /// Holds the page of element i until the returned span is destroyed.
  template <access A = access::read>
  [[nodiscard]] __device__ page_span<T, A> span(std::uint64_t i) const {
    return page_span<T, A>(*this, i);
  }

  /// In checked mode, records for the host an out-of-range index, a handle of an object destroyed
  /// since (its slot's generation moved on), or a handle whose placement is stale (taken before
  /// set_placement()), and returns false: the access is not made. Unchecked, such a handle is
  /// undefined behaviour (it names freed page tables and host memory).
  [[nodiscard]] __device__ bool valid_access(std::uint64_t i) const {
    if (!checked_) return true;
    if (i >= size_) {
      detail::record_error(cache_, ErrorKind::index_out_of_range, object_.id, i, size_);
      return false;
    }
    const detail::ObjectDescriptor& now = cache_.objects[object_.id];
    if (now.generation != object_.generation) {
      detail::record_error(cache_, ErrorKind::invalid_argument, object_.id, object_.generation, now.generation,
                           detail::FailureCause::destroyed_object);
      return false;
    }
    if (now.placement != object_.placement) {
      detail::record_error(cache_, ErrorKind::invalid_argument, object_.id, i, size_, detail::FailureCause::stale_placement);
      return false;
    }
    return true;
  }
#endif

 private:
  template <class, access>
  friend class page_span;
  template <class, access>
  friend class cursor;
#if defined(__CUDACC__)
  /// Acquires the page of element i (in range) for the calling lane (page_span and cursor only:
  /// each releases what it holds exactly once).
  [[nodiscard]] __device__ detail::PageHold<T> hold(std::uint64_t i, access mode) const {
    detail::PageHold<T> h;
    const std::uint64_t page = page_of(i);
    h.first = page << element_shift_;
    const std::uint64_t left = size_ - h.first;
    h.count = static_cast<std::uint32_t>(left < elements_per_page() ? left : elements_per_page());
    if (object_.placement == Placement::remote) {
      h.data = reinterpret_cast<T*>(object_.host) + h.first;
      return h;
    }
    bool held = true;
    // GPU-initiated overwrite spans always hold: write_behind() needs the holder count.
    const bool must_hold = mode == access::overwrite && cache_.transport == Transport::gpu_initiated;
    const std::uint32_t frame = must_hold ? detail::acquire_page(cache_, object_, page, intent_of(mode))
                                          : pin(page, intent_of(mode), held);
    h.data = reinterpret_cast<T*>(cache_.frame_data(frame));
    h.frame = frame;
    if (held) {
      h.word = &object_.pages[page].state;
      h.key = detail::make_page_key(object_.id, page);
    }
    return h;
  }
  /// Writes a fully overwritten page back to host memory before its holders release it, so that
  /// output pages stream out while inputs stream in, and marks it clean. Skipped (the page stays
  /// dirty for eviction or flush) when holders outside the releasing lanes exist.
  __device__ void write_behind(const detail::PageHold<T>& h) const {
    if (h.word == nullptr) return;  // remote: the data went to host memory directly
    const unsigned mask = __activemask();
    const unsigned peers = __match_any_sync(mask, h.key);
    const bool is_leader = detail::lane_id() == detail::first_lane(peers);
    __syncwarp(mask);  // every lane's writes to the frame come first
    if (checked_) report_unwritten(h, peers, is_leader);
    bool sole_holders = false;
    if (is_leader) {
      // Clear first, then look: a writer that acquires after the look sets the bit again after
      // our clear; one that acquired before it shows up in the holder count and we put it back.
      cache_.table.set_dirty(h.frame, false);
      cuda::atomic_thread_fence(cuda::std::memory_order_seq_cst, cuda::thread_scope_device);
      sole_holders = detail::page_word::holders(detail::page_load(*h.word)) == static_cast<std::uint32_t>(__popc(peers));
      if (!sole_holders) cache_.table.set_dirty(h.frame, true);
    }
    sole_holders = __shfl_sync(mask, sole_holders, detail::first_lane(peers));
    if (sole_holders) detail::write_back_page(cache_, peers, is_leader, h.frame, h.key);
  }
  /// Checked mode: records (once per page, by the group's leader) an overwrite span that left a
  /// chunk of its page unwritten, still poison from its load (overwrite_check.hpp). The lanes
  /// holding the page share the scan.
  __device__ void report_unwritten(const detail::PageHold<T>& h, unsigned peers, bool is_leader) const {
    const auto rank = static_cast<std::uint32_t>(__popc(peers & detail::lanemask_lt()));
    const auto lanes = static_cast<std::uint32_t>(__popc(peers));
    const std::uint64_t bytes = std::uint64_t{h.count} * sizeof(T);
    const auto* page = reinterpret_cast<const std::byte*>(h.data);
    unsigned first = ~0u;
    for (std::uint32_t c = rank; c < detail::overwrite_chunks(bytes); c += lanes) {
      if (detail::chunk_unwritten(page, bytes, c)) {
        first = c;
        break;
      }
    }
    first = __reduce_min_sync(peers, first);
    if (is_leader && first != ~0u)
      detail::record_error(cache_, ErrorKind::invalid_argument, object_.id, page_of(h.first),
                           std::uint64_t{first} * detail::overwrite_chunk_bytes, detail::FailureCause::overwrite_incomplete);
  }
  /// A hold of nothing whose data still points at readable memory (the scratch frame), for
  /// readers that load before they check.
  [[nodiscard]] __device__ detail::PageHold<T> empty_hold() const {
    detail::PageHold<T> h;
    h.data = reinterpret_cast<T*>(cache_.frame_data(detail::scratch_frame(cache_)));
    return h;
  }
  __device__ static void release(detail::PageHold<T>& h) {
    if (h.word != nullptr) detail::release_page(h.word, h.key);
    h = detail::PageHold<T>{};
  }

  template <class Op>
  __device__ auto with_element(std::uint64_t i, bool write, Op&& op) const {
    using Result = decltype(op(static_cast<T*>(nullptr)));
    if (!valid_access(i)) return Result{};
    if (object_.placement == Placement::remote) return op(remote_slot(i));
    return on_pinned(i, write ? detail::Intent::write : detail::Intent::read, op);
  }
  /// `op` on the slot of element i (a migrate object's), with the page pinned around it.
  template <class Op>
  __device__ auto on_pinned(std::uint64_t i, detail::Intent intent, Op&& op) const {
    using Result = decltype(op(static_cast<T*>(nullptr)));
    const std::uint64_t page = page_of(i);
    if (WARPVM_HOST_BATCHED_EVICTION && cache_.transport == Transport::host_batched && *cache_.never_evicts == 0u) {
      // Eviction is possible: each lane holds its page only around its own operation, so no
      // lane holds anything while its warp waits for the host (host_batched.cuh says why).
      Result result{};
      detail::hold_from_host(cache_, object_, page, intent != detail::Intent::read, /*keep=*/false,
                             [&](std::uint32_t frame) { result = op(frame_slot(frame, i)); });
      return result;
    }
    bool held = false;
    const std::uint32_t frame = pin(page, intent, held);
    const Result result = op(frame_slot(frame, i));
    unpin(page, held);
    return result;
  }
  [[nodiscard]] __device__ T* frame_slot(std::uint32_t frame, std::uint64_t i) const {
    return reinterpret_cast<T*>(cache_.frame_data(frame)) + (i & (elements_per_page() - 1));
  }
  [[nodiscard]] __device__ T* remote_slot(std::uint64_t i) const { return reinterpret_cast<T*>(object_.host) + i; }
  /// Where element i starts within its page, in bytes (a page holds fewer than 2^32 bytes).
  [[nodiscard]] __device__ std::uint32_t byte_in_page(std::uint64_t i) const {
    return static_cast<std::uint32_t>((i & (elements_per_page() - 1)) * sizeof(T));
  }
  /// The frame of a migrate page: without a hold when nothing can be evicted, else acquired
  /// (held = true; unpin() releases it).
  __device__ std::uint32_t pin(std::uint64_t page, detail::Intent intent, bool& held) const {
    std::uint32_t frame = 0;
    held = !detail::peek_resident_unheld(cache_, object_, page, frame) &&
           !detail::recheck_resident_unheld(cache_, object_, page, frame);
    if (held && cache_.transport == Transport::host_batched) {
      if (WARPVM_HOST_BATCHED_EVICTION && *cache_.never_evicts == 0u)  // the hold is kept: the caller releases it
        return detail::hold_from_host(cache_, object_, page, intent != detail::Intent::read, /*keep=*/true,
                                      [](std::uint32_t) {});
      frame = detail::await_host_service(cache_, object_, page, intent != detail::Intent::read);
      held = false;
    }
    if (held) return detail::acquire_page(cache_, object_, page, intent);
    if (intent != detail::Intent::read) cache_.table.set_dirty(frame, true);
    return frame;
  }
  __device__ void unpin(std::uint64_t page, bool held) const {
    if (held) detail::release_page(&object_.pages[page].state, detail::make_page_key(object_.id, page));
  }
  __device__ static constexpr detail::Intent intent_of(access mode) {
    return mode == access::read ? detail::Intent::read
           : mode == access::read_write ? detail::Intent::write
                                        : detail::Intent::overwrite;
  }
  /// Device-scope atomics, on a cached frame or on remote (host) memory alike: atomic among this
  /// GPU's threads. The host must not write the object while a kernel runs (host-native atomics
  /// over PCIe are not available on the platforms warpvm targets).
  template <class Op>
  __device__ auto atomic(std::uint64_t i, Op&& op) const {
    return with_element(i, true, [&](T* slot) { return op(cuda::atomic_ref<T, cuda::thread_scope_device>(*slot)); });
  }
#endif

  detail::CacheView cache_{};
  detail::ObjectDescriptor object_{};
  std::uint64_t size_ = 0;
  unsigned element_shift_ = 0;
  bool checked_ = false;
};

#if defined(__CUDACC__)
/// The page of one element, held by the calling lane for the span's lifetime. Indices are
/// relative to the page: s[0] is element s.first().
template <class T, access A = access::read>
class page_span {
 public:
  using element_type = std::conditional_t<A == access::read, const T, T>;

  /// In checked mode an out-of-range i is recorded for the host and the span is empty.
  __device__ page_span(const array<T>& a, std::uint64_t i) : owner_(a) {
    if (a.valid_access(i)) hold_ = a.hold(i, A);
  }
  __device__ ~page_span() {
    if constexpr (A == access::overwrite) owner_.write_behind(hold_);
    array<T>::release(hold_);
  }
  page_span(const page_span&) = delete;
  page_span& operator=(const page_span&) = delete;

  [[nodiscard]] __device__ element_type* data() const { return hold_.data; }
  [[nodiscard]] __device__ std::uint64_t first() const { return hold_.first; }
  [[nodiscard]] __device__ std::uint32_t size() const { return hold_.count; }
  [[nodiscard]] __device__ bool contains(std::uint64_t i) const { return hold_.contains(i); }
  [[nodiscard]] __device__ element_type& operator[](std::uint32_t j) const { return hold_.data[j]; }

 private:
  struct NoOwner {
    __device__ explicit NoOwner(const array<T>&) {}
  };
  /// Overwrite spans keep a copy of the handle for write_behind(); others need nothing.
  [[no_unique_address]] std::conditional_t<A == access::overwrite, array<T>, NoOwner> owner_;
  detail::PageHold<T> hold_{};
};

/// Walks an object element by element, holding one page at a time.
template <class T, access A = access::read>
class cursor {
  static_assert(A != access::overwrite, "a cursor cannot promise to overwrite whole pages");
 public:
  __device__ explicit cursor(const array<T>& a) : array_(a), hold_(a.empty_hold()) {}
  __device__ ~cursor() { array<T>::release(hold_); }
  cursor(const cursor&) = delete;
  cursor& operator=(const cursor&) = delete;

  /// Element i (read cursors return it by value); an index outside the held page moves the
  /// cursor there. In checked mode an out-of-range index is recorded and T{} is returned.
  __device__ T operator[](std::uint64_t i)
    requires(A == access::read)
  {
    const std::uint64_t offset = i - hold_.first;
    const bool inside = offset < hold_.count;
    // Read before the page check (the slot is readable either way): the check then does not
    // stand between this read and the caller's next one, which the compiler overlaps.
    const T seen = hold_.data[inside ? offset : 0];
    if (inside) return seen;
    hold_ = move_to(array_, std::move(hold_), i);
    return hold_.contains(i) ? hold_.data[i - hold_.first] : T{};
  }
  /// Element i by reference; out of range in checked mode: recorded, and a scratch element.
  __device__ T& operator[](std::uint64_t i)
    requires(A == access::read_write)
  {
    if (!hold_.contains(i)) {
      hold_ = move_to(array_, std::move(hold_), i);
      if (!hold_.contains(i)) return scratch_;
    }
    return hold_.data[i - hold_.first];
  }
  /// Lets go of the held page early (e.g. before a long wait).
  __device__ void release() {
    array<T>::release(hold_);
    hold_ = array_.empty_hold();
  }

 private:
  /// The page change, out of line: the per-element path stays a compare and a load, which the
  /// compiler can schedule freely around the caller's loop.
  __device__ __noinline__ static detail::PageHold<T> move_to(const array<T>& a, detail::PageHold<T> held,
                                                             std::uint64_t i) {
    array<T>::release(held);
    return a.valid_access(i) ? a.hold(i, A) : a.empty_hold();
  }

  array<T> array_;
  detail::PageHold<T> hold_{};
  T scratch_{};
};
#endif

}  // namespace warpvm

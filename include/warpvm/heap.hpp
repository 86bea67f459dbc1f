#pragma once
/// @file
/// warpvm::Heap: device-side malloc and free over warpvm's paged space (AlignMalloc, issue #4).
///
/// The heap is one object of the paged space, so its capacity may exceed GPU memory: its pages
/// are cached and written back like any object's. Kernels get a device_heap by value; any
/// thread may call malloc and free, divergent or not. Requests of at most 8 KB are served on the
/// device from slabs of a small area (the fast path); for the rest, the active lanes of a warp
/// are served by one request to a host service thread, which owns the free space (an OR tree
/// over 2 MB segments, a PortionTree for regions under 2 MB); what malloc returns is a
/// heap_ptr, whose bytes are read and written through warpvm's access path.
///
/// @code
///   warpvm::Runtime rt;
///   warpvm::Heap heap(rt, {.capacity_bytes = 64ull << 30});      // may exceed GPU memory
///   rt.launch(kernel, grid, block, 0, heap.device());
///
///   __global__ void kernel(warpvm::device_heap heap) {
///     warpvm::heap_ptr p = heap.malloc(n * sizeof(float));     // null when out of memory
///     if (!p) return;
///     for (std::uint64_t i = 0; i < n; ++i) heap.store<float>(p, i, 1.0f);
///     heap.free(p);
///   }
/// @endcode

#include "warpvm/array.hpp"
#include "warpvm/detail/alloc/heap_protocol.hpp"
#include "warpvm/detail/alloc/heap_ptr.hpp"
#include "warpvm/detail/alloc/warp_layout.hpp"
#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/host_device.hpp"
#include "warpvm/runtime.hpp"

#if defined(__CUDACC__)
#include "warpvm/detail/alloc/heap_device.cuh"
#include "warpvm/detail/core/device_support.cuh"
#include "warpvm/error.hpp"
#endif

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace warpvm {

/// How a Heap is made.
struct HeapOptions {
  /// Bytes of the heap, rounded up to 2 MiB. Pinned host memory; may exceed GPU memory.
  std::size_t capacity_bytes = std::size_t{1} << 30;
  HeapLayout layout = HeapLayout::aligned;
  /// The placement of the backing object (Placement): migrate copies each touched page in, as
  /// UVM does; automatic reads an absent page's sparse elements over the link until it proves
  /// dense; remote never caches; resident needs Config::resident_bytes for the whole capacity.
  /// Allocation is the same in all; writes migrate under automatic.
  Placement placement = Placement::migrate;
  /// Aligned layout: the order of the lanes' tiles in a row (detail::LaneOrder).
  detail::LaneOrder lane_order = detail::LaneOrder::lane_id;
  /// Bytes of the PortionSpace, where regions under 2 MiB go (rounded down to 2 MiB; 0: half of
  /// what the small area leaves, at most the paper's 2048 VABlocks = 4 GiB; so the small area
  /// comes out of the PortionSpace and the larger regions' segments alike: detail::heap_shares).
  std::size_t portion_bytes = 0;
  /// Slots of the request ring (a power of two): requests outstanding at once.
  std::uint32_t ring_slots = 1u << 14;
  /// Serve requests of at most 8 KB on the device, from 64 KB slabs of the small area, without
  /// a host round trip (detail/alloc/small_blocks.hpp); what it cannot serve goes to the host.
  bool fast_path = true;
  /// Bytes of the small area, reserved from the heap when it is made (rounded down to 2 MiB;
  /// 0: a quarter of the capacity, at most 8 GiB). Each of its 64 KB slabs costs 528 B of GPU
  /// memory.
  std::size_t small_bytes = 0;
};

/// The last request the host service refused (a warp's lanes of one size class, given null), and
/// the heap's bytes at that moment. All 0 while none was refused. A refusal is malloc's null,
/// not an error; this says why: the bytes the request needed against what was free.
struct HeapRefusal {
  std::uint64_t lanes = 0;         ///< threads given null by it
  std::uint64_t lane_bytes = 0;    ///< the lanes' largest request, rounded up to 16 (0: over any region's limit)
  std::uint64_t region_bytes = 0;  ///< the region it needed, the layout's rounding included (0: over the limit)
  std::uint64_t capacity_bytes = 0;
  std::uint64_t small_area_bytes = 0;    ///< set aside for the fast path's slabs (small requests only)
  std::uint64_t reserved_bytes = 0;      ///< in live regions' reservations, padding included
  std::uint64_t free_bytes = 0;          ///< in no reservation: capacity = small area + reserved + free
  std::uint64_t free_segment_bytes = 0;  ///< of the free bytes, in whole free 2 MiB segments
};

/// What the heap has served since it was made (or reset_stats()). Counted by the host service,
/// which sees no fast-path allocation: the small_* fields are read from the device's slabs.
struct HeapStats {
  std::uint64_t requests = 0;            ///< warp-aggregated allocation requests
  std::uint64_t allocations = 0;         ///< threads given memory
  std::uint64_t failed_allocations = 0;  ///< threads given null (out of memory, or too large)
  std::uint64_t regions_freed = 0;       ///< regions whose every lane freed its part
  std::uint64_t batches = 0;             ///< batches of requests the service took
  std::uint64_t reserved_bytes = 0;      ///< bytes in live regions, padding included (now; not the small area)
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t small_slabs = 0;         ///< 64 KB slabs of the small area (0: no fast path)
  std::uint64_t small_slabs_bound = 0;   ///< of them, bound to a size class (now)
  std::uint64_t small_live_blocks = 0;   ///< fast-path blocks allocated and not freed (now)
  HeapRefusal last_refusal{};            ///< the last refused request (lanes 0: none)

  /// The last refusal in words, with its sizes: "no refusal" when there was none.
  [[nodiscard]] std::string describe_last_refusal() const;
};

/// The handle kernels take by value. malloc and free are warp-collective in effect (the active
/// lanes' calls are served together) but need no convergence: call them from any thread.
class device_heap {
 public:
  device_heap() = default;
  device_heap(const detail::CacheView& cache, const detail::ObjectDescriptor& object, const detail::HeapView& heap,
              bool checked)
      : cache_(cache), object_(object), heap_(heap), checked_(checked) {}

  /// The heap's bytes as elements of T: element i is at heap byte offset i * sizeof(T).
  template <class T>
  [[nodiscard]] WARPVM_HD array<T> view() const {
    return array<T>(cache_, object_, checked_);
  }
  [[nodiscard]] WARPVM_HD HeapLayout layout() const { return heap_.layout; }
  [[nodiscard]] WARPVM_HD std::uint64_t capacity_bytes() const { return heap_.blocks * detail::basic_block_bytes; }

  /// Index in view<T>() of element i of allocation p (sizeof(T) a power of two up to 16, so
  /// that elements never straddle the layout's pieces).
  template <class T>
  [[nodiscard]] WARPVM_HD static std::uint64_t index_of(const heap_ptr& p, std::uint64_t i) {
    static_assert(sizeof(T) <= detail::heap_unit_bytes, "heap elements are at most 16 bytes");
    return p.offset_of(i * sizeof(T)) / sizeof(T);
  }

#if defined(__CUDACC__)
  /// `bytes` of heap memory for the calling thread, or null (counted in HeapStats) when the heap
  /// has no room; null without a request for 0 bytes.
  [[nodiscard]] __device__ heap_ptr malloc(std::uint64_t bytes) const {
    return detail::heap_malloc(heap_, cache_, object_.id, bytes);
  }
  /// Gives p back; null is ignored. Freeing a part twice, or a pointer the heap did not return,
  /// changes nothing; in checked mode it is recorded and raised by Runtime::synchronize() as an
  /// Error of kind invalid_free.
  __device__ void free(heap_ptr p) const {
    if (!detail::heap_free(heap_, cache_, object_.id, p) && checked_)
      detail::record_error(cache_, ErrorKind::invalid_free, object_.id, p.region_offset(), p.lane());
  }

  /// Element i of allocation p. In checked mode an element past p's end is recorded as
  /// index_out_of_range (raised by Runtime::synchronize()) and T{} is returned.
  template <class T>
  [[nodiscard]] __device__ T load(const heap_ptr& p, std::uint64_t i) const {
    if (!in_range<T>(p, i)) return T{};
    return view<T>().load(index_of<T>(p, i));
  }
  template <class T>
  __device__ void store(const heap_ptr& p, std::uint64_t i, T value) const {
    if (in_range<T>(p, i)) view<T>().store(index_of<T>(p, i), value);
  }
#endif

 private:
#if defined(__CUDACC__)
  template <class T>
  [[nodiscard]] __device__ bool in_range(const heap_ptr& p, std::uint64_t i) const {
    const std::uint64_t count = p.size() / sizeof(T);
    if (!checked_ || i < count) return true;
    detail::record_error(cache_, ErrorKind::index_out_of_range, object_.id, i, count);
    return false;
  }
#endif

  detail::CacheView cache_{};
  detail::ObjectDescriptor object_{};
  detail::HeapView heap_{};
  bool checked_ = false;
};

namespace detail {
class HeapService;
}

/// Owns a heap: its backing object in `runtime`'s paged space, the region words, the request
/// ring and the host service thread. Move-only; not thread-safe (one host thread at a time).
/// Destroying it waits for device work first; it must not outlive its Runtime's objects' use.
class Heap {
 public:
  /// Throws Error: invalid_argument for a capacity of 0, a ring size that is not a power of
  /// two or a small area larger than the capacity, out_of_memory when the backing cannot be
  /// pinned.
  Heap(Runtime& runtime, HeapOptions options = {});
  ~Heap();
  Heap(Heap&&) noexcept;
  Heap& operator=(Heap&&) noexcept;
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  [[nodiscard]] device_heap device() const;
  /// Waits for device work and for the service to have taken every request posted; device-side
  /// errors stay for Runtime::synchronize() to raise.
  void synchronize();
  /// synchronize(), then the counters.
  [[nodiscard]] HeapStats stats();
  void reset_stats();

  [[nodiscard]] std::size_t capacity_bytes() const;
  [[nodiscard]] const HeapOptions& options() const;
  /// The backing object: its host() is the heap's bytes after Runtime::flush().
  [[nodiscard]] const object<std::uint64_t>& backing() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace warpvm

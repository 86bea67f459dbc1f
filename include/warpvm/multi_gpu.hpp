#pragma once
/// @file
/// One paged space over N NVLink-connected GPUs and the host, with OASIS's page placement
/// (issue #6, docs/placement.md). Objects live first in pinned host memory; each GPU has a frame
/// pool and a page table per object; one directory per object (on its home GPU) and the O-Table
/// (on the first GPU) are reached by every GPU through peer access. Kernels take
/// `shared_array<T>` handles bound to the GPU they run on; a fault is served on the GPU by the
/// faulting warp (placement.hpp's decide()/apply(), warp copies over PCIe or NVLink).
///
/// @code
///   warpvm::MultiGpuSpace space({.devices = {0, 1}, .frame_bytes_per_gpu = 4ull << 30});
///   auto in = space.alloc<float>(n, warpvm::PlacementPolicy::oasis, "in");
///   std::ranges::fill(in.host(), 1.0f);
///   space.launch(kernel, grid, block, 0, in.on(0));  // on every GPU, handles rebound to each
///   space.flush();                                    // dirty pages back in in.host()
/// @endcode

#include "warpvm/array.hpp"
#include "warpvm/detail/multi_gpu/shadow_map.hpp"
#include "warpvm/detail/multi_gpu/space_view.hpp"
#include "warpvm/error.hpp"

#if defined(__CUDACC__)
#include "warpvm/detail/multi_gpu/fault.cuh"

#include <cuda/atomic>
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace warpvm {

struct MultiGpuConfig {
  std::vector<int> devices;                      ///< CUDA ordinals; empty: every visible device
  /// Each GPU's frame pool, at least min_pool_frames (32) pages. A GPU whose pool is full evicts a
  /// page (its copy is dropped, handed to a replica, or written back to the host).
  std::size_t frame_bytes_per_gpu = 1ull << 30;
  std::size_t page_bytes = 4096;                 ///< a power of two, at least 4 KB
  PlacementPolicy default_policy = PlacementPolicy::oasis;
  std::uint32_t reset_threshold = detail::default_reset_threshold;      ///< O-Table: shared faults per relearn, 1-255
  std::uint32_t counter_threshold = detail::default_counter_threshold;  ///< remote lines per 64 KB group before migrating
  std::uint32_t max_objects = 256;
  double drain_timeout_seconds = 1e-3;  ///< a transition whose old mappings are still held then is retried
  /// Flat addresses (shared_object::address(), flat_view) the space hands out over its life;
  /// freed objects' addresses are not reused. Each GPU keeps 8 B of shadow-map root per 4096
  /// pages of it, and a 16 KiB leaf per 4096 pages that objects take.
  std::uint64_t flat_address_bytes = 1ull << 40;
  /// A fault that finds no frame to evict, or waits for a page's directory lock, this long
  /// fails the kernel (out_of_memory, no_progress) instead of hanging the GPU.
  double watchdog_seconds = 10.0;
};

/// A byte's address in a MultiGpuSpace's flat addresses: shared_object::address() plus the
/// byte's offset in the object. 0 is no object's.
using flat_address = std::uint64_t;

/// What one GPU did since the space was made (or reset_stats()).
struct GpuPlacementStats {
  std::uint64_t local_accesses = 0;   ///< warp accesses (one per page per warp) to the GPU's own frames
  std::uint64_t remote_accesses = 0;  ///< warp accesses to a peer's frame
  std::uint64_t remote_lines = 0;     ///< 128 B lines those touched
  std::uint64_t first_touches = 0;  ///< pages fetched from the host, or written where place_on_gpus() put them elsewhere
  std::uint64_t shared_faults = 0;
  std::uint64_t migrations = 0;
  std::uint64_t counter_migrations = 0;
  std::uint64_t replications = 0;
  std::uint64_t collapses = 0;
  std::uint64_t remote_maps = 0;
  std::uint64_t write_upgrades = 0;
  std::uint64_t invalidations = 0;
  std::uint64_t aborted_transitions = 0;
  std::uint64_t nvlink_bytes = 0;  ///< pages pulled from peers plus remote lines
  std::uint64_t pcie_bytes = 0;    ///< pages fetched from and written back to the host
  std::uint64_t writebacks = 0;  ///< dirty pages written back: by flush() and by evictions
  std::uint64_t evictions = 0;   ///< own copies given up because the pool was full

  GpuPlacementStats& operator+=(const GpuPlacementStats& o);
};

struct MultiGpuStats {
  std::vector<GpuPlacementStats> per_gpu;
  [[nodiscard]] GpuPlacementStats total() const;
};

class MultiGpuSpace;
namespace detail::mg {
class SpaceState;
/// Test hook that corrupts on purpose: takes page `page`'s directory lock of object `object_id`
/// and never gives it back, so that tests can show a fault waiting for it ends in an error
/// rather than a hang. Waits for every GPU first.
void force_directory_lock(const MultiGpuSpace& space, std::uint32_t object_id, std::uint64_t page);

/// Move-only owner of one registered object; frees it (frames, tables, host memory) when dropped.
class ObjectOwner {
 public:
  ObjectOwner() = default;
  ObjectOwner(std::shared_ptr<SpaceState> state, std::uint32_t id);
  ~ObjectOwner();
  ObjectOwner(ObjectOwner&& other) noexcept;
  ObjectOwner& operator=(ObjectOwner&& other) noexcept;
  ObjectOwner(const ObjectOwner&) = delete;
  ObjectOwner& operator=(const ObjectOwner&) = delete;

  [[nodiscard]] Binding binding(unsigned gpu) const;
  [[nodiscard]] std::byte* host_data() const;
  [[nodiscard]] std::uint64_t bytes() const;
  [[nodiscard]] const std::string& name() const;
  [[nodiscard]] PlacementPolicy policy() const;
  [[nodiscard]] flat_address flat_base() const;
  [[nodiscard]] std::uint32_t id() const { return id_; }
  [[nodiscard]] bool belongs_to(const std::shared_ptr<SpaceState>& space) const { return state_ != nullptr && state_ == space; }

 private:
  void reset() noexcept;
  std::shared_ptr<SpaceState> state_;
  std::uint32_t id_ = ~0u;
};
}  // namespace detail::mg

class flat_view;

/// The handle kernels take by value: an object of a MultiGpuSpace as seen from one GPU.
/// Element and page accesses are warp-level (lanes on one page share one hold) and work with
/// divergent lanes and any pattern. Stores and reads of the same element by different GPUs in one
/// phase are ordered only by the page's transitions (as on one GPU without atomics: a data race).
///
/// Atomics (`fetch_add`, `fetch_min`, `fetch_max`, `fetch_or`, `compare_exchange`; T a 4- or
/// 8-byte integral type) take a write hold on the element's page exactly as `store` does (so
/// duplication collapses the replicas, on-touch migrates the page, access-counter maps it
/// remotely and the atomic goes over NVLink), then run a relaxed system-scope
/// `cuda::atomic_ref` on the held frame: system scope because two GPUs may reach the same word at
/// once, one through its own frame and one through a remote mapping. They are atomic with respect
/// to every GPU's atomics on the same element in the same phase (a phase's sum of fetch_adds is
/// exact, exactly one compare_exchange from unvisited wins). They are relaxed and not ordered with
/// plain loads and stores of other elements, nor with plain stores of the same one (mixing them
/// in a phase is a data race as above); launch boundaries order everything.
template <class T>
class shared_array {
  static_assert(std::is_trivially_copyable_v<T>, "shared_array elements must be trivially copyable");
  // Pages are powers of two from 4 KiB: an element size dividing 4 KiB divides every page, so no
  // element straddles two pages (each access holds one page).
  static_assert(4096 % sizeof(T) == 0, "shared_array elements must have a size dividing 4 KiB (1, 2, 4, ... 4096 bytes)");

 public:
  using value_type = T;

  shared_array() = default;
  [[nodiscard]] WARPVM_HD std::uint64_t size() const { return size_; }
  [[nodiscard]] WARPVM_HD std::uint32_t id() const { return id_; }
  /// The GPU the handle is bound to (0 .. gpus()-1, an index into the space's devices).
  [[nodiscard]] WARPVM_HD unsigned gpu() const { return binding_.gpu; }
  [[nodiscard]] WARPVM_HD unsigned gpus() const { return binding_.gpus; }
  [[nodiscard]] WARPVM_HD std::uint64_t elements_per_page() const {
    return (std::uint64_t{1} << binding_.page_shift) / sizeof(T);
  }

  /// The same object viewed as elements of U (for objects of mixed-width data; U's size must
  /// divide the page).
  template <class U>
  [[nodiscard]] shared_array<U> as() const {
    return shared_array<U>(binding_, size_ * sizeof(T) / sizeof(U), id_);
  }

#if defined(__CUDACC__)
  [[nodiscard]] __device__ T load(std::uint64_t i) const {
    T value;
    on_element(i, false, [&](const T& element) { value = element; });
    return value;
  }
  [[nodiscard]] __device__ T operator[](std::uint64_t i) const { return load(i); }
  __device__ void store(std::uint64_t i, const T& value) const {
    on_element(i, true, [&](T& element) { element = value; });
  }
  /// Atomically adds `value` to element `i`; returns the element before.
  __device__ T fetch_add(std::uint64_t i, T value) const {
    return atomic_update(i, [&](atomic_element& e) { return e.fetch_add(value, cuda::std::memory_order_relaxed); });
  }
  /// Atomically lowers element `i` to `value` if that is less; returns the element before.
  __device__ T fetch_min(std::uint64_t i, T value) const {
    return atomic_update(i, [&](atomic_element& e) { return e.fetch_min(value, cuda::std::memory_order_relaxed); });
  }
  /// Atomically raises element `i` to `value` if that is greater; returns the element before.
  __device__ T fetch_max(std::uint64_t i, T value) const {
    return atomic_update(i, [&](atomic_element& e) { return e.fetch_max(value, cuda::std::memory_order_relaxed); });
  }
  /// Atomically ors `bits` into element `i`; returns the element before.
  __device__ T fetch_or(std::uint64_t i, T bits) const {
    return atomic_update(i, [&](atomic_element& e) { return e.fetch_or(bits, cuda::std::memory_order_relaxed); });
  }
  /// As cuda::atomic_ref's compare_exchange_strong: if element `i` equals `expected` it becomes
  /// `desired` and the call returns true; otherwise `expected` receives the element and the call
  /// returns false. (Always a write hold, even when it fails: it may write.)
  __device__ bool compare_exchange(std::uint64_t i, T& expected, T desired) const {
    return atomic_update(i, [&](atomic_element& e) {
      return e.compare_exchange_strong(expected, desired, cuda::std::memory_order_relaxed);
    });
  }

  /// Holds the page of element `i` for `A` while `f(data, first, count)` runs: `data[j]` is
  /// element `first + j`, for j < count (the page's elements inside the object). A remote page
  /// counts as an access to each of its lines. Accessing other shared objects inside `f` is
  /// allowed (the one case where a warp waits for a directory lock while holding a page:
  /// docs/placement.md says why that still cannot deadlock).
  template <access A, class F>
  __device__ void with_page(std::uint64_t i, F&& f) const {
    const std::uint64_t per_page = elements_per_page(), page = i / per_page, first = page * per_page;
    const std::uint64_t left = size_ - first;
    const auto count = static_cast<std::uint32_t>(left < per_page ? left : per_page);
    const auto lines = static_cast<std::uint32_t>((count * sizeof(T) + 127) >> detail::mg::line_shift);
    using Element = std::conditional_t<A == access::read, const T, T>;
    detail::mg::access_page(binding_, page, A != access::read, 0, lines == 0 ? 1 : lines,
                            [&](std::byte* frame) { f(reinterpret_cast<Element*>(frame), first, count); });
  }
  /// Holds the page of elements [i, i + count) for `A` while `f(data)` runs: `data[j]` is element
  /// `i + j`, for j < count. One hold for the whole span, where element accesses take one per
  /// access: a warp reading a tile row or a lane walking an adjacency run pays one hold per page.
  /// The span must lie in the object and in one page (i % elements_per_page() + count <=
  /// elements_per_page()); a span that does not is a programming error: it is recorded (the
  /// space's next synchronize() raises index_out_of_range naming the object) and traps. count 0 does
  /// nothing. A remote span counts the 128 B lines it touches (lanes that share a page are one
  /// access: their group leader's span is counted). Accessing other shared objects inside `f` is
  /// allowed as for with_page; no barrier (__syncthreads) inside `f`: a warp waiting there while
  /// holding the page could keep a peer's transition of it from ever draining.
  template <access A, class F>
  __device__ void with_span(std::uint64_t i, std::uint32_t count, F&& f) const {
    if (count == 0) return;
    const std::uint64_t at = i * sizeof(T), last = at + std::uint64_t{count} * sizeof(T) - 1;
    if (i + count > size_ || (last >> binding_.page_shift) != (at >> binding_.page_shift)) {
      detail::mg::record_failure(*binding_.space, detail::mg::DeviceFailure::bad_span, id_, i);
      detail::trap_once_recorded<cuda::thread_scope_system>(binding_.space->error_claim);
    }
    const auto lines = static_cast<std::uint32_t>((last >> detail::mg::line_shift) - (at >> detail::mg::line_shift) + 1);
    using Element = std::conditional_t<A == access::read, const T, T>;
    detail::mg::access_page(binding_, at >> binding_.page_shift, A != access::read, 0, lines,
                            [&](std::byte* frame) { f(reinterpret_cast<Element*>(frame + (at & page_mask()))); });
  }
#endif

 private:
#if defined(__CUDACC__)
  using atomic_element = cuda::atomic_ref<T, cuda::thread_scope_system>;
  /// Runs `f(element)` on element `i`'s slot under a hold of its page (a write hold when `write`):
  /// the one access path of load, store and the atomics.
  template <class F>
  __device__ void on_element(std::uint64_t i, bool write, F&& f) const {
    const std::uint64_t at = i * sizeof(T);
    detail::mg::access_page(binding_, at >> binding_.page_shift, write, at >> detail::mg::line_shift, 0,
                            [&](std::byte* frame) { f(*reinterpret_cast<T*>(frame + (at & page_mask()))); });
  }
  /// Runs `op` on element `i` as an atomic_ref, under a write hold of its page (as store does).
  template <class Op>
  __device__ auto atomic_update(std::uint64_t i, Op&& op) const {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool> && (sizeof(T) == 4 || sizeof(T) == 8),
                  "shared_array atomics need a 4- or 8-byte integral element type (view the object with as<U>())");
    std::invoke_result_t<Op&, atomic_element&> result{};
    on_element(i, true, [&](T& slot) {
      atomic_element element(slot);
      result = op(element);
    });
    return result;
  }
#endif

  friend class MultiGpuSpace;
  friend class flat_view;
  template <class>
  friend class shared_object;
  template <class>
  friend class shared_array;
  WARPVM_HD shared_array(detail::mg::Binding binding, std::uint64_t size, std::uint32_t id)
      : binding_(binding), size_(size), id_(id) {}
  [[nodiscard]] WARPVM_HD std::uint64_t page_mask() const { return (std::uint64_t{1} << binding_.page_shift) - 1; }

  detail::mg::Binding binding_;
  std::uint64_t size_ = 0;
  std::uint32_t id_ = 0;
};

/// An object of a MultiGpuSpace, owned by the host. Move-only. Its host() copy is the data until
/// a GPU touches it; after kernels, flush() makes it exact again. Destroying it drops its pages
/// from every GPU and frees its host memory.
template <class T>
class shared_object {
 public:
  shared_object() = default;
  [[nodiscard]] std::span<T> host() const { return {reinterpret_cast<T*>(owner_.host_data()), size()}; }
  [[nodiscard]] std::size_t size() const { return owner_.bytes() / sizeof(T); }
  [[nodiscard]] std::uint32_t id() const { return owner_.id(); }
  [[nodiscard]] const std::string& name() const { return owner_.name(); }
  [[nodiscard]] PlacementPolicy policy() const { return owner_.policy(); }
  /// The handle bound to GPU `gpu` (an index into the space's devices).
  [[nodiscard]] shared_array<T> on(unsigned gpu) const { return shared_array<T>(owner_.binding(gpu), size(), id()); }
  /// The flat address of element 0 (element i at address() + i * sizeof(T)), for flat_view.
  [[nodiscard]] flat_address address() const { return owner_.flat_base(); }

 private:
  friend class MultiGpuSpace;
  explicit shared_object(detail::mg::ObjectOwner owner) : owner_(std::move(owner)) {}
  detail::mg::ObjectOwner owner_;
};

/// Access to a space's objects by flat address, OASIS-InMem's raw pointers (docs/placement.md,
/// "Flat addresses"): kernels that keep addresses in their data (linked structures, offsets
/// into several objects) load and store through it; each access finds its object in the
/// shadow map, then goes through that object's page tables and policy exactly as its
/// shared_array would (the same faults, counters and O-Table entry); handle_at() turns an
/// address into its object's handle for repeated access. Lanes of one warp may reach different
/// objects in one call. Passed to launch() as a kernel argument of its own, it is rebound to
/// each GPU like a shared_array (one inside a struct is not: it would stay GPU 0's). An address
/// outside every object, misaligned for T, or whose T would run past its object's end is not
/// accessed: load returns T{}, store does nothing, handle_at gives an empty handle, and the
/// space's next call that waits for the GPUs (synchronize, flush, stats, ...) raises
/// Error(index_out_of_range) naming the first such address; the space goes on. object_at()
/// probes an address without that.
class flat_view {
 public:
  flat_view() = default;
  /// The GPU the view is bound to, and the space's GPU count.
  [[nodiscard]] WARPVM_HD unsigned gpu() const { return gpu_; }
  [[nodiscard]] WARPVM_HD unsigned gpus() const { return gpus_; }

#if defined(__CUDACC__)
  template <class T>
  [[nodiscard]] __device__ T load(flat_address address) const {
    std::uint64_t i = 0;
    const shared_array<T> array = handle_at<T>(address, i);
    return array.size() == 0 ? T{} : array.load(i);
  }
  template <class T>
  __device__ void store(flat_address address, const T& value) const {
    std::uint64_t i = 0;
    const shared_array<T> array = handle_at<T>(address, i);
    if (array.size() != 0) array.store(i, value);
  }
  /// The handle (bound to this view's GPU) of the object holding a T at `address`, with the T's
  /// index in `index`: one lookup, then the handle's own accesses (spans, atomics, the object's
  /// other elements) at a handle's cost. An empty handle (size 0) for a bad address, recorded as
  /// load and store record it.
  template <class T>
  [[nodiscard]] __device__ shared_array<T> handle_at(flat_address address, std::uint64_t& index) const {
    const std::uint32_t id = detail::mg::shadow_lookup(shadow_, address);
    if (id != detail::mg::no_object) {
      const detail::mg::ObjectView& o = space_->objects[id];
      const std::uint64_t offset = address - o.flat_base;
      if (offset % sizeof(T) == 0 && offset + sizeof(T) <= o.bytes) {
        index = offset / sizeof(T);
        return shared_array<T>(detail::mg::Binding{space_, &o, o.pte[gpu_], gpu_, gpus_, shadow_.segments.page_shift},
                               o.bytes / sizeof(T), id);
      }
    }
    detail::mg::record_failure(*space_, detail::mg::DeviceFailure::bad_flat_address, id, address);
    return {};
  }
  /// The id of the object holding `address` (shared_object::id()), or detail::mg::no_object.
  [[nodiscard]] __device__ std::uint32_t object_at(flat_address address) const {
    return detail::mg::shadow_lookup(shadow_, address);
  }
#endif

 private:
  friend class MultiGpuSpace;
  flat_view(const detail::mg::SpaceView* space, detail::mg::ShadowMapView shadow, unsigned gpu, unsigned gpus)
      : space_(space), shadow_(shadow), gpu_(gpu), gpus_(gpus) {}

  const detail::mg::SpaceView* space_ = nullptr;
  detail::mg::ShadowMapView shadow_;  ///< its segments are the space's pages
  unsigned gpu_ = 0, gpus_ = 0;
};

/// The space. Not copyable; used from one host thread at a time; every call restores the
/// caller's current device. Objects keep its state alive.
class MultiGpuSpace {
 public:
  /// Enables peer access between every pair of devices (Error(invalid_config) naming a pair that
  /// has none) and allocates each GPU's frame pool. Throws warpvm::Error.
  explicit MultiGpuSpace(MultiGpuConfig config = {});
  ~MultiGpuSpace();
  MultiGpuSpace(const MultiGpuSpace&) = delete;
  MultiGpuSpace& operator=(const MultiGpuSpace&) = delete;

  /// `count` elements in new pinned host memory (zeroed), placed by `policy` (default: the
  /// space's), named for messages.
  template <class T>
  [[nodiscard]] shared_object<T> alloc(std::size_t count, std::optional<PlacementPolicy> policy = std::nullopt,
                                       std::string name = {}) {
    WARPVM_EXPECTS(count <= std::numeric_limits<std::size_t>::max() / sizeof(T), ErrorKind::invalid_argument,
                   "object '" + name + "': " + std::to_string(count) + " elements overflow the address space");
    return shared_object<T>(register_object(count * sizeof(T), policy, std::move(name)));
  }

  /// Places every page of `object` on a GPU before kernels touch it: the GPU `spread` names
  /// fetches the page from host() and owns it (a first touch in stats(); the page stays clean).
  /// Placement is not use: another GPU's write to a placed page is a first touch (the page moves
  /// to it over NVLink; no shared fault, the O-Table learns nothing), so a spread that does not
  /// match who writes the data costs a page move, not access-counter for the whole object.
  /// Another GPU's read is a shared fault as for any held page (under OASIS a replica). The
  /// placed GPU's first write ends the placement (from then on another GPU's write is a shared
  /// fault), and so does a transition; its reads are hits and do not. A page a GPU already holds
  /// stays where it is; one that was shared before it went back to the host is fetched through
  /// a shared fault (the O-Table learns from it) and not placed: drop_cached() first for a clean
  /// start. Waits for every GPU's work first and
  /// for the placement after. A pool too small for the pages given to its GPU evicts as any
  /// fault does. Fill host() before: the pages are copied from it.
  template <class T>
  void place_on_gpus(const shared_object<T>& object, Spread spread) {
    place_pages_on_gpus(object.owner_, spread);
  }

  /// An explicit phase boundary: waits for every GPU's work, then clears every object's O-Table
  /// count (the next shared fault relearns its policy). launch() and launch_on() call it.
  void begin_phase();

  /// One phase: begin_phase(), then `kernel` on every GPU of the space, each launch with its
  /// shared_array and flat_view arguments rebound to that GPU. Does not wait for the kernels.
  template <class... Params, class... Args>
  void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, const Args&... args) {
    static_assert(sizeof...(Params) == sizeof...(Args), "launch: wrong number of kernel arguments");
    begin_phase();
    for (unsigned g = 0; g < gpus(); ++g) launch_one(g, kernel, grid, block, shared_bytes, args...);
  }
  /// One phase on one GPU.
  template <class... Params, class... Args>
  void launch_on(unsigned gpu, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                 const Args&... args) {
    static_assert(sizeof...(Params) == sizeof...(Args), "launch_on: wrong number of kernel arguments");
    begin_phase();
    launch_one(gpu, kernel, grid, block, shared_bytes, args...);
  }

  /// Waits for every GPU; raises the first device-side failure (a full frame pool in which no
  /// page could be evicted for seconds, naming the object and the GPU) or CUDA error as
  /// warpvm::Error.
  void synchronize();
  /// synchronize(), then writes every dirty page back from its owner: each object's host() is exact.
  void flush();
  /// flush(), then forgets every GPU copy: pages, directories, access counters, O-Table back to
  /// their state at allocation (stats are kept).
  void drop_cached();

  [[nodiscard]] MultiGpuStats stats() const;
  /// The counters as they stand, without waiting for the GPUs (stats() waits): while kernels
  /// run, a snapshot of counts still moving, for progress or a timeline of a run; each counter
  /// only grows between reset_stats() calls. Does not raise the kernels' device failures
  /// (synchronize() does); a CUDA error still throws.
  [[nodiscard]] MultiGpuStats stats_now() const;
  void reset_stats();

  /// Access by flat address to every object of the space (bound to GPU 0; launch() rebinds it).
  [[nodiscard]] flat_view flat() const { return flat_on(0); }

  [[nodiscard]] unsigned gpus() const;
  [[nodiscard]] int device(unsigned gpu) const;
  [[nodiscard]] cudaStream_t stream(unsigned gpu) const;
  [[nodiscard]] std::size_t page_bytes() const;
  [[nodiscard]] std::uint32_t frames_per_gpu() const;

 private:
  friend void detail::mg::force_directory_lock(const MultiGpuSpace&, std::uint32_t, std::uint64_t);
  template <class A>
  static const A& bind_arg(const detail::mg::SpaceState&, unsigned, const A& a) {
    return a;
  }
  template <class U>
  static shared_array<U> bind_arg(const detail::mg::SpaceState& state, unsigned gpu, const shared_array<U>& a) {
    return shared_array<U>(binding_of(state, a.id(), gpu), a.size(), a.id());
  }
  [[nodiscard]] flat_view bind_arg(const detail::mg::SpaceState&, unsigned gpu, const flat_view&) const { return flat_on(gpu); }
  [[nodiscard]] flat_view flat_on(unsigned gpu) const;
  template <class... Params, class... Args>
  void launch_one(unsigned gpu, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                  const Args&... args) {
    std::tuple<std::decay_t<Params>...> params(bind_arg(*state_, gpu, args)...);
    std::apply(
        [&](auto&... p) {
          void* pointers[] = {static_cast<void*>(&p)..., nullptr};
          launch_raw(gpu, reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, pointers);
        },
        params);
  }
  static detail::mg::Binding binding_of(const detail::mg::SpaceState& state, std::uint32_t id, unsigned gpu);
  void place_pages_on_gpus(const detail::mg::ObjectOwner& object, Spread spread);
  detail::mg::ObjectOwner register_object(std::size_t bytes, std::optional<PlacementPolicy> policy, std::string name);
  void launch_raw(unsigned gpu, const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes, void** args);
  std::shared_ptr<detail::mg::SpaceState> state_;
};

}  // namespace warpvm

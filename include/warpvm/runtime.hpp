#pragma once
/// @file
/// The host side of warpvm: a Runtime owns the device page cache and the objects that live in
/// the paged space; kernels reach objects through warpvm::array<T> handles.
///
/// @code
///   warpvm::Runtime rt({.cache_bytes = 8ull << 30});
///   auto data = rt.alloc<float>(n);                 // pinned host memory, any size
///   std::ranges::fill(data.host(), 1.0f);            // host access between kernels
///   rt.launch(my_kernel, grid, block, 0, data.device());
///   rt.flush();                                      // dirty pages written back
///   rt.synchronize();                                // device-side errors raised here
/// @endcode

#include "warpvm/array.hpp"
#include "warpvm/config.hpp"
#include "warpvm/error.hpp"
#include "warpvm/stats.hpp"
#include "warpvm/trace.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace warpvm {

class Runtime;
class Heap;
namespace detail {
class RuntimeState;
std::vector<std::uint64_t> frame_owners(const Runtime& runtime);
std::vector<std::uint32_t> page_states(const Runtime& runtime, std::uint32_t object_id);
void force_page_state(const Runtime& runtime, std::uint32_t object_id, std::uint64_t page, std::uint32_t word);
std::vector<std::uint32_t> frame_dirty_bits(const Runtime& runtime);

/// Move-only owner of one registered object; unregisters it (and frees its frames) on destruction.
class ObjectHandle {
 public:
  ObjectHandle() = default;
  ObjectHandle(std::shared_ptr<RuntimeState> state, std::uint32_t id);
  ~ObjectHandle();
  ObjectHandle(ObjectHandle&& other) noexcept;
  ObjectHandle& operator=(ObjectHandle&& other) noexcept;
  ObjectHandle(const ObjectHandle&) = delete;
  ObjectHandle& operator=(const ObjectHandle&) = delete;

  [[nodiscard]] CacheView cache_view() const;
  [[nodiscard]] ObjectDescriptor descriptor() const;
  [[nodiscard]] bool checked() const;
  [[nodiscard]] std::byte* host_data() const;
  [[nodiscard]] const std::string& name() const;
  void set_placement(Placement placement);

 private:
  void reset() noexcept;
  /// The runtime's state; throws (invalid_argument) for an empty object: default-constructed or
  /// moved from.
  [[nodiscard]] RuntimeState& state() const;
  std::shared_ptr<RuntimeState> state_;
  std::uint32_t id_ = ~0u;
};
}  // namespace detail

/// An object in the paged space, owned by the host. Move-only; destroying it discards its cached
/// pages (flush() first to keep GPU writes) and frees the backing store it allocated. The
/// Runtime's state lives until its last object is gone. An empty object (default-constructed or
/// moved from) may be assigned to or destroyed; any other call throws warpvm::Error.
template <class T>
class object {
 public:
  object() = default;

  /// The handle kernels take by value.
  [[nodiscard]] array<T> device() const {
    return array<T>(handle_.cache_view(), handle_.descriptor(), handle_.checked());
  }
  /// The backing store. Exact after Runtime::flush(). To change it while pages may be cached:
  /// flush(), write it, then drop_cached(), so that kernels see the new data (drop_cached writes
  /// dirty pages back first, over anything written to them on the host).
  [[nodiscard]] std::span<T> host() const {
    return {reinterpret_cast<T*>(handle_.host_data()), size()};
  }
  [[nodiscard]] std::size_t size() const { return handle_.descriptor().bytes / sizeof(T); }
  [[nodiscard]] std::size_t bytes() const { return handle_.descriptor().bytes; }
  [[nodiscard]] std::uint32_t id() const { return handle_.descriptor().id; }
  [[nodiscard]] const std::string& name() const { return handle_.name(); }
  [[nodiscard]] Placement placement() const { return handle_.descriptor().placement; }
  /// Switches between caching pages (migrate, automatic), zero-copy access (remote) and frames
  /// of its own (resident). Leaving the cache (to remote) or leaving resident writes the
  /// object's dirty pages back and drops them; between migrate and automatic the cached pages
  /// stay; going resident takes its frames from Config::resident_bytes first (refused, changing
  /// nothing, when they are not free). Take device() again afterwards.
  void set_placement(Placement placement) { handle_.set_placement(placement); }

 private:
  friend class Runtime;
  friend class Heap;  // its device handle views the backing as elements of any type
  explicit object(detail::ObjectHandle handle) : handle_(std::move(handle)) {}
  detail::ObjectHandle handle_;
};

/// Owns one device's page cache. Not copyable, and not thread-safe: use a Runtime and its
/// objects from one host thread at a time. Objects keep its state alive. Every call works on
/// Config::device and leaves the caller's current device as it was. A moved-from Runtime may
/// only be destroyed or assigned to.
class Runtime {
  friend std::vector<std::uint64_t> detail::frame_owners(const Runtime&);
  friend std::vector<std::uint32_t> detail::page_states(const Runtime&, std::uint32_t);
  friend void detail::force_page_state(const Runtime&, std::uint32_t, std::uint64_t, std::uint32_t);
  friend std::vector<std::uint32_t> detail::frame_dirty_bits(const Runtime&);

 public:
  /// Validates `config`, allocates the cache on config.device. Throws warpvm::Error.
  explicit Runtime(Config config = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  Runtime(Runtime&&) noexcept;
  Runtime& operator=(Runtime&&) noexcept;

  /// `count` elements in new pinned host memory (contents uninitialised), named for messages.
  template <class T>
  [[nodiscard]] object<T> alloc(std::size_t count, Placement placement = Placement::automatic,
                                std::string name = {}) {
    return object<T>(register_object(nullptr, bytes_of<T>(count, name), placement, std::move(name)));
  }
  /// Registers memory the caller owns (cudaHostRegister unless it is pinned already; 16-byte
  /// aligned, not overlapping another object); it must outlive the returned object.
  template <class T>
  [[nodiscard]] object<T> adopt(T* data, std::size_t count, Placement placement = Placement::automatic,
                                std::string name = {}) {
    return object<T>(register_object(reinterpret_cast<std::byte*>(data), bytes_of<T>(count, name), placement,
                                     std::move(name)));
  }

  /// Launches `kernel` on the runtime's stream after check_launch(). Arguments are converted to
  /// the kernel's parameter types.
  template <class... Params, class... Args>
  void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes, Args&&... args) {
    launch_on(stream(), kernel, grid, block, shared_bytes, std::forward<Args>(args)...);
  }
  /// launch() on a stream of the caller's (ordered after the work queued on it before), for
  /// libraries whose callers own the stream (warpvm::ops). flush(), drop_cached() and
  /// synchronize() wait for every stream of the device. Kernels running at once on several
  /// streams must fit the cache together (check_launch covers one launch).
  template <class... Params, class... Args>
  void launch_on(cudaStream_t on, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                 Args&&... args) {
    static_assert(sizeof...(Params) == sizeof...(Args), "launch: wrong number of kernel arguments");
    std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
    std::apply(
        [&](auto&... p) {
          void* pointers[] = {static_cast<void*>(&p)..., nullptr};
          launch_raw(on, reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, pointers);
        },
        params);
  }

  /// Throws invalid_config if the cache cannot guarantee progress for this launch: resident
  /// threads x pages held per thread must fit in the frames. `pages_held_per_thread` 0 means
  /// Config::max_pages_held_per_thread. The bound covers one launch at a time: kernels that use
  /// the same Runtime concurrently (other streams) must fit together.
  void check_launch(const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
                    std::uint32_t pages_held_per_thread = 0) const;
  /// The most threads that may be resident at once under Config::max_pages_held_per_thread.
  [[nodiscard]] std::uint64_t max_resident_threads() const;

  /// Writes every dirty page back; afterwards each object's host() copy is exact.
  void flush();
  /// flush(), then empties the cache: the next access to any page reads host memory again.
  void drop_cached();
  /// Waits for all device work; raises the first device-side error (bounds, no progress).
  void synchronize();

  [[nodiscard]] Stats stats() const;
  void reset_stats();
  /// host_batched transport: the fault batches served since the last clear_fault_batches(),
  /// with their timings (empty with GPU-initiated transfers). Waits for device work first.
  [[nodiscard]] std::vector<FaultBatch> fault_batches() const;
  void clear_fault_batches();
  /// The fault events recorded since the last clear_fault_events(), in no particular order
  /// (Config::fault_event_capacity; empty when recording is off). Waits for device work
  /// first; `dropped`, if given, receives how many did not fit.
  [[nodiscard]] std::vector<FaultEvent> fault_events(std::uint64_t* dropped = nullptr) const;
  void clear_fault_events();

  [[nodiscard]] const Config& config() const;
  [[nodiscard]] std::uint32_t frame_count() const;
  [[nodiscard]] std::size_t cache_bytes() const;
  [[nodiscard]] std::size_t page_bytes() const;
  [[nodiscard]] int multiprocessor_count() const;
  [[nodiscard]] cudaStream_t stream() const;

 private:
  template <class T>
  static std::size_t bytes_of(std::size_t count, const std::string& name) {
    WARPVM_EXPECTS(count <= std::numeric_limits<std::size_t>::max() / sizeof(T), ErrorKind::invalid_argument,
                   "object '" + name + "': " + std::to_string(count) + " elements overflow the address space");
    return count * sizeof(T);
  }
  detail::ObjectHandle register_object(std::byte* adopted, std::size_t bytes, Placement placement,
                                       std::string name);
  void launch_raw(cudaStream_t stream, const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
                  void** args);
  std::shared_ptr<detail::RuntimeState> state_;
};

/// Number of CUDA devices visible (0 on a machine without a GPU; never throws).
int device_count() noexcept;

}  // namespace warpvm

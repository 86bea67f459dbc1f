#pragma once
// The Runtime's private state, shared by the Runtime and its objects. Not thread-safe: a
// Runtime and its objects are used from one host thread at a time.

#include "warpvm/detail/core/cuda_buffers.hpp"
#include "transport/host_batched_service.hpp"

#include "warpvm/config.hpp"
#include "warpvm/detail/core/cache_view.hpp"
#include "warpvm/detail/core/frame_ranges.hpp"
#include "warpvm/stats.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace warpvm::detail {

/// Host-side bookkeeping of one registered object.
struct ObjectSlot {
  ObjectDescriptor descriptor{};
  std::string name;
  std::byte* host = nullptr;        ///< the backing store as the host sees it
  pinned_ptr<std::byte> owned_host;  ///< set when the runtime allocated the backing store
  registration registered;           ///< set when adopt() pinned caller memory itself
  device_ptr<PageEntry> pages;
  device_ptr<std::uint32_t> remote_sectors;  ///< Placement::automatic's per-page counts
  /// Placement::resident: the first of the object's frames (one per page), while it is resident.
  std::optional<std::uint32_t> resident_first_frame;
  bool in_use = false;
};

class RuntimeState {
 public:
  explicit RuntimeState(const Config& config);
  ~RuntimeState();
  RuntimeState(const RuntimeState&) = delete;
  RuntimeState& operator=(const RuntimeState&) = delete;

  std::uint32_t register_object(std::byte* adopted, std::size_t bytes, Placement placement, std::string name);
  void unregister_object(std::uint32_t id) noexcept;
  void set_placement(std::uint32_t id, Placement placement);
  /// Sets the slot's placement and gives it what the placement needs: the per-page counts of
  /// Placement::automatic (allocated on first use and kept, zeroed, for the slot's lifetime:
  /// stale handles must not count into freed memory), the frames of Placement::resident (taken
  /// on entering it, given back on leaving). The device learns it from publish_descriptor().
  void give_placement(ObjectSlot& slot, Placement placement);
  /// A run of free resident frames, one per page of the slot's object: its first frame. Throws
  /// (out_of_memory) when Config::resident_bytes has no run that long.
  std::uint32_t take_resident_frames(const ObjectSlot& slot);
  /// Gives the slot's resident frames back, if it has any.
  void give_back_resident_frames(ObjectSlot& slot) noexcept;

  /// For the frames of `object_filter` (all objects when all_objects; resident objects' frames
  /// too): with write_back, writes the dirty ones back; with drop, empties them and marks the
  /// objects' pages absent.
  void write_back(std::uint32_t object_filter, bool write_back, bool drop);
  /// Waits for all device work, then raises the first error: one kept from an object's
  /// destructor, else the first device-side error, else a CUDA error.
  void synchronize();
  /// Raises an error kept from a destructor, if there is one (a launch checks this first, as
  /// CUDA's next call reports an earlier asynchronous error).
  void raise_pending_error();
  [[nodiscard]] Stats stats();
  void reset_stats();
  /// The recorded fault events (waits for device work first); `dropped` gets those past the capacity.
  [[nodiscard]] std::vector<FaultEvent> fault_events(std::uint64_t& dropped);
  void clear_fault_events();

  [[nodiscard]] const CacheView& view() const { return view_; }
  [[nodiscard]] const ObjectSlot& slot(std::uint32_t id) const { return slots_.at(id); }

  [[nodiscard]] cudaStream_t stream() const { return stream_.get(); }
  /// The host_batched transport's service; null with GPU-initiated transfers.
  [[nodiscard]] HostBatchedService* service() const { return service_.get(); }

  Config config;
  int multiprocessors = 0;
  std::uint32_t frames = 0;  ///< the cache's frames, which eviction cycles through
  /// Every frame: the cache's, the scratch frame, then those set aside for resident objects.
  std::uint32_t all_frames = 0;

  static constexpr std::uint32_t all_objects = ~0u;

  /// cudaOccupancyMaxActiveBlocksPerMultiprocessor, asked once per kernel and block shape: the
  /// launch check needs it at every launch (warpvm::ops launches twice per call), and the answer
  /// never changes for a kernel and shape.
  int blocks_per_multiprocessor(const void* kernel, int threads_per_block, std::size_t shared_bytes);

 private:
  /// Uploads slot `id`'s descriptor, tells the host_batched service (if any) whether it serves
  /// the object, and re-decides whether eviction is possible at all (under host_batched: the
  /// service's evicts()). Callers wait for all device work first: kernels read the descriptor
  /// and flag. Returns once both are in device memory (give_placement's zeroing too).
  void publish_descriptor(std::uint32_t id);
  void mark_pages_absent(std::uint32_t id);
  /// Tells the host_batched service (if any) which objects it serves: the migrate ones.
  void update_served(std::uint32_t id, const std::unique_lock<std::mutex>& paused);
  /// Empties slot `id`: the host_batched service forgets the object first (even if the device
  /// cannot be told), and only then are its host memory and page table freed.
  void release_slot(std::uint32_t id) noexcept;
  void raise_device_error();
  /// Waits for all device work; the first error (synchronize()'s) is kept for the next host
  /// call instead of thrown: for destructors, which must neither throw nor lose it.
  void settle() noexcept;
  /// Keeps the exception in flight as the pending error unless one is pending already.
  void keep_pending_error() noexcept;
  /// write_back() without its waits: the drop or write-back kernel, and what the host must learn.
  void write_back_frames(std::uint32_t object_filter, bool write_back, bool drop);

  device_ptr<std::byte> frame_data_;
  device_ptr<std::uint64_t> owner_;
  device_ptr<std::uint32_t> lock_;
  device_ptr<std::uint32_t> referenced_;
  device_ptr<std::uint32_t> dirty_;
  device_ptr<std::uint64_t> hand_;
  device_ptr<std::uint64_t> counters_;
  device_ptr<ObjectDescriptor> objects_;
  device_ptr<std::uint32_t> error_claim_;
  device_ptr<std::uint32_t> never_evicts_;
  device_ptr<std::uint32_t> automatic_budget_;
  std::mutex occupancy_mutex_;
  std::map<std::tuple<const void*, int, std::size_t>, int> occupancy_;
  device_ptr<FaultEvent> fault_events_;
  device_ptr<std::uint64_t> fault_event_count_;
  pinned_ptr<ErrorRecord> error_;
  stream_ptr stream_;
  CacheView view_{};
  std::vector<ObjectSlot> slots_;
  /// Per slot: the generation of its newest object, and the name of the last one destroyed (with
  /// its generation), for the message about a stale handle.
  std::vector<std::uint16_t> generations_;
  std::vector<std::pair<std::uint16_t, std::string>> retired_;
  FrameRanges resident_frames_;  // the free frames of Config::resident_bytes
  std::exception_ptr pending_error_;  // raised by the next synchronize() or launch
  std::unique_ptr<HostBatchedService> service_;  // last: its thread stops before the buffers go
};

/// Launches the write-back / drop kernel over the first `frames` frames (maintenance.cu).
void launch_write_back(const CacheView& view, std::uint32_t frames, std::uint32_t object_filter, bool write_back,
                       bool drop, cudaStream_t stream);
/// host_batched: carries out eviction orders [first_order, first_order + orders) with no user
/// kernel running (maintenance.cu).
void launch_finish_evictions(const CacheView& view, std::uint64_t first_order, std::uint64_t orders,
                             cudaStream_t stream);

}  // namespace warpvm::detail

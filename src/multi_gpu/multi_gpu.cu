// MultiGpuSpace: the host side of multi-GPU placement (docs/placement.md). Owns each GPU's frame
// pool, page tables, counters and device views, the objects' directories (on their home GPU),
// the O-Table and the error record; runs the maintenance kernels (directory init, O-Table phase
// reset, write-back, freeing an object's frames, placing pages on GPUs before a run).

#include "warpvm/multi_gpu.hpp"

#include "warpvm/detail/core/cuda_buffers.hpp"
#include "warpvm/detail/multi_gpu/fault.cuh"
#include "warpvm/runtime.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace warpvm {
namespace {

/// GpuPlacementStats' field of each device counter, in detail::mg::Counter order: the one list
/// that ties the two together.
using StatField = std::uint64_t GpuPlacementStats::*;
constexpr StatField stat_fields[] = {
    &GpuPlacementStats::local_accesses, &GpuPlacementStats::remote_accesses, &GpuPlacementStats::remote_lines,
    &GpuPlacementStats::first_touches,  &GpuPlacementStats::shared_faults,   &GpuPlacementStats::migrations,
    &GpuPlacementStats::counter_migrations, &GpuPlacementStats::replications, &GpuPlacementStats::collapses,
    &GpuPlacementStats::remote_maps,    &GpuPlacementStats::write_upgrades,  &GpuPlacementStats::invalidations,
    &GpuPlacementStats::aborted_transitions, &GpuPlacementStats::nvlink_bytes, &GpuPlacementStats::pcie_bytes,
    &GpuPlacementStats::writebacks, &GpuPlacementStats::evictions};
static_assert(std::size(stat_fields) == detail::mg::counter_count, "one GpuPlacementStats field per device counter");
constexpr bool distinct_fields() {
  for (std::size_t i = 0; i < std::size(stat_fields); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (stat_fields[i] == stat_fields[j]) return false;
  return true;
}
static_assert(distinct_fields() && sizeof(GpuPlacementStats) == std::size(stat_fields) * sizeof(std::uint64_t),
              "every GpuPlacementStats field is in stat_fields once");

}  // namespace

GpuPlacementStats& GpuPlacementStats::operator+=(const GpuPlacementStats& o) {
  for (const auto field : stat_fields) this->*field += o.*field;
  return *this;
}

GpuPlacementStats MultiGpuStats::total() const {
  GpuPlacementStats sum;
  for (const auto& g : per_gpu) sum += g;
  return sum;
}

namespace detail::mg {
namespace {

constexpr unsigned maintenance_block = 256;

/// cudaMalloc'd memory of one device, freed with that device current.
template <class T>
class OnDevice {
 public:
  OnDevice() = default;
  OnDevice(int device, std::size_t count, const char* what) : device_(device) {
    DeviceGuard guard(device);
    void* p = nullptr;
    const std::size_t bytes = std::max<std::size_t>(1, count * sizeof(T));
    expect_success(allocate_device(&p, bytes), ErrorKind::out_of_memory,
                   "cudaMalloc of " + std::to_string(bytes) + " B for " + what + " on device " + std::to_string(device));
    ptr_ = static_cast<T*>(p);
    bytes_ = bytes;
    try {
      zero();
    } catch (...) {
      release();  // no destructor runs for a constructor that throws
      throw;
    }
  }
  ~OnDevice() { release(); }
  OnDevice(OnDevice&& o) noexcept
      : device_(o.device_), ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  OnDevice& operator=(OnDevice&& o) noexcept {
    if (this != &o) {
      release();
      device_ = o.device_;
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

  // Writes return once they have landed: they go on the legacy stream (cudaMemset, and
  // cudaMemcpy from pageable memory, may return before), which the space's kernels, on
  // non-blocking streams, do not wait for.
  void zero() const {
    DeviceGuard guard(device_);
    WARPVM_CUDA_TRY(cudaMemset(ptr_, 0, bytes_));
    settle();
  }
  /// Elements [first, first + count) from `from`.
  void write(std::size_t first, const T* from, std::size_t count) const {
    DeviceGuard guard(device_);
    WARPVM_CUDA_TRY(cudaMemcpy(ptr_ + first, from, count * sizeof(T), cudaMemcpyHostToDevice));
    settle();
  }
  [[nodiscard]] T* get() const { return ptr_; }

 private:
  static void settle() { WARPVM_CUDA_TRY(cudaStreamSynchronize(cudaStreamLegacy)); }
  void release() noexcept {
    if (ptr_ == nullptr) return;
    int previous = 0;
    if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(device_) == cudaSuccess) {
      free_device(ptr_);
      cudaSetDevice(previous);
    }
    ptr_ = nullptr;
  }
  int device_ = -1;
  T* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

__global__ void init_directory(DirectoryEntry* entries, std::uint64_t pages) {
  for (std::uint64_t p = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; p < pages;
       p += std::uint64_t{gridDim.x} * blockDim.x)
    entries[p] = DirectoryEntry{};
}

__global__ void otable_phase(std::uint32_t* otable, std::uint32_t objects) {
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < objects; i += gridDim.x * blockDim.x)
    otable_begin_phase(otable[i]);
}

/// GPU view.gpu writes back the dirty pages of object `id` that it owns, then clears their dirty
/// mark and every GPU's write permission (the next store faults and marks the page again).
/// Runs only while no kernel uses the space.
__global__ void write_back_owned(const SpaceView* view, std::uint32_t id, std::uint64_t pages) {
  const SpaceView& s = *view;
  const ObjectView& o = s.objects[id];
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  for (std::uint64_t p = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32; p < pages; p += warps) {
    const DirectoryEntry e = load_entry(o.directory[p]);
    if (e.owner != s.gpu || __ldcg(o.dirty + p) == 0u) continue;
    const std::uint64_t bytes = page_bytes_of(s, o, p);
    const auto* frame = reinterpret_cast<const std::byte*>(pte::address(pte_load(o.pte[s.gpu][p])));
    warp_copy(0xffffffffu, o.host + (p << s.page_shift), frame, bytes);
    __threadfence_system();
    __syncwarp();
    if (lane == 0) {
      __stcg(o.dirty + p, 0u);
      for (unsigned g = 0; g < s.gpus; ++g) pte_clear_write(o.pte[g][p]);
      count(s, Counter::writebacks, 1);
      count(s, Counter::pcie_bytes, bytes);
    }
  }
}

/// Each warp places pages of one object that `spread` gives the bound GPU and that are on the
/// host: it reads the page through the fault path (the first touch that fetches it), then marks
/// it placed under the page's lock, so that another GPU's write is not taken for sharing
/// (placement.hpp's decide()). Pages a GPU holds are skipped. Every GPU of the space runs it at
/// once, on disjoint pages.
__global__ void place_pages(Binding binding, std::uint64_t pages, Spread spread) {
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  for (std::uint64_t p = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32; p < pages; p += warps) {
    DirectoryEntry& entry = binding.object->directory[p];
    if (spread_gpu(spread, p, pages, binding.gpus) != binding.gpu || __ldcg(&entry.owner) != owner_host) continue;
    access_page(binding, p, false, 0, 1, [](std::byte*) {});
    if (lane_id() == 0) {
      (void)wait_for_directory_lock(*binding.space, entry, binding.object->id, p, [] { return false; });
      DirectoryEntry now = load_entry(entry);
      if (mark_placed(now, binding.gpu)) store_entry(entry, now);
      directory_unlock(entry);
    }
    __syncwarp();
  }
}

/// Gives back to GPU view.gpu's pool every frame it holds for object `id`.
__global__ void free_object_frames(const SpaceView* view, std::uint32_t id, std::uint64_t pages) {
  const SpaceView& s = *view;
  const ObjectView& o = s.objects[id];
  for (std::uint64_t p = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; p < pages;
       p += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t w = pte_load(o.pte[s.gpu][p]);
    if (!pte::is_own_frame(w)) continue;
    release_frame(s.pools[s.gpu], frame_at(s.pools[s.gpu], pte::address(w), s.page_shift));
  }
}

unsigned blocks_for(std::uint64_t items) {
  return static_cast<unsigned>(std::clamp<std::uint64_t>((items + maintenance_block - 1) / maintenance_block, 1, 4096));
}

void check_launch(const char* what) {
  const cudaError_t status = cudaGetLastError();
  expect_success(status, ErrorKind::cuda, what);
}

}  // namespace

struct GpuState {
  int device = 0;
  stream_ptr stream;
  OnDevice<std::byte> frames;      ///< one page more than the pool, so that the base can be aligned
  std::byte* base = nullptr;       ///< page-aligned first frame
  OnDevice<std::uint32_t> pool_words;
  OnDevice<std::uint64_t> frame_owners;  ///< the pool's reverse map (frame_pool.hpp)
  OnDevice<std::uint64_t> counters;
  OnDevice<ObjectView> objects;
  OnDevice<SpaceView> view;
  OnDevice<const std::uint32_t*> shadow_roots;  ///< the shadow map's root in this GPU's memory
  std::unordered_map<std::uint64_t, OnDevice<std::uint32_t>> shadow_leaves;  ///< by leaf index, made on first use
};

struct ObjectState {
  bool live = false;
  std::string name;
  pinned_ptr<std::byte> host;
  std::uint64_t bytes = 0;
  std::uint64_t pages = 0;
  flat_address flat_base = 0;
  PlacementPolicy policy = PlacementPolicy::oasis;
  OnDevice<DirectoryEntry> directory;
  OnDevice<std::uint32_t> dirty;
  std::vector<OnDevice<std::uint64_t>> pte;
  std::vector<OnDevice<std::uint32_t>> counters;
  std::vector<Binding> bindings;
};

class SpaceState {
 public:
  explicit SpaceState(MultiGpuConfig config) : config_(std::move(config)), shadow_(0, 12) {
    const int visible = device_count();
    WARPVM_EXPECTS(visible > 0, ErrorKind::no_device, "MultiGpuSpace: no CUDA device visible");
    if (config_.devices.empty())
      for (int d = 0; d < visible; ++d) config_.devices.push_back(d);
    const auto n = config_.devices.size();
    WARPVM_EXPECTS(n <= max_gpus, ErrorKind::invalid_config,
                   "MultiGpuSpace: " + std::to_string(n) + " devices, at most " + std::to_string(max_gpus));
    for (std::size_t i = 0; i < n; ++i) {
      WARPVM_EXPECTS(config_.devices[i] >= 0 && config_.devices[i] < visible, ErrorKind::invalid_config,
                     "MultiGpuSpace: device " + std::to_string(config_.devices[i]) + " is not visible");
      for (std::size_t j = 0; j < i; ++j)
        WARPVM_EXPECTS(config_.devices[i] != config_.devices[j], ErrorKind::invalid_config,
                       "MultiGpuSpace: device " + std::to_string(config_.devices[i]) + " listed twice");
    }
    const std::size_t page = config_.page_bytes;
    WARPVM_EXPECTS(page >= 4096 && (page & (page - 1)) == 0 && page <= (std::size_t{1} << 30), ErrorKind::invalid_config,
                   "MultiGpuSpace: page_bytes must be a power of two from 4 KiB to 1 GiB");
    page_shift_ = 0;
    while ((std::size_t{1} << page_shift_) < page) ++page_shift_;
    const std::uint64_t frames = config_.frame_bytes_per_gpu / page;
    WARPVM_EXPECTS(frames >= min_pool_frames && frames < no_frame, ErrorKind::invalid_config,
                   "MultiGpuSpace: frame_bytes_per_gpu must hold from " + std::to_string(min_pool_frames) +
                       " pages (one warp's access may need that many at once; data beyond the pool is evicted "
                       "as needed) to 2^32 - 1 pages; it holds " + std::to_string(frames));
    frames_ = static_cast<std::uint32_t>(frames);
    WARPVM_EXPECTS(config_.reset_threshold >= 1 && config_.reset_threshold <= otable::max_reset_threshold,
                   ErrorKind::invalid_config, "MultiGpuSpace: reset_threshold must be in [1, 255]");
    WARPVM_EXPECTS(config_.counter_threshold >= 1, ErrorKind::invalid_config,
                   "MultiGpuSpace: counter_threshold must be at least 1");
    WARPVM_EXPECTS(config_.max_objects >= 1 && config_.max_objects <= frame_owner::max_objects, ErrorKind::invalid_config,
                   "MultiGpuSpace: max_objects must be in [1, 2^24] (the frames' reverse map holds 24-bit ids)");
    WARPVM_EXPECTS(config_.drain_timeout_seconds > 0, ErrorKind::invalid_config,
                   "MultiGpuSpace: drain_timeout_seconds must be positive");
    WARPVM_EXPECTS(config_.watchdog_seconds > 0 && config_.watchdog_seconds < 1e6, ErrorKind::invalid_config,
                   "MultiGpuSpace: watchdog_seconds must be in (0, 1e6)");
    // 16 TiB at 4 KB pages is a root of 8 MiB per GPU (and 32 MiB of host bookkeeping).
    WARPVM_EXPECTS(config_.flat_address_bytes >= 2 * page && config_.flat_address_bytes <= (std::uint64_t{1} << 44),
                   ErrorKind::invalid_config, "MultiGpuSpace: flat_address_bytes must be from two pages to 16 TiB");
    shadow_ = ShadowMap(config_.flat_address_bytes, page_shift_);

    // Peer access between every pair, both ways.
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        if (i != j) enable_peer_access(config_.devices[i], config_.devices[j], "MultiGpuSpace");
      }

    gpus_.resize(n);
    for (std::size_t g = 0; g < n; ++g) {
      GpuState& gs = gpus_[g];
      gs.device = config_.devices[g];
      DeviceGuard guard(gs.device);
      gs.stream = make_stream();
      gs.frames = OnDevice<std::byte>(gs.device, (std::uint64_t{frames_} + 1) << page_shift_, "frame pool");
      const auto raw = reinterpret_cast<std::uint64_t>(gs.frames.get());
      const std::uint64_t aligned = (raw + page - 1) & ~static_cast<std::uint64_t>(page - 1);
      gs.base = reinterpret_cast<std::byte*>(aligned);
      WARPVM_EXPECTS(aligned + (std::uint64_t{frames_} << page_shift_) <= pte::address_limit, ErrorKind::invalid_config,
                     "MultiGpuSpace: frame addresses exceed what a page-table word holds");
      gs.pool_words = OnDevice<std::uint32_t>(gs.device, frame_pool_words(frames_), "frame pool bitmap");
      gs.frame_owners = OnDevice<std::uint64_t>(gs.device, frames_, "frame reverse map");
      gs.counters = OnDevice<std::uint64_t>(gs.device, std::size_t{counter_shards} * counter_count, "counters");
      gs.objects = OnDevice<ObjectView>(gs.device, config_.max_objects, "object table");
      gs.view = OnDevice<SpaceView>(gs.device, 1, "space view");
      gs.shadow_roots = OnDevice<const std::uint32_t*>(gs.device, shadow_.leaf_count(), "shadow map root");
    }
    otable_ = OnDevice<std::uint32_t>(gpus_[0].device, config_.max_objects, "O-Table");
    error_claim_ = OnDevice<std::uint32_t>(gpus_[0].device, 1, "error claim");
    error_ = make_pinned_zeroed<ErrorRecord>(1, cudaHostAllocMapped | cudaHostAllocPortable, "error record");
    for (std::size_t g = 0; g < n; ++g) {
      DeviceGuard guard(gpus_[g].device);
      SpaceView v{};
      for (std::size_t h = 0; h < n; ++h)
        v.pools[h] = FramePoolView{gpus_[h].base, gpus_[h].pool_words.get(), gpus_[h].frame_owners.get(), frames_};
      v.objects = gpus_[g].objects.get();
      v.otable = otable_.get();
      v.counters = gpus_[g].counters.get();
      v.error = on_device(error_.get());
      v.error_claim = error_claim_.get();
      v.drain_timeout_ns = static_cast<std::uint64_t>(config_.drain_timeout_seconds * 1e9);
      v.watchdog_ns = static_cast<std::uint64_t>(config_.watchdog_seconds * 1e9);
      v.reset_threshold = config_.reset_threshold;
      v.counter_threshold = config_.counter_threshold;
      v.pages_per_group = std::max<std::uint32_t>(1, counter_group_bytes >> page_shift_);
      v.gpu = static_cast<unsigned>(g);
      v.gpus = static_cast<unsigned>(n);
      v.page_shift = page_shift_;
      gpus_[g].view.write(0, &v, 1);
    }
    objects_.resize(config_.max_objects);
  }

  ~SpaceState() {
    for (const GpuState& g : gpus_) {
      DeviceGuard guard(g.device);
      cudaStreamSynchronize(g.stream.get());
    }
  }
  SpaceState(const SpaceState&) = delete;
  SpaceState& operator=(const SpaceState&) = delete;

  std::uint32_t add(std::size_t bytes, PlacementPolicy policy, std::string name) {
    std::uint32_t id = 0;
    while (id < objects_.size() && objects_[id].live) ++id;
    WARPVM_EXPECTS(id < objects_.size(), ErrorKind::invalid_argument,
                   "object '" + name + "': the space already holds max_objects = " + std::to_string(objects_.size()) +
                       " objects");
    WARPVM_EXPECTS(bytes > 0, ErrorKind::invalid_argument, "object '" + name + "' has no elements");
    ObjectState o;
    o.name = name.empty() ? "object " + std::to_string(id) : std::move(name);
    o.bytes = bytes;
    o.pages = (bytes + page_bytes() - 1) >> page_shift_;
    WARPVM_EXPECTS(o.pages <= frame_owner::max_pages, ErrorKind::invalid_argument,
                   "object '" + o.name + "': more pages than the frames' reverse map holds (2^40 - 1)");
    o.policy = policy;
    o.host = make_pinned_zeroed<std::byte>(bytes, cudaHostAllocMapped | cudaHostAllocPortable, o.name.c_str());
    const int home = gpus_[id % gpus_.size()].device;
    o.directory = OnDevice<DirectoryEntry>(home, o.pages, "page directory");
    o.dirty = OnDevice<std::uint32_t>(home, o.pages, "dirty marks");
    const std::uint64_t groups = (o.pages + pages_per_group() - 1) / pages_per_group();
    for (const GpuState& g : gpus_) {
      o.pte.emplace_back(g.device, o.pages, "page table");
      o.counters.emplace_back(g.device, groups, "access counters");
    }
    reset_directory(o, id % gpus_.size());
    // Flat addresses last of what can fail, so that a failed add() leaves none naming `id`.
    try {
      o.flat_base = shadow_.assign(id, bytes);
    } catch (const std::length_error& e) {
      throw_error(ErrorKind::invalid_argument,
                  "object '" + o.name + "': " + e.what() + "; raise MultiGpuConfig::flat_address_bytes", __FILE__, __LINE__);
    }
    upload_shadow(o.flat_base, bytes);
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      DeviceGuard guard(gpus_[g].device);
      ObjectView v{};
      v.host = on_device(o.host.get());
      v.bytes = bytes;
      v.directory = o.directory.get();
      v.dirty = o.dirty.get();
      for (std::size_t h = 0; h < gpus_.size(); ++h) v.pte[h] = o.pte[h].get();
      v.counters = o.counters[g].get();
      v.id = id;
      v.policy = policy;
      v.flat_base = o.flat_base;
      gpus_[g].objects.write(id, &v, 1);
      o.bindings.push_back(Binding{gpus_[g].view.get(), gpus_[g].objects.get() + id, o.pte[g].get(),
                                   static_cast<unsigned>(g), static_cast<unsigned>(gpus_.size()), page_shift_});
    }
    const std::uint32_t unlearned = 0;
    otable_.write(id, &unlearned, 1);
    o.live = true;
    objects_[id] = std::move(o);
    return id;
  }

  /// Drops an object: its frames go back to the pools, its tables and host memory are freed.
  void remove(std::uint32_t id) {
    synchronize_streams();
    ObjectState& o = objects_[id];
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      DeviceGuard guard(gpus_[g].device);
      free_object_frames<<<blocks_for(o.pages), maintenance_block, 0, gpus_[g].stream.get()>>>(gpus_[g].view.get(), id,
                                                                                                o.pages);
      check_launch("free_object_frames");
    }
    synchronize_streams();
    shadow_.clear(o.flat_base, o.bytes);
    upload_shadow(o.flat_base, o.bytes);
    objects_[id] = ObjectState{};
  }

  void place_on_gpus(std::uint32_t id, Spread spread) {
    synchronize_streams();
    const ObjectState& o = objects_[id];
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      DeviceGuard guard(gpus_[g].device);
      place_pages<<<blocks_for(o.pages * 32), maintenance_block, 0, gpus_[g].stream.get()>>>(o.bindings[g], o.pages,
                                                                                              spread);
      check_launch("place_pages");
    }
    synchronize();
  }

  void begin_phase() {
    synchronize_streams();
    DeviceGuard guard(gpus_[0].device);
    otable_phase<<<blocks_for(config_.max_objects), maintenance_block, 0, gpus_[0].stream.get()>>>(otable_.get(),
                                                                                                  config_.max_objects);
    check_launch("otable_phase");
    WARPVM_CUDA_TRY(cudaStreamSynchronize(gpus_[0].stream.get()));
  }

  void launch(unsigned gpu, const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes, void** args) {
    WARPVM_EXPECTS(gpu < gpus_.size(), ErrorKind::invalid_argument,
                   "MultiGpuSpace::launch: GPU index " + std::to_string(gpu) + " of " + std::to_string(gpus_.size()));
    DeviceGuard guard(gpus_[gpu].device);
    WARPVM_CUDA_TRY(cudaLaunchKernel(kernel, grid, block, args, shared_bytes, gpus_[gpu].stream.get()));
  }

  /// Waits for every GPU; the device error record first (it names the object), then CUDA's.
  void synchronize() {
    cudaError_t first = cudaSuccess;
    for (const GpuState& g : gpus_) {
      DeviceGuard guard(g.device);
      const cudaError_t status = cudaStreamSynchronize(g.stream.get());
      if (first == cudaSuccess) first = status;
    }
    const ErrorRecord record = *error_;
    if (record.state != 0) {
      cudaGetLastError();
      // The record is the cause, and is raised even when a kernel trapped afterwards (a later
      // failure finds the claim taken and only traps): CUDA's bare launch failure would lose it.
      const std::string then_failed = first == cudaSuccess ? std::string{}
                                                           : std::string("; the kernel then failed: ") +
                                                                 cudaGetErrorString(first);
      const std::string name = record.object_id < objects_.size() && objects_[record.object_id].live
                                   ? objects_[record.object_id].name
                                   : "object " + std::to_string(record.object_id);
      const std::string gpu = "GPU " + std::to_string(record.gpu) + " (device " +
                              std::to_string(gpus_[record.gpu].device) + ")";
      const std::string watchdog = std::to_string(config_.watchdog_seconds) + " s (MultiGpuConfig::watchdog_seconds)";
      switch (record.failure) {
        case DeviceFailure::bad_flat_address: {
          if (first == cudaSuccess) {
            // Nothing was accessed: the space stays usable, so the record is cleared for the next failure.
            *error_ = ErrorRecord{};
            error_claim_.zero();
          }
          const std::string where = record.object_id == no_object ? "no object's" : "in object '" + name + "', but misaligned or past its end for the access";
          throw_error(ErrorKind::index_out_of_range,
                      "flat_view on GPU " + std::to_string(record.gpu) + ": flat address " + std::to_string(record.where) +
                          " is " + where + " (the first such access; flat addresses come from shared_object::address())" +
                          then_failed,
                      __FILE__, __LINE__);
        }
        case DeviceFailure::bad_span:
          throw_error(ErrorKind::index_out_of_range,
                      "shared_array::with_span on " + gpu + ": the span at element " + std::to_string(record.where) +
                          " of '" + name + "' runs past the object's end or across a page (a span must lie in one page)" +
                          then_failed,
                      __FILE__, __LINE__);
        case DeviceFailure::lock_timeout:
          throw_error(ErrorKind::no_progress,
                      "object '" + name + "' (page " + std::to_string(record.where) + "): a fault on " + gpu +
                          " waited " + watchdog + " for the page's directory lock, and its holder never gave it back" +
                          then_failed,
                      __FILE__, __LINE__);
        case DeviceFailure::out_of_frames:
          break;
      }
      throw_error(ErrorKind::out_of_memory,
                  "object '" + name + "' (page " + std::to_string(record.where) + "): the frame pool of " + gpu + " (" +
                      std::to_string(record.frames) + " frames) is full and no frame could be evicted for " + watchdog +
                      " (every frame held by accesses or locked by transitions): raise MultiGpuConfig::frame_bytes_per_gpu" +
                      then_failed,
                  __FILE__, __LINE__);
    }
    expect_success(first, ErrorKind::cuda, "a kernel of the multi-GPU space");
  }

  void flush() {
    synchronize();
    for (std::uint32_t id = 0; id < objects_.size(); ++id) {
      const ObjectState& o = objects_[id];
      if (!o.live) continue;
      for (const GpuState& g : gpus_) {
        DeviceGuard guard(g.device);
        write_back_owned<<<blocks_for(o.pages * 32), maintenance_block, 0, g.stream.get()>>>(g.view.get(), id, o.pages);
        check_launch("write_back_owned");
      }
    }
    synchronize();
  }

  void drop_cached() {
    flush();
    for (std::uint32_t id = 0; id < objects_.size(); ++id) {
      ObjectState& o = objects_[id];
      if (!o.live) continue;
      reset_directory(o, id % gpus_.size());
      o.dirty.zero();
      for (auto& p : o.pte) p.zero();
      for (auto& c : o.counters) c.zero();
    }
    for (const GpuState& g : gpus_) {
      g.pool_words.zero();
      g.frame_owners.zero();
    }
    otable_.zero();
  }

  MultiGpuStats stats() {
    synchronize();
    return counters_now();
  }

  /// The counters as they stand (a copy on the legacy stream, which the space's non-blocking
  /// streams do not wait for, nor it for them).
  MultiGpuStats counters_now() const {
    MultiGpuStats out;
    std::vector<std::uint64_t> raw(std::size_t{counter_shards} * counter_count);
    for (const GpuState& g : gpus_) {
      DeviceGuard guard(g.device);
      WARPVM_CUDA_TRY(cudaMemcpy(raw.data(), g.counters.get(), raw.size() * sizeof(std::uint64_t), cudaMemcpyDeviceToHost));
      std::uint64_t sum[counter_count] = {};
      for (std::uint32_t s = 0; s < counter_shards; ++s)
        for (std::uint32_t c = 0; c < counter_count; ++c) sum[c] += raw[s * counter_count + c];
      GpuPlacementStats st;
      for (std::uint32_t c = 0; c < counter_count; ++c) st.*stat_fields[c] = sum[c];
      st.nvlink_bytes += st.remote_lines << line_shift;  // the fault path counts remote lines once, not their bytes
      out.per_gpu.push_back(st);
    }
    return out;
  }

  void reset_stats() {
    synchronize();
    for (const GpuState& g : gpus_) g.counters.zero();
  }

  [[nodiscard]] const ObjectState& object(std::uint32_t id) const { return objects_.at(id); }
  [[nodiscard]] unsigned gpus() const { return static_cast<unsigned>(gpus_.size()); }
  [[nodiscard]] int device(unsigned g) const { return gpus_.at(g).device; }
  [[nodiscard]] cudaStream_t stream(unsigned g) const { return gpus_.at(g).stream.get(); }
  [[nodiscard]] std::size_t page_bytes() const { return std::size_t{1} << page_shift_; }
  [[nodiscard]] std::uint32_t frames() const { return frames_; }
  [[nodiscard]] const MultiGpuConfig& config() const { return config_; }
  [[nodiscard]] const SpaceView* view(unsigned g) const { return gpus_.at(g).view.get(); }
  [[nodiscard]] ShadowMapView shadow_view(unsigned g) const {
    return {gpus_.at(g).shadow_roots.get(), shadow_.leaf_count(), PageGeometry{page_shift_}};
  }

 private:
  [[nodiscard]] std::uint32_t pages_per_group() const { return std::max<std::uint32_t>(1, counter_group_bytes >> page_shift_); }

  void synchronize_streams() {
    for (const GpuState& g : gpus_) {
      DeviceGuard guard(g.device);
      WARPVM_CUDA_TRY(cudaStreamSynchronize(g.stream.get()));
    }
  }

  /// Every GPU's copy of the shadow map's leaves that [base, base + bytes) touches, from the
  /// host's (a GPU's leaf made, and its root entry set, on first use).
  void upload_shadow(flat_address base, std::uint64_t bytes) {
    const ShadowMap::LeafRange range = shadow_.leaves_of(base, bytes);
    for (GpuState& g : gpus_) {
      for (std::uint64_t leaf = range.first; leaf < range.end; ++leaf) {
        auto [at, made] = g.shadow_leaves.try_emplace(leaf);
        if (made) at->second = OnDevice<std::uint32_t>(g.device, shadow_leaf_entries, "shadow map leaf");
        // The leaf's entries land before the root names it, so that no kernel finds a leaf
        // still zeroed (object 0's id).
        at->second.write(0, shadow_.leaf(leaf).data(), shadow_leaf_entries);
        if (made) {
          const std::uint32_t* device_leaf = at->second.get();
          g.shadow_roots.write(leaf, &device_leaf, 1);
        }
      }
    }
  }

  void reset_directory(const ObjectState& o, std::size_t home) {
    DeviceGuard guard(gpus_[home].device);
    init_directory<<<blocks_for(o.pages), maintenance_block, 0, gpus_[home].stream.get()>>>(o.directory.get(), o.pages);
    check_launch("init_directory");
    WARPVM_CUDA_TRY(cudaStreamSynchronize(gpus_[home].stream.get()));
  }

  MultiGpuConfig config_;
  unsigned page_shift_ = 12;
  std::uint32_t frames_ = 0;
  std::vector<GpuState> gpus_;
  OnDevice<std::uint32_t> otable_;
  OnDevice<std::uint32_t> error_claim_;
  pinned_ptr<ErrorRecord> error_;
  ShadowMap shadow_;
  std::vector<ObjectState> objects_;
};

ObjectOwner::ObjectOwner(std::shared_ptr<SpaceState> state, std::uint32_t id) : state_(std::move(state)), id_(id) {}
ObjectOwner::~ObjectOwner() { reset(); }
ObjectOwner::ObjectOwner(ObjectOwner&& other) noexcept
    : state_(std::move(other.state_)), id_(std::exchange(other.id_, ~0u)) {}
ObjectOwner& ObjectOwner::operator=(ObjectOwner&& other) noexcept {
  if (this != &other) {
    reset();
    state_ = std::move(other.state_);
    id_ = std::exchange(other.id_, ~0u);
  }
  return *this;
}
void ObjectOwner::reset() noexcept {
  if (!state_) return;
  try {
    state_->remove(id_);
  } catch (const Error&) {
    // Destructors never throw; a failing device has already been reported by synchronize().
  }
  state_.reset();
}
Binding ObjectOwner::binding(unsigned gpu) const {
  WARPVM_EXPECTS(state_ != nullptr, ErrorKind::invalid_argument, "shared_object: empty (moved-from) object");
  WARPVM_EXPECTS(gpu < state_->gpus(), ErrorKind::invalid_argument,
                 "shared_object::on: GPU index " + std::to_string(gpu) + " of " + std::to_string(state_->gpus()));
  return state_->object(id_).bindings[gpu];
}
std::byte* ObjectOwner::host_data() const { return state_ ? state_->object(id_).host.get() : nullptr; }
std::uint64_t ObjectOwner::bytes() const { return state_ ? state_->object(id_).bytes : 0; }
const std::string& ObjectOwner::name() const {
  static const std::string empty;
  return state_ ? state_->object(id_).name : empty;
}
PlacementPolicy ObjectOwner::policy() const { return state_ ? state_->object(id_).policy : PlacementPolicy::oasis; }
flat_address ObjectOwner::flat_base() const { return state_ ? state_->object(id_).flat_base : 0; }

void force_directory_lock(const MultiGpuSpace& space, std::uint32_t object_id, std::uint64_t page) {
  SpaceState& state = *space.state_;
  state.synchronize();
  const ObjectState& object = state.object(object_id);
  WARPVM_EXPECTS(page < object.pages, ErrorKind::invalid_argument,
                 "force_directory_lock: object '" + object.name + "' has no page " + std::to_string(page));
  const std::uint32_t locked = 1;
  WARPVM_CUDA_TRY(cudaMemcpy(&object.directory.get()[page].lock, &locked, sizeof locked, cudaMemcpyHostToDevice));
}

}  // namespace detail::mg

MultiGpuSpace::MultiGpuSpace(MultiGpuConfig config)
    : state_(std::make_shared<detail::mg::SpaceState>(std::move(config))) {}
MultiGpuSpace::~MultiGpuSpace() = default;

detail::mg::ObjectOwner MultiGpuSpace::register_object(std::size_t bytes, std::optional<PlacementPolicy> policy,
                                                       std::string name) {
  const std::uint32_t id = state_->add(bytes, policy.value_or(state_->config().default_policy), std::move(name));
  return detail::mg::ObjectOwner(state_, id);
}
detail::mg::Binding MultiGpuSpace::binding_of(const detail::mg::SpaceState& state, std::uint32_t id, unsigned gpu) {
  WARPVM_EXPECTS(id < state.config().max_objects && state.object(id).live, ErrorKind::invalid_argument,
                 "MultiGpuSpace::launch: a shared_array of no live object of this space");
  WARPVM_EXPECTS(gpu < state.gpus(), ErrorKind::invalid_argument, "MultiGpuSpace::launch: bad GPU index");
  return state.object(id).bindings[gpu];
}
flat_view MultiGpuSpace::flat_on(unsigned gpu) const {
  WARPVM_EXPECTS(gpu < state_->gpus(), ErrorKind::invalid_argument, "MultiGpuSpace: bad GPU index for a flat_view");
  return flat_view(state_->view(gpu), state_->shadow_view(gpu), gpu, state_->gpus());
}
void MultiGpuSpace::launch_raw(unsigned gpu, const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
                               void** args) {
  state_->launch(gpu, kernel, grid, block, shared_bytes, args);
}
void MultiGpuSpace::place_pages_on_gpus(const detail::mg::ObjectOwner& object, Spread spread) {
  WARPVM_EXPECTS(object.belongs_to(state_), ErrorKind::invalid_argument,
                 "MultiGpuSpace::place_on_gpus: the object is not one of this space's (moved from, or another space's)");
  state_->place_on_gpus(object.id(), spread);
}
void MultiGpuSpace::begin_phase() { state_->begin_phase(); }
void MultiGpuSpace::synchronize() { state_->synchronize(); }
void MultiGpuSpace::flush() { state_->flush(); }
void MultiGpuSpace::drop_cached() { state_->drop_cached(); }
MultiGpuStats MultiGpuSpace::stats() const { return state_->stats(); }
MultiGpuStats MultiGpuSpace::stats_now() const { return state_->counters_now(); }
void MultiGpuSpace::reset_stats() { state_->reset_stats(); }
unsigned MultiGpuSpace::gpus() const { return state_->gpus(); }
int MultiGpuSpace::device(unsigned gpu) const { return state_->device(gpu); }
cudaStream_t MultiGpuSpace::stream(unsigned gpu) const { return state_->stream(gpu); }
std::size_t MultiGpuSpace::page_bytes() const { return state_->page_bytes(); }
std::uint32_t MultiGpuSpace::frames_per_gpu() const { return state_->frames(); }

}  // namespace warpvm

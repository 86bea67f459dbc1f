#include "warpvm/runtime.hpp"

#include "runtime_state.hpp"
#include "nvtx_range.hpp"

#include "warpvm/detail/core/inspect.hpp"
#include "warpvm/detail/policy/automatic.hpp"
#include "warpvm/detail/policy/victim.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

namespace warpvm {
namespace detail {
namespace {

std::string mib(std::uint64_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(bytes) / double(1 << 20) << " MiB";
  return out.str();
}

/// Config::cache_bytes, or its share of the device memory left free besides the resident frames.
std::size_t choose_cache_bytes(const Config& config) {
  if (config.cache_bytes != 0) return config.cache_bytes;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  WARPVM_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::size_t shared = free_bytes > config.resident_bytes ? free_bytes - config.resident_bytes : 0;
  return static_cast<std::size_t>(static_cast<double>(shared) * config.cache_fraction_of_free);
}

/// A slot's next generation: never 0, which an empty slot's zeroed descriptor has.
std::uint16_t next_generation(std::uint16_t& newest) {
  newest = static_cast<std::uint16_t>(newest + 1 == 0x10000 ? 1 : newest + 1);
  return newest;
}

/// The message of an input a warpvm::ops operation refused on the device (its FailureCause): which
/// operation, which input, the value, and the object it was checked against. Those checks run
/// before the operation writes anything.
void describe_op_input_error(std::ostringstream& what, FailureCause cause, std::int64_t value, std::uint64_t limit,
                             const std::string& object) {
  switch (cause) {
    case FailureCause::gather_ids:
    case FailureCause::embedding_bag_ids:
    case FailureCause::index_add_ids: {
      const char* op = cause == FailureCause::gather_ids ? "gather" : cause == FailureCause::index_add_ids ? "index_add"
                                                                                                    : "embedding_bag";
      what << op << ": ids holds " << value << ", out of range for table " << object << ", which has " << limit
           << " rows; nothing was written";
      break;
    }
    case FailureCause::embedding_bag_offsets:
      what << "embedding_bag: offsets hold " << value << ", below the offset before it or past len(ids) = " << limit
           << " (table " << object << "); nothing was written";
      break;
    case FailureCause::sample_seeds:
      what << "sample_neighbors: seeds holds " << value << ", out of range for indptr " << object << ", which describes "
           << limit << " nodes; nothing was written";
      break;
    case FailureCause::sample_indptr:
      what << "sample_neighbors: indptr " << object << " is not the offsets of a CSR graph at node " << value
           << ": its entries must not decrease and must stay within len(indices) = " << limit
           << "; nothing was written";
      break;
    default:  // not an op's input: described by the caller
      break;
  }
}

bool is_pinned(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

}  // namespace

RuntimeState::RuntimeState(const Config& cfg) : config(cfg) {
  config.validate();
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    throw_error(ErrorKind::no_device, "no CUDA device is visible; warpvm needs a GPU (the simulator does not)",
                __FILE__, __LINE__);
  }
  WARPVM_EXPECTS(config.device < devices, ErrorKind::invalid_config,
                 "device " + std::to_string(config.device) + " does not exist (" + std::to_string(devices) +
                     " visible)");
  const DeviceGuard on_device(config.device);
  WARPVM_CUDA_TRY(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, config.device));
  stream_ = make_stream();

  const std::size_t cache_bytes = choose_cache_bytes(config);
  const std::uint64_t frame_count = cache_bytes / config.page_bytes;
  const std::uint64_t resident_count = (config.resident_bytes + config.page_bytes - 1) / config.page_bytes;
  WARPVM_EXPECTS(frame_count >= 1 && frame_count + resident_count < (std::uint64_t{1} << 32) - 2,
                 ErrorKind::invalid_config,
                 "a cache of " + std::to_string(cache_bytes) + " B holds " + std::to_string(frame_count) +
                     " frames of " + std::to_string(config.page_bytes) + " B (and " + std::to_string(resident_count) +
                     " resident frames); need at least 1, and fewer than 2^32 - 2 in all");
  frames = static_cast<std::uint32_t>(frame_count);
  config.cache_bytes = std::size_t{frames} * config.page_bytes;
  config.resident_bytes = resident_count * config.page_bytes;

  // Past the cache's frames: the scratch frame, never filled, which readers that load before
  // they know whether a page is resident read instead (see peek_resident_unheld); then the frames
  // set aside for resident objects. Eviction cycles through the cache's frames only.
  all_frames = frames + 1 + static_cast<std::uint32_t>(resident_count);
  resident_frames_ = FrameRanges(frames + 1, static_cast<std::uint32_t>(resident_count));
  frame_data_ = make_device_zeroed<std::byte>(std::size_t{all_frames} * config.page_bytes, "the page cache frames");
  owner_ = make_device_zeroed<std::uint64_t>(all_frames, "frame owners");
  WARPVM_CUDA_TRY(cudaMemset(owner_.get(), 0xff, std::size_t{all_frames} * sizeof(std::uint64_t)));  // empty_page_key
  lock_ = make_device_zeroed<std::uint32_t>(all_frames, "frame locks");
  referenced_ = make_device_zeroed<std::uint32_t>(all_frames, "frame reference bits");
  dirty_ = make_device_zeroed<std::uint32_t>(all_frames, "frame dirty bits");
  hand_ = make_device_zeroed<std::uint64_t>(1, "the clock hand");
  counters_ = make_device_zeroed<std::uint64_t>(std::size_t{counter_shards} * counter_count, "counters");
  objects_ = make_device_zeroed<ObjectDescriptor>(config.max_objects, "the object table");
  error_claim_ = make_device_zeroed<std::uint32_t>(1, "the error claim");
  never_evicts_ = make_device_zeroed<std::uint32_t>(1, "the never-evicts flag");
  automatic_budget_ = make_device_zeroed<std::uint32_t>(1, "the automatic placement's budget");
  error_ = make_pinned_zeroed<ErrorRecord>(1, cudaHostAllocMapped, "the error record");

  view_.frames = frame_data_.get();
  view_.table = FrameTable{owner_.get(), lock_.get(), referenced_.get(), dirty_.get(), hand_.get(), frames};
  view_.objects = objects_.get();
  view_.counters = counters_.get();
  view_.error = detail::on_device(error_.get());
  view_.error_claim = error_claim_.get();
  view_.never_evicts = never_evicts_.get();
  view_.automatic_budget = automatic_budget_.get();
  view_.watchdog_ns = static_cast<std::uint64_t>(config.watchdog_seconds * 1e9);
  view_.page_shift = log2_exact(config.page_bytes);
  view_.eviction = config.eviction;
  view_.transport = config.transport;
  view_.checked = config.checked;
  if (config.fault_event_capacity != 0) {
    fault_events_ = make_device_zeroed<FaultEvent>(config.fault_event_capacity, "the fault event recorder");
    fault_event_count_ = make_device_zeroed<std::uint64_t>(1, "the fault event count");
    view_.recorder = FaultRecorder{fault_events_.get(), fault_event_count_.get(), config.fault_event_capacity};
  }
  if (config.transport == Transport::host_batched) {
    service_ = std::make_unique<HostBatchedService>(config, frame_data_.get(), owner_.get(), dirty_.get(), frames);
    view_.faults = service_->ring();
  }
  slots_.resize(config.max_objects);
  generations_.resize(config.max_objects);
  retired_.resize(config.max_objects);
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());
}

RuntimeState::~RuntimeState() {
  // Kernels may still use the buffers freed next. There is no later call to raise an error at:
  // one still pending is said on stderr rather than lost.
  settle();
  if (!pending_error_) return;
  try {
    std::rethrow_exception(pending_error_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warpvm: an error was still pending when the Runtime was destroyed: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "warpvm: an error was still pending when the Runtime was destroyed\n");
  }
}

std::uint32_t RuntimeState::register_object(std::byte* adopted, std::size_t bytes, Placement placement,
                                            std::string name) {
  synchronize();  // an earlier error is reported before anything is allocated
  WARPVM_EXPECTS(bytes > 0, ErrorKind::invalid_argument, "object '" + name + "' has no elements");
  WARPVM_EXPECTS(adopted == nullptr || reinterpret_cast<std::uintptr_t>(adopted) % 16 == 0,
                 ErrorKind::invalid_argument, "adopt: memory of '" + name + "' must be 16-byte aligned");
  const std::uint64_t pages = view_.geometry().pages_for(bytes);
  WARPVM_EXPECTS(pages < (std::uint64_t{1} << object_id_shift), ErrorKind::invalid_argument,
                 "object '" + name + "' of " + mib(bytes) + " has more than 2^40 pages");
  if (adopted != nullptr) {
    for (const ObjectSlot& other : slots_) {
      const bool overlaps = other.in_use && adopted < other.host + other.descriptor.bytes && other.host < adopted + bytes;
      WARPVM_EXPECTS(!overlaps, ErrorKind::invalid_argument,
                     "adopt: the memory of '" + name + "' overlaps object '" + other.name +
                         "'; two objects would cache the same bytes");
    }
  }
  const auto free_slot = std::find_if(slots_.begin(), slots_.end(), [](const ObjectSlot& s) { return !s.in_use; });
  WARPVM_EXPECTS(free_slot != slots_.end(), ErrorKind::invalid_argument,
                 "cannot register '" + name + "': all " + std::to_string(config.max_objects) +
                     " object slots are in use (raise Config::max_objects)");
  const auto id = static_cast<std::uint32_t>(free_slot - slots_.begin());
  const DeviceGuard on_device(config.device);
  ObjectSlot slot;
  slot.name = name.empty() ? "object#" + std::to_string(id) : std::move(name);

  if (adopted == nullptr) {
    void* p = nullptr;
    expect_success(allocate_pinned(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable), ErrorKind::out_of_memory,
                   "pinned host allocation of " + mib(bytes) + " for '" + slot.name + "'");
    slot.owned_host.reset(static_cast<std::byte*>(p));
    slot.host = slot.owned_host.get();
  } else {
    if (!is_pinned(adopted)) {  // memory the caller pinned already is used as it is
      expect_success(register_host(adopted, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
                     ErrorKind::cuda, "cudaHostRegister of " + mib(bytes) + " for '" + slot.name + "'");
      slot.registered.reset(adopted);
    }
    slot.host = adopted;
  }
  slot.pages = make_device_zeroed<PageEntry>(pages, ("the page table of '" + slot.name + "'").c_str());
  slot.descriptor = ObjectDescriptor{detail::on_device(slot.host),
                                     bytes,
                                     slot.pages.get(),
                                     nullptr,
                                     id,
                                     Placement::migrate,
                                     next_generation(generations_[id]),
                                     0};
  give_placement(slot, placement);
  slot.in_use = true;
  *free_slot = std::move(slot);
  try {
    publish_descriptor(id);  // the synchronize() above waited for every kernel that could read it
  } catch (...) {
    release_slot(id);
    throw;
  }
  return id;
}

void RuntimeState::release_slot(std::uint32_t id) noexcept {
  ObjectSlot dying = std::exchange(slots_[id], ObjectSlot{});  // freed when this returns
  retired_[id] = {dying.descriptor.generation, std::move(dying.name)};
  give_back_resident_frames(dying);
  try {
    if (service_) update_served(id, service_->pause());  // set_object forgets the object even if it throws
  } catch (...) {
    keep_pending_error();  // the device could not be told (a failed kernel): the next host call says so
  }
}

void RuntimeState::publish_descriptor(std::uint32_t id) {
  // On the runtime's stream and waited for (below): a copy from pageable memory may return before
  // it lands, and kernels run on the runtime's non-blocking stream, which does not wait for it.
  WARPVM_CUDA_TRY(cudaMemcpyAsync(objects_.get() + id, &slots_[id].descriptor, sizeof(ObjectDescriptor),
                                  cudaMemcpyHostToDevice, stream()));
  bool fits = false;
  if (service_) {  // host_batched serves whole 2 MB chunks: the service decides, from the objects it serves
    update_served(id, service_->pause());
    fits = !service_->evicts();
  } else {
    std::uint64_t migrate_pages = 0;
    for (const ObjectSlot& slot : slots_)
      if (slot.in_use && is_cached(slot.descriptor.placement))
        migrate_pages += view_.geometry().pages_for(slot.descriptor.bytes);
    fits = migrate_pages <= frames;
  }
  const std::uint32_t never_evicts = fits ? 1u : 0u;
  const std::uint32_t automatic_budget = automatic_remote_sectors(
      config.page_bytes, fits ? config.automatic_remote_share : config.automatic_remote_share_evicting);
  WARPVM_CUDA_TRY(cudaMemcpyAsync(never_evicts_.get(), &never_evicts, sizeof never_evicts, cudaMemcpyHostToDevice,
                                  stream()));
  WARPVM_CUDA_TRY(cudaMemcpyAsync(automatic_budget_.get(), &automatic_budget, sizeof automatic_budget,
                                  cudaMemcpyHostToDevice, stream()));
  WARPVM_CUDA_TRY(cudaStreamSynchronize(stream()));
}

void RuntimeState::update_served(std::uint32_t id, const std::unique_lock<std::mutex>& paused) {
  const ObjectSlot& slot = slots_[id];
  const ServedObject object{slot.host, slot.descriptor.bytes, slot.descriptor.pages};
  const bool served = slot.in_use && is_cached(slot.descriptor.placement);
  service_->set_object(paused, id, served ? &object : nullptr);
}

void RuntimeState::mark_pages_absent(std::uint32_t id) {
  const ObjectSlot& slot = slots_[id];
  const std::uint64_t pages = view_.geometry().pages_for(slot.descriptor.bytes);
  WARPVM_CUDA_TRY(cudaMemsetAsync(slot.descriptor.pages, 0, pages * sizeof(PageEntry), stream()));
  // Placement::automatic learns again from scratch: a dropped page's history is not its future's.
  if (slot.remote_sectors)
    WARPVM_CUDA_TRY(cudaMemsetAsync(slot.remote_sectors.get(), 0, pages * sizeof(std::uint32_t), stream()));
}

void RuntimeState::unregister_object(std::uint32_t id) noexcept {
  // A destructor must neither throw nor lose an error: an error of the kernels that ran before
  // (say an out-of-range index in checked mode) is kept for the next host call, and the object
  // is still dropped, so that no frame goes on naming its freed page table.
  settle();
  try {
    const DeviceGuard on_device(config.device);
    write_back_frames(id, /*write_back=*/false, /*drop=*/true);  // a dying object's cached pages are discarded
    release_slot(id);
    publish_descriptor(id);
  } catch (...) {
    keep_pending_error();  // a broken context: the next host call reports it
    if (slots_[id].in_use) release_slot(id);
  }
}

void RuntimeState::set_placement(std::uint32_t id, Placement placement) {
  ObjectSlot& slot = slots_.at(id);
  if (slot.descriptor.placement == placement) return;
  // Frames for a resident object are taken first, so that a refusal changes nothing.
  if (placement == Placement::resident && !slot.resident_first_frame) slot.resident_first_frame = take_resident_frames(slot);
  // Pages stay cached between migrate and automatic; remote objects have none; a resident
  // object's pages go back to the host before its frames do.
  const bool leaves_frames = is_cached(slot.descriptor.placement) && !is_cached(placement);
  if (leaves_frames || slot.descriptor.placement == Placement::resident)
    write_back(id, /*write_back=*/true, /*drop=*/true);
  synchronize();  // running kernels may still use what give_placement zeroes or frees
  give_placement(slot, placement);
  publish_descriptor(id);
}

std::uint32_t RuntimeState::take_resident_frames(const ObjectSlot& slot) {
  WARPVM_EXPECTS(config.transport == Transport::gpu_initiated, ErrorKind::invalid_argument,
                 "object '" + slot.name + "' cannot be resident: the host_batched transport (the uvm preset) "
                 "serves migrate objects only");
  const std::uint64_t pages = view_.geometry().pages_for(slot.descriptor.bytes);
  const std::optional<std::uint32_t> first =
      pages < (std::uint64_t{1} << 32) ? resident_frames_.take(static_cast<std::uint32_t>(pages)) : std::nullopt;
  WARPVM_EXPECTS(first.has_value(), ErrorKind::out_of_memory,
                 "object '" + slot.name + "' cannot be resident: it needs " + std::to_string(pages) + " frames (" +
                     mib(pages * config.page_bytes) + ") in a row, and Config::resident_bytes (" +
                     mib(config.resident_bytes) + ") has " + std::to_string(resident_frames_.free_frames()) +
                     " free, at most " + std::to_string(resident_frames_.largest_run()) + " in a row");
  return *first;
}

void RuntimeState::give_back_resident_frames(ObjectSlot& slot) noexcept {
  if (!slot.resident_first_frame) return;
  resident_frames_.give_back(*slot.resident_first_frame,
                             static_cast<std::uint32_t>(view_.geometry().pages_for(slot.descriptor.bytes)));
  slot.resident_first_frame.reset();
}

void RuntimeState::give_placement(ObjectSlot& slot, Placement placement) {
  // The counts, once allocated, live as long as the slot: a handle taken while the object was
  // automatic and used after it left (a stale handle, which checked mode cannot tell when the
  // object has come back to automatic since) then counts into live memory of its own object,
  // not into memory cudaMalloc may have given to something else (another object's page table).
  // Allocated before anything changes, so that an allocation failure leaves the slot as it was.
  const std::uint64_t pages = view_.geometry().pages_for(slot.descriptor.bytes);
  if (placement == Placement::automatic) {
    if (!slot.remote_sectors)
      slot.remote_sectors =
          make_device_zeroed<std::uint32_t>(pages, ("the remote-sector counts of '" + slot.name + "'").c_str());
    else if (slot.descriptor.placement != Placement::automatic)  // coming back: learn from scratch
      WARPVM_CUDA_TRY(cudaMemsetAsync(slot.remote_sectors.get(), 0, pages * sizeof(std::uint32_t), stream()));
  }
  // A resident object's frames go with the placement: a handle taken while it was resident must
  // not be used after it left (checked mode reports such a stale handle).
  if (placement == Placement::resident && !slot.resident_first_frame) {
    slot.resident_first_frame = take_resident_frames(slot);
  } else if (placement != Placement::resident) {
    give_back_resident_frames(slot);
  }
  slot.descriptor.placement = placement;
  slot.descriptor.remote_sectors = placement == Placement::automatic ? slot.remote_sectors.get() : nullptr;
  slot.descriptor.resident_first_frame = slot.resident_first_frame.value_or(0);
}

void RuntimeState::write_back(std::uint32_t object_filter, bool write_back, bool drop) {
  const NvtxRange range(drop ? (write_back ? "warpvm: drop cached (write back first)" : "warpvm: drop cached")
                             : "warpvm: flush");
  const DeviceGuard on_device(config.device);
  synchronize();
  write_back_frames(object_filter, write_back, drop);
  synchronize();
}

void RuntimeState::write_back_frames(std::uint32_t object_filter, bool write_back, bool drop) {
  {
    // No host_batched batch may land between the drop's steps (it would map a page into a
    // frame the service then forgets): the service stays paused until they are done.
    std::unique_lock<std::mutex> paused;
    if (service_ && drop) {
      paused = service_->pause();
      // Eviction orders a kernel left behind are carried out first (no user kernel runs, so no
      // page is held): an order must not outlive the pages it names.
      const auto [first_order, orders] = service_->unsettled_orders(paused);
      if (orders != 0) {
        launch_finish_evictions(view_, first_order, orders, stream());
        WARPVM_CUDA_TRY(cudaStreamSynchronize(stream()));
        service_->settle_orders(paused);
      }
    }
    launch_write_back(view_, all_frames, object_filter, write_back, drop, stream());
    if (drop) {
      for (std::uint32_t id = 0; id < slots_.size(); ++id) {
        if (!slots_[id].in_use || (object_filter != all_objects && object_filter != id)) continue;
        mark_pages_absent(id);
        if (service_) update_served(id, paused);  // the service forgets the dropped pages too
      }
    }
    WARPVM_CUDA_TRY(cudaStreamSynchronize(stream()));
  }
}

void RuntimeState::synchronize() {
  settle();
  raise_pending_error();
}

void RuntimeState::raise_pending_error() {
  if (pending_error_) std::rethrow_exception(std::exchange(pending_error_, nullptr));
}

void RuntimeState::settle() noexcept {
  try {
    const DeviceGuard on_device(config.device);
    const cudaError_t status = cudaDeviceSynchronize();
    if (service_) service_->raise_failure();  // first: a failed service is why warps timed out
    raise_device_error();
    WARPVM_CUDA_TRY(status);
  } catch (...) {
    keep_pending_error();
  }
}

void RuntimeState::keep_pending_error() noexcept {
  if (!pending_error_) pending_error_ = std::current_exception();
}

void RuntimeState::raise_device_error() {
  volatile ErrorRecord* record = error_.get();
  if (record->state != error_state_set) return;
  const auto kind = static_cast<ErrorKind>(record->kind);
  const std::uint32_t object_id = record->object_id;
  const FailureCause cause = record->cause;
  const std::uint64_t index = record->index;
  const std::uint64_t limit = record->limit;
  record->state = error_state_none;
  // On the runtime's stream, waited for: a kernel launched next must not see the old claim (its
  // own failure would be dropped). Best effort: the context may be gone.
  cudaMemsetAsync(error_claim_.get(), 0, sizeof(std::uint32_t), stream());
  cudaStreamSynchronize(stream());
  const std::string name = object_id < slots_.size() && slots_[object_id].in_use
                               ? "'" + slots_[object_id].name + "' (id " + std::to_string(object_id) + ")"
                               : "object id " + std::to_string(object_id);
  std::ostringstream what;
  switch (kind) {
    case ErrorKind::index_out_of_range:
      if (cause == FailureCause::none)
        what << "a kernel accessed index " << index << " of " << name << ", which has " << limit << " elements";
      else
        describe_op_input_error(what, cause, static_cast<std::int64_t>(index), limit, name);
      break;
    case ErrorKind::invalid_argument:
      if (cause == FailureCause::overwrite_incomplete) {
        what << "an overwrite span of " << name << " released page " << index << " with bytes from " << limit
             << " of the page on never written: an overwrite span promises to write its whole page, and the "
             << "bytes it leaves hold the frame's previous contents (another page's, perhaps another object's), "
             << "which go back to the host. Write every element, or use access::read_write";
        break;
      }
      if (cause == FailureCause::destroyed_object) {
        const auto& [retired_generation, retired_name] = retired_.at(object_id);
        const std::string was = retired_generation == index ? "'" + retired_name + "'" : "an object";
        what << "a kernel used a stale handle: " << was << " (id " << object_id << ", generation " << index
             << ") was destroyed before the kernel ran; its slot now has generation " << limit
             << (slots_[object_id].in_use ? " (" + name + ")" : std::string(" (empty)"))
             << ". Take device() from a live object";
        break;
      }
      what << "a kernel used a handle of " << name << " taken before its placement changed; call device() again "
           << "after set_placement()";
      break;
    case ErrorKind::invalid_free:
      what << "a kernel freed lane " << limit << "'s part of the region at byte " << index << " of heap " << name
           << ", which is not live: a double free, or a pointer the heap did not return";
      break;
    case ErrorKind::no_progress:
      if (cause == FailureCause::host_service) {  // host_batched, or a Heap's
        what << "for " << config.watchdog_seconds << " s a warp waited for a host service thread (host_batched: "
             << "page " << index << " of " << name << "; a heap: its host request, or on the fast path the slab "
             << "binding, numbered " << index << ")";
        break;
      }
      if (cause == FailureCause::page_transition) {
        what << "for " << config.watchdog_seconds << " s a warp waited for another warp to finish loading or "
             << "evicting page " << index << " of " << name << ", and it never did (Config::watchdog_seconds)";
        break;
      }
      [[fallthrough]];
    default:
      what << "for " << config.watchdog_seconds << " s a warp found no frame to evict among all " << limit
           << " frames: the pages held by resident threads fill the cache. Use a larger cache, fewer resident "
              "threads, or fewer pages held per thread (Runtime::check_launch states the bound)";
  }
  throw_error(kind, what.str(), __FILE__, __LINE__);
}

Stats RuntimeState::stats() {
  synchronize();
  std::vector<std::uint64_t> shards(std::size_t{counter_shards} * counter_count);
  WARPVM_CUDA_TRY(cudaMemcpy(shards.data(), counters_.get(), shards.size() * sizeof(std::uint64_t),
                             cudaMemcpyDeviceToHost));
  std::array<std::uint64_t, counter_count> total{};
  for (std::size_t i = 0; i < shards.size(); ++i) total[i % counter_count] += shards[i];
  if (service_) {  // pages the host brought in, evicted and wrote back
    total[static_cast<std::size_t>(Counter::misses)] += service_->pages_in();
    total[static_cast<std::size_t>(Counter::bytes_in)] += service_->bytes_in();
    total[static_cast<std::size_t>(Counter::evictions)] += service_->pages_evicted();
    total[static_cast<std::size_t>(Counter::writebacks)] += service_->pages_out();
    total[static_cast<std::size_t>(Counter::bytes_out)] += service_->bytes_out();
  }
  auto at = [&](Counter c) { return total[static_cast<std::size_t>(c)]; };
  return Stats{at(Counter::hits),      at(Counter::misses),   at(Counter::waits),    at(Counter::evictions),
               at(Counter::writebacks), at(Counter::bytes_in), at(Counter::bytes_out)};
}

void RuntimeState::reset_stats() {
  synchronize();
  WARPVM_CUDA_TRY(cudaMemset(counters_.get(), 0, std::size_t{counter_shards} * counter_count * sizeof(std::uint64_t)));
  if (service_) service_->reset_totals();
}

std::vector<FaultEvent> RuntimeState::fault_events(std::uint64_t& dropped) {
  synchronize();
  dropped = 0;
  if (!fault_events_) return {};
  std::uint64_t count = 0;
  WARPVM_CUDA_TRY(cudaMemcpy(&count, fault_event_count_.get(), sizeof count, cudaMemcpyDeviceToHost));
  const std::uint64_t kept = std::min<std::uint64_t>(count, config.fault_event_capacity);
  dropped = count - kept;
  std::vector<FaultEvent> events(kept);
  WARPVM_CUDA_TRY(cudaMemcpy(events.data(), fault_events_.get(), kept * sizeof(FaultEvent), cudaMemcpyDeviceToHost));
  return events;
}

void RuntimeState::clear_fault_events() {
  synchronize();
  if (fault_event_count_) WARPVM_CUDA_TRY(cudaMemset(fault_event_count_.get(), 0, sizeof(std::uint64_t)));
}

// ---- ObjectHandle ----------------------------------------------------------------------------

ObjectHandle::ObjectHandle(std::shared_ptr<RuntimeState> state, std::uint32_t id) : state_(std::move(state)), id_(id) {}
ObjectHandle::~ObjectHandle() { reset(); }
ObjectHandle::ObjectHandle(ObjectHandle&& other) noexcept
    : state_(std::move(other.state_)), id_(std::exchange(other.id_, ~0u)) {}
ObjectHandle& ObjectHandle::operator=(ObjectHandle&& other) noexcept {
  if (this != &other) {
    reset();
    state_ = std::move(other.state_);
    id_ = std::exchange(other.id_, ~0u);
  }
  return *this;
}
void ObjectHandle::reset() noexcept {
  if (state_ && id_ != ~0u) state_->unregister_object(id_);
  state_.reset();
  id_ = ~0u;
}
RuntimeState& ObjectHandle::state() const {
  WARPVM_EXPECTS(state_ != nullptr, ErrorKind::invalid_argument,
                 "an empty warpvm::object (default-constructed or moved from) was used; assign an object of a "
                 "Runtime to it first");
  return *state_;
}
CacheView ObjectHandle::cache_view() const { return state().view(); }
ObjectDescriptor ObjectHandle::descriptor() const { return state().slot(id_).descriptor; }
bool ObjectHandle::checked() const { return state().config.checked; }
std::byte* ObjectHandle::host_data() const { return state().slot(id_).host; }
const std::string& ObjectHandle::name() const { return state().slot(id_).name; }
void ObjectHandle::set_placement(Placement placement) { state().set_placement(id_, placement); }

}  // namespace detail

// ---- Runtime ---------------------------------------------------------------------------------

Runtime::Runtime(Config config) : state_(std::make_shared<detail::RuntimeState>(config)) {}
Runtime::~Runtime() = default;
Runtime::Runtime(Runtime&&) noexcept = default;
Runtime& Runtime::operator=(Runtime&&) noexcept = default;

detail::ObjectHandle Runtime::register_object(std::byte* adopted, std::size_t bytes, Placement placement,
                                              std::string name) {
  return {state_, state_->register_object(adopted, bytes, placement, std::move(name))};
}

void Runtime::check_launch(const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
                           std::uint32_t pages_held_per_thread) const {
  const std::uint32_t holds = pages_held_per_thread != 0 ? pages_held_per_thread : state_->config.max_pages_held_per_thread;
  const std::uint64_t threads_per_block = std::uint64_t{block.x} * block.y * block.z;
  const std::uint64_t blocks = std::uint64_t{grid.x} * grid.y * grid.z;
  const int blocks_per_sm =
      state_->blocks_per_multiprocessor(kernel, static_cast<int>(threads_per_block), shared_bytes);
  const std::uint64_t resident_blocks =
      std::min<std::uint64_t>(blocks, std::uint64_t(blocks_per_sm) * state_->multiprocessors);
  if (const detail::HostBatchedService* service = state_->service()) {
    if (!WARPVM_HOST_BATCHED_EVICTION && service->evicts()) {
      std::ostringstream what;
      what << "the host_batched transport evicts only in builds configured with -DWARPVM_HOST_BATCHED_EVICTION=ON "
           << "(docs/uvm-preset.md): its cache holds " << service->chunks() << " chunks of 2 MiB, and the migrate "
           << "objects need " << service->chunks_needed() << ". Use a larger cache, or such a build";
      detail::throw_error(ErrorKind::invalid_config, what.str(), __FILE__, __LINE__);
    }
    // host_batched: nothing is held while a warp waits for the host: element accesses hold their page only
    // around their own operation, and the service never waits for an eviction without a time
    // bound (host_batched.cuh), so any grid makes progress at any cache of whole chunks (the
    // constructor requires one). Spans and cursors kept across other accesses pin chunks; the
    // watchdog reports a cache too small for them.
    return;
  }
  const std::uint64_t needed = detail::frames_required(resident_blocks * threads_per_block, holds);
  if (needed <= state_->frames) return;
  const std::uint64_t fitting_blocks = state_->frames / (threads_per_block * holds);
  std::ostringstream what;
  what << "the cache has " << state_->frames << " frames (" << detail::mib(state_->config.cache_bytes)
       << "), but this launch can have " << resident_blocks << " blocks x " << threads_per_block
       << " threads resident, each holding up to " << holds << " pages: " << needed
       << " frames are needed to guarantee progress. Use a larger cache, launch at most " << fitting_blocks
       << " blocks (grid-stride loop), or declare fewer pages held per thread";
  detail::throw_error(ErrorKind::invalid_config, what.str(), __FILE__, __LINE__);
}

int detail::RuntimeState::blocks_per_multiprocessor(const void* kernel, int threads_per_block,
                                                    std::size_t shared_bytes) {
  const std::scoped_lock lock(occupancy_mutex_);
  const auto key = std::make_tuple(kernel, threads_per_block, shared_bytes);
  if (const auto known = occupancy_.find(key); known != occupancy_.end()) return known->second;
  int blocks = 0;
  const DeviceGuard on_device(config.device);
  WARPVM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads_per_block, shared_bytes));
  occupancy_.emplace(key, blocks);
  return blocks;
}

std::uint64_t Runtime::max_resident_threads() const {
  return state_->frames / state_->config.max_pages_held_per_thread;
}

void Runtime::launch_raw(cudaStream_t stream, const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
                         void** args) {
  const detail::NvtxRange range("warpvm: launch");
  state_->raise_pending_error();
  check_launch(kernel, grid, block, shared_bytes);
  const detail::DeviceGuard on_device(state_->config.device);
  WARPVM_CUDA_TRY(cudaLaunchKernel(kernel, grid, block, args, shared_bytes, stream));
}

void Runtime::flush() { state_->write_back(detail::RuntimeState::all_objects, /*write_back=*/true, /*drop=*/false); }
void Runtime::drop_cached() {
  state_->write_back(detail::RuntimeState::all_objects, /*write_back=*/true, /*drop=*/true);
}
void Runtime::synchronize() { state_->synchronize(); }
Stats Runtime::stats() const { return state_->stats(); }
void Runtime::reset_stats() { state_->reset_stats(); }
std::vector<FaultBatch> Runtime::fault_batches() const {
  state_->synchronize();
  return state_->service() ? state_->service()->batches() : std::vector<FaultBatch>{};
}
std::vector<FaultEvent> Runtime::fault_events(std::uint64_t* dropped) const {
  std::uint64_t past_capacity = 0;
  std::vector<FaultEvent> events = state_->fault_events(past_capacity);
  if (dropped != nullptr) *dropped = past_capacity;
  return events;
}
void Runtime::clear_fault_events() { state_->clear_fault_events(); }
void Runtime::clear_fault_batches() {
  state_->synchronize();
  if (state_->service()) state_->service()->clear_batches();
}
const Config& Runtime::config() const { return state_->config; }
std::uint32_t Runtime::frame_count() const { return state_->frames; }
std::size_t Runtime::cache_bytes() const { return state_->config.cache_bytes; }
std::size_t Runtime::page_bytes() const { return state_->config.page_bytes; }
int Runtime::multiprocessor_count() const { return state_->multiprocessors; }
cudaStream_t Runtime::stream() const { return state_->stream(); }

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace warpvm

namespace warpvm::detail {

std::vector<std::uint64_t> frame_owners(const Runtime& runtime) {
  RuntimeState& state = *runtime.state_;
  state.synchronize();
  std::vector<std::uint64_t> owners(state.all_frames);
  WARPVM_CUDA_TRY(cudaMemcpy(owners.data(), state.view().table.owner, owners.size() * sizeof(std::uint64_t),
                             cudaMemcpyDeviceToHost));
  return owners;
}

std::vector<std::uint32_t> frame_dirty_bits(const Runtime& runtime) {
  RuntimeState& state = *runtime.state_;
  state.synchronize();
  std::vector<std::uint32_t> dirty(state.all_frames);
  WARPVM_CUDA_TRY(cudaMemcpy(dirty.data(), state.view().table.dirty, dirty.size() * sizeof(std::uint32_t),
                             cudaMemcpyDeviceToHost));
  return dirty;
}

std::vector<std::uint32_t> page_states(const Runtime& runtime, std::uint32_t object_id) {
  RuntimeState& state = *runtime.state_;
  const ObjectDescriptor& object = state.slot(object_id).descriptor;
  state.synchronize();
  std::vector<PageEntry> entries(state.view().geometry().pages_for(object.bytes));
  WARPVM_CUDA_TRY(cudaMemcpy(entries.data(), object.pages, entries.size() * sizeof(PageEntry),
                             cudaMemcpyDeviceToHost));
  std::vector<std::uint32_t> words;
  words.reserve(entries.size());
  for (const PageEntry& entry : entries) words.push_back(entry.state);
  return words;
}

void force_page_state(const Runtime& runtime, std::uint32_t object_id, std::uint64_t page, std::uint32_t word) {
  RuntimeState& state = *runtime.state_;
  const ObjectDescriptor& object = state.slot(object_id).descriptor;
  WARPVM_EXPECTS(page < state.view().geometry().pages_for(object.bytes), ErrorKind::invalid_argument,
                 "force_page_state: object " + std::to_string(object_id) + " has no page " + std::to_string(page));
  state.synchronize();
  WARPVM_CUDA_TRY(cudaMemcpy(&object.pages[page].state, &word, sizeof word, cudaMemcpyHostToDevice));
}

}  // namespace warpvm::detail

#include "heap_service.hpp"

#include "warpvm/detail/core/cuda_buffers.hpp"

#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/error.hpp"
#include "warpvm/heap.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <string>
#include <vector>

namespace warpvm {

struct Heap::State {
  HeapOptions options;
  int device = 0;
  object<std::uint64_t> backing;
  detail::device_ptr<std::uint64_t> regions;
  detail::device_ptr<std::uint64_t> next_position;
  detail::pinned_ptr<detail::HeapSlot> slots;
  // The fast path's slabs (heap_protocol.hpp's SmallSlabsView); empty when it is off.
  detail::device_ptr<std::uint32_t> slab_tags, slab_live, slab_bitmaps, binding_readers;
  detail::device_ptr<std::uint64_t> class_tickets, class_bindings, slab_queue, queue_positions;
  detail::device_ptr<std::int64_t> queue_available;
  detail::HeapView view{};
  std::unique_ptr<detail::HeapService> service;  // last: its thread stops before the ring goes

  /// Reserves the small area from the service's space and makes the slabs' device state: every
  /// slab in the free-slab queue.
  detail::SmallSlabsView make_small_slabs(std::uint64_t bytes);
};

namespace {
constexpr std::uint64_t segment_bytes = detail::vablock_bytes;

/// "3.00 GiB (3221225472 B)": readable, and exact for comparing with the request.
std::string bytes_text(std::uint64_t bytes) {
  constexpr std::array<const char*, 4> units{"B", "KiB", "MiB", "GiB"};
  double scaled = static_cast<double>(bytes);
  std::size_t unit = 0;
  for (; unit + 1 < units.size() && scaled >= 1024; ++unit) scaled /= 1024;
  if (unit == 0) return std::to_string(bytes) + " B";
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.2f %s", scaled, units[unit]);
  return std::string(text.data()) + " (" + std::to_string(bytes) + " B)";
}
}  // namespace

std::string HeapStats::describe_last_refusal() const {
  const HeapRefusal& r = last_refusal;
  if (r.lanes == 0) return "no refusal";
  const std::string lanes = std::to_string(r.lanes) + (r.lanes == 1 ? " thread" : " threads");
  if (r.region_bytes == 0)
    return lanes + " refused: a request over the " + bytes_text(detail::heap_max_lane_bytes) +
           " a thread may ask for";
  std::string text = lanes + " refused, asking for up to " + bytes_text(r.lane_bytes) + " each: a region of " +
                     bytes_text(r.region_bytes) + "; the heap of " + bytes_text(r.capacity_bytes) + " had " +
                     bytes_text(r.small_area_bytes) + " in its small area, " + bytes_text(r.reserved_bytes) +
                     " reserved by live regions and " + bytes_text(r.free_bytes) + " free (" +
                     bytes_text(r.free_segment_bytes) + " of it in whole 2 MiB segments)";
  if (r.region_bytes > r.capacity_bytes) return text + ": the region exceeds the capacity";
  if (r.free_bytes < r.region_bytes) return text + ": too little free";
  return text + ": enough free, but in no place the region fits (no run of free segments that long, or no "
                "aligned free subtree under 2 MiB)";
}

detail::SmallSlabsView Heap::State::make_small_slabs(std::uint64_t bytes) {
  const std::uint64_t offset = service->reserve(bytes);
  WARPVM_EXPECTS(offset != detail::no_offset, ErrorKind::invalid_argument,
                 "HeapOptions::small_bytes (" + std::to_string(bytes) + " B) do not fit the heap's free segments");
  const auto slabs = static_cast<std::uint32_t>(bytes / detail::slab_bytes);
  slab_tags = detail::make_device_zeroed<std::uint32_t>(slabs, "the heap's slab tags");
  slab_live = detail::make_device_zeroed<std::uint32_t>(slabs, "the heap's slab counts");
  slab_bitmaps = detail::make_device_zeroed<std::uint32_t>(std::size_t{slabs} * detail::slab_bitmap_words,
                                                           "the heap's slab bitmaps");
  class_tickets = detail::make_device_zeroed<std::uint64_t>(detail::small_classes, "the heap's class tickets");
  class_bindings = detail::make_device_zeroed<std::uint64_t>(std::size_t{detail::small_classes} * detail::binding_ring,
                                                             "the heap's slab bindings");
  binding_readers = detail::make_device_zeroed<std::uint32_t>(std::size_t{detail::small_classes} * detail::binding_ring,
                                                              "the heap's binding reader counts");
  slab_queue = detail::make_device_zeroed<std::uint64_t>(slabs, "the heap's free-slab queue");
  queue_positions = detail::make_device_zeroed<std::uint64_t>(2, "the free-slab queue's positions");
  queue_available = detail::make_device_zeroed<std::int64_t>(1, "the free-slab queue's count");
  // Every slab free: slab s at position s, the tail past them.
  std::vector<std::uint64_t> queued(slabs);
  for (std::uint32_t slab = 0; slab < slabs; ++slab) queued[slab] = detail::queue_entry(slab, slab + 1);
  const std::uint64_t tail = slabs;
  const std::int64_t available = slabs;
  WARPVM_CUDA_TRY(cudaMemcpy(slab_queue.get(), queued.data(), slabs * sizeof(std::uint64_t), cudaMemcpyHostToDevice));
  WARPVM_CUDA_TRY(cudaMemcpy(queue_positions.get() + 1, &tail, sizeof tail, cudaMemcpyHostToDevice));
  WARPVM_CUDA_TRY(cudaMemcpy(queue_available.get(), &available, sizeof available, cudaMemcpyHostToDevice));
  return detail::SmallSlabsView{detail::SmallArea{offset, slabs},
                                slab_tags.get(),
                                slab_live.get(),
                                slab_bitmaps.get(),
                                class_tickets.get(),
                                class_bindings.get(),
                                binding_readers.get(),
                                slab_queue.get(),
                                queue_positions.get(),
                                queue_positions.get() + 1,
                                queue_available.get()};
}

Heap::Heap(Runtime& runtime, HeapOptions options) : state_(std::make_unique<State>()) {
  WARPVM_EXPECTS(options.capacity_bytes > 0, ErrorKind::invalid_argument, "a Heap needs a capacity above 0");
  WARPVM_EXPECTS(detail::is_power_of_two(options.ring_slots), ErrorKind::invalid_argument,
                 "HeapOptions::ring_slots must be a power of two, not " + std::to_string(options.ring_slots));
  const std::uint64_t segments = (options.capacity_bytes + segment_bytes - 1) / segment_bytes;
  // heap_ptr keeps a region's 64 KB block in 32 bits, which also keeps the segments within
  // PortionTree::max_vablocks (HeapSpace's PortionTree spans them all; the OR tree takes more).
  WARPVM_EXPECTS(segments * segment_bytes / detail::basic_block_bytes <= ~std::uint32_t{0}, ErrorKind::invalid_argument,
                 "a Heap holds at most 256 TiB");
  options.capacity_bytes = segments * segment_bytes;
  // Whole segments each, so that the small area never shares a segment with a region.
  const detail::HeapShares shares =
      detail::heap_shares(options.capacity_bytes, options.portion_bytes, options.fast_path, options.small_bytes);
  const auto portion_vablocks = static_cast<std::uint32_t>(shares.portion_bytes / segment_bytes);
  options.portion_bytes = shares.portion_bytes;
  if (options.fast_path) {  // checked before anything is pinned or started, as the options above
    WARPVM_EXPECTS(shares.small_bytes <= options.capacity_bytes - options.portion_bytes, ErrorKind::invalid_argument,
                   "HeapOptions::small_bytes (" + std::to_string(shares.small_bytes) + " B) exceed the heap's " +
                       std::to_string(options.capacity_bytes - options.portion_bytes) + " B outside the PortionSpace");
    // Bitmap words are indexed in 32 bits on the device.
    WARPVM_EXPECTS(shares.small_bytes / detail::slab_bytes * detail::slab_bitmap_words <= ~std::uint32_t{0},
                   ErrorKind::invalid_argument, "HeapOptions::small_bytes: at most 2 TiB");
    options.small_bytes = shares.small_bytes;
  }

  State& s = *state_;
  s.options = options;
  s.device = runtime.config().device;
  s.backing = runtime.alloc<std::uint64_t>(options.capacity_bytes / sizeof(std::uint64_t), options.placement,
                                           "warpvm heap");
  const detail::DeviceGuard on_device(s.device);
  const std::uint64_t blocks = options.capacity_bytes / detail::basic_block_bytes;
  s.regions = detail::make_device_zeroed<std::uint64_t>(blocks, "the heap's region words");
  s.next_position = detail::make_device_zeroed<std::uint64_t>(1, "the heap's ring position");
  s.slots = detail::make_pinned_zeroed<detail::HeapSlot>(options.ring_slots, cudaHostAllocMapped,
                                                         "the heap's request ring");
  s.service = std::make_unique<detail::HeapService>(s.slots.get(), options.ring_slots,
                                                    static_cast<std::uint32_t>(segments), portion_vablocks);
  s.view = detail::HeapView{detail::on_device(s.slots.get()), s.next_position.get(), options.ring_slots,
                            s.regions.get(), blocks, options.layout, options.lane_order, detail::SmallSlabsView{}};
  if (options.fast_path && options.small_bytes != 0) s.view.small = s.make_small_slabs(options.small_bytes);
}

Heap::~Heap() {
  if (!state_) return;
  try {
    // Kernels may still be posting to the ring that goes next.
    const detail::DeviceGuard on_device(state_->device);
    cudaDeviceSynchronize();
  } catch (const Error&) {
    // A destructor must not throw; a broken context is reported by the next checked call.
  }
}

Heap::Heap(Heap&&) noexcept = default;
Heap& Heap::operator=(Heap&&) noexcept = default;

device_heap Heap::device() const {
  const detail::ObjectHandle& handle = state_->backing.handle_;
  return {handle.cache_view(), handle.descriptor(), state_->view, handle.checked()};
}

void Heap::synchronize() {
  const detail::DeviceGuard on_device(state_->device);
  WARPVM_CUDA_TRY(cudaDeviceSynchronize());
  std::uint64_t posted = 0;
  WARPVM_CUDA_TRY(cudaMemcpy(&posted, state_->next_position.get(), sizeof(posted), cudaMemcpyDeviceToHost));
  state_->service->wait_served(posted);
}

HeapStats Heap::stats() {
  synchronize();
  HeapStats stats = state_->service->stats();
  const detail::SmallSlabsView& small = state_->view.small;
  if (small.area.slabs == 0) return stats;
  const detail::DeviceGuard on_device(state_->device);
  std::vector<std::uint32_t> tags(small.area.slabs);
  std::vector<std::uint32_t> bitmaps(std::size_t{small.area.slabs} * detail::slab_bitmap_words);
  WARPVM_CUDA_TRY(cudaMemcpy(tags.data(), small.tags, tags.size() * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  WARPVM_CUDA_TRY(
      cudaMemcpy(bitmaps.data(), small.bitmaps, bitmaps.size() * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  stats.small_slabs = small.area.slabs;
  stats.small_slabs_bound =
      static_cast<std::uint64_t>(std::count_if(tags.begin(), tags.end(), [](std::uint32_t tag) { return tag != 0; }));
  for (const std::uint32_t word : bitmaps) stats.small_live_blocks += static_cast<std::uint64_t>(std::popcount(word));
  return stats;
}

void Heap::reset_stats() {
  synchronize();
  state_->service->reset_stats();
}

std::size_t Heap::capacity_bytes() const { return state_->options.capacity_bytes; }
const HeapOptions& Heap::options() const { return state_->options; }
const object<std::uint64_t>& Heap::backing() const { return state_->backing; }

}  // namespace warpvm

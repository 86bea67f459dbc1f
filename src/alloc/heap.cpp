#include "heap_service.hpp"

#include "../core/cuda_buffers.hpp"

#include "warpvm/detail/core/geometry.hpp"
#include "warpvm/error.hpp"
#include "warpvm/heap.hpp"

#include <algorithm>
#include <string>

namespace warpvm {

struct Heap::State {
  HeapOptions options;
  int device = 0;
  object<std::uint64_t> backing;
  detail::device_ptr<std::uint64_t> regions;
  detail::device_ptr<std::uint64_t> next_position;
  detail::pinned_ptr<detail::HeapSlot> slots;
  detail::HeapView view{};
  std::unique_ptr<detail::HeapService> service;  // last: its thread stops before the ring goes
};

namespace {
constexpr std::uint64_t segment_bytes = detail::vablock_bytes;
constexpr std::uint64_t paper_portion_bytes = std::uint64_t{detail::PortionTree::paper_vablocks} * segment_bytes;
}  // namespace

Heap::Heap(Runtime& runtime, HeapOptions options) : state_(std::make_unique<State>()) {
  WARPVM_EXPECTS(options.capacity_bytes > 0, ErrorKind::invalid_argument, "a Heap needs a capacity above 0");
  WARPVM_EXPECTS(detail::is_power_of_two(options.ring_slots), ErrorKind::invalid_argument,
                 "HeapOptions::ring_slots must be a power of two, not " + std::to_string(options.ring_slots));
  const std::uint64_t segments = (options.capacity_bytes + segment_bytes - 1) / segment_bytes;
  // heap_ptr keeps a region's 64 KB block in 32 bits; the OR tree has at most 2^31 segments.
  WARPVM_EXPECTS(segments * segment_bytes / detail::basic_block_bytes <= ~std::uint32_t{0}, ErrorKind::invalid_argument,
                 "a Heap holds at most 256 TiB");
  options.capacity_bytes = segments * segment_bytes;
  const std::uint64_t portion =
      options.portion_bytes == 0 ? std::min(options.capacity_bytes / 2, paper_portion_bytes)
                                 : std::min<std::uint64_t>(options.portion_bytes, options.capacity_bytes);
  const auto portion_vablocks = static_cast<std::uint32_t>(portion / segment_bytes);
  options.portion_bytes = std::uint64_t{portion_vablocks} * segment_bytes;

  State& s = *state_;
  s.options = options;
  s.device = runtime.config().device;
  s.backing = runtime.alloc<std::uint64_t>(options.capacity_bytes / sizeof(std::uint64_t), Placement::migrate,
                                           "warpvm heap");
  const detail::DeviceGuard on_device(s.device);
  const std::uint64_t blocks = options.capacity_bytes / detail::basic_block_bytes;
  s.regions = detail::make_device_zeroed<std::uint64_t>(blocks, "the heap's region words");
  s.next_position = detail::make_device_zeroed<std::uint64_t>(1, "the heap's ring position");
  s.slots = detail::make_pinned_zeroed<detail::HeapSlot>(options.ring_slots, cudaHostAllocMapped,
                                                         "the heap's request ring");
  s.view = detail::HeapView{detail::on_device(s.slots.get()), s.next_position.get(), options.ring_slots,
                            s.regions.get(), blocks, options.layout, options.lane_order};
  s.service = std::make_unique<detail::HeapService>(s.slots.get(), options.ring_slots,
                                                    static_cast<std::uint32_t>(segments), portion_vablocks);
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
  return state_->service->stats();
}

void Heap::reset_stats() {
  synchronize();
  state_->service->reset_stats();
}

std::size_t Heap::capacity_bytes() const { return state_->options.capacity_bytes; }
const HeapOptions& Heap::options() const { return state_->options; }
const object<std::uint64_t>& Heap::backing() const { return state_->backing; }

}  // namespace warpvm

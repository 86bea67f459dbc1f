#include "heap_service.hpp"

#include "warpvm/detail/core/resources.hpp"

#include <algorithm>
#include <chrono>

namespace warpvm::detail {

HeapService::HeapService(HeapSlot* slots, std::uint32_t capacity, std::uint32_t segments,
                         std::uint32_t portion_vablocks)
    : slots_(slots),
      capacity_(capacity),
      storage_(HeapSpace::storage_words(segments)),
      space_(storage_.data(), storage_.size(), segments, portion_vablocks) {
  batch_.reserve(batch_limit);
  thread_ = start_thread([this] { run(); }, "the heap's service thread");
}

HeapService::~HeapService() {
  stop_.store(true);
  thread_.join();
}

std::uint64_t HeapService::reserve(std::uint64_t bytes) {
  const std::lock_guard lock(mutex_);
  const HeapRegion region = space_.allocate(bytes);
  set_aside_ += region.reserved_bytes;
  return region.offset;
}

std::uint64_t HeapService::region_bytes() const { return space_.reserved_bytes() - set_aside_; }

HeapRefusal HeapService::refusal(const Taken& request) const {
  const bool over_limit = request.value == no_offset;
  return HeapRefusal{.lanes = request.lanes,
                     .lane_bytes = over_limit ? 0 : std::uint64_t{request.lane_units} * heap_unit_bytes,
                     .region_bytes = over_limit ? 0 : request.value,
                     .capacity_bytes = space_.capacity_bytes(),
                     .small_area_bytes = set_aside_,
                     .reserved_bytes = region_bytes(),
                     .free_bytes = space_.free_bytes(),
                     .free_segment_bytes = space_.free_segment_bytes()};
}

void HeapService::wait_served(std::uint64_t position) const {
  while (served_.load(std::memory_order_acquire) < position) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

HeapStats HeapService::stats() const {
  const std::lock_guard lock(mutex_);
  HeapStats s = stats_;
  s.reserved_bytes = region_bytes();
  return s;
}

void HeapService::reset_stats() {
  const std::lock_guard lock(mutex_);
  stats_ = HeapStats{};
  stats_.peak_reserved_bytes = region_bytes();
}

std::uint32_t HeapService::next_tag() {
  if (++tag_ == 0) ++tag_;  // 0 marks a region word that was never live
  return tag_;
}

void HeapService::run() {
  using Clock = std::chrono::steady_clock;
  auto active = Clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    if (serve_batch() != 0) {
      active = Clock::now();
      continue;
    }
    // Requests come in bursts (a kernel's warps): spin for a while after one, then poll gently.
    if (Clock::now() - active > std::chrono::milliseconds(5))
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    else
      std::this_thread::yield();
  }
}

std::size_t HeapService::serve_batch() {
  batch_.clear();
  for (; batch_.size() < batch_limit; ++taken_) {
    HeapSlot& slot = slots_[taken_ & (capacity_ - 1)];
    if (std::atomic_ref(slot.header).load(std::memory_order_acquire) != heap_slot_header(taken_, heap_slot_posted))
      break;
    batch_.push_back(
        Taken{&slot, taken_, static_cast<HeapRequest>(slot.kind), slot.value, slot.lanes, slot.lane_units});
  }
  if (batch_.empty()) return 0;

  const std::lock_guard lock(mutex_);
  ++stats_.batches;
  // Frees first: what the batch gives back is there for its allocations.
  for (const Taken& t : batch_) {
    if (t.kind != HeapRequest::release) continue;
    // The device frees a region once, when its last lane's part goes (heap_device.cuh).
    if (space_.release(t.value) != 0) ++stats_.regions_freed;
    std::atomic_ref(t.slot->header).store(0, std::memory_order_release);
  }
  for (const Taken& t : batch_) {
    if (t.kind != HeapRequest::allocate) continue;
    ++stats_.requests;
    const HeapRegion region = t.value == no_offset ? HeapRegion{no_offset, 0} : space_.allocate(t.value);
    if (region.ok()) {
      stats_.allocations += t.lanes;
      t.slot->tag = next_tag();
    } else {
      stats_.failed_allocations += t.lanes;
      stats_.last_refusal = refusal(t);
      t.slot->tag = 0;
    }
    t.slot->value = region.offset;
    std::atomic_ref(t.slot->header).store(heap_slot_header(t.position, heap_slot_replied), std::memory_order_release);
  }
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, region_bytes());
  served_.store(taken_, std::memory_order_release);
  return batch_.size();
}

}  // namespace warpvm::detail
